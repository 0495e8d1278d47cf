"""Ground truth on real Spark runs: workloads with a known bottleneck give the
hints that name it, and a balanced one gives none (local mode, traced live)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import sparktrail
from sparktrail import workloads
from sparktrail.tracer import attach, detach

pytestmark = pytest.mark.integration

WINDOW_NS = 1_000_000_000


@contextmanager
def sql_conf(spark: Any, **settings: str) -> Iterator[None]:
    """Set SQL settings on the shared session for one test, then restore them."""
    keys = {k.replace("_", "."): v for k, v in settings.items()}
    before = {k: spark.conf.get(k, None) for k in keys}
    for key, value in keys.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def traced(
    spark: Any, out: Path, workload: Callable[[Any], None]
) -> tuple[pl.DataFrame, sparktrail.Summaries]:
    """Run ``workload`` with the live bridge attached; its trace and summaries."""
    attach(spark, out)
    try:
        workload(spark)
    finally:
        detach(spark)
    trace = sparktrail.read_trace(out)
    return trace, sparktrail.summarize(trace, WINDOW_NS)


def hints_of(summaries: sparktrail.Summaries, kind: str) -> list[dict[str, Any]]:
    return summaries.hints.filter(pl.col("kind") == kind).to_dicts()


def stages_with_tasks(trace: pl.DataFrame, tasks: int) -> list[int]:
    """Stage ids of the trace that ran exactly ``tasks`` partitions."""
    counts = (
        trace.drop_nulls("task_id")
        .group_by("stage_id")
        .agg(pl.col("partition").n_unique().alias("n"))
    )
    return sorted(counts.filter(pl.col("n") == tasks)["stage_id"].to_list())


def test_a_sleeping_partition_is_a_straggler_task(spark: Any, tmp_path: Path) -> None:
    # GIVEN a stage of 16 short tasks where partition 5 sleeps 2 s (Python
    # workers started before tracing: a cold start is ~2 s a slot)
    workloads.warm_python_workers(spark)
    # WHEN it runs traced live and is summarized
    trace, summaries = traced(spark, tmp_path / "trace", workloads.straggler_partition)
    # THEN a straggler_task hint names that stage and partition
    stage = stages_with_tasks(trace, 16)
    hints = hints_of(summaries, "straggler_task")
    assert [(h["stage_id"], h["partition"]) for h in hints] == [
        (stage[0], workloads.SLOW_PARTITION)
    ]
    assert "spark.speculation=true" in hints[0]["action"]
    evidence = json.loads(hints[0]["evidence"])
    assert evidence["duration_ns"] >= 5 * evidence["median_ns"]
    # AND that stage tops the operator summary among stages
    stages = summaries.operator.drop_nulls("stage_id").sort("cp_share", descending=True)
    assert stages["stage_id"][0] == stage[0]


def test_b_a_hot_join_key_is_a_hotspot(spark: Any, tmp_path: Path) -> None:
    # GIVEN a join where key 0 holds half the rows, AQE's skew handling off
    with sql_conf(
        spark,
        spark_sql_adaptive_enabled="false",
        spark_sql_shuffle_partitions="8",
        spark_sql_autoBroadcastJoinThreshold="-1",
    ):
        trace, summaries = traced(spark, tmp_path / "trace", workloads.skewed_join)
    # THEN a hotspot hint names the join's reduce stage (8 shuffle partitions)
    # with a key-split action
    hints = hints_of(summaries, "hotspot")
    assert hints, summaries.hints
    assert {h["stage_id"] for h in hints} <= set(stages_with_tasks(trace, 8))
    assert "split" in hints[0]["action"] or "salt" in hints[0]["action"]
    evidence = json.loads(hints[0]["evidence"])
    assert evidence["records"] >= 5 * evidence["median_records"]
    # AND no straggler_task blames a task whose input is simply larger
    assert not hints_of(summaries, "straggler_task")


def test_c_tiny_partitions_are_scheduling_bound(spark: Any, tmp_path: Path) -> None:
    # GIVEN a sum over 20,000 one-row partitions
    _, summaries = traced(spark, tmp_path / "trace", workloads.many_tiny_tasks)
    # THEN a scheduling_bound hint proposes fewer partitions
    hints = hints_of(summaries, "scheduling_bound")
    assert len(hints) == 1, summaries.hints
    evidence = json.loads(hints[0]["evidence"])
    assert evidence["suggested_partitions"] < 20_000
    assert str(evidence["suggested_partitions"]) in hints[0]["action"]


def test_d_a_balanced_job_has_no_straggler_or_hotspot(
    spark: Any, tmp_path: Path
) -> None:
    # GIVEN a group-by over evenly spread keys
    with sql_conf(spark, spark_sql_adaptive_enabled="false"):
        _, summaries = traced(spark, tmp_path / "trace", workloads.balanced_groupby)
    # THEN no hint blames a task, a partition or an executor
    kinds = set(summaries.hints["kind"].to_list())
    assert not kinds & {"straggler_task", "hotspot", "straggler_executor"}
