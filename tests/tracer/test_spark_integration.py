"""Real Spark runs (pyspark, local[2]) imported and checked with the CP kernel."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import sparktrail
from sparktrail.workloads import warm_python_workers
from tests.tracer.eventlog_support import import_quietly, wait_for

pytestmark = pytest.mark.integration


def slow_job(sc: Any, seconds: float) -> None:
    """Eight one-element partitions; partition 3 sleeps."""
    import time as t

    sc.parallelize(range(8), 8).map(lambda x: t.sleep(seconds) if x == 3 else x).count()


def check_straggler(trace: pl.DataFrame, origin: int, end: int) -> None:
    """The sleeping task's slot and stage carry most CP in [origin, end)."""
    # The shared session's log also holds other tests' jobs (some with their
    # own sleeping tasks): look only at tasks inside [origin, end].
    tasks = trace.filter(
        pl.col("task_id").is_not_null()
        & (pl.col("activity") != "control")
        & (pl.col("start_ns") >= origin)
        & (pl.col("end_ns") <= end)
    )
    per_task = tasks.group_by("task_id", "stage_id", "src_worker").agg(
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("length")
    )
    slow = per_task.sort("length", descending=True).row(0, named=True)
    assert slow["length"] >= 900_000_000
    window = trace.filter(pl.col("end_ns") <= end)
    stats = sparktrail.snapshot_stats(window, end - origin, origin)
    first = stats.filter(pl.col("window_start_ns") == origin)
    assert first["log10_paths"][0] is not None, "no path spans the run"
    cp = sparktrail.critical_participation(window, end - origin, origin)
    cp = cp.filter(pl.col("window_start_ns") == origin)
    by_worker = (
        cp.group_by("src_worker").agg(pl.col("cp").sum()).sort("cp", descending=True)
    )
    by_stage = (
        cp.group_by("stage_id").agg(pl.col("cp").sum()).sort("cp", descending=True)
    )
    assert by_worker.row(0)[0] == slow["src_worker"], by_worker
    assert by_worker.row(0)[1] > 0.5, by_worker
    assert by_stage.drop_nulls().row(0)[0] == slow["stage_id"], by_stage


def test_shared_session_plain_log(spark: Any, spark_eventlog_dir: Path) -> None:
    sc = spark.sparkContext
    # A cold Python worker costs each slot ~2 s on its first task: warm them
    # outside the measured jobs so the sleeping task is the only straggler.
    warm_python_workers(spark)
    sc.setJobGroup("sparktrail-cp", "straggler test")
    df = spark.range(20_000).selectExpr("id % 13 AS k", "id AS v")
    df.groupBy("k").sum("v").collect()
    slow_job(sc, 2.0)
    jobs = sorted(sc.statusTracker().getJobIdsForGroup("sparktrail-cp"))
    log = spark_eventlog_dir / f"{sc.applicationId}.inprogress"
    wait_for(log, b'"SparkListenerJobEnd","Job ID":%d' % jobs[-1])
    trace, stats = import_quietly(log)
    assert stats.spark_version is not None and stats.spark_version.startswith("4.")
    assert stats.tasks >= 8 + 2 and stats.slots <= 2  # AQE may coalesce reducers
    driver = trace.filter(
        (pl.col("src_worker") == "driver") & pl.col("job_id").is_in(jobs)
    )
    origin, end = int(driver["start_ns"].min()), int(driver["end_ns"].max())  # type: ignore[arg-type]
    check_straggler(trace, origin, end)


SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", sys.argv[1])
        .config("spark.eventLog.rolling.enabled", "true")
        .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.parallelize(range(2), 2).map(lambda x: x).collect()  # job 0
    df = spark.range(20_000).selectExpr("id % 13 AS k", "id AS v")
    df.groupBy("k").sum("v").collect()
    spark.sparkContext.parallelize(range(8), 8).map(
        lambda x: time.sleep(2.0) if x == 3 else x).count()
    spark.stop()
    """
)


def test_rolling_zstd_log_of_a_finished_run(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-c", SCRIPT, tmp_path.as_uri()],
        check=True,
        timeout=120,
        capture_output=True,
    )
    (root,) = tmp_path.glob("eventlog_v2_*")
    names = sorted(p.name for p in root.iterdir())
    assert any(
        n.startswith("appstatus_") and not n.endswith(".inprogress") for n in names
    )
    assert any(n.startswith("events_1_") and n.endswith(".zstd") for n in names), names
    trace, stats = import_quietly(root)
    assert stats.app_id == root.name.removeprefix("eventlog_v2_")
    assert stats.tasks >= 10
    origin = int(trace["start_ns"].min())  # type: ignore[arg-type]
    end = int(trace["end_ns"].max())  # type: ignore[arg-type]
    whole = sparktrail.snapshot_stats(trace, end - origin, origin)
    assert whole.height == 1 and whole["log10_paths"][0] is not None
    # Job 0 only warmed the Python workers (a cold one costs a slot ~2 s).
    jobs = trace.filter((pl.col("src_worker") == "driver") & (pl.col("job_id") >= 1))
    check_straggler(trace, int(jobs["start_ns"].min()), int(jobs["end_ns"].max()))  # type: ignore[arg-type]
