"""Errors reach the user as one line and an exit code, mapped in one place."""

from __future__ import annotations

import argparse

import pytest

from sparktrail import cli
from sparktrail.errors import InputError, SparktrailError
from sparktrail.pag import CycleError, TraceError
from sparktrail.tracer import EventError, EventLogError
from sparktrail.tracer.jvm import JavaNotFoundError


@pytest.mark.parametrize(
    "error", [TraceError, CycleError, EventLogError, EventError, JavaNotFoundError]
)
def test_every_stage_error_shares_the_base(error):
    assert issubclass(error, SparktrailError)


def _run_raising(monkeypatch, error: BaseException) -> int:
    def run(args: argparse.Namespace) -> int:
        raise error

    # the cp subcommand registers its run when the parser is built
    monkeypatch.setattr("sparktrail.cli.cp.run", run)
    return cli.main(["cp", "nowhere"])


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InputError("x.arrow: bad"), cli.EXIT_BAD_INPUT),
        (TraceError("bad column", path="x.arrow"), cli.EXIT_BAD_INPUT),
        (FileNotFoundError("x.arrow"), cli.EXIT_BAD_INPUT),
        (JavaNotFoundError("no javac"), cli.EXIT_ENVIRONMENT),
    ],
)
def test_errors_map_to_exit_codes_in_one_line(monkeypatch, capsys, error, code):
    # WHEN a subcommand raises a sparktrail error
    got = _run_raising(monkeypatch, error)
    # THEN the exit code is the error's, and stderr is one line naming it
    assert got == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sparktrail: error: ")
    assert str(error) in err


def test_a_bug_is_not_passed_off_as_bad_input(monkeypatch):
    # GIVEN a plain ValueError (a bug, not the user's input)
    # THEN it propagates with its traceback instead of exit 2
    with pytest.raises(ValueError, match="a bug"):
        _run_raising(monkeypatch, ValueError("a bug"))
