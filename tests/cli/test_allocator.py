"""One-shot commands set polars' allocator to give freed pages back soon
(``sparktrail.cli.configure_allocator``); window loops and the user's own
setting are left alone. jemalloc reads the setting when polars is imported,
so each case runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sparktrail.cli import ONE_SHOT_ALLOCATOR

_PROBE = """
import json, os, sys
from sparktrail.cli import configure_allocator
applied = configure_allocator(sys.argv[1:])
import polars
print(json.dumps([applied, os.environ.get("_RJEM_MALLOC_CONF")]))
"""


def probe(*argv: str, env: dict[str, str] | None = None) -> list[object]:
    environ = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        env=environ | (env or {}),
        capture_output=True,
        text=True,
        check=True,
    )
    result: list[object] = json.loads(out.stdout)
    return result


def test_a_one_shot_command_returns_freed_pages_soon():
    # GIVEN a fresh interpreter  WHEN `sparktrail profile` configures it
    applied, conf = probe("profile", "trace.arrow")
    # THEN jemalloc gets the one-shot setting when polars is imported (which
    # puts its own first: the later pair wins)
    assert applied is True
    assert str(conf).endswith("," + ONE_SHOT_ALLOCATOR)


@pytest.mark.parametrize("command", ["live", "serve", "demo"])
def test_window_loops_keep_the_default(command):
    # GIVEN a command that computes window after window
    # WHEN it configures the allocator  THEN polars' setting stands alone
    applied, conf = probe(command)
    assert applied is False
    assert ONE_SHOT_ALLOCATOR not in str(conf)


def test_the_users_own_setting_stands():
    # GIVEN a user's own jemalloc setting
    mine = "dirty_decay_ms:0"
    # WHEN a one-shot command configures the allocator  THEN it is kept
    applied, conf = probe("profile", env={"_RJEM_MALLOC_CONF": mine})
    assert applied is False
    assert str(conf).endswith("," + mine)


def test_after_polars_is_imported_nothing_is_set():
    # GIVEN polars already imported (jemalloc has read its setting)
    code = (
        "import os, polars\nfrom sparktrail.cli import configure_allocator\n"
        "print(configure_allocator(['profile']))"
    )
    environ = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True
    )
    # THEN configuring is a no-op that says so
    assert out.stdout.split() == ["False"]
