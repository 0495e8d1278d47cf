"""``sparktrail cp TRACE``: critical participation by activity, worker and stage.

It prints the summaries' own frames (:func:`sparktrail.engines.summarize`),
so it names the same workers as ``profile`` and the dashboard: a message's
CP is charged to the worker that receives it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from sparktrail.sources import no_rows

from ._units import parse_duration_ns

if TYPE_CHECKING:
    import polars as pl

    from sparktrail.summaries import Summaries

#: Tables printed by :func:`report`: (summary frame, label column, heading).
TABLES = (
    ("activity", "activity", "activity"),
    ("straggler", "worker", "worker"),
    ("operator", "operator", "stage"),
)


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
    """Origin and length of one window covering every event of ``trace``:
    from its first to its last event (:func:`~sparktrail.pag.chunk_cp.trace_extent`,
    the extent the pag gives a trace's paths).

    >>> import polars as pl
    >>> whole_trace_window(pl.DataFrame({"start_ns": [5, 2], "end_ns": [9, 1]}))
    (1, 8)
    """
    from sparktrail.pag.chunk_cp import trace_extent

    first, last = trace_extent(trace)
    return first, max(last - first, 1)


def shares(summaries: Summaries, frame: str, label: str) -> pl.DataFrame:
    """``label, cp_share`` of one summary frame, largest share first.

    >>> import polars as pl
    >>> from sparktrail.engines import summarize
    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "b"],
    ...     "start_ns": [0, 4], "end_ns": [4, 6], "activity": ["gc", "data"]})
    >>> shares(summarize(t, 6), "straggler", "worker").rows()
    [('a', 0.6666666666666666), ('b', 0.3333333333333333)]
    """
    from sparktrail.summaries.frames import CP_SHARE

    table: pl.DataFrame = getattr(summaries, frame)
    return (
        table.select(label, CP_SHARE)
        .drop_nulls(label)
        .sort([CP_SHARE, label], descending=[True, False])
    )


def report(
    trace: pl.DataFrame, name: str, window: int | str | None = None, top: int = 10
) -> int:
    """Print the CP shares of ``trace`` by activity, worker and stage."""
    from sparktrail.engines import summarize
    from sparktrail.pag.workers import worker_label

    if trace.is_empty():
        raise no_rows(name)
    if isinstance(window, str):
        window = parse_duration_ns(window)
    if window is None:
        # One window closed at the trace's last event: its end is an event.
        origin, span = whole_trace_window(trace)
        summaries = summarize(trace, span, origin)
    else:
        summaries = summarize(trace, window)
    print(f"{name}: {len(trace)} rows, {len(summaries.windows)} windows")
    for frame, label, heading in TABLES:
        print(f"\nCP by {heading}:")
        for value, share in shares(summaries, frame, label).head(top).iter_rows():
            shown = worker_label(value) if label == "worker" else str(value)
            print(f"  {shown:<40} {share:7.1%}")
    return 0


def run(args: argparse.Namespace) -> int:
    from sparktrail.pag import read_trace

    return report(read_trace(args.trace), args.trace, args.window, args.top)
