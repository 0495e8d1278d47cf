"""``sparktrail cp TRACE``: critical participation by activity, worker and stage."""

from __future__ import annotations

import argparse
from typing import Any

import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag import critical_participation, read_trace

from ._units import parse_duration_ns

#: Tables printed by :func:`report`: column -> heading.
TABLES = {"activity": "activity", "src_worker": "worker", "operator": "stage"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cp",
        help="print critical participation by activity, worker and stage",
        description="Compute critical participation (CP) of a trace and print "
        "its share by activity type, by worker and by stage.",
    )
    parser.add_argument("trace", help="trace file or directory of Arrow files")
    parser.add_argument(
        "--window",
        type=parse_duration_ns,
        default=None,
        help="window length, e.g. 1s or 250ms (default: the whole trace)",
    )
    parser.add_argument("--top", type=int, default=10, help="rows per table")
    parser.set_defaults(run=run)


def whole_trace_window(trace: pl.DataFrame) -> tuple[int, int]:
    """Origin and length of one window covering every event of ``trace``."""
    first = int(trace["start_ns"].min())  # type: ignore[arg-type]
    last = int(trace.select(pl.max_horizontal("start_ns", "end_ns").max()).item())
    return first, max(last - first, 1)


def cp_shares(cp: pl.DataFrame, by: str) -> pl.DataFrame:
    """CP summed by ``by`` as a share of all windows' CP, largest first."""
    total = cp["cp"].sum() or 1.0
    return (
        cp.group_by(by)
        .agg(pl.col("cp").sum().alias("cp"))
        .with_columns((pl.col("cp") / total).alias("share"))
        .sort("share", descending=True)
    )


def report(
    trace: pl.DataFrame, name: str, window: int | str | None = None, top: int = 10
) -> int:
    """Print CP shares of ``trace`` by activity, worker and stage."""
    if trace.is_empty():
        raise InputError(f"{name}: the trace holds no rows")
    if isinstance(window, str):
        window = parse_duration_ns(window)
    if window is None:
        # One window closed at the trace's last event: its end is an event.
        origin, span = whole_trace_window(trace)
        cp = critical_participation(trace, span, origin)
    else:
        cp = critical_participation(trace, window)
    windows = cp["window_start_ns"].n_unique()
    print(f"{name}: {len(trace)} rows, {windows} windows")
    for column, heading in TABLES.items():
        table = cp_shares(cp, column).drop_nulls(column).head(top)
        print(f"\nCP by {heading}:")
        for label, share in table.select(column, "share").iter_rows():
            print(f"  {label!s:<40} {share:7.1%}")
    return 0


def run(args: argparse.Namespace) -> int:
    return report(read_trace(args.trace), args.trace, args.window, args.top)
