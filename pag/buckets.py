"""Rows of a long table grouped by bucket, in memory bounded by a slice.

A pass that works through a trace a part at a time (a batch of windows, a
range of task ids) first finds each part's rows. Sorting every row by its
part keeps two or three arrays as long as the trace in memory (~1.6 GB at
10^8 rows, measured). :func:`bucketed_rows` places them with a counting
sort instead: the buckets are counted as they come, then each row is
written at its bucket's next place. Rows and buckets of a long table go to
memory-mapped files (:func:`~sparktrail.pag.trace.mapped_array`), whose
pages are released a slice at a time (DESIGN §10).

Assumptions
-----------
* Buckets are integers in ``[0, n_buckets)``; a row of bucket -1 is left
  out.
* The pieces of ``buckets`` cover the rows in order, each piece at most a
  slice long (:data:`~sparktrail.pag.trace.SLICE_ROWS`) for the memory
  bound to hold.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import trace
from .trace import mapped_array, maps_in_place, release_if_long

__all__ = ["bucketed_rows"]


def bucketed_rows(
    buckets: Iterable[np.ndarray], n_rows: int, n_buckets: int
) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``0 .. n_rows - 1`` grouped by their bucket, each group in
    row order, and where each bucket's group starts.

    Parameters
    ----------
    buckets
        Each row's bucket (-1: left out), in consecutive pieces that add up
        to ``n_rows`` items.
    n_rows
        The rows in all.
    n_buckets
        How many buckets there are (> 0).

    Returns
    -------
    (rows, bounds)
        Bucket ``b``'s rows are ``rows[bounds[b]:bounds[b + 1]]``, ascending;
        ``rows`` is UInt32 below 2^32 rows (Int64 above), in a mapped file
        when it is longer than a slice.

    Raises
    ------
    ValueError
        If the pieces do not add up to ``n_rows`` or a bucket is out of
        range.

    Examples
    --------
    >>> rows, bounds = bucketed_rows([np.array([1, -1, 0]), np.array([1])], 4, 2)
    >>> rows.tolist(), bounds.tolist()
    ([2, 0, 3], [0, 1, 3])
    """
    if n_buckets < 1:
        raise ValueError(f"n_buckets must be positive, got {n_buckets!r}")
    long = maps_in_place(n_rows)
    kept = mapped_array(n_rows, np.int32) if long else np.empty(n_rows, np.int32)
    counts = np.zeros(n_buckets, dtype=np.int64)
    at = 0
    for piece in buckets:
        if at + len(piece) > n_rows:
            raise ValueError(f"buckets hold more than n_rows={n_rows} rows")
        if len(piece) and (piece.min() < -1 or piece.max() >= n_buckets):
            bad = piece[(piece < -1) | (piece >= n_buckets)][0]
            raise ValueError(f"bucket {bad} is outside [-1, {n_buckets})")
        kept[at : at + len(piece)] = piece
        counts += np.bincount(piece[piece >= 0], minlength=n_buckets)
        at += len(piece)
        release_if_long(n_rows)
    if at != n_rows:
        raise ValueError(f"buckets hold {at} rows, not n_rows={n_rows}")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    row_type = np.uint32 if n_rows < 2**32 else np.int64
    total = int(bounds[-1])
    rows = mapped_array(total, row_type) if long else np.empty(total, row_type)
    # Each bucket's next free place; a slice's rows are placed in one
    # scatter (a stable sort of the slice keeps them in row order).
    free = bounds[:-1].copy()
    step = trace.SLICE_ROWS  # read when called: tests set smaller slices
    for start in range(0, n_rows, step):
        piece = np.asarray(kept[start : start + step])
        mine = np.flatnonzero(piece >= 0)
        bucket = piece[mine]
        by_bucket = np.argsort(bucket, kind="stable")
        bucket = bucket[by_bucket]
        first_of = np.searchsorted(bucket, bucket, side="left")
        place = free[bucket] + (np.arange(len(bucket)) - first_of)
        rows[place] = (mine[by_bucket] + start).astype(row_type)
        free += np.bincount(bucket, minlength=n_buckets)
        release_if_long(n_rows)
    return rows, bounds
