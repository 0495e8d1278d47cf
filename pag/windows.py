"""The windowing rules: which windows a trace row lies in, clipping, trace rows.

Each rule of DESIGN §4 that turns trace rows into window pieces has its one
owner here, written as polars expressions and small frame functions; every
engine (batch, online, Spark) and the report call them:

* :func:`window_floor` and :func:`window_ceil`: the window boundary at or
  before, at or after a time (the live engines' watermark and the default
  origin, :func:`~sparktrail.pag.snapshot.default_origin`, use them);
* :func:`window_range` and :func:`listed_windows`, :func:`pieces`,
  :func:`touches`: which windows a row lies in, and which windows exist;
* :func:`coarse_range`: a cheaper range that holds the exact one, for
  counting rows per window and for the Spark engine's explode;
* :func:`clip`: a row cut to one window;
* :func:`to_trace_rows`: a CP row's ``edge_index`` mapped back to the row
  of the trace it came from;
* :func:`plain_stretches`: runs of windows that hold no event of any row,
  whose CP is one window's (DESIGN §10: a profile's cost follows the rows,
  not the time span).

The numba fast path of :mod:`~sparktrail.pag.snapshot` (``_window_ranges``,
``_listed_windows`` and ``_cut``, which build every window of a trace at
once for the CP kernel) implements the same rules without polars;
``tests/pag/test_window_rules.py`` checks on random traces that both give
the same windows, the same (window, trace row) pairs and the same clipped
rows.

Rules
-----
* Windows are ``[origin + k * W, origin + (k + 1) * W)`` for ``k >= 0``
  (``W`` = ``window_ns``); rows before the origin lie in no window.
* An *interval* (a local row of positive length, :data:`is_interval`)
  ``[s, e)`` lies in windows ``(s - origin) // W .. (e - origin - 1) // W``.
* Any other row (a message, a zero-length local row) is an *instant*: it
  lies in every window whose closed span ``[ts, te]`` holds both its ends,
  ``(last - origin - 1) // W .. (first - origin) // W`` (none when that is
  empty), so an instant on a boundary lies in the windows on both sides.
* A window is *listed* (exists) when a row anchors it: an interval anchors
  every window it lies in, an instant only its first one. A row's pieces
  are those in listed windows: an instant on the end of the trace's last
  window opens no window of its own.
* Within window ``[ts, te]`` an interval is clipped to it; a clipped start
  gets a seq below every other, a clipped end one above every other.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeVar

import numpy as np
import polars as pl

from sparktrail.errors import InputError

from .query_engine import collect
from .trace import trace_slices

__all__ = [
    "TRACE_ROW",
    "WindowRange",
    "clip",
    "coarse_range",
    "first_event",
    "is_interval",
    "last_event",
    "listed_spans",
    "listed_windows",
    "pieces",
    "plain_stretches",
    "range_coverage",
    "range_members",
    "to_trace_rows",
    "touches",
    "touching",
    "trace_row",
    "window_ceil",
    "window_floor",
    "window_range",
]

#: A frame or a query (the row ranges are computed in either).
_Frame = TypeVar("_Frame", pl.DataFrame, pl.LazyFrame)

#: Column holding, for each row of a window's rows, its row in the trace.
TRACE_ROW = "trace_row"

_LOCAL = pl.col("src_worker") == pl.col("dst_worker")
#: A local activity of positive length (every other row is an instant).
is_interval = _LOCAL & (pl.col("end_ns") > pl.col("start_ns"))
#: The earlier of a row's two event times (a message may arrive before it
#: was sent, by clock noise).
first_event = pl.min_horizontal("start_ns", "end_ns")
#: The later of a row's two event times.
last_event = pl.max_horizontal("start_ns", "end_ns")


class WindowRange(NamedTuple):
    """Window indices of a row: it lies in ``first .. last`` (none when
    ``last < first``) and anchors ``first .. anchor``."""

    first: pl.Expr
    last: pl.Expr
    anchor: pl.Expr


def _check(window_ns: int) -> None:
    if window_ns <= 0:
        raise InputError(f"window_ns must be positive, got {window_ns!r}")


def window_floor(time_ns: int, window_ns: int, origin_ns: int = 0) -> int:
    """The start of the window holding ``time_ns``: the last boundary
    ``origin_ns + k * window_ns`` at or before it (any integer ``k``).

    >>> window_floor(25, 10), window_floor(20, 10), window_floor(-5, 10)
    (20, 20, -10)
    >>> window_floor(25, 10, origin_ns=3)
    23
    """
    return origin_ns + (time_ns - origin_ns) // window_ns * window_ns


def window_ceil(time_ns: int, window_ns: int, origin_ns: int = 0) -> int:
    """The first window boundary at or after ``time_ns``.

    >>> window_ceil(25, 10), window_ceil(20, 10), window_ceil(-5, 10)
    (30, 20, 0)
    """
    return origin_ns - (-(time_ns - origin_ns) // window_ns) * window_ns


def window_range(window_ns: int, origin_ns: int = 0) -> WindowRange:
    """The windows each row lies in and anchors, as polars expressions.

    Parameters
    ----------
    window_ns, origin_ns
        The windows ``[origin_ns + k * window_ns, ...)``, ``k >= 0``.

    Returns
    -------
    WindowRange
        ``first``, ``last`` and ``anchor`` window index of each row
        (module docstring, "Rules").

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "b"],
    ...     "start_ns": [5, 10], "end_ns": [25, 10]})
    >>> t.select(*window_range(10)).rows()  # an interval, an instant on 10
    [(0, 2, 2), (0, 1, 0)]
    """
    _check(window_ns)
    w = window_ns
    start = pl.col("start_ns") - origin_ns
    end = pl.col("end_ns") - origin_ns
    earliest = pl.min_horizontal(start, end)
    latest = pl.max_horizontal(start, end)
    lo = pl.when(is_interval).then(start // w).otherwise((latest - 1) // w)
    first = pl.max_horizontal(lo, pl.lit(0, pl.Int64))
    last = pl.when(is_interval).then((end - 1) // w).otherwise(earliest // w)
    anchor = pl.when(is_interval).then(last).otherwise(first)
    return WindowRange(first.alias("first"), last.alias("last"), anchor.alias("anchor"))


def coarse_range(window_ns: int, origin_ns: int = 0) -> tuple[pl.Expr, pl.Expr]:
    """``(lo, hi)`` window indices holding each row's :func:`window_range`.

    They read only the row's times (no worker columns), so they count rows
    per window cheaply and are simple to state in SQL (the Spark engine
    explodes rows over them, then filters each window exactly with
    :func:`touches`): ``lo`` is the window before the first event's when
    that lies on a boundary, ``hi`` the window holding the last event.

    >>> t = pl.DataFrame({"start_ns": [5, 10], "end_ns": [25, 10]})
    >>> t.select(*coarse_range(10)).rows()
    [(0, 2), (0, 1)]
    """
    _check(window_ns)
    lo = ((first_event - origin_ns - 1) // window_ns).clip(lower_bound=0)
    hi = (last_event - origin_ns) // window_ns
    return lo.alias("lo"), hi.alias("hi")


def touches(ts: int, te: int) -> pl.Expr:
    """Whether a row lies in a window within ``[ts, te)``.

    A local activity of positive length when it overlaps ``[ts, te)``; any
    other row (a message, an instant) when both its ends lie in ``[ts, te]``:
    the row lies in window 0 of :func:`window_range` with windows of
    ``te - ts`` from ``ts``. For a single window (``te - ts`` the window
    length) these are exactly the rows with a piece there.

    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "b"],
    ...     "start_ns": [0, 5], "end_ns": [10, 11]})
    >>> t.select(touches(0, 10)).to_series().to_list()  # the message ends at 11
    [True, False]
    """
    first, last, _ = window_range(te - ts, ts)
    return (first == 0) & (last >= 0)


def touching(rows: pl.DataFrame, ts: int, te: int) -> pl.DataFrame:
    """The rows that lie in a window within ``[ts, te)`` (:func:`touches`).

    >>> t = pl.DataFrame({"src_worker": ["a", "a", "a"], "dst_worker": ["a", "b", "a"],
    ...     "start_ns": [0, 5, 9], "end_ns": [12, 11, 10], "activity": ["gc"] * 3})
    >>> touching(t, 0, 10)["start_ns"].to_list()
    [0, 9]
    """
    return rows.filter(touches(ts, te))


def pieces(rows: pl.DataFrame, window_ns: int, origin_ns: int = 0) -> pl.DataFrame:
    """One row per (trace row, listed window) pair: a snapshot's pieces.

    Unclipped (see :func:`clip`). Columns: ``window`` (index), ``trace_row``
    (the row's position in ``rows``), then ``rows``' columns; sorted by
    window, then trace row, as the snapshot builder orders them.

    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "b"],
    ...     "start_ns": [0, 20], "end_ns": [15, 20]})
    >>> pieces(t, 10).select("window", "trace_row").rows()  # window 2 is not listed
    [(0, 0), (1, 0), (1, 1)]
    """
    ranged = _ranged(rows, window_ns, origin_ns)
    exploded = ranged.with_columns(
        pl.int_ranges("first", pl.col("last") + 1).alias("window")
    ).explode("window")
    listed = (
        exploded.filter(pl.col("window") <= pl.col("anchor")).select("window").unique()
    )
    return (
        exploded.join(listed, on="window", how="semi")
        .sort("window", TRACE_ROW)
        .select("window", TRACE_ROW, *rows.columns)
    )


def _ranged(rows: _Frame, window_ns: int, origin_ns: int) -> _Frame:
    """``rows`` numbered as ``trace_row``, with their window range, if any."""
    return (
        rows.with_row_index(TRACE_ROW)
        .with_columns(
            pl.col(TRACE_ROW).cast(pl.Int64), *window_range(window_ns, origin_ns)
        )
        .filter(pl.col("last") >= pl.col("first"))
    )


def listed_windows(
    rows: pl.DataFrame,
    window_ns: int,
    lo: int | None = None,
    hi: int | None = None,
    *,
    origin_ns: int = 0,
) -> list[int]:
    """Starts of the listed windows in ``[lo, hi)`` that ``rows`` make exist.

    A window exists when a row anchors it: a local activity of positive
    length overlaps it, or an instant (message) lies in it and it is the
    earliest window that holds both its ends (module docstring).

    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "b"],
    ...     "start_ns": [0, 25], "end_ns": [15, 28], "activity": ["gc", "data"]})
    >>> listed_windows(t, 10, 0, 40)
    [0, 10, 20]
    """
    if rows.is_empty():
        return []
    w = window_ns
    if lo is not None and hi is not None:
        k = max(0, -(-(lo - origin_ns) // w))
        if (hi - origin_ns) // w - 1 == k and _interval_in(rows, origin_ns + k * w, w):
            return [origin_ns + k * w]
    a = pl.col("first")
    b = pl.col("anchor")
    if lo is not None:
        a = pl.max_horizontal(a, pl.lit(-(-(lo - origin_ns) // w)))
    if hi is not None:
        b = pl.min_horizontal(b, pl.lit((hi - origin_ns) // w - 1))
    # One query: only the times and workers the ranges read are filtered
    # (an eager filter copied every column of the buffer, 20 ms for the
    # 240,000 rows of 8 windows).
    query = rows.lazy()
    if hi is not None:
        # A row whose first event is after hi lists no window before hi
        # (an instant on hi anchors the window that ends there), and a live
        # buffer holds the lateness beyond it: 2.5 -> 1.5 ms on a buffer of
        # 60,000 rows closing one window (one core).
        query = query.filter(first_event <= hi)
    ranges = collect(
        _ranged(query, w, origin_ns)
        .select(a.alias("a"), b.alias("b"))
        .filter(pl.col("a") <= pl.col("b")),
        len(rows),
    )
    if ranges.is_empty():
        return []
    return [origin_ns + int(k) * w for k in _covered(ranges["a"], ranges["b"])]


def _interval_in(rows: pl.DataFrame, ts: int, window_ns: int) -> bool:
    """Whether an interval of ``rows`` lies in the window from ``ts``: it
    then anchors it (module docstring, "Rules").

    The online pipeline's one window a poll, listed in one aggregate, not by
    every row's window range: 1.6 -> 0.17 ms over 30,000 rows (one core).
    """
    te = ts + window_ns
    overlaps = is_interval & (pl.col("start_ns") < te) & (pl.col("end_ns") > ts)
    return bool(collect(rows.lazy().select(overlaps.any()), len(rows)).item())


def _covered(a: pl.Series, b: pl.Series) -> np.ndarray[Any, Any]:
    """The integers in the union of the ranges ``[a, b]`` (non-empty), sorted.

    A live buffer spans a few windows with 10^5-10^6 rows: counted over
    the span (rows starting minus rows ended before each window), not by
    listing every row's windows.

    >>> _covered(pl.Series([3, 7, 4]), pl.Series([5, 7, 4])).tolist()
    [3, 4, 5, 7]
    """
    first, last = a.to_numpy(), b.to_numpy()
    lo = int(first.min())
    span = int(last.max()) - lo + 1
    if span > 4 * len(first) + 1024:  # sparse: a few rows far apart
        return np.unique(range_members(first, last))
    return np.flatnonzero(range_coverage(first, last, lo, span)) + lo


def range_coverage(
    first: np.ndarray[Any, Any], last: np.ndarray[Any, Any], k0: int, span: int
) -> np.ndarray[Any, Any]:
    """How many of the ranges ``[first, last]`` cover each of ``k0 ..
    k0 + span - 1`` (every range non-empty, within that span).

    >>> range_coverage(np.array([3, 4]), np.array([5, 4]), 3, 4).tolist()
    [1, 2, 1, 0]
    """
    starts = np.bincount(first - k0, minlength=span + 1)
    ends = np.bincount(last - k0 + 1, minlength=span + 1)
    covering: np.ndarray[Any, Any] = np.cumsum(starts - ends)[:span]
    return covering


def range_members(
    first: np.ndarray[Any, Any], last: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Every integer of every range ``[first, last]``, concatenated.

    >>> range_members(np.array([3, 7]), np.array([5, 7])).tolist()
    [3, 4, 5, 7]
    """
    counts = last - first + 1
    starts = np.cumsum(counts) - counts
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)
    members: np.ndarray[Any, Any] = np.repeat(first, counts) + within
    return members


#: Runs of fewer plain windows are built one by one (the cost is bounded
#: by this many windows per pair of neighbouring events either way, and
#: short runs keep their per-window detail on the charts).
MIN_STRETCH = 64


def plain_stretches(
    trace: pl.DataFrame,
    window_ns: int,
    origin_ns: int = 0,
    min_windows: int = MIN_STRETCH,
) -> list[tuple[int, int]]:
    """Runs of at least ``min_windows`` windows that hold no row's event.

    A window whose closed span ``[ts, te]`` holds no row's start or end
    time is *plain*: every row in it is an interval over the whole window,
    each clipped to ``[ts, te]``, so every non-waiting one is a path of
    its own and the CP of each is ``1 / N`` (DESIGN §4). Consecutive plain
    windows therefore have the same PAG, and a run of them has the CP of
    one window as long as the run (the batch engine computes it so, and
    weighs it by the windows it stands for). Found from the sorted event
    times alone: O(rows log rows), whatever the span.

    Returns
    -------
    list of (first, last)
        Window indices (``k`` of ``[origin + k W, origin + (k + 1) W)``),
        both included, ``last - first + 1 >= min_windows``, in order.

    Examples
    --------
    One driver row over 100 windows, tasks at either end:

    >>> t = pl.DataFrame({"start_ns": [0, 0, 995], "end_ns": [5, 1000, 1000]})
    >>> plain_stretches(t, 10, 0, min_windows=4)
    [(1, 98)]
    """
    _check(window_ns)
    if trace.is_empty():
        return []
    # The windows holding an event: its own, and the one before when it lies
    # on a boundary (module docstring: a window is [ts, te], both ends in
    # it). Hashed, not sorted: their number is at most the windows'. A
    # slice of the trace at a time (:func:`~sparktrail.pag.trace.trace_slices`):
    # the whole trace's times and window indices took ~460 MB at 10^7 rows.
    held = np.unique(
        np.concatenate(
            [
                _held_windows(part, window_ns, origin_ns)
                for _, part in trace_slices(trace)
            ]
        )
    )
    first, last = held[:-1] + 1, held[1:] - 1
    long = np.flatnonzero(last - first + 1 >= min_windows)
    return [(int(first[i]), int(last[i])) for i in long]


def _held_windows(rows: pl.DataFrame, window_ns: int, origin_ns: int) -> np.ndarray:
    """The distinct windows holding an event of ``rows`` (:func:`plain_stretches`)."""
    times = pl.concat([rows["start_ns"], rows["end_ns"]]).cast(pl.Int64) - origin_ns
    times = times.clip(lower_bound=0)
    own = times // window_ns
    before = own.filter((times % window_ns == 0) & (own > 0)) - 1
    # Copied out: polars' few distinct values kept the slice's whole
    # buffers alive (~15 MB a slice, 1.6 GB at 10^8 rows, measured).
    return pl.concat([own, before]).unique().to_numpy().copy()


def listed_spans(
    rows: pl.DataFrame,
    window_ns: int,
    lo: int,
    hi: int,
    *,
    origin_ns: int = 0,
    min_windows: int = MIN_STRETCH,
) -> list[tuple[int, int]]:
    """The listed windows in ``[lo, hi)`` as ``(start, end)``, each plain
    stretch of them (:func:`plain_stretches`) as one span.

    What an engine that closes windows one at a time (the online pipeline)
    lists, so that a stretch of a million idle seconds costs one window,
    not a million: the windows between stretches come from
    :func:`listed_windows`, a stretch is listed when an interval spans it
    (it then anchors every window of it).

    >>> t = pl.DataFrame({"src_worker": ["d", "a", "a"], "dst_worker": ["d", "a", "a"],
    ...     "start_ns": [0, 0, 995], "end_ns": [1000, 5, 1000]})
    >>> listed_spans(t, 10, 0, 1000, min_windows=4)
    [(0, 10), (10, 990), (990, 1000)]
    """
    stretches = [
        (max(lo, origin_ns + a * window_ns), min(hi, origin_ns + (b + 1) * window_ns))
        for a, b in plain_stretches(rows, window_ns, origin_ns, min_windows)
    ]
    stretches = [(a, b) for a, b in stretches if b - a >= 2 * window_ns]
    spans: list[tuple[int, int]] = []
    at = lo
    for a, b in [*stretches, (hi, hi)]:
        if a > at:
            starts = listed_windows(rows, window_ns, at, a, origin_ns=origin_ns)
            spans += [(ts, ts + window_ns) for ts in starts]
        if b > a and _spanned(rows, a, b):
            spans.append((a, b))
        at = max(at, b)
    return spans


def _spanned(rows: pl.DataFrame, ts: int, te: int) -> bool:
    """Whether an interval of ``rows`` covers all of ``[ts, te]``."""
    over = is_interval & (pl.col("start_ns") <= ts) & (pl.col("end_ns") >= te)
    return bool(collect(rows.lazy().select(over.any()), len(rows)).item())


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
    # The seq bounds are aggregates broadcast in the same query: one query
    # instead of two (a window closes ~10^4 rows, where a query's fixed cost
    # is most of its time).
    seq_lo = pl.min_horizontal(pl.col("src_seq").min(), pl.col("dst_seq").min()) - 1
    seq_hi = pl.max_horizontal(pl.col("src_seq").max(), pl.col("dst_seq").max()) + 1
    early = is_interval & (pl.col("start_ns") < ts)
    late = is_interval & (pl.col("end_ns") > te)
    return rows.with_columns(
        pl.when(early).then(pl.lit(ts)).otherwise("start_ns").alias("start_ns"),
        pl.when(early).then(seq_lo).otherwise("src_seq").alias("src_seq"),
        pl.when(late).then(pl.lit(te)).otherwise("end_ns").alias("end_ns"),
        pl.when(late).then(seq_hi).otherwise("dst_seq").alias("dst_seq"),
    )


def to_trace_rows(cp: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """``cp`` with ``edge_index`` mapped from a row of ``rows`` to the trace row.

    ``cp`` was computed from some rows of a trace (``rows``, which name
    their row in the trace in :data:`TRACE_ROW`), so its ``edge_index``
    counts rows of ``rows``; the result's counts rows of the trace.

    >>> rows = pl.DataFrame({"trace_row": [4, 9]})
    >>> cp = pl.DataFrame({"edge_index": [1, 0]})
    >>> to_trace_rows(cp, rows)["edge_index"].to_list()
    [9, 4]
    """
    mapped = rows[TRACE_ROW].cast(pl.Int64).gather(cp["edge_index"])
    return cp.with_columns(mapped.alias("edge_index"))


def trace_row(rows: pl.DataFrame, edge_index: int) -> int:
    """The trace row of row ``edge_index`` of ``rows`` (:func:`to_trace_rows`).

    >>> trace_row(pl.DataFrame({"trace_row": [4, 9]}), 1)
    9
    """
    return int(rows[TRACE_ROW][edge_index])
