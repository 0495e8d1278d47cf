"""Windowed snapshots of a trace: the edges and vertices of each window's PAG.

Tumbling windows ``[ts, te)`` of ``window_ns`` start at ``origin_ns``. Every
window of a trace is built at once, as one disjoint union of per-window DAGs,
so thousands of small windows cost no Python loop.

Assumptions (DESIGN §4)
-----------------------
* A vertex is an event ``(worker, time, seq)`` within one window; rows that
  name the same event share its vertex.
* A local activity of positive length is clipped to the window. A clipped
  start becomes an event that precedes every other event of that worker at
  ``ts``; a clipped end one that follows every other event at ``te``.
* An edge of zero length, and every communication edge, is an instant: it is
  kept in each window whose closed interval ``[ts, te]`` holds both its ends
  (so one that lies on a window boundary belongs to both windows, with
  weight 0 in each).
* Weights are the clipped durations; a communication edge received before it
  was sent (clock noise) weighs 0.
* A window is listed (exists) only when a positive-length local piece lies
  in it, or an instant whose earliest window it is. An instant on a
  boundary joins the later window's PAG too, but only when that window
  exists: the last event of a trace opens no window of its own.
* Paths span the window clipped to the trace's own extent, from its first
  event to its last: a window at either end of a trace, which the trace
  covers only in part, has its start (end) frontier at the trace's first
  (last) event instead of at ``ts`` (``te``). Inner windows are unchanged.
* Rows before ``origin_ns`` fall outside every window.

The rules of which windows a row lies in and anchors, and of clipping, are
owned by :mod:`~sparktrail.pag.windows` (polars), which every engine calls;
this module is the CP kernel's fast path, the same rules in numba and
numpy (``_window_ranges``, ``_listed_windows``, ``_cut``), and
``tests/pag/test_window_rules.py`` checks that both agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt
import polars as pl

from .trace import release_if_long
from .windows import range_coverage, range_members, window_floor

__all__ = [
    "SnapshotWarning",
    "Snapshots",
    "build_snapshots",
    "default_origin",
    "trace_origin",
]

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


class SnapshotWarning(UserWarning):
    """A window whose PAG has no path from its start to its end (CP is 0)."""


@dataclass(frozen=True)
class Snapshots:
    """All windows' PAG edges ("pieces") and vertices, sorted by window.

    Piece arrays have one entry per (trace row, window) pair; vertex arrays
    one per event. ``piece_offsets[k]:piece_offsets[k+1]`` are the pieces of
    the k-th listed window, likewise ``vertex_offsets`` for vertices.
    """

    origin_ns: int
    window_ns: int
    windows: I64  # window index (from origin) of each listed window
    path_start_ns: I64  # per window: where paths start (ts, or the trace's start)
    path_end_ns: I64  # per window: where paths end (te, or the trace's end)
    piece_offsets: I64
    vertex_offsets: I64
    row: I64  # edge_index: row of the piece in the input trace
    src: I64  # vertex ids
    dst: I64
    start_ns: I64  # clipped
    end_ns: I64
    weight_ns: I64
    counted: npt.NDArray[np.bool_]  # False for waiting edges
    vertex_at_start: npt.NDArray[np.bool_]  # vertex time == path_start_ns
    vertex_at_end: npt.NDArray[np.bool_]  # vertex time == path_end_ns

    @property
    def window_start_ns(self) -> I64:
        return self.origin_ns + self.windows * self.window_ns

    @property
    def n_vertices(self) -> int:
        return int(self.vertex_offsets[-1])


def default_origin(first_start_ns: int, window_ns: int) -> int:
    """The trace's first start time floored to a multiple of ``window_ns``.

    >>> default_origin(1_234_567, 1_000_000)
    1000000
    """
    return window_floor(first_start_ns, window_ns)


def trace_origin(trace: pl.DataFrame, window_ns: int) -> int:
    """:func:`default_origin` of a trace's first ``start_ns`` (0 if empty).

    >>> trace_origin(pl.DataFrame({"start_ns": [1_234_567]}), 1_000_000)
    1000000
    """
    first = trace["start_ns"].min()
    # The pages of a long trace's start times (800 MB at 10^8 rows) are
    # read once here; resident memory follows a slice (DESIGN §10).
    release_if_long(trace.height)
    return default_origin(int(first), window_ns) if first is not None else 0  # type: ignore[arg-type]


@numba.njit(cache=True, nogil=True)
def _window_ranges(
    start: I64, end: I64, interval: B, origin: int, window: int
) -> tuple[I64, I64]:
    """First and last window index of each row (last < first: in none).

    :func:`sparktrail.pag.windows.window_range` in numba.
    """
    n = start.shape[0]
    first = np.empty(n, dtype=np.int64)
    last = np.empty(n, dtype=np.int64)
    for i in range(n):
        s = start[i] - origin
        e = end[i] - origin
        if interval[i]:
            lo = s // window
            hi = (e - 1) // window
        else:
            lo = (max(s, e) - 1) // window
            hi = min(s, e) // window
        first[i] = max(lo, 0)
        last[i] = hi
    return first, last


@numba.njit(cache=True, nogil=True)
def _cut(
    first: I64,
    last: I64,
    windows: I64,
    slots: I64,
    start: I64,
    end: I64,
    interval: B,
    src_seq: I64,
    dst_seq: I64,
    seq_before: int,
    seq_after: int,
    origin: int,
    window: int,
    n_pieces: int,
) -> tuple[I64, I64, I64, I64, I64, I64, I64]:
    """Every (row, window) piece, clipped, placed in window order.

    :func:`sparktrail.pag.windows.pieces` then
    :func:`~sparktrail.pag.windows.clip`, in numba (with the seq bounds of
    the whole trace, not of one window's rows: either orders a clipped end
    the same way among its worker's events).

    ``windows`` lists (sorted) every window holding a piece and ``slots`` the
    next free position of each one's pieces; rows are visited in order, so
    within a window pieces keep row order.
    """
    row = np.empty(n_pieces, dtype=np.int64)
    win = np.empty(n_pieces, dtype=np.int64)
    p_start = np.empty(n_pieces, dtype=np.int64)
    p_end = np.empty(n_pieces, dtype=np.int64)
    weight = np.empty(n_pieces, dtype=np.int64)
    seq_src = np.empty(n_pieces, dtype=np.int64)
    seq_dst = np.empty(n_pieces, dtype=np.int64)
    for i in range(first.shape[0]):
        if last[i] < first[i]:
            continue
        listed = np.searchsorted(windows, first[i])
        for k in range(first[i], last[i] + 1):
            if listed >= windows.shape[0] or windows[listed] != k:
                continue  # an instant on the end of the trace's last window
            j = slots[listed]
            slots[listed] += 1
            listed += 1
            ts = origin + k * window
            te = ts + window
            s, e = start[i], end[i]
            a, b = src_seq[i], dst_seq[i]
            if interval[i]:
                if s < ts:
                    s, a = ts, seq_before
                if e > te:
                    e, b = te, seq_after
            row[j] = i
            win[j] = k
            p_start[j] = s
            p_end[j] = e
            weight[j] = max(e - s, 0)
            seq_src[j] = a
            seq_dst[j] = b
    return row, win, p_start, p_end, weight, seq_src, seq_dst


@numba.njit(cache=True, nogil=True)
def _pack_keys(
    win: I64,
    row: I64,
    p_start: I64,
    p_end: I64,
    seq_src: I64,
    seq_dst: I64,
    src_code: I64,
    dst_code: I64,
    k0: int,
    origin: int,
    window: int,
    seq_lo: int,
    n_seq: int,
    n_workers: int,
) -> I64:
    """One int64 per event (sources, then destinations), ordered as
    (window, time, seq, worker)."""
    n = win.shape[0]
    keys = np.empty(2 * n, dtype=np.int64)
    for i in range(n):
        base = (win[i] - k0) * (window + 1) - (origin + win[i] * window)
        key = (base + p_start[i]) * n_seq + (seq_src[i] - seq_lo)
        keys[i] = key * n_workers + src_code[row[i]]
        key = (base + p_end[i]) * n_seq + (seq_dst[i] - seq_lo)
        keys[n + i] = key * n_workers + dst_code[row[i]]
    return keys


def _worker_codes(trace: pl.DataFrame) -> tuple[I64, I64, int]:
    workers = pl.concat([trace["src_worker"], trace["dst_worker"]]).unique().sort()
    codes = pl.Enum(workers)
    return (
        trace["src_worker"].cast(codes).to_physical().to_numpy().astype(np.int64),
        trace["dst_worker"].cast(codes).to_physical().to_numpy().astype(np.int64),
        len(workers),
    )


def _listed_windows(
    first: I64, last: I64, anchor: I64, n_pieces: int
) -> tuple[I64, I64]:
    """Listed windows (sorted) and how many pieces each holds.

    :func:`sparktrail.pag.windows.listed_windows` in numpy.

    A row's pieces span windows ``first .. last``; it lists (anchors)
    windows ``first .. anchor``.
    """
    has = last >= first
    first, last, anchor = first[has], last[has], anchor[has]
    k0 = int(first.min())
    span = int(last.max()) - k0 + 1
    if span <= 4 * n_pieces + 1024:
        per_window = range_coverage(first, last, k0, span)
        listed = np.flatnonzero(range_coverage(first, anchor, k0, span)) + k0
        return listed, per_window[listed - k0]
    listed = np.unique(range_members(first, anchor))
    piece_windows = range_members(first, last)
    kept, per_window = np.unique(
        piece_windows[np.isin(piece_windows, listed)], return_counts=True
    )
    return kept.astype(np.int64), per_window.astype(np.int64)


def _packed_vertex_ids(
    packed: I64, k0: int, window: int, n_seq: int, n_workers: int
) -> tuple[I64, I64, I64]:
    """Dense ids of packed event keys, and each vertex's window and time."""
    # A dense rank (np.unique's inverse: ids in key order) by a stable
    # argsort: numpy's timsort gains from the keys' runs (each endpoint
    # half is nearly in time order), 2-2.6x faster than polars' rank on
    # 6 x 10^5 to 7 x 10^6 keys, which was 3x faster than np.unique.
    order = np.argsort(packed, kind="stable")
    ids, unique = _dense_ranks(packed, order)
    slot: I64 = unique // (n_seq * n_workers)
    vertex_win: I64 = slot // (window + 1) + k0
    vertex_time: I64 = slot % (window + 1)
    return ids, vertex_win, vertex_time


@numba.njit(cache=True, nogil=True)
def _dense_ranks(keys: I64, order: I64) -> tuple[I64, I64]:
    """Each key's rank among the distinct ``keys``, and those keys in order.

    ``order`` sorts ``keys``. One pass: in numpy, the gather, the mask, the
    cumulative sum and the scatter took 1.6 ms on 60,000 keys (0.2 here).
    """
    n = keys.shape[0]
    ids = np.empty(n, dtype=np.int64)
    unique = np.empty(n, dtype=np.int64)
    m = 0
    for j in range(n):
        key = keys[order[j]]
        if m == 0 or key != unique[m - 1]:
            unique[m] = key
            m += 1
        ids[order[j]] = m - 1
    return ids, unique[:m]


def _sorted_vertex_ids(
    keys: tuple[I64, I64, I64, I64], origin: int, window: int
) -> tuple[I64, I64, I64]:
    """Like :func:`_packed_vertex_ids`, for keys too wide to pack in an int64."""
    order = np.lexsort(keys[::-1])
    changed = np.zeros(len(order), dtype=bool)
    if len(order):
        changed[0] = True
    for key in keys:
        sorted_key = key[order]
        changed[1:] |= sorted_key[1:] != sorted_key[:-1]
    ids = np.empty(len(order), dtype=np.int64)
    ids[order] = np.cumsum(changed) - 1
    one_of = order[changed]
    vertex_win = keys[0][one_of]
    return ids, vertex_win, keys[1][one_of] - (origin + vertex_win * window)


def build_snapshots(
    trace: pl.DataFrame,
    window_ns: int,
    origin_ns: int,
    extent_ns: tuple[int, int] | None = None,
) -> Snapshots:
    """Cut a validated trace into the PAG snapshots of every window.

    ``extent_ns`` is the (first, last) event time of the whole trace when
    ``trace`` is only the part of it that touches some windows; by default
    it is ``trace``'s own.
    """
    start = trace["start_ns"].to_numpy().astype(np.int64, copy=False)
    end = trace["end_ns"].to_numpy().astype(np.int64, copy=False)
    src_code, dst_code, n_workers = _worker_codes(trace)
    interval = (src_code == dst_code) & (end > start)
    first, last = _window_ranges(start, end, interval, origin_ns, window_ns)
    n_pieces = int(np.maximum(last - first + 1, 0).sum())
    if n_pieces == 0:
        return _empty(origin_ns, window_ns)

    anchor = np.where(interval, last, first)
    windows, piece_counts = _listed_windows(first, last, anchor, n_pieces)
    piece_offsets = _offsets(piece_counts)
    n_pieces = int(piece_offsets[-1])
    src_seq = trace["src_seq"].to_numpy().astype(np.int64, copy=False)
    dst_seq = trace["dst_seq"].to_numpy().astype(np.int64, copy=False)
    seq_lo = min(int(src_seq.min()), int(dst_seq.min())) - 1
    seq_hi = max(int(src_seq.max()), int(dst_seq.max())) + 1
    row, win, p_start, p_end, weight, seq_src, seq_dst = _cut(
        first, last, windows, piece_offsets[:-1].copy(), start, end, interval,
        src_seq, dst_seq, seq_lo, seq_hi, origin_ns, window_ns, n_pieces,
    )  # fmt: skip
    ids, vertex_win, vertex_time = _vertex_ids(
        (win, row, p_start, p_end, seq_src, seq_dst),
        (src_code, dst_code, n_workers),
        windows, origin_ns, window_ns, seq_lo, seq_hi - seq_lo + 1,
    )  # fmt: skip
    vertex_counts = np.unique(vertex_win, return_counts=True)[1]
    if extent_ns is None:
        extent_ns = (
            min(int(start.min()), int(end.min())),
            max(int(start.max()), int(end.max())),
        )
    path_start, path_end, vertex_at_start, vertex_at_end = _path_ends(
        windows, vertex_counts, vertex_time, extent_ns, origin_ns, window_ns
    )
    counted = (trace["activity"] != "waiting").to_numpy()[row]
    return Snapshots(
        origin_ns=origin_ns,
        window_ns=window_ns,
        windows=windows.astype(np.int64),
        path_start_ns=path_start.astype(np.int64),
        path_end_ns=path_end.astype(np.int64),
        piece_offsets=piece_offsets,
        vertex_offsets=_offsets(vertex_counts),
        row=row,
        src=ids[:n_pieces],
        dst=ids[n_pieces:],
        start_ns=p_start,
        end_ns=p_end,
        weight_ns=weight,
        counted=np.asarray(counted, dtype=bool),
        vertex_at_start=vertex_at_start,
        vertex_at_end=vertex_at_end,
    )


def _vertex_ids(
    pieces: tuple[I64, I64, I64, I64, I64, I64],
    workers: tuple[I64, I64, int],
    windows: I64,
    origin_ns: int,
    window_ns: int,
    seq_lo: int,
    n_seq: int,
) -> tuple[I64, I64, I64]:
    """Each piece end's vertex id, and each vertex's window and time: by
    packed integer keys when they fit in 63 bits, else by a sort."""
    win, row, p_start, p_end, seq_src, seq_dst = pieces
    src_code, dst_code, n_workers = workers
    k0 = int(windows[0])
    if (int(windows[-1]) - k0 + 1) * (window_ns + 1) * n_seq * n_workers < 2**63:
        packed = _pack_keys(
            win, row, p_start, p_end, seq_src, seq_dst, src_code, dst_code,
            k0, origin_ns, window_ns, seq_lo, n_seq, n_workers,
        )  # fmt: skip
        return _packed_vertex_ids(packed, k0, window_ns, n_seq, n_workers)
    endpoints = (
        np.concatenate([win, win]),
        np.concatenate([p_start, p_end]),
        np.concatenate([seq_src, seq_dst]),
        np.concatenate([src_code[row], dst_code[row]]),
    )
    return _sorted_vertex_ids(endpoints, origin_ns, window_ns)


def _path_ends(
    windows: I64,
    vertex_counts: npt.NDArray[np.int64],
    vertex_time: I64,
    extent_ns: tuple[int, int],
    origin_ns: int,
    window_ns: int,
) -> tuple[I64, I64, B, B]:
    """Where each window's paths start and end (its bounds within the
    trace's extent), and which vertices lie there."""
    window_start = origin_ns + windows * window_ns
    path_start = np.maximum(window_start, extent_ns[0])
    path_end = np.minimum(window_start + window_ns, extent_ns[1])
    listed = np.repeat(np.arange(len(windows)), vertex_counts)
    vertex_at_start = vertex_time == (path_start - window_start)[listed]
    vertex_at_end = vertex_time == (path_end - window_start)[listed]
    return path_start, path_end, vertex_at_start, vertex_at_end


def _empty(origin_ns: int, window_ns: int) -> Snapshots:
    nothing = np.zeros(0, dtype=np.int64)
    return Snapshots(
        origin_ns=origin_ns,
        window_ns=window_ns,
        windows=nothing,
        path_start_ns=nothing,
        path_end_ns=nothing,
        piece_offsets=np.zeros(1, dtype=np.int64),
        vertex_offsets=np.zeros(1, dtype=np.int64),
        row=nothing,
        src=nothing,
        dst=nothing,
        start_ns=nothing,
        end_ns=nothing,
        weight_ns=nothing,
        counted=np.zeros(0, dtype=bool),
        vertex_at_start=np.zeros(0, dtype=bool),
        vertex_at_end=np.zeros(0, dtype=bool),
    )


def _offsets(counts: npt.NDArray[np.int64]) -> I64:
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets
