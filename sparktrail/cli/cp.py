"""``sparktrail cp TRACE``: critical participation by activity and by worker."""

from __future__ import annotations

import argparse
from typing import Any

import polars as pl

from sparktrail.pag import critical_participation, read_trace

from ._units import parse_duration_ns


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cp",
        help="print critical participation by activity and worker",
        description="Compute critical participation (CP) of a trace and print "
        "its share by activity type and by worker.",
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


def run(args: argparse.Namespace) -> int:
    trace = read_trace(args.trace)
    if trace.is_empty():
        raise ValueError(f"{args.trace}: the trace holds no rows")
    origin, span = whole_trace_window(trace)
    window = args.window or span
    if args.window is None:
        # One window closed at the trace's last event: its end is an event.
        cp = critical_participation(trace, window, origin)
    else:
        cp = critical_participation(trace, window)
    print(
        f"{args.trace}: {len(trace)} rows, {cp['window_start_ns'].n_unique()} windows"
    )
    for by in ("activity", "src_worker"):
        table = cp_shares(cp, by).head(args.top)
        print(f"\nCP by {'worker' if by == 'src_worker' else by}:")
        for name, share in table.select(by, "share").iter_rows():
            print(f"  {name!s:<24} {share:7.1%}")
    return 0
