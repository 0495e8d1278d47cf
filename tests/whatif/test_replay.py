"""The unchanged replay reproduces the traced run; bad names are refused."""

from __future__ import annotations

import heapq
import sys

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktrail.errors import InputError
from sparktrail.pag.trace import load_trace
from sparktrail.summaries import task_facts
from sparktrail.synthetic import profile_trace
from sparktrail.tracer import import_trace
from sparktrail.whatif import (
    DropDriverGap,
    DropDriverGaps,
    Replay,
    SpeculateTask,
    SplitPartition,
    StagePartitions,
    predict,
)
from tests.paths import SHARED_LOG

from .builders import GAPS, TWO_SLOTS, trace_of

_stage = st.tuples(
    st.lists(st.integers(0, 50), min_size=1, max_size=8),  # task durations
    st.lists(st.integers(0, 5), min_size=8, max_size=8),  # launch lags
    st.integers(0, 20),  # the stage's start after the previous one's end
    st.booleans(),  # a driver gap before it
    st.booleans(),  # overlaps the previous stage instead
)


def _greedy_run(slots: int, stages: list) -> tuple[list, list, int]:
    """Schedule ``stages`` greedily on ``slots`` (free slot that frees first)."""
    free = [(0, k) for k in range(slots)]
    tasks, driver = [], []
    now, task_id, prev_start = 0, 0, 0
    for s, (durations, lags, after, gap, overlap) in enumerate(stages):
        if overlap:
            release = prev_start + after
        else:
            release = now + after
            if gap:
                driver.append((now, now + after + 1, "driver"))
                release = now + after + 1
        prev_start = release
        for part, (d, lag) in enumerate(zip(durations, lags, strict=False)):
            t_free, slot = heapq.heappop(free)
            launch = max(release, t_free) + lag
            heapq.heappush(free, (launch + d, slot))
            tasks.append((f"exec-1/{slot}", s, task_id, part, launch, launch + d))
            task_id += 1
        now = max(now, *(t[5] for t in tasks))
    return tasks, driver, now


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.lists(_stage, min_size=1, max_size=6))
def test_random_greedy_runs_replay_exactly(slots, stages):
    # GIVEN random stages of random tasks scheduled greedily on k slots
    tasks, driver, _ = _greedy_run(slots, stages)
    trace = trace_of(tasks, driver)
    frame = trace.frame
    traced = frame["end_ns"].max() - frame["start_ns"].min()
    # WHEN the trace is replayed unchanged
    outcome = Replay.of(trace).run()
    # THEN the wall time and every stage's span are the traced ones
    assert outcome.wall_ns == traced
    spans = {}
    for _, s, _, _, launch, end in tasks:
        a, b = spans.get(s, (launch, end))
        spans[s] = (min(a, launch), max(b, end))
    assert outcome.stage_ns == {s: b - a for s, (a, b) in spans.items()}


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.lists(_stage, min_size=1, max_size=6))
def test_splitting_a_task_in_one_or_speculating_late_changes_nothing(slots, stages):
    tasks, driver, _ = _greedy_run(slots, stages)
    replay = Replay.of(trace_of(tasks, driver))
    _, s, task_id, part, launch, end = tasks[-1]
    base = replay.run().wall_ns
    assert replay.run(SplitPartition(int(s), int(part), 1)).wall_ns == base
    late = SpeculateTask(int(task_id), delay_ns=int(end) - int(launch))
    assert replay.run(late).wall_ns == base


def test_the_shared_log_replays_within_ten_percent():
    # GIVEN the shared Spark log
    replay = Replay.of(import_trace(SHARED_LOG, progress=False))
    # WHEN it is replayed unchanged
    wall = replay.run().wall_ns
    # THEN its error against the traced wall time is at most 10%
    assert abs(wall / replay.traced_wall_ns - 1) <= 0.10
    assert replay.executors == 1 and replay.slots == 4  # local[*] on 4 cores


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (SplitPartition(9, 0, 2), "stage 9 is not in the trace"),
        (SplitPartition(0, 7, 2), "stage 0 has no partition 7"),
        (StagePartitions(4, 2), "stage 4 is not in the trace"),
        (SpeculateTask(99), "task 99 is not in the trace"),
        (DropDriverGap(3), "no driver gap starts at 3 ns"),
        (DropDriverGaps(0, 5), "job 5 is not in the trace"),
    ],
)
def test_changes_that_name_nothing_in_the_trace_are_refused(change, named):
    trace = GAPS if isinstance(change, DropDriverGap | DropDriverGaps) else TWO_SLOTS
    with pytest.raises(InputError, match=named):
        predict(trace, change)


def test_the_startup_is_not_a_driver_gap_to_drop():
    with pytest.raises(InputError, match="no driver gap starts at 0 ns"):
        predict(GAPS, DropDriverGap(0))


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: SplitPartition(0, 1, 0), "k must be at least 1, not 0"),
        (lambda: StagePartitions(0, -2), "n must be at least 1, not -2"),
        (lambda: SpeculateTask(0, delay_ns=-1), "delay_ns must be at least 0"),
    ],
)
def test_bad_change_values_are_refused_by_name(make, named):
    with pytest.raises(InputError, match=named):
        make()


def test_an_empty_trace_is_refused():
    with pytest.raises(InputError, match="needs a trace with rows"):
        Replay.of(trace_of([]))


def _same_model(a: Replay, b: Replay) -> None:
    assert a.tasks.equals(b.tasks) and a.tasks.schema == b.tasks.schema
    assert a.stages.equals(b.stages) and a.gaps.equals(b.gaps)
    assert (a.slots, a.executors, a.start_ns, a.end_ns) == (
        b.slots,
        b.executors,
        b.start_ns,
        b.end_ns,
    )


@pytest.mark.parametrize("source", ["shared log", "synthetic", "greedy"])
def test_the_model_built_from_task_facts_is_the_one_built_from_the_rows(source):
    # GIVEN a trace: a real Spark log's, the profile benchmark's, and a
    # greedy run with a driver gap (tasks and facts on slots and the driver)
    if source == "shared log":
        trace = load_trace(import_trace(SHARED_LOG, progress=False))
    elif source == "synthetic":
        trace = load_trace(profile_trace(3000))
    else:
        stage = ([5, 9, 3], [0, 1, 2, 0, 0, 0, 0, 0], 2, True, False)
        trace = trace_of(*_greedy_run(2, [stage, stage])[:2])
    # WHEN the replay model is built from its rows, and from its task facts
    from_rows = Replay.of(trace)
    from_facts = Replay.of(trace, task_facts(trace))
    # THEN the two models are the same, and so are their predictions
    _same_model(from_rows, from_facts)
    assert from_rows.run().wall_ns == from_facts.run().wall_ns
    assert from_rows.tasks.height > 0


def test_facts_handed_over_in_a_list_are_taken_and_build_the_same_model():
    # GIVEN the facts of a real Spark log's trace, handed over in a list
    trace = load_trace(import_trace(SHARED_LOG, progress=False))
    facts = task_facts(trace)
    handed = [facts]
    # WHEN the model is built from the list
    taken = Replay.of(trace, handed)
    # THEN the build took the facts out (the caller holds no copy while it
    # runs), and the model is the one built from the frame
    assert handed == []
    _same_model(taken, Replay.of(trace, facts))


def test_the_model_keeps_stage_indices_not_stage_ids_and_names_stages_by_id():
    # GIVEN a model of a real Spark log's tasks
    trace = load_trace(import_trace(SHARED_LOG, progress=False))
    replay = Replay.of(trace, task_facts(trace))
    # THEN each task keeps what a change needs, its stage as a 32-bit index
    # into the stages, and its stage id is read back through them
    assert dict(replay.tasks.schema) == {
        "task_id": pl.Int64,
        "partition": pl.Int32,
        "overhead_ns": pl.Int64,
        "duration_ns": pl.Int64,
        "stage": pl.Int32,
        "segment": pl.Int32,
        "lag_release": pl.Int64,
        "lag_slot": pl.Int64,
    }
    facts = task_facts(trace).filter(
        pl.col("worker").cast(pl.String).str.starts_with("exec-")
    )
    for task_id, stage_id in facts.select("task_id", "stage_id").head(50).iter_rows():
        assert replay.stage_of_task(task_id) == stage_id


def test_task_facts_without_the_model_columns_are_refused_naming_them():
    # GIVEN facts without the tasks' overhead
    trace = trace_of([("exec-1/0", 0, 0, 0, 0, 5)], [])
    facts = task_facts(trace).drop("overhead_ns")
    # WHEN a model is built from them
    with pytest.raises(InputError, match="overhead_ns"):
        Replay.of(trace, facts)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_long_runs_model_waits_in_a_mapped_file_and_predicts_the_same(
    monkeypatch,
):
    # GIVEN a real Spark log's model, and the same model of a run long
    # enough that its tasks are kept in a mapped file
    from sparktrail.pag import trace as trace_module
    from tests.mapped import file_backed

    trace = load_trace(import_trace(SHARED_LOG, progress=False))
    facts = task_facts(trace)
    in_memory = Replay.of(trace, facts)
    monkeypatch.setattr(trace_module, "SLICE_ROWS", 3)
    mapped = Replay.of(trace, facts)
    # THEN the long run's model is pages of a file, the same model, and
    # its replays (unchanged, a re-divided stage, a speculative copy) the same
    assert file_backed(mapped.tasks["duration_ns"])
    assert all(file_backed(column) for column in mapped.tasks.iter_columns())
    assert not file_backed(in_memory.tasks["duration_ns"])
    _same_model(mapped, in_memory)
    stage = int(in_memory.stages["stage_id"][0])
    task = int(in_memory.tasks["task_id"][0])
    for change in (None, StagePartitions(stage, 2), SpeculateTask(task)):
        assert mapped.run(change) == in_memory.run(change)
        assert mapped.run(change, lags=False) == in_memory.run(change, lags=False)


@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 5), st.integers(0, 10**6)),
        min_size=1,
        max_size=120,
        unique_by=lambda t: t[2],
    ),
    st.booleans(),
    st.integers(1, 9),
)
@settings(max_examples=150, deadline=None)
def test_a_long_runs_launch_order_is_a_sort_of_every_task(tasks, by_id, slice_rows):
    # GIVEN tasks of few distinct launches and ends (ties), their ids in id
    # order or not
    import numpy as np

    from sparktrail.pag import trace as trace_module
    from sparktrail.whatif.replay import _launch_order

    if by_id:
        tasks = sorted(tasks, key=lambda t: t[2])
    launch = np.array([t[0] for t in tasks], dtype=np.int64)
    end = launch + np.array([t[1] for t in tasks], dtype=np.int64)
    ids = np.array([t[2] for t in tasks], dtype=np.int64)
    want = np.lexsort([ids, end, launch]).tolist()
    # WHEN they are ordered as a long run's: ranges of launches placed a
    # slice at a time, each range sorted in its place
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trace_module, "SLICE_ROWS", slice_rows)
        got = _launch_order(launch, end, None if by_id else ids)
    # THEN the order is that of one sort by launch, end and task id
    assert got.tolist() == want
