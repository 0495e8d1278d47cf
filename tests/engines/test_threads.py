"""Small windows close with polars' pool on the calling thread's core."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from sparktrail.engines import online, threads
from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.threads import background, one_core, pool_threads
from sparktrail.pag import write_trace
from sparktrail.synthetic import barrier_trace

#: prctl's option that names the calling thread (linux/prctl.h).
PR_SET_NAME = 15

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="pins threads on Linux with two cores or more",
)


def masks() -> dict[int, set[int]]:
    """The calling thread's and polars' pool threads' CPU masks."""
    threads = [threading.get_native_id(), *pool_threads()]
    return {tid: os.sched_getaffinity(tid) for tid in threads}


@pytest.fixture(autouse=True)
def started_pool() -> None:
    # Polars starts its pool on the first query that uses it.
    pl.DataFrame({"a": range(1000)}).group_by(pl.col("a") % 3).len()
    assert pool_threads()


def test_one_core_pins_the_caller_and_the_pool_and_restores_them() -> None:
    # GIVEN the threads' masks before
    before = masks()
    # WHEN a query runs inside one_core
    with one_core():
        inside = masks()
        height = pl.DataFrame({"a": [1, 1, 2]}).group_by("a").len().height
    # THEN every one of them ran on the same single core, the lowest allowed
    core = {min(os.sched_getaffinity(0) | set().union(*inside.values()))}
    assert height == 2
    assert set(inside) == set(before)
    assert all(mask == core for mask in inside.values()), inside
    # ... and has its own mask back afterwards
    assert masks() == before


def test_masks_come_back_when_the_body_raises() -> None:
    before = masks()
    with pytest.raises(RuntimeError, match="boom"), one_core():
        raise RuntimeError("boom")
    assert masks() == before


def test_two_threads_inside_at_once_restore_the_pool_once_both_left() -> None:
    # GIVEN the pool's masks before, and two threads that enter one_core
    # one after the other and leave in the order they entered
    before = {tid: os.sched_getaffinity(tid) for tid in pool_threads()}
    first_in, second_in, first_out = (threading.Event() for _ in range(3))
    seen: list[dict[int, set[int]]] = []

    def first() -> None:
        with one_core():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with one_core():
            second_in.set()
            first_out.wait(5)
            # WHEN the first has left while the second is still inside
            seen.append({tid: os.sched_getaffinity(tid) for tid in before})

    threads = [threading.Thread(target=f) for f in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # THEN the pool stayed pinned for the second, and is free again after
    assert seen and all(len(mask) == 1 for mask in seen[0].values())
    assert {tid: os.sched_getaffinity(tid) for tid in before} == before


def named_thread(name: bytes, started: threading.Event, stop: threading.Event) -> None:
    """A thread that names itself ``name`` in /proc (as Rust threads do)."""
    ctypes.CDLL(None).prctl(PR_SET_NAME, name)
    started.set()
    stop.wait(10)


def test_a_pool_thread_started_later_is_found_and_one_ended_forgotten() -> None:
    # GIVEN the pool's threads already looked up once
    assert pool_threads()
    # WHEN polars starts another thread of its pool later (as it starts its
    # streaming executor at the first query that needs it)
    started, stop = threading.Event(), threading.Event()
    late = threading.Thread(
        target=named_thread, args=(b"async-executor-", started, stop)
    )
    late.start()
    started.wait(10)
    try:
        # THEN it is found, and one_core pins it with the others
        assert late.native_id in pool_threads()
        with one_core():
            assert os.sched_getaffinity(late.native_id) == os.sched_getaffinity(0)
            assert len(os.sched_getaffinity(0)) == 1
    finally:
        stop.set()
        late.join(10)
    # ... and it is forgotten once it ended (gone from /proc: join() returns
    # while the kernel may still list the exiting thread)
    assert late.native_id is not None
    gone = time.monotonic() + 10
    while (
        Path(f"/proc/self/task/{late.native_id}").exists() and time.monotonic() < gone
    ):
        time.sleep(0.01)
    assert late.native_id not in pool_threads()


def test_disabled_it_pins_nothing() -> None:
    before = masks()
    with one_core(enabled=False):
        assert masks() == before


def test_a_poll_after_a_small_window_runs_on_one_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a trace landing in two halves, and the caller's mask at each close
    trace = barrier_trace(400, workers=4, seed=3)
    middle = int(trace["end_ns"].median())  # type: ignore[arg-type]
    halves = (
        trace.filter(pl.col("end_ns") <= middle),
        trace.filter(pl.col("end_ns") > middle),
    )
    seen: list[int] = []
    close = OnlinePipeline._close

    def noting(self: OnlinePipeline, rows: pl.DataFrame, ts: int, te: int):  # type: ignore[no-untyped-def]
        seen.append(len(os.sched_getaffinity(0)))
        return close(self, rows, ts, te)

    monkeypatch.setattr(OnlinePipeline, "_close", noting)
    window, cores = 200_000, len(os.sched_getaffinity(0))

    def closes(run: str) -> tuple[list[int], list[int]]:
        """The closes' core counts of the first poll and of the second."""
        pipeline = OnlinePipeline(tmp_path / run, window, window)
        write_trace(halves[0], tmp_path / run / "part-0.arrow")
        first = len(pipeline.poll())
        write_trace(halves[1], tmp_path / run / "part-1.arrow")
        pipeline.poll(final=True)
        assert 0 < first < len(seen)
        return seen[:first], seen[first:]

    # WHEN windows under the row limit close
    before, after = closes("small")
    # THEN the first poll's closes ran on every core (no window closed
    # before them), the next poll's on one
    assert set(before) == {cores} and set(after) == {1}
    # WHEN the limit is below every window's rows
    seen.clear()
    monkeypatch.setattr(online, "ONE_CORE_ROWS", 1)
    before, after = closes("large")
    # THEN no close was pinned
    assert set(before) == set(after) == {cores}


def test_a_background_thread_runs_on_every_core_even_started_from_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN no helper of that name yet, and a caller pinned to one core
    monkeypatch.setattr(threads, "_helpers", {})
    every = os.sched_getaffinity(0)
    with one_core():
        assert len(os.sched_getaffinity(0)) == 1
        # WHEN its helper thread starts and runs a job
        helper = background("sparktrail-test")
        tid, mask = helper.submit(
            lambda: (threading.get_native_id(), os.sched_getaffinity(0))
        ).result(timeout=10)
    # THEN the job ran on another thread, free to use every core
    assert tid != threading.get_native_id()
    assert mask == every
    # ... and the helper is the same one next time
    assert background("sparktrail-test") is helper


def test_a_forked_child_starts_its_own_background_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN the helper of another process (a fork's parent: its thread is
    # not in the child)
    parent = object()
    monkeypatch.setattr(
        threads, "_helpers", {"sparktrail-test": (os.getpid() + 1, parent)}
    )
    # WHEN the child asks for it THEN it gets one of its own, which runs
    helper = background("sparktrail-test")
    assert helper is not parent
    assert helper.submit(lambda: 42).result(timeout=10) == 42
