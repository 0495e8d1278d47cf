"""The importer against a real Spark 2.3.0 log and sparklens' report of it."""

from __future__ import annotations

import json

import polars as pl
import pytest

import sparktrail
from sparktrail.tracer import ImportStats, import_eventlog
from tests.paths import EVENTLOGS, SHARED_LOG

LOG = SHARED_LOG
MS = 1_000_000
LOCAL = ["scheduling", "deserialization", "shuffle_read", "processing", "gc"]
LOCAL += ["shuffle_write", "serialization", "result"]
RUN = ["shuffle_read", "processing", "gc", "shuffle_write"]


@pytest.fixture(scope="module")
def imported() -> tuple[pl.DataFrame, ImportStats]:
    stats = ImportStats()
    return import_eventlog(LOG, stats=stats), stats


def per_task(trace: pl.DataFrame) -> pl.DataFrame:
    """Duration, run time and GC per task, from the trace's task rows."""
    rows = trace.filter(
        pl.col("task_id").is_not_null() & (pl.col("src_worker") == pl.col("dst_worker"))
    )
    length = pl.col("end_ns") - pl.col("start_ns")
    return rows.group_by("stage_id", "task_id").agg(
        (length.sum() + pl.col("clipped_ns").first()).alias("duration"),
        length.filter(pl.col("activity").is_in(RUN)).sum().alias("run"),
        length.filter(pl.col("activity") == "gc").sum().alias("gc"),
        length.filter(pl.col("activity") == "scheduling").sum().alias("delay"),
    )


def test_stage_metrics_match_sparklens(
    imported: tuple[pl.DataFrame, ImportStats],
) -> None:
    trace, _ = imported
    report = json.loads((EVENTLOGS / "local-1532512550423.sparklens.json").read_text())
    tasks = per_task(trace)
    assert set(tasks["stage_id"].to_list()) == {int(s) for s in report["stageMap"]}
    for sid, stage in report["stageMap"].items():
        metrics = stage["stageMetrics"]
        mine = tasks.filter(pl.col("stage_id") == int(sid))
        assert mine.height == metrics["count"] == stage["numberOfTasks"]
        duration = metrics["map"]["taskDuration"]
        assert mine["duration"].sum() == duration["value"] * MS
        assert mine["duration"].min() == duration["min"] * MS
        assert mine["duration"].max() == duration["max"] * MS
        assert mine["run"].sum() == metrics["map"]["executorRuntime"]["value"] * MS
        assert mine["gc"].sum() == metrics["map"]["jvmGCTime"]["value"] * MS


def test_scheduler_delay_follows_spark_ui(
    imported: tuple[pl.DataFrame, ImportStats],
) -> None:
    trace, _ = imported
    tasks = per_task(trace)
    expected = {}
    for line in LOG.read_text().splitlines():
        event = json.loads(line)
        if event["Event"] != "SparkListenerTaskEnd":
            continue
        info, m = event["Task Info"], event["Task Metrics"]
        duration = info["Finish Time"] - info["Launch Time"]
        getting = info["Finish Time"] - info["Getting Result Time"]
        getting = getting if info["Getting Result Time"] > 0 else 0
        other = m["Executor Run Time"] + m["Executor Deserialize Time"]
        other += m["Result Serialization Time"] + getting
        expected[info["Task ID"]] = max(0, duration - other) * MS
    assert len(expected) == 8
    assert dict(zip(tasks["task_id"], tasks["delay"], strict=True)) == expected


def test_trace_shape(imported: tuple[pl.DataFrame, ImportStats]) -> None:
    trace, stats = imported
    assert stats.tasks == 8 and stats.stages == 2 and stats.jobs == 2
    assert stats.clipped_tasks == 0 and stats.skipped_lines == 0
    assert stats.spark_version == "2.3.0" and stats.app_id == "local-1532512550423"
    assert stats.rows == trace.height
    assert trace.sort("start_ns", "src_worker", maintain_order=True).equals(trace)
    workers = set(trace["src_worker"].unique())
    assert workers == {"driver"} | {f"exec-driver/{k}" for k in range(4)}
    control = trace.filter(pl.col("activity") == "control")
    assert control.height == 16  # one launch and one completion per task
    # RDD jobs: the operator is the stage's call site, no stage id in it
    assert set(trace["operator"].drop_nulls()) == {"collect at <console>:25"}
    assert (trace.filter(pl.col("task_id").is_not_null())["status"] == "success").all()
    # The driver timeline covers the application without gaps.
    driver = trace.filter(
        (pl.col("src_worker") == "driver") & (pl.col("dst_worker") == "driver")
    )
    assert (driver["start_ns"].shift(-1).drop_nulls() == driver["end_ns"][:-1]).all()
    assert driver["start_ns"][0] == 1532512549494 * MS
    assert driver["end_ns"][-1] == 1532512565469 * MS


def test_whole_run_window_has_paths(imported: tuple[pl.DataFrame, ImportStats]) -> None:
    trace, _ = imported
    origin = int(trace["start_ns"].min())  # type: ignore[arg-type]
    span = int(trace["end_ns"].max()) - origin  # type: ignore[arg-type]
    stats = sparktrail.snapshot_stats(trace, span, origin)
    assert stats.height == 1
    assert stats["log10_paths"][0] is not None
    assert stats["spans_window"][0]
    cp = sparktrail.critical_participation(trace, span, origin)
    assert cp["cp"].sum() == pytest.approx(1.0)
    by_worker = cp.group_by("src_worker").agg(pl.col("cp").sum())
    top = by_worker.sort("cp", descending=True).row(0)
    assert top[0] == "driver"  # the shell sat idle between the two jobs


def test_each_job_window_has_paths(imported: tuple[pl.DataFrame, ImportStats]) -> None:
    trace, _ = imported
    jobs = trace.filter(
        pl.col("job_id").is_not_null() & (pl.col("src_worker") == "driver")
    )
    for _, rows in jobs.group_by("job_id"):
        origin = int(rows["start_ns"].min())  # type: ignore[arg-type]
        span = int(rows["end_ns"].max()) - origin  # type: ignore[arg-type]
        before = trace.filter(pl.col("end_ns") <= origin + span)
        cp = sparktrail.critical_participation(before, span, origin)
        cp = cp.filter(pl.col("window_start_ns") == origin)
        assert cp["cp"].sum() == pytest.approx(1.0)
        executor = cp.filter(pl.col("src_worker") != "driver")["cp"].sum()
        assert executor >= 0.45  # inside a job, tasks are half the path or more
