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
from .query_engine import collect
from .snapshot import SnapshotWarning
from .trace import Trace, collect_slices
from .windows import TRACE_ROW, clip, first_event, last_event, touches, trace_row

# The windowing rules themselves are in .windows.
__all__ = [
    "chunk_cp",
    "cp_of_touching",
    "one_window_cp",
    "touching_rows",
    "trace_extent",
]


def trace_extent(trace: pl.DataFrame) -> tuple[int, int]:
    """The (first, last) event time of a non-empty trace, for ``extent_ns``.

    >>> trace_extent(pl.DataFrame({"start_ns": [5, 2], "end_ns": [9, 1]}))
    (1, 9)
    """
    # A slice at a time: the one query read both time columns' pages whole.
    ends = collect_slices(
        trace,
        lambda _, part: part.lazy().select(
            first_event.min().alias("first"), last_event.max().alias("last")
        ),
    )
    return int(ends["first"].min()), int(ends["last"].max())  # type: ignore[arg-type]


def chunk_cp(
    trace: pl.DataFrame,
    window_ns: int,
    origin_ns: int,
    ts: int,
    te: int,
    extent_ns: tuple[int, int],
    *,
    row_column: str | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """CP of the windows in ``[ts, te)`` from the rows of ``trace`` touching them.

    The one way every engine computes some windows' CP from part of a
    trace: the rows are cut with :func:`~sparktrail.pag.windows.touches`
    and :func:`~sparktrail.pag.windows.clip`, and a CP row maps back to its
    trace row with :func:`~sparktrail.pag.windows.to_trace_rows`.

    Parameters
    ----------
    trace
        A validated trace (the whole of it, or any rows of it that include
        those touching the batch).
    window_ns, origin_ns
        The windows, as for :func:`~sparktrail.pag.critical_participation`.
    ts, te
        Window boundaries: the batch is the windows starting in ``[ts, te)``.
    extent_ns
        The whole trace's (first, last) event time.
    row_column
        A column of ``trace`` holding each row's row in the whole trace
        (default: ``trace`` is the whole trace, its row is its position).

    Returns
    -------
    (cp, rows)
        The CP rows of those windows, as the CP table of the whole trace has
        them except ``edge_index``, which is the row of ``rows``: the trace
        rows touching the batch (unclipped) with their row in the whole
        trace as ``trace_row``.

    Raises
    ------
    CycleError
        Naming the row of the whole trace that lies on a cycle.

    Examples
    --------
    >>> from sparktrail.pag.trace import validate_trace
    >>> t = validate_trace(pl.DataFrame({"src_worker": ["a", "a"],
    ...     "dst_worker": ["a", "a"], "start_ns": [0, 6], "end_ns": [6, 8],
    ...     "activity": ["processing", "gc"]}))
    >>> cp, rows = chunk_cp(t, 4, 0, 4, 8, (0, 8))
    >>> cp.select("window_start_ns", "edge_index", "cp").rows()
    [(4, 0, 0.5), (4, 1, 0.5)]
    >>> rows["trace_row"].to_list()
    [0, 1]
    """
    rows = touching_rows(trace, ts, te, row_column=row_column)
    return cp_of_touching(rows, window_ns, origin_ns, ts, te, extent_ns)


def one_window_cp(
    rows: pl.DataFrame,
    ts: int,
    te: int,
    extent_ns: tuple[int, int],
    *,
    origin_ns: int | None = None,
    row_column: str | None = None,
    touching: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """CP of the one window ``[ts, te)`` from rows of a trace.

    The one way every engine computes a single window's CP (the profile's
    critical window, a live window as it closes, a window on Spark's
    executors): :func:`chunk_cp` of that window, ``(cp, rows)`` as there.

    Parameters
    ----------
    rows
        Rows of the trace that include those touching the window; with
        ``touching``, exactly :func:`touching_rows`' rows for it.
    ts, te
        The window.
    extent_ns
        The whole trace's (first, last) event time.
    origin_ns
        The windows' origin, when the window is one of a grid of windows of
        ``te - ts`` (then an instant on ``ts`` anchors the window before it,
        as in the whole trace, and an unlisted window gets no rows); by
        default ``ts``: the window is window 0 of windows from ``ts``, so an
        instant on ``ts`` lies in it (for a window known to be listed, or
        a plain stretch of several computed as one).
    row_column
        As for :func:`chunk_cp`.

    Raises
    ------
    CycleError
        As :func:`chunk_cp`.

    >>> from sparktrail.pag.trace import validate_trace
    >>> t = validate_trace(pl.DataFrame({"src_worker": ["a", "a"],
    ...     "dst_worker": ["a", "a"], "start_ns": [0, 10], "end_ns": [10, 20],
    ...     "activity": ["processing", "gc"]}))
    >>> cp, rows = one_window_cp(t, 10, 20, (0, 20))
    >>> cp.select("edge_index", "cp").rows(), rows["trace_row"].to_list()
    ([(0, 1.0)], [1])
    """
    origin = ts if origin_ns is None else origin_ns
    if touching:
        return cp_of_touching(rows, te - ts, origin, ts, te, extent_ns)
    return chunk_cp(rows, te - ts, origin, ts, te, extent_ns, row_column=row_column)


def touching_rows(
    trace: pl.DataFrame, ts: int, te: int, *, row_column: str | None = None
) -> pl.DataFrame:
    """The rows of ``trace`` touching a window in ``[ts, te)``, unclipped,
    with their row in the whole trace as ``trace_row`` (the first step of
    :func:`chunk_cp`; ``row_column`` as there).

    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "a"],
    ...     "start_ns": [0, 6], "end_ns": [6, 8]})
    >>> touching_rows(t, 6, 8)["trace_row"].to_list()
    [1]
    """
    if row_column is not None:
        numbered = trace.lazy().with_columns(pl.col(row_column).alias(TRACE_ROW))
        return collect(_touching(numbered, ts, te), len(trace))
    # The whole trace, a slice at a time: the filter reads the times of
    # every row, and their pages would all stay resident (DESIGN §10).
    return collect_slices(
        trace,
        lambda at, part: _touching(part.lazy().with_row_index(TRACE_ROW, at), ts, te),
    )


def _touching(numbered: pl.LazyFrame, ts: int, te: int) -> pl.LazyFrame:
    """The rows of ``numbered`` (each with its ``trace_row``) touching a
    window in ``[ts, te)``."""
    return numbered.filter(touches(ts, te)).with_columns(
        pl.col(TRACE_ROW).cast(pl.Int64)
    )


def cp_of_touching(
    rows: pl.DataFrame,
    window_ns: int,
    origin_ns: int,
    ts: int,
    te: int,
    extent_ns: tuple[int, int],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`chunk_cp` of the rows :func:`touching_rows` gave (its second
    step: for a caller that needs those rows before the CP).

    Raises
    ------
    CycleError
        As :func:`chunk_cp`.
    """
    clipped = clip(rows.drop(TRACE_ROW), ts, te)
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
        row = trace_row(rows, err.edge_index)
        message = str(err).replace(f"trace row {err.edge_index} ", f"trace row {row} ")
        raise CycleError(message, row) from err
    in_batch = (pl.col("window_start_ns") >= ts) & (pl.col("window_start_ns") < te)
    return cp.filter(in_batch), rows
