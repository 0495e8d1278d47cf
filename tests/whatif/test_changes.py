"""Each change on a tiny hand-made trace, with the exact expected wall time."""

from __future__ import annotations

import pytest

from sparktrail.whatif import (
    DropDriverGap,
    DropDriverGaps,
    Executors,
    Replay,
    SpeculateTask,
    SplitPartition,
    StagePartitions,
    executor_table,
    predict,
)

from .builders import GAPS, TWO_SLOTS, trace_of


def test_the_unchanged_hand_made_traces_replay_exactly():
    # GIVEN the hand-made traces
    # WHEN they are replayed unchanged
    two, gaps = Replay.of(TWO_SLOTS).run(), Replay.of(GAPS).run()
    # THEN the wall times and stage spans are the traced ones
    assert (two.wall_ns, two.stage_ns, two.slots) == (40, {0: 40}, 2)
    assert (gaps.wall_ns, gaps.stage_ns) == (32, {0: 10, 1: 3})


def test_splitting_the_straggler_in_two():
    # GIVEN t1 (0-40) beside t0 (0-10) then t2 (10-20) on two slots
    # WHEN partition 1 is split into two tasks of 20
    p = predict(TWO_SLOTS, SplitPartition(stage_id=0, partition=1, k=2))
    # THEN t0 0-10, piece a 0-20, piece b 10-30, t2 20-30: the run takes 30
    assert (p.replayed_wall_ns, p.predicted_wall_ns, p.saving_ns) == (40, 30, 10)
    assert (p.stage_id, p.stage_before_ns, p.stage_after_ns) == (0, 40, 30)
    assert p.replay_error == 0.0


def test_a_split_into_one_changes_nothing():
    assert predict(TWO_SLOTS, SplitPartition(0, 1, 1)).saving_ns == 0


def test_a_speculative_copy_ends_the_straggler_at_delay_plus_median():
    # GIVEN the stage's median task time of 10
    # WHEN a copy of t1 starts 5 ns after it
    p = predict(TWO_SLOTS, SpeculateTask(task_id=1, delay_ns=5))
    # THEN t1 ends at 0 + 5 + 10 = 15 and t2 (10-20) ends the run
    assert (p.predicted_wall_ns, p.stage_id, p.stage_after_ns) == (20, 0, 20)


def test_a_speculative_copy_never_makes_a_task_longer():
    assert predict(TWO_SLOTS, SpeculateTask(task_id=0, delay_ns=50)).saving_ns == 0


def test_the_default_speculation_delay_is_at_least_100_ms():
    # GIVEN a straggler of 1 s beside tasks of 10 ms
    ms = 1_000_000
    trace = trace_of(
        [
            ("exec-1/0", 0, 0, 0, 0, 10 * ms),
            ("exec-1/1", 0, 1, 1, 0, 1000 * ms),
            ("exec-1/0", 0, 2, 2, 10 * ms, 20 * ms),
        ]
    )
    # WHEN it is speculated with Spark's threshold (1.5 x 10 ms < 100 ms)
    p = predict(trace, SpeculateTask(1))
    # THEN the copy starts at 100 ms and ends 10 ms later
    assert p.predicted_wall_ns == 110 * ms


@pytest.mark.parametrize(("count", "wall"), [(1, 40), (2, 40)])
def test_more_executors_do_not_shorten_the_straggler(count, wall):
    assert Replay.of(TWO_SLOTS).run(Executors(count)).wall_ns == wall


def test_fewer_slots_serialize_the_tasks():
    # GIVEN two executors of one slot, three tasks of 10 (two at 0, one at 10)
    trace = trace_of(
        [
            ("exec-1/0", 0, 0, 0, 0, 10),
            ("exec-2/0", 0, 1, 1, 0, 10),
            ("exec-1/0", 0, 2, 2, 10, 20),
        ]
    )
    # WHEN the run has one executor
    outcome = Replay.of(trace).run(Executors(1))
    # THEN the three tasks run one after the other
    assert (outcome.wall_ns, outcome.slots) == (30, 1)


def test_the_executor_table():
    table = executor_table(TWO_SLOTS, (0.5, 1, 2))
    assert table.columns == ["factor", "executors", "slots", "wall_ns", "saving_ns"]
    # one executor today: half of it is still one
    assert table.rows() == [(0.5, 1, 2, 40, 0), (1.0, 1, 2, 40, 0), (2.0, 2, 4, 40, 0)]


@pytest.mark.parametrize(("n", "wall"), [(1, 60), (2, 30), (3, 40), (6, 30)])
def test_a_stage_re_divided_into_n_tasks(n, wall):
    # GIVEN 60 ns of task time on two slots, no per-task overhead
    # WHEN the stage runs as n equal tasks (task j keeps the j-th lags)
    # THEN n=2: 30+30 side by side; n=3: 20, 20, then 20; n=6: three rounds
    assert predict(TWO_SLOTS, StagePartitions(0, n)).predicted_wall_ns == wall


def test_re_divided_tasks_keep_the_per_task_overhead():
    # GIVEN tasks whose first 2 ns are scheduling (median overhead 2)
    trace = trace_of(
        [
            ("exec-1/0", 0, 0, 0, 0, 10, 2),
            ("exec-1/1", 0, 1, 1, 0, 40, 2),
            ("exec-1/0", 0, 2, 2, 10, 20, 2),
        ]
    )
    # WHEN the stage runs as two tasks
    p = predict(trace, StagePartitions(0, 2))
    # THEN each is (8 + 38 + 8) / 2 of work plus 2 of overhead
    assert p.predicted_wall_ns == 29


def test_merged_tasks_shed_each_task_own_overhead():
    # GIVEN tasks of 10, 40 and 10 whose first 2, 8 and 2 ns are scheduling
    trace = trace_of(
        [
            ("exec-1/0", 0, 0, 0, 0, 10, 2),
            ("exec-1/1", 0, 1, 1, 0, 40, 8),
            ("exec-1/0", 0, 2, 2, 10, 20, 2),
        ]
    )
    # WHEN the stage runs as two tasks
    p = predict(trace, StagePartitions(0, 2))
    # THEN the work is (8 + 32 + 8) / 2 each, plus the median overhead 2:
    # the long task's 8 ns of scheduling are not carried into the merge
    assert p.predicted_wall_ns == 26


#: TWO_SLOTS with t2 launched 2 ns after its slot freed (a launch lag).
LAGGED = trace_of(
    [
        ("exec-1/0", 0, 0, 0, 0, 10),
        ("exec-1/1", 0, 1, 1, 0, 40),
        ("exec-1/0", 0, 2, 2, 12, 22),
    ]
)


def test_the_no_lag_replay_launches_each_task_when_a_slot_frees():
    # GIVEN t2's lag of 2 after its slot (t0's) freed at 10
    replay = Replay.of(LAGGED)
    # WHEN the run is replayed as traced, and with its lags zeroed
    # THEN both take the straggler's 40; without lags t2 runs 10-20
    assert replay.run().wall_ns == replay.run(lags=False).wall_ns == 40
    # WHEN partition 1 is split in two (pieces 0-20 and 10-30)
    lagged = predict(LAGGED, SplitPartition(0, 1, 2))
    no_lag = predict(LAGGED, SplitPartition(0, 1, 2), lags=False)
    # THEN t2 follows piece a at 20 + its lag 2 (ends 32), or at 20 (ends 30)
    assert (lagged.predicted_wall_ns, lagged.saving_ns) == (32, 8)
    assert (no_lag.predicted_wall_ns, no_lag.saving_ns) == (30, 10)
    assert no_lag.replay_error == 0.0


def test_the_no_lag_replay_drops_a_stage_launch_lag():
    # GIVEN job 1 launched 2 ns after the driver gap 15-25 ended
    # WHEN the run is replayed without lags
    # THEN job 1 runs 25-28 and the run takes 30, not 32
    assert Replay.of(GAPS).run(lags=False).wall_ns == 30
    p = predict(GAPS, DropDriverGap(15), lags=False)
    assert (p.replayed_wall_ns, p.predicted_wall_ns) == (30, 20)
    assert p.replay_error == pytest.approx(30 / 32 - 1)


def test_dropping_a_driver_gap():
    # GIVEN the driver gap 15-25 between job 0 and job 1
    # WHEN it is dropped, by its start or as the gaps between the two jobs
    by_start = predict(GAPS, DropDriverGap(15))
    between = predict(GAPS, DropDriverGaps(after_job=0, before_job=1))
    # THEN the run is 10 ns shorter
    assert by_start.predicted_wall_ns == between.predicted_wall_ns == 22
    assert by_start.stage_id is None


def test_dropping_the_last_driver_gap():
    assert predict(GAPS, DropDriverGap(30)).predicted_wall_ns == 30


def test_more_slots_do_not_move_the_driver_gaps():
    assert Replay.of(GAPS).run(Executors(3)).wall_ns == 32


def test_stages_wait_for_the_stages_that_ended_before_them():
    # GIVEN stage 1 launched 2 ns after stage 0 ended (on another slot)
    trace = trace_of(
        [
            ("exec-1/0", 0, 0, 0, 0, 30),
            ("exec-1/1", 0, 1, 1, 0, 10),
            ("exec-1/1", 1, 2, 0, 32, 40),
        ]
    )
    # WHEN stage 0's straggler is split in three (it ends at 10)
    p = predict(trace, SplitPartition(0, 0, 3))
    # THEN t1 and a piece run 0-10, two pieces 10-20, and stage 1 keeps its
    # 2 ns lag after stage 0's end: 22-30
    assert (p.predicted_wall_ns, p.stage_after_ns) == (30, 20)
