"""Close a small window on one core: polars' pool beside the calling thread.

A window of some 30,000 rows runs about 140 small polars queries, and each
hands its work to polars' thread pool and waits for it. When the pool's
thread runs on another core, that hand-off wakes the other core: on this
project's 2-vCPU test machine (a Firecracker VM) a filter of 16 rows took
0.108 ms against 0.051 ms with the pool on the caller's core
(``bench/polars_handoff.py``), and one window's whole step 72 against 83 ms.
Large windows gain from the second core instead (300,000 rows: about 360
against 410 ms), so :func:`one_core` pins only while it is asked to: the
online pipeline runs a poll on one core when the last window it closed
had fewer than :data:`ONE_CORE_ROWS` rows (its trace rows touching it).

Assumptions
-----------
* Linux: threads are pinned with :func:`os.sched_setaffinity` by their
  thread id, and polars' pool threads are those named as in
  :data:`POOL_THREAD_NAMES` in ``/proc/self/task``. Elsewhere, or when
  no pool thread is found, :func:`one_core` changes nothing.
* Nothing else in the process relies on the pool's threads being spread
  while a window closes (a few tens of ms): other threads' polars queries
  still run, on the pinned core. Every thread gets its own former mask
  back afterwards, also when the body raises; the pool's, when the last
  of the threads inside :func:`one_core` at once leaves.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = [
    "ONE_CORE_ROWS",
    "POOL_THREAD_NAMES",
    "background",
    "on_every_core",
    "one_core",
    "pool_threads",
]

#: Window rows under which the online pipeline closes a window on one core:
#: at 100,000 rows both ways took the same time on the test machine.
ONE_CORE_ROWS = 60_000

_TASKS = Path("/proc/self/task")
#: Names (``/proc`` truncates them to 15 characters) of polars' threads that
#: run a query's work: its compute pool (``polars-<n>``), and the executor
#: of its streaming engine, which some in-memory queries hand work to too.
#: Pinning the latter as well: a window's close 43.5 -> 42.5 ms (one core,
#: medians of 30 alternating runs; polars 2.1).
POOL_THREAD_NAMES = ("polars-", "async-executor")
#: The cores the process may run on, as it started (before any pinning).
_PROCESS_CORES: set[int] | None = (
    os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
)
#: (pid, {thread id: name}) of the threads seen; a forked child looks again.
_seen: tuple[int, dict[int, str]] | None = None
_seen_lock = threading.Lock()


def pool_threads() -> list[int]:
    """Thread ids of polars' pool threads in this process (none off Linux).

    Each thread's name is read once, when it is first seen (reading every
    thread's name took 0.5 ms a poll): polars starts its streaming
    executor's threads only at the first query that needs them, after its
    compute pool.

    >>> import polars as pl
    >>> _ = pl.DataFrame({"a": [1, 2]}).group_by("a").len()
    >>> all(isinstance(tid, int) for tid in pool_threads())
    True
    """
    global _seen
    try:
        tids = {int(tid) for tid in os.listdir(_TASKS)}
    except OSError:  # no /proc
        return []
    with _seen_lock:  # pipelines may poll from several threads
        if _seen is None or _seen[0] != os.getpid():
            _seen = (os.getpid(), {})
        names = _seen[1]
        for gone in names.keys() - tids:
            del names[gone]
        for tid in tids - names.keys():
            try:
                names[tid] = (_TASKS / str(tid) / "comm").read_text()
            except OSError:  # the thread ended meanwhile
                continue
        pool = [
            tid for tid, name in names.items() if name.startswith(POOL_THREAD_NAMES)
        ]
    return pool


@contextlib.contextmanager
def one_core(enabled: bool = True) -> Iterator[None]:
    """Run the body with the calling thread and polars' pool on one core.

    The core is the lowest the calling thread may run on. With ``enabled``
    false, or where threads cannot be pinned (see "Assumptions"), the body
    runs as it would without this.

    Parameters
    ----------
    enabled
        Whether to pin (callers pass their size test, such as a window's
        rows under :data:`ONE_CORE_ROWS`).

    Examples
    --------
    >>> import polars as pl
    >>> with one_core():
    ...     pl.DataFrame({"a": [1, 1, 2]}).group_by("a").len().height
    2
    """
    if not enabled or not hasattr(os, "sched_setaffinity"):
        yield
        return
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2 or not pool_threads():
        yield
        return
    core = {min(allowed)}
    _pin_pool(core)
    try:
        os.sched_setaffinity(0, core)  # 0: the calling thread
        try:
            yield
        finally:
            os.sched_setaffinity(0, allowed)
    finally:
        _unpin_pool()


#: The pool threads' masks before the first of the threads now inside
#: :func:`one_core` pinned them, and how many threads are inside: two
#: pipelines polling at once must not restore each other's pins.
_pool_masks: dict[int, set[int]] = {}
_inside = 0
_pool_lock = threading.Lock()


def _pin_pool(core: set[int]) -> None:
    global _inside
    with _pool_lock:
        if _inside == 0:
            _pool_masks.clear()
            for tid in pool_threads():
                with contextlib.suppress(OSError):  # a pool thread that ended
                    _pool_masks[tid] = os.sched_getaffinity(tid)
                    os.sched_setaffinity(tid, core)
        _inside += 1


def _unpin_pool() -> None:
    global _inside
    with _pool_lock:
        _inside -= 1
        if _inside == 0:
            for tid, mask in _pool_masks.items():
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(tid, mask)


def on_every_core() -> None:
    """Let the calling thread run on every core the process started with.

    For a helper thread: a thread starts with the mask of the thread that
    started it, which may be inside :func:`one_core` then. Nothing happens
    where threads cannot be pinned.

    >>> on_every_core()
    """
    if _PROCESS_CORES is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, _PROCESS_CORES)


#: (pid, executor) of each :func:`background` thread, by name; a forked
#: child starts its own (the parent's threads are not in it).
_helpers: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_helpers_lock = threading.Lock()


def background(name: str) -> ThreadPoolExecutor:
    """The process's one helper thread called ``name``, started on first use.

    It runs on every core (:func:`on_every_core`) even when started from
    inside :func:`one_core`, so its work goes on beside a pinned poll's.

    >>> background("sparktrail-doc").submit(sum, [1, 2]).result()
    3
    """
    with _helpers_lock:
        known = _helpers.get(name)
        if known is None or known[0] != os.getpid():
            executor = ThreadPoolExecutor(
                1, thread_name_prefix=name, initializer=on_every_core
            )
            known = _helpers[name] = (os.getpid(), executor)
        return known[1]
