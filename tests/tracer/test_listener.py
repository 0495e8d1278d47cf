"""The live bridge: a Java listener in the driver plus a Python follower."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.pag.trace import read_trace
from sparktrail.tracer import jvm, listener
from tests.tracer.eventlog_support import import_quietly, wait_for

pytestmark = pytest.mark.integration

KEYS = ["start_ns", "src_worker", "src_seq", "dst_worker", "dst_seq", "activity"]
needs_javac = pytest.mark.skipif(
    shutil.which("javac") is None and not os.environ.get("JAVA_HOME"),
    reason="no JDK",
)


def per_task(trace: pl.DataFrame, jobs: list[int]) -> pl.DataFrame:
    """Each task's time per local activity (control edges are instants)."""
    return (
        trace.filter(
            pl.col("job_id").is_in(jobs)
            & pl.col("task_id").is_not_null()
            & (pl.col("activity") != "control")
        )
        .group_by("task_id", "activity")
        .agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("ns"))
        .sort("task_id", "activity")
    )


@pytest.fixture(scope="module")
def traced(
    spark: Any, spark_eventlog_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Attach, run a shuffle job and a job with a sleeping partition, detach."""
    sc = spark.sparkContext
    out = tmp_path_factory.mktemp("live")
    handle = listener.attach(spark, out, flush_seconds=0.2)
    sc.setJobGroup("sparktrail-live", "live bridge test")
    df = spark.range(20_000).selectExpr("id % 13 AS k", "id AS v")
    df.groupBy("k").sum("v").collect()
    sc.parallelize(range(8), 8).map(lambda x: time.sleep(1.0) if x == 3 else x).count()
    running = handle.stats()
    final = handle.detach()
    sc.setJobGroup("", "")
    jobs = sorted(sc.statusTracker().getJobIdsForGroup("sparktrail-live"))
    spark_log = spark_eventlog_dir / f"{sc.applicationId}.inprogress"
    wait_for(spark_log, b'"SparkListenerJobEnd","Job ID":%d' % jobs[-1])
    return {
        "out": out,
        "handle": handle,
        "running": running,
        "final": final,
        "jobs": jobs,
        "spark_log": spark_log,
    }


def test_trace_files_are_the_raw_log(traced: dict[str, Any]) -> None:
    handle, final = traced["handle"], traced["final"]
    files = handle.trace_files()
    assert files and final.trace_files == len(files)
    assert not handle.attached
    assert any(p.name.startswith("appstatus_") for p in handle.log_dir.iterdir())
    assert not any(p.name.startswith(".") for p in handle.log_dir.iterdir())
    followed = read_trace(traced["out"]).sort(KEYS)
    whole, stats = import_quietly(handle.log_dir)
    assert stats.app_id == handle.app_id and stats.spark_version is not None
    assert final.rows == followed.height == whole.height
    assert followed.equals(whole.sort(KEYS))


def test_same_tasks_and_durations_as_sparks_own_log(traced: dict[str, Any]) -> None:
    jobs = traced["jobs"]
    assert len(jobs) >= 2
    ours = per_task(read_trace(traced["out"]), jobs)
    theirs = per_task(import_quietly(traced["spark_log"])[0], jobs)
    assert ours["task_id"].n_unique() >= 8 + 2
    assert ours.equals(theirs)
    sleeper = ours.filter(pl.col("activity") == "processing")["ns"].max()
    assert sleeper is not None and int(sleeper) >= 900_000_000  # type: ignore[arg-type]


def test_listener_received_every_task(traced: dict[str, Any]) -> None:
    final, running, jobs = traced["final"], traced["running"], traced["jobs"]
    theirs = import_quietly(traced["spark_log"])[0]
    tasks = theirs.filter(pl.col("job_id").is_in(jobs))["task_id"].drop_nulls()
    assert final.task_ends == tasks.n_unique()
    # Three header lines (log start, application start, environment) and, in
    # local mode, no executors; everything received was written.
    assert final.lines_written == final.events_received + 3
    assert final.lines_buffered == 0
    assert running.events_received <= final.events_received
    assert final.dropped and set(final.dropped.values()) == {0}
    assert final.segments >= 2  # flushed while running, not only at detach


def test_attach_twice_and_detach_unknown(spark: Any, tmp_path: Path) -> None:
    handle = listener.attach(spark, tmp_path / "a", flush_seconds=0.1)
    try:
        with pytest.raises(RuntimeError, match="already has a live trace"):
            listener.attach(spark, tmp_path / "b")
    finally:
        listener.detach(spark)
    assert not handle.attached
    with pytest.raises(RuntimeError, match="no live trace"):
        listener.detach(spark)
    with pytest.raises(RuntimeError, match="already holds a trace"):
        listener.attach(spark, tmp_path / "a")
    with pytest.raises(RuntimeError, match=r"no dev\.sparktrail\.SparktrailListener"):
        listener.attach(spark, tmp_path / "c", existing=True)


@needs_javac
def test_compile_cache_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKTRAIL_CACHE", str(tmp_path))
    first = jvm.listener_classes()
    assert first.parent == tmp_path / "listener"
    assert (first / "dev" / "sparktrail" / "SparktrailListener.class").is_file()

    def no_javac(*args: object) -> None:
        raise AssertionError("javac ran again")

    monkeypatch.setattr(jvm, "_run_javac", no_javac)
    assert jvm.listener_classes() == first
    assert [p.name for p in (tmp_path / "listener").iterdir()] == [first.name]


def test_missing_javac_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARKTRAIL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(jvm.JavaNotFoundError, match=r"(?s)no javac.*Install a JDK"):
        jvm.listener_classes()
    assert isinstance(jvm.JavaNotFoundError("x"), RuntimeError)


STARTUP = textwrap.dedent(
    """
    import json, sys, time
    from pyspark.sql import SparkSession
    from sparktrail.tracer import attach, spark_conf
    out = sys.argv[1]
    conf = spark_conf(out, flush_seconds=0.2)
    spark = (SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "3")
        .config(map=conf)
        .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    handle = attach(spark, out, existing=True)
    spark.range(10_000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    spark.sparkContext.parallelize(range(6), 6).count()
    spark.stop()
    stats = handle.detach()
    print(json.dumps({"app": handle.app_id, "tasks": stats.task_ends,
                      "received": stats.events_received,
                      "written": stats.lines_written, "files": stats.trace_files}))
    """
)


@needs_javac
def test_spark_conf_installs_listener_at_startup(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    done = subprocess.run(
        [sys.executable, "-c", STARTUP, str(out)],
        check=False,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    (root,) = (out / "raw").glob("eventlog_v2_*")
    assert root.name == f"eventlog_v2_{result['app']}"
    assert (root / f"appstatus_{result['app']}").exists()
    assert result["written"] == result["received"] + 1  # + the LogStart line
    trace, stats = import_quietly(root)
    assert stats.app_id == result["app"] and stats.tasks == result["tasks"] >= 6
    assert stats.spark_version is not None and stats.jobs >= 2
    assert result["files"] >= 1
    assert read_trace(out).sort(KEYS).equals(trace.sort(KEYS))


def test_a_late_attach_starts_the_trace_at_the_attach(
    spark: Any, tmp_path: Path
) -> None:
    # GIVEN a session that has run for a while before tracing starts
    age_s = time.time() - spark.sparkContext.startTime / 1000
    time.sleep(max(0.0, 2.0 - age_s))
    attached_ns = time.time_ns()
    # WHEN a job runs traced
    handle = listener.attach(spark, tmp_path / "trace", flush_seconds=0.2)
    spark.range(100).count()
    handle.detach()
    trace = read_trace(tmp_path / "trace")
    # THEN the trace starts at the attach (its ms), not at the application's
    # start: the unobserved time before it is not charged to the driver
    assert len(trace) > 0
    assert int(trace["start_ns"].min()) >= attached_ns - 1_000_000  # type: ignore[arg-type]


def test_live_operators_are_the_logs_and_name_the_plan(traced: dict[str, Any]) -> None:
    # GIVEN the live trace (the listener keeps the SQL plan events) and
    # Spark's own event log of the same jobs
    jobs = traced["jobs"]
    columns = ["task_id", "operator"]

    def labels(trace: pl.DataFrame) -> pl.DataFrame:
        tasks = trace.filter(
            pl.col("job_id").is_in(jobs) & pl.col("task_id").is_not_null()
        )
        return tasks.select(columns).unique().sort(columns)

    ours = labels(read_trace(traced["out"]))
    theirs = labels(import_quietly(traced["spark_log"])[0])
    # THEN every task has the same operator in both
    assert ours.equals(theirs)
    # AND the group-by's operators name its aggregate, with no expression ids
    ops = set(ours["operator"])
    aggregates = [op for op in ops if "HashAggregate(keys=[k]" in op]
    assert len(aggregates) >= 2, ops  # the map side and the reduce side
    assert all(" · " in op and "#" not in op for op in aggregates)
