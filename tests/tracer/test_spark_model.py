"""The SparkModel state machine on hand-made events: attempt status and
speculation as the events record them (tracer/spark_model.py, DESIGN §5)."""

from __future__ import annotations

import polars as pl

from sparktrail.tracer.spark_model import SparkModel
from tests.tracer.spark_model_support import MS, app, build, task_events, whole_run


def test_failed_killed_speculative_are_marked() -> None:
    events = app(
        task_events(0, 0, 20, 30, failed=True, reason="ExceptionFailure")
        + task_events(1, 0, 20, 40, spec=True, killed=True, reason="TaskKilled")
        + task_events(2, 0, 31, 60)
    )
    trace, _ = build(events)
    status = dict(
        trace.filter(pl.col("task_id").is_not_null())
        .group_by("task_id")
        .agg(pl.col("status").first())
        .iter_rows()
    )
    assert status == {0: "failed", 1: "killed", 2: "success"}
    spec = trace.filter(pl.col("task_id") == 1)["speculative"]
    assert spec.all()
    whole_run(trace)


def test_spark_cpu_time_is_kept_and_null_where_the_log_has_none() -> None:
    events = app(
        task_events(0, 0, 20, 30, cpu_ns=4_000_000) + task_events(1, 0, 20, 40)
    )
    trace, _ = build(events)
    cpu = dict(
        trace.filter(pl.col("task_id").is_not_null())
        .group_by("task_id")
        .agg(pl.col("executor_cpu_ns").drop_nulls().first())
        .iter_rows()
    )
    assert cpu == {0: 4_000_000, 1: None}


def test_a_late_success_of_a_lost_attempt_is_no_failure_of_its_own() -> None:
    # GIVEN task 1 ended as ExecutorLostFailure at 50 ms, then (Spark 1.x)
    # the lost executor's own report of it arrives at 150 ms: a Success
    # whose task info says failed; the partition reran as task 2
    lost = task_events(1, 0, 20, 50, "1", reason="ExecutorLostFailure", failed=True)
    late = task_events(1, 0, 20, 150, "1", failed=True)[1]
    rerun = task_events(2, 0, 60, 120, "2")
    model = SparkModel()
    for event in app([*lost, late, *rerun], master="spark://m:7077"):
        model.feed(event)
    trace = model.build(final=True)
    # THEN the attempt ended once, at 50 ms, as failed
    ended = trace.filter(pl.col("task_id") == 1)
    assert int(ended["end_ns"].max()) == 50 * MS  # type: ignore[arg-type]
    assert set(ended["status"].drop_nulls()) == {"failed"}
    # AND the failures hold the executor's loss only, no unknown failure
    kinds = [f.kind for f in model.failures.failures()]
    assert kinds == ["ExecutorLostFailure"]


def test_an_attempt_without_an_end_ends_with_its_stage() -> None:
    # GIVEN a speculative copy (task 2) whose TaskEnd the log left out, of a
    # stage that completed at 60 ms, in an application that ran to 200 ms
    done = task_events(1, 0, 20, 50)
    copy = task_events(2, 0, 30, 0, spec=True)[0]  # its TaskStart only
    completed = {
        "Event": "SparkListenerStageCompleted",
        "Stage Info": {"Stage ID": 0, "Stage Attempt ID": 0, "Completion Time": 60},
    }
    trace, _ = build(app([*done, copy, completed]))
    # THEN the copy ran no longer than its stage; its status is what the
    # log says of it (no end: running)
    rows = trace.filter(pl.col("task_id") == 2)
    assert int(rows["end_ns"].max()) == 60 * MS  # type: ignore[arg-type]
    assert set(rows["status"].drop_nulls()) == {"running"}
