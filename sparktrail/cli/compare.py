"""``sparktrail compare BEFORE AFTER``: did the fix work? (DESIGN §11)
``sparktrail compare DIR``: where did a regression begin?

Each of BEFORE and AFTER is a Spark event log, a trace, or a profile folder
(``sparktrail profile -o DIR``'s: it holds ``profile.json`` or
``summaries/``), profiled if need be. The command prints a one-sentence
verdict and a short table: where the wall-time change went on the critical
path, the settings that differ, BEFORE's hints checked in AFTER and the
regressions. ``--json`` prints the comparison's JSON contract on stdout
(the rest on stderr); ``-o DIR`` writes ``DIR/report.html`` and the
comparison's frames.

With one argument, a folder of runs of one application (event logs,
traces or profile folders), the runs are profiled once each, ordered by
start time, and the command prints each operator's critical seconds per
run and the run where an operator's regression began
(:mod:`~sparktrail.engines.series`); ``--json`` prints the series' JSON,
``-o DIR`` writes ``DIR/report.html`` (a line chart per top operator and
the table) and ``DIR/series.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sparktrail.errors import InputError
from sparktrail.sources import is_profile_folder, open_profile
from sparktrail.units import duration_s

from ._options import add_window

if TYPE_CHECKING:
    from sparktrail.engines.comparison import Comparison
    from sparktrail.engines.series import RunSeries

__all__ = [
    "print_comparison",
    "print_series",
    "register",
    "run",
    "series_inputs",
]

#: Operator rows the terminal table shows.
TOP = 8


def register(subparsers: Any) -> None:
    """Add the ``compare`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "compare",
        help="compare two runs (or a folder of runs): where the time went, "
        "did the hints work, where a regression began",
        description=(
            "Compare two runs of one application (event logs, traces or "
            "profile folders): the wall-time change decomposed by operator "
            "on the critical path, the settings that differ, and each hint "
            "of BEFORE checked in AFTER (applied? predicted vs measured). "
            "Given one folder of runs instead, order them by start time and "
            "show each operator's critical seconds per run and the run where "
            "its regression began."
        ),
    )
    parser.add_argument(
        "before",
        type=Path,
        metavar="BEFORE",
        help="event log, trace (*.arrow file or directory) or profile folder; "
        "alone: a folder of runs (DIR)",
    )
    parser.add_argument(
        "after",
        type=Path,
        nargs="?",
        metavar="AFTER",
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
    parser.add_argument(
        "--force",
        action="store_true",
        help="compare two different applications anyway (different names, "
        "no operator in common)",
    )
    add_window(parser)
    parser.set_defaults(run=run)


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
    from sparktrail.dashboard.compare_report import comparison_verdict, short_label

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
            said = duration_s(predicted)
            measured = r["measured_saving_s"]
            got = "" if measured is None else f", measured {duration_s(measured)}"
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


def series_inputs(folder: Path) -> list[Path]:
    """The runs in ``folder``: each entry an event log, a trace or a profile
    folder, by name (hidden entries and README files left out).

    Raises
    ------
    FileNotFoundError, InputError
        If ``folder`` is missing, not a folder, or itself one run.
    """
    from sparktrail.pag.trace import trace_files
    from sparktrail.tracer.eventlog import EventLogError, resolve

    if not folder.exists():
        raise FileNotFoundError(f"{folder}: no such folder of runs")
    one_run = (
        f"{folder}: one run; give BEFORE AFTER, or one folder holding a run "
        "per entry (event logs, traces or profile folders)"
    )
    if not folder.is_dir() or is_profile_folder(folder) or trace_files(folder):
        raise InputError(one_run)
    try:
        resolve(folder)
    except EventLogError:  # several logs (SeveralLogsError) or none
        pass
    else:
        raise InputError(one_run)
    return [
        p
        for p in sorted(folder.iterdir(), key=lambda p: p.name)
        if not p.name.startswith(".") and not p.name.lower().startswith("readme")
    ]


def load_series(folder: Path, window_ns: int) -> RunSeries:
    """Each run of ``folder`` profiled once (named by its entry), in series."""
    from sparktrail.engines.series import run_series

    runs = []
    for path in series_inputs(folder):
        found = open_profile(path, window_ns)
        runs.append(replace(found, name=path.name))
    if len(runs) < 2:
        raise InputError(f"{folder}: {len(runs)} run(s); a series needs at least two")
    return run_series(runs)


def print_series(s: RunSeries, out: TextIO) -> None:
    """The runs, each operator's critical seconds per run, the regressions."""
    import polars as pl

    from sparktrail.dashboard.compare_report import short_label
    from sparktrail.engines.series import start_text

    for warning in s.warnings:
        print(f"Warning: {warning}", file=out)
    print(f"{len(s.runs)} runs by start time:", file=out)
    for i, r in enumerate(s.runs.iter_rows(named=True), start=1):
        start = start_text(r["start_ns"]) or "start unknown"
        print(
            f"  #{i} {r['run']}  {r['app_id'] or '–'}  {start}  "
            f"wall {duration_s(r['wall_s'])}",
            file=out,
        )
    print(
        "\nCritical seconds by operator and run (* where a regression began):", file=out
    )
    head = "".join(f"{'#' + str(i):>10}" for i in range(1, len(s.runs) + 1))
    print(f"{head}  operator", file=out)
    ops = s.operators
    shown = pl.concat([ops.head(len(ops) - 1).head(TOP), ops.tail(1)])
    names = s.names
    for r in shown.iter_rows(named=True):
        cells = "".join(
            f"{v:9.2f}" + ("*" if names[i] == r["regression_from"] else " ")
            for i, v in enumerate(r["critical_s"])
        )
        print(f"{cells}  {short_label(str(r['operator']), 70)}", file=out)
    if len(ops) - 1 > TOP:
        print(f"  ({len(ops) - 1 - TOP} more operators)", file=out)
    found = s.regressions()
    if found.is_empty():
        print(
            "\nNo regression: no operator's critical seconds rose by more than "
            "max(10%, 1 s) over the runs before it, at the same input, and stayed "
            "up.",
            file=out,
        )
        return
    print("\nRegressions:", file=out)
    for r in found.iter_rows(named=True):
        i = names.index(r["regression_from"])
        seconds = r["critical_s"]
        before = seconds[:i]
        print(
            f"  from #{i + 1} {r['regression_from']}: "
            f"{short_label(str(r['operator']), 60)}: "
            f"median {_median_text(before)} before, {duration_s(seconds[i])} then",
            file=out,
        )


def _median_text(values: list[float]) -> str:
    import statistics

    return duration_s(statistics.median(values))


def _run_series(args: argparse.Namespace) -> int:
    from sparktrail.dashboard.compare_report import write_series_report

    series = load_series(args.before, args.window)
    out = sys.stderr if args.json else sys.stdout
    print_series(series, out)
    if args.output is not None:
        page = write_series_report(series, args.output)
        (args.output / "series.json").write_text(
            json.dumps(series.to_json(), indent=2) + "\n"
        )
        print(f"\nReport: {page}", file=out)
    if args.json:
        json.dump(series.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """Compare ``args.before`` with ``args.after`` (or the runs of the folder
    ``args.before``); returns the exit code."""
    from sparktrail.dashboard.compare_report import write_compare_report
    from sparktrail.engines.comparison import compare, unrelated

    if args.output is not None and args.output.exists() and not args.output.is_dir():
        raise NotADirectoryError(f"{args.output}: exists and is not a directory")
    if args.after is None:
        return _run_series(args)
    before = open_profile(args.before, args.window)
    after = open_profile(args.after, args.window)
    result = compare(before, after)
    why = unrelated(before, after, result.matched_operators)
    if why is not None and not args.force:
        raise InputError(
            f"{args.before} and {args.after} are {why}: a comparison would call "
            "every operator of AFTER new; --force compares them anyway"
        )
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
