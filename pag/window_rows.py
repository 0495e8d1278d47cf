"""The trace rows of a run of windows, and their CP computed from those rows alone.

A window's PAG depends only on the rows that touch it (DESIGN §4), so the
CP of windows ``[ts, te)`` can be computed from those rows, clipped to
``[ts, te]``, without the rest of the trace: the online pipeline does so
for each window as it closes, and the batch pipeline for a run of windows
at a time, which bounds its memory by a batch instead of the whole CP
table.

Assumptions
-----------
* ``ts`` and ``te`` are window boundaries of the same ``window_ns`` and
  ``origin_ns`` the CP is computed with.
* ``extent_ns`` is the (first, last) event time of the whole trace, so
  that the first and last windows' paths start and end where the whole
  trace's do (:func:`~sparktrail.pag.critical_participation`).
"""

from __future__ import annotations

import warnings

import polars as pl

from .participation import CycleError, critical_participation
from .snapshot import SnapshotWarning
from .trace import Trace

__all__ = [
    "batch_cp",
    "clip",
    "first_event",
    "is_interval",
    "last_event",
    "touches",
    "touching",
    "trace_extent",
]

_LOCAL = pl.col("src_worker") == pl.col("dst_worker")
#: A local activity of positive length (every other row is an instant).
is_interval = _LOCAL & (pl.col("end_ns") > pl.col("start_ns"))
first_event = pl.min_horizontal("start_ns", "end_ns")
last_event = pl.max_horizontal("start_ns", "end_ns")


def trace_extent(trace: pl.DataFrame) -> tuple[int, int]:
    """The (first, last) event time of a non-empty trace, for ``extent_ns``.

    >>> trace_extent(pl.DataFrame({"start_ns": [5, 2], "end_ns": [9, 1]}))
    (1, 9)
    """
    first, last = trace.select(
        first_event.min().alias("first"), last_event.max().alias("last")
    ).row(0)
    return int(first), int(last)


def touches(ts: int, te: int) -> pl.Expr:
    """Whether a row puts an edge into the PAG of a window within ``[ts, te)``.

    A local activity of positive length when it overlaps ``[ts, te)``; any
    other row (a message, an instant) when both its ends lie in ``[ts, te]``.
    """
    overlaps = (pl.col("start_ns") < te) & (pl.col("end_ns") > ts)
    inside = (first_event >= ts) & (last_event <= te)
    return pl.when(is_interval).then(overlaps).otherwise(inside)


def touching(rows: pl.DataFrame, ts: int, te: int) -> pl.DataFrame:
    """The rows that put an edge into window ``[ts, te)``'s PAG.

    >>> t = pl.DataFrame({"src_worker": ["a", "a", "a"], "dst_worker": ["a", "b", "a"],
    ...     "start_ns": [0, 5, 9], "end_ns": [12, 11, 10], "activity": ["gc"] * 3})
    >>> touching(t, 0, 10)["start_ns"].to_list()
    [0, 9]
    """
    return rows.filter(touches(ts, te))


def clip(rows: pl.DataFrame, ts: int, te: int) -> pl.DataFrame:
    """Clip local activities to ``[ts, te]`` the way a window's snapshot does.

    A clipped start gets a seq below every other, a clipped end one above,
    so it precedes (follows) every other event of its worker at that time,
    as in :mod:`~sparktrail.pag.snapshot`; the window's PAG is unchanged
    and no edge reaches into a neighbouring window.

    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [12], "activity": ["gc"],
    ...     "src_seq": [0], "dst_seq": [1]})
    >>> clip(t, 5, 10).select("start_ns", "end_ns", "src_seq", "dst_seq").row(0)
    (5, 10, -1, 2)
    """
    if rows.is_empty():
        return rows
    seqs = rows.select(
        pl.min_horizontal(pl.col("src_seq").min(), pl.col("dst_seq").min()).alias("a"),
        pl.max_horizontal(pl.col("src_seq").max(), pl.col("dst_seq").max()).alias("b"),
    ).row(0)
    seq_lo, seq_hi = int(seqs[0]) - 1, int(seqs[1]) + 1
    early = is_interval & (pl.col("start_ns") < ts)
    late = is_interval & (pl.col("end_ns") > te)
    return rows.with_columns(
        pl.when(early).then(pl.lit(ts)).otherwise("start_ns").alias("start_ns"),
        pl.when(early).then(pl.lit(seq_lo)).otherwise("src_seq").alias("src_seq"),
        pl.when(late).then(pl.lit(te)).otherwise("end_ns").alias("end_ns"),
        pl.when(late).then(pl.lit(seq_hi)).otherwise("dst_seq").alias("dst_seq"),
    )


def batch_cp(
    trace: pl.DataFrame,
    window_ns: int,
    origin_ns: int,
    ts: int,
    te: int,
    extent_ns: tuple[int, int],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """CP of the windows in ``[ts, te)`` from the rows of ``trace`` touching them.

    Parameters
    ----------
    trace
        A validated trace (the whole of it).
    window_ns, origin_ns
        The windows, as for :func:`~sparktrail.pag.critical_participation`.
    ts, te
        Window boundaries: the batch is the windows starting in ``[ts, te)``.
    extent_ns
        The whole trace's (first, last) event time.

    Returns
    -------
    (cp, rows)
        The CP rows of those windows, as the CP table of the whole trace has
        them except ``edge_index``, which is the row of ``rows``: the trace
        rows touching the batch (unclipped) with their row in ``trace`` as
        ``trace_row``.

    Examples
    --------
    >>> from sparktrail.pag.trace import validate_trace
    >>> t = validate_trace(pl.DataFrame({"src_worker": ["a", "a"],
    ...     "dst_worker": ["a", "a"], "start_ns": [0, 6], "end_ns": [6, 8],
    ...     "activity": ["processing", "gc"]}))
    >>> cp, rows = batch_cp(t, 4, 0, 4, 8, (0, 8))
    >>> cp.select("window_start_ns", "edge_index", "cp").rows()
    [(4, 0, 0.5), (4, 1, 0.5)]
    >>> rows["trace_row"].to_list()
    [0, 1]
    """
    rows = (
        trace.lazy()
        .with_row_index("trace_row")
        .filter(touches(ts, te))
        .with_columns(pl.col("trace_row").cast(pl.Int64))
        .collect()
    )
    clipped = clip(rows.drop("trace_row"), ts, te)
    try:
        # Pathless windows are the caller's to report, once for all
        # batches; the window before ts may be one here (below).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SnapshotWarning)
            # The origin stays the trace's, not ts: an instant on ts then
            # anchors the window before ts, as in the whole trace, and does
            # not make a window exist that the whole trace does not list.
            cp = critical_participation(
                Trace(clipped), window_ns, origin_ns, extent_ns=extent_ns
            )
    except CycleError as err:
        row = int(rows["trace_row"][err.edge_index])
        message = str(err).replace(f"trace row {err.edge_index} ", f"trace row {row} ")
        raise CycleError(message, row) from err
    in_batch = (pl.col("window_start_ns") >= ts) & (pl.col("window_start_ns") < te)
    return cp.filter(in_batch), rows
