"""The list scheduler of the what-if replay, compiled with numba.

:func:`list_schedule` walks the tasks in (traced) launch order through the
run's segments and driver gaps, puts each task on the slot of a pool that
frees first (a binary min-heap of free times) and returns when the run
ends; :func:`launch_lags` measures each task's lags on a run with the
traced launches. :mod:`~sparktrail.whatif.replay` states the model.

Examples
--------
>>> import numpy as np
>>> heap = np.array([3, 5, 4], dtype=np.int64)
>>> replace_top(heap, 9); heap.tolist()
[4, 5, 9]
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

__all__ = ["launch_lags", "list_schedule", "replace_top"]

_Array = np.ndarray[Any, Any]


@numba.njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def replace_top(heap: _Array, value: int) -> None:
    """Replace the smallest value of the min-heap ``heap`` with ``value``."""
    n = heap.size
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        child = left
        right = left + 1
        if right < n and heap[right] < heap[left]:
            child = right
        if heap[child] >= value:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = value


@numba.njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def list_schedule(
    dur: _Array,
    lag_release: _Array,
    lag_slot: _Array,
    stage: _Array,
    segment: _Array,
    fixed: _Array,
    slots: int,
    start_ns: int,
    seg_len: _Array,
    seg_tail: _Array,
    seg_has_tail: _Array,
    gap_len: _Array,
    drop: _Array,
    by_end: _Array,
    ended_before: _Array,
    s_start: _Array,
    s_end: _Array,
    started: _Array,
    free_at: _Array,
    release: _Array,
) -> int:
    """Schedule the tasks; fills each stage's start, end and release, and
    each task's slot free time, and returns when the run ends.

    With a non-empty ``fixed`` the launches are those given (the traced
    ones) and the lags are not read.
    """
    heap = np.full(max(slots, 1), start_ns, dtype=np.int64)
    use_fixed = fixed.size > 0
    ended_max = start_ns
    ptr = 0
    seg = 0
    seg_start = start_ns
    seg_max = start_ns
    seg_any = False
    n_segments = seg_len.size
    for i in range(dur.size):
        k = segment[i]
        while seg < k:
            seg_start = _segment_end(
                seg, seg_start, seg_max, seg_any, seg_len, seg_tail, seg_has_tail
            )
            if not drop[seg]:
                seg_start += gap_len[seg]
            seg += 1
            seg_any = False
        s = stage[i]
        if not started[s]:
            started[s] = True
            while ptr < ended_before[s]:
                e = s_end[by_end[ptr]]
                if e > ended_max:
                    ended_max = e
                ptr += 1
            release[s] = max(seg_start, ended_max)
            s_start[s] = np.iinfo(np.int64).max
            s_end[s] = np.iinfo(np.int64).min
        f = heap[0]
        if use_fixed:
            launch = fixed[i]
            free_at[i] = f
        else:
            launch = max(release[s] + lag_release[i], f + lag_slot[i])
        end = launch + dur[i]
        replace_top(heap, end)
        if launch < s_start[s]:
            s_start[s] = launch
        if end > s_end[s]:
            s_end[s] = end
        if not seg_any or end > seg_max:
            seg_max = end
        seg_any = True
    while seg < n_segments:
        seg_start = _segment_end(
            seg, seg_start, seg_max, seg_any, seg_len, seg_tail, seg_has_tail
        )
        if not drop[seg]:
            seg_start += gap_len[seg]
        seg += 1
        seg_any = False
    return seg_start  # type: ignore[no-any-return]


@numba.njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _segment_end(
    seg: int,
    start: int,
    last_end: int,
    any_task: bool,
    seg_len: _Array,
    seg_tail: _Array,
    seg_has_tail: _Array,
) -> int:
    """When segment ``seg`` ends: its traced tail after its last task."""
    if not any_task or not seg_has_tail[seg]:
        return start + seg_len[seg]  # type: ignore[no-any-return]
    return max(start, last_end + seg_tail[seg])  # type: ignore[no-any-return]


@numba.njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def launch_lags(
    launch: _Array,
    stage: _Array,
    free: _Array,
    release: _Array,
    n_stages: int,
    lag_release: _Array,
    lag_slot: _Array,
) -> None:
    """Each task's launch lags after its stage's release and its slot.

    A task whose slot was free by its release (and launch) only waited for
    the driver: its lag after release is all of it. A task that waited for
    a slot launches its slot lag after the slot freed; its release lag is
    the driver's pace reached so far in its stage (at most its own).
    """
    pace = np.zeros(n_stages, dtype=np.int64)
    paced = np.zeros(n_stages, dtype=np.bool_)
    for i in range(launch.size):
        s = stage[i]
        t = launch[i]
        r = release[s]
        f = free[i]
        if f <= min(r, t):
            lag_release[i] = t - r
            lag_slot[i] = 0
            if not paced[s] or t - r > pace[s]:
                pace[s] = t - r
                paced[s] = True
        else:
            lag_release[i] = min(t - r, pace[s])
            lag_slot[i] = t - f
