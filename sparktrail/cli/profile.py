"""``sparktrail profile INPUT -o OUT_DIR``: a batch report of one run.

INPUT is a trace (an ``*.arrow`` file, or a directory holding them, or
only the listener's raw log under ``raw/``) or one Spark event log (a
file, or a log directory: rolling ``eventlog_v2_*``, Spark 1.x,
Databricks); a directory holding several event logs is refused
with their names, so the user picks one. The
command writes ``OUT_DIR/report.html`` and ``OUT_DIR/summaries/*.parquet``
and prints a short summary; with ``--json`` it prints the hints as a JSON
list on stdout and everything else on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sparktrail.engines.engine_choice import ENGINES
from sparktrail.sources import no_rows, open_trace
from sparktrail.tracer.remote import log_arg, log_name

from ._options import add_output, add_window, output_for

if TYPE_CHECKING:
    import polars as pl

    from sparktrail.engines.profiler import Profile

__all__ = ["hints_json", "print_summary", "register", "run"]

STEPS = 3


def register(subparsers: Any) -> None:
    """Add the ``profile`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "profile",
        help="profile a trace or event log into an HTML report",
        description=(
            "Compute critical participation, summaries and rebalancing hints "
            "of a trace or Spark event log; write OUT_DIR/report.html and "
            "OUT_DIR/summaries/*.parquet."
        ),
    )
    parser.add_argument(
        "input",
        type=log_arg,
        help="trace (*.arrow file or directory) or event log (a path or a URI: "
        "s3://, gs://, abfs://, hdfs://, https://)",
    )
    add_output(parser, "profile directory to write")
    add_window(parser, batches=True)
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="polars",
        help="run the summaries on polars (default) or on Spark",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the hints as JSON on stdout (the summary goes to stderr); "
        "without -o, write no files",
    )
    parser.add_argument("--top", type=int, default=5, help="rows per summary table")
    parser.set_defaults(run=run)


def hints_json(hints: pl.DataFrame) -> list[dict[str, Any]]:
    """The hints as JSON-ready dicts; ``evidence`` decoded into an object.

    >>> import polars as pl
    >>> h = pl.DataFrame({"kind": ["driver_bound"], "evidence": ['{"share": 0.9}']})
    >>> hints_json(h)
    [{'kind': 'driver_bound', 'evidence': {'share': 0.9}}]
    """
    rows = hints.to_dicts()
    for row in rows:
        if isinstance(row.get("evidence"), str):
            row["evidence"] = json.loads(row["evidence"])
    return rows


class _Steps:
    """A rich progress bar over the command's steps (or nothing)."""

    def __init__(self, bar: Any) -> None:
        self._bar = bar
        self._task = bar.add_task("profiling", total=STEPS) if bar else None
        self._started = False

    def step(self, description: str) -> None:
        if self._bar is None:
            return
        advance = 1 if self._started else 0
        self._started = True
        self._bar.update(self._task, description=description, advance=advance)

    def detail(self, description: str) -> None:
        """Change the current step's description (no step ends)."""
        if self._bar is not None:
            self._bar.update(self._task, description=description)


@contextmanager
def _progress(show: bool) -> Iterator[_Steps]:
    if not show:
        yield _Steps(None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description:<34}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        yield _Steps(bar)


def _pct(value: Any) -> str:
    return "   –  " if value is None else f"{value:6.1%}"


def print_summary(
    profile: Profile, out_dir: Path | None, top: int, out: TextIO
) -> None:
    """The terminal summary of ``profile``: what ran and the verdict, then
    top operators, workers vs fair share, the hints."""
    from sparktrail.dashboard.chart_basics import no_stage_label
    from sparktrail.dashboard.figures import SHARE_ONLY, saving_text
    from sparktrail.dashboard.report import window_text
    from sparktrail.dashboard.verdict import header_line, verdict
    from sparktrail.engines.profiler import REPORT_FILE, SUMMARIES_DIR
    from sparktrail.pag.workers import worker_label, worker_text
    from sparktrail.summaries.frames import CP_SHARE, FAIR_SHARE, HAS_PATHS
    from sparktrail.summaries.hints import integrity_notes, share_of_saved, shown_hints
    from sparktrail.summaries.hints.hint import SHOWN_SHARE

    summaries, name, rows = profile.summaries, profile.name, profile.rows
    windows = summaries.windows
    paths = int(windows[HAS_PATHS].sum()) if len(windows) else 0
    print(header_line(summaries), file=out)
    notes = integrity_notes(summaries.hints)
    if notes:
        print(f"Log not whole: {'; '.join(notes)}", file=out)
    print(f"Verdict: {verdict(summaries)}\n", file=out)
    print(
        f"{name}: {rows} trace rows, {len(windows)} windows of "
        f"{window_text(summaries)} ({paths} with a critical path)",
        file=out,
    )
    print("\nTop critical operators (share of the critical path):", file=out)
    ops = summaries.operator.head(top)
    stages = ops["stages"] if "stages" in ops.columns else [None] * len(ops)
    parts = ops["parts"].to_list() if "parts" in ops.columns else [None] * len(ops)
    listed = zip(ops["operator"], ops[CP_SHARE], stages, parts, strict=True)
    for operator, share, n, part in listed:
        ran = f" ({n} stages)" if n and n > 1 else ""
        name = operator or no_stage_label(part)
        print(f"  {_pct(share)}  {name}{ran}", file=out)
    print("\nTop workers (CP share vs fair share):", file=out)
    for worker, share, fair in (
        summaries.straggler.head(top).select("worker", CP_SHARE, FAIR_SHARE).iter_rows()
    ):
        print(f"  {_pct(share)} vs {_pct(fair)}  {worker_label(worker)}", file=out)
    hints = shown_hints(summaries.hints)
    print(f"\nHints ({len(hints)}):", file=out)
    for row in hints.iter_rows(named=True):
        saving = saving_text(row)
        # A share of the input or the trigger is no time saved: said as is.
        verb = "" if share_of_saved(row) in SHARE_ONLY else "saves "
        saves = f", {verb}{saving}" if saving else ""
        action = worker_text(row["action"])
        print(f"  [{row['severity']}] {row['kind']}{saves}: {action}", file=out)
    small = len(summaries.hints) - len(hints) - (1 if notes else 0)
    if hints.is_empty():
        print("  none: no rule's numbers crossed its threshold", file=out)
    if small:
        under = f"under {SHOWN_SHARE:.0%} of the run"
        print(f"  ({small} more would save {under}: see --json)", file=out)
    if out_dir is not None:
        print(
            f"\nReport: {out_dir / REPORT_FILE}; summaries: "
            f"{out_dir / SUMMARIES_DIR}/*.parquet",
            file=out,
        )


def run(args: argparse.Namespace) -> int:
    """Profile ``args.input`` into ``args.output``; returns the exit code.

    With ``--json`` and no ``-o``, nothing is written: the hints go to
    stdout, the summary to stderr."""
    from sparktrail.dashboard.report import write_report
    from sparktrail.engines.profiler import profile

    keep = not (args.json and args.output is None)
    local = args.input if isinstance(args.input, Path) else None
    args.output = output_for(
        local or Path(log_name(args.input)), args.output, "profile"
    )
    if keep and args.output.exists() and not args.output.is_dir():
        raise NotADirectoryError(f"{args.output}: exists and is not a directory")
    with _progress(sys.stderr.isatty()) as steps:
        steps.step(f"reading {log_name(args.input)}")
        trace, _ = open_trace(args.input)
        if trace.frame.is_empty():
            raise no_rows(args.input)
        steps.step("summaries and hints")
        result = profile(
            trace,
            args.window,
            engine=args.engine,
            name=log_name(args.input),
            progress=steps.detail,
        )
        if keep:
            steps.step("writing the report")
            result.save(args.output)
            write_report(result, args.output)
    out = sys.stderr if args.json else sys.stdout
    print_summary(result, args.output if keep else None, args.top, out)
    if args.json:
        json.dump(hints_json(result.hints), sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0
