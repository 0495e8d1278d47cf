"""``sparktrail compare BEFORE AFTER``: did the fix work? (DESIGN §11)

Each of BEFORE and AFTER is a Spark event log, a trace, or a profile folder
(``sparktrail profile -o DIR``'s: it holds ``profile.json`` or
``summaries/``), profiled if need be. The command prints a one-sentence
verdict and a short table: where the wall-time change went on the critical
path, the settings that differ, BEFORE's hints checked in AFTER and the
regressions. ``--json`` prints the comparison's JSON contract on stdout
(the rest on stderr); ``-o DIR`` writes ``DIR/report.html`` and the
comparison's frames.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from sparktrail.dashboard.compare_report import (
    comparison_verdict,
    short_label,
    write_compare_report,
)
from sparktrail.engines.comparison import Comparison, compare
from sparktrail.engines.profiler import (
    META_FILE,
    SUMMARIES_DIR,
    Profile,
    profile,
)
from sparktrail.errors import InputError

from ._options import add_window
from .profile import load_input

__all__ = ["load_profile", "print_comparison", "register", "run"]

#: Operator rows the terminal table shows.
TOP = 8


def register(subparsers: Any) -> None:
    """Add the ``compare`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "compare",
        help="compare two runs: where the time went, and did the hints work",
        description=(
            "Compare two runs of one application (event logs, traces or "
            "profile folders): the wall-time change decomposed by operator "
            "on the critical path, the settings that differ, and each hint "
            "of BEFORE checked in AFTER (applied? predicted vs measured)."
        ),
    )
    for name in ("before", "after"):
        parser.add_argument(
            name,
            type=Path,
            metavar=name.upper(),
            help="event log, trace (*.arrow file or directory) or profile folder",
        )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="write DIR/report.html and the comparison's files here",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as JSON on stdout (the summary goes to stderr)",
    )
    add_window(parser)
    parser.set_defaults(run=run)


def _is_profile(path: Path) -> bool:
    return path.is_dir() and (
        (path / META_FILE).is_file() or (path / SUMMARIES_DIR).is_dir()
    )


def load_profile(path: Path, window_ns: int) -> Profile:
    """``path`` as a profile: a profile folder loaded, else a trace or event
    log profiled with ``window_ns`` windows.

    Raises
    ------
    FileNotFoundError, InputError
        If ``path`` is missing, a folder that is not a profile's, or
        neither a trace nor an event log.
    """
    if _is_profile(path):
        return Profile.load(path)
    trace, _ = load_input(path)
    if trace.frame.is_empty():
        raise InputError(f"{path}: the trace holds no rows")
    return profile(trace, window_ns, name=path.name)


def _row(op: str, before: float, after: float, delta: float, records: str) -> str:
    return f"  {before:9.2f} {after:9.2f} {delta:+9.2f}  {records:>23}  {op}"


def _records(old: Any, new: Any) -> str:
    def text(v: Any) -> str:
        return "–" if v is None else f"{v:,}"

    return f"{text(old)} → {text(new)}"


def _setting(value: str | None) -> str:
    return "(unset)" if value is None else value or '""'


def print_comparison(c: Comparison, out: TextIO) -> None:
    """The verdict, then the operators, settings, hints and regressions."""
    print(f"Verdict: {comparison_verdict(c)}", file=out)
    for warning in c.warnings:
        print(f"Warning: {warning}", file=out)
    print(
        f"\nCritical seconds by operator ({c.matched_operators} matched by label):",
        file=out,
    )
    print(
        f"  {'BEFORE':>9} {'AFTER':>9} {'change':>9}  {'records':>23}  operator",
        file=out,
    )
    ops = c.operators
    named = ops.head(len(ops) - 1)
    for r in named.head(TOP).iter_rows(named=True):
        records = _records(r["records_before"], r["records_after"])
        label = short_label(str(r["operator"]), 70)
        print(_row(label, r["before_s"], r["after_s"], r["delta_s"], records), file=out)
    if len(named) > TOP:
        rest = named.slice(TOP)
        print(
            _row(
                f"({len(rest)} more operators)",
                float(rest["before_s"].sum()),
                float(rest["after_s"].sum()),
                float(rest["delta_s"].sum()),
                "",
            ),
            file=out,
        )
    last = ops.row(len(ops) - 1, named=True)
    print(
        _row(last["operator"], last["before_s"], last["after_s"], last["delta_s"], ""),
        file=out,
    )
    wall_b, wall_a = c.wall_before_ns / 1e9, c.wall_after_ns / 1e9
    print(_row("wall time", wall_b, wall_a, c.wall_delta_s, ""), file=out)
    if not c.settings.is_empty():
        print("\nSettings that differ:", file=out)
        for r in c.settings.iter_rows(named=True):
            old, new = _setting(r["before"]), _setting(r["after"])
            print(f"  {r['key']}: {old} → {new}", file=out)
    if not c.hints.is_empty():
        print("\nHints of BEFORE, checked in AFTER:", file=out)
        for r in c.hints.iter_rows(named=True):
            predicted = r["predicted_saving_s"]
            said = "–" if predicted is None else f"{predicted:.2f} s"
            measured = r["measured_saving_s"]
            got = "" if measured is None else f", measured {measured:.2f} s"
            where = f" on {short_label(r['operator'], 50)}" if r["operator"] else ""
            how = f" ({r['how']})" if r["how"] else ""
            print(
                f"  {r['kind']}{where}: {r['verdict']}{how}; predicted {said}{got}",
                file=out,
            )
    if not c.regressions.is_empty():
        print("\nRegressions:", file=out)
        for r in c.regressions.iter_rows(named=True):
            where = short_label(r["operator"] or "(the run)", 60)
            print(f"  {r['kind']}, {r['cause']}: {where}: {r['detail']}", file=out)


def run(args: argparse.Namespace) -> int:
    """Compare ``args.before`` with ``args.after``; returns the exit code."""
    if args.output is not None and args.output.exists() and not args.output.is_dir():
        raise NotADirectoryError(f"{args.output}: exists and is not a directory")
    before = load_profile(args.before, args.window)
    after = load_profile(args.after, args.window)
    result = compare(before, after)
    out = sys.stderr if args.json else sys.stdout
    print_comparison(result, out)
    if args.output is not None:
        result.save(args.output)
        page = write_compare_report(result, args.output)
        print(f"\nReport: {page}", file=out)
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0
