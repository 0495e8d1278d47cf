"""Commands sparktrail prints work when pasted into the user's shell
(issue 44: `make run` printed `sparktrail profile …`, "command not found"
without an activated venv)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

PRINT_PROGRAM = "from sparktrail.cli._invocation import program; print(program())"


def _program(path: str) -> str:
    env = {**os.environ, "PATH": path}
    out = subprocess.run(
        [sys.executable, "-c", PRINT_PROGRAM],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_without_the_venv_on_path_the_printed_command_is_the_venvs_script() -> None:
    # GIVEN a shell whose PATH lacks this Python's bin directory
    bare = "/usr/bin:/bin"
    # WHEN sparktrail says how to call itself
    command = _program(bare)
    # THEN it is not the bare name, and it runs as printed from that shell
    assert command != "sparktrail"
    ran = subprocess.run(
        [*shlex.split(command), "--version"],
        cwd=ROOT,
        env={**os.environ, "PATH": bare},
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0 and ran.stdout.startswith("sparktrail ")


def test_with_the_venv_on_path_it_is_the_bare_name() -> None:
    # GIVEN an activated venv (its bin first on PATH)
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    # THEN the bare name is what to type
    assert _program(path) == "sparktrail"
