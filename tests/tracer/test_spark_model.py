"""The SparkModel state machine on hand-made events: attempt status and
speculation as the events record them (tracer/spark_model.py, DESIGN §5)."""

from __future__ import annotations

import polars as pl

from tests.tracer.spark_model_support import app, build, task_events, whole_run


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
