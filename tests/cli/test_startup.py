"""The command line's help loads argparse and the parsers, not the stages'
libraries (issue 43: ``--help`` loaded 1,318 modules and 291 MB). Its time
is measured in ``bench/cli_startup.py``, not here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sparktrail.cli import SUBCOMMANDS

#: Libraries a parser must not need.
HEAVY = ("polars", "numba", "pyarrow", "dash", "plotly", "pyspark", "fsspec", "rich")
MAX_MODULES = 200


def _loaded_by_help(argv: list[str]) -> dict:
    code = (
        "import contextlib, io, json, sys\n"
        "from sparktrail.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'modules': len(sys.modules), 'heavy': heavy,"
        " 'help': out.getvalue()}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_help_loads_no_heavy_library(command):
    # GIVEN a fresh interpreter  WHEN `sparktrail [COMMAND] --help` runs
    argv = ["--help"] if command is None else [command, "--help"]
    loaded = _loaded_by_help(argv)
    # THEN the help is printed, without polars, numba, dash or pyspark
    assert "usage: sparktrail" in loaded["help"]
    assert loaded["heavy"] == []
    assert loaded["modules"] <= MAX_MODULES
