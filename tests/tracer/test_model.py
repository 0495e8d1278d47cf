"""The Spark -> PAG model on hand-made event sequences (DESIGN §5)."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import sparktrail
from sparktrail.tracer.spark_model import ImportStats, SparkModel
from sparktrail.tracer.timelines import master_cores

MS = 1_000_000


def task_events(
    tid: int,
    stage: int,
    launch: int,
    finish: int,
    executor: str = "driver",
    **extra: Any,
) -> list[dict[str, Any]]:
    info = {
        "Task ID": tid,
        "Index": tid,
        "Attempt": 0,
        "Launch Time": launch,
        "Executor ID": executor,
        "Host": "h",
        "Speculative": extra.get("spec", False),
    }
    end_info = {
        **info,
        "Finish Time": finish,
        "Getting Result Time": 0,
        "Failed": extra.get("failed", False),
        "Killed": extra.get("killed", False),
    }
    reason = extra.get("reason", "Success")
    metrics = {
        "Executor Deserialize Time": 1,
        "Executor Run Time": extra.get("run", 5),
        "JVM GC Time": 0,
        "Result Serialization Time": 0,
        "Shuffle Read Metrics": {
            "Fetch Wait Time": 1,
            "Remote Bytes Read": 10,
            "Local Bytes Read": 5,
            "Total Records Read": 3,
        },
        "Shuffle Write Metrics": {
            "Shuffle Bytes Written": 7,
            "Shuffle Write Time": 1_500_000,
        },
    }
    return [
        {"Event": "SparkListenerTaskStart", "Stage ID": stage, "Task Info": info},
        {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": stage,
            "Task Info": end_info,
            "Task End Reason": {"Reason": reason},
            "Task Metrics": metrics,
        },
    ]


def app(
    events: list[dict[str, Any]], master: str = "local[2]", end: int = 200
) -> list[dict[str, Any]]:
    return [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App ID": "a"},
        {
            "Event": "SparkListenerEnvironmentUpdate",
            "Spark Properties": {"spark.master": master},
        },
        {
            "Event": "SparkListenerJobStart",
            "Job ID": 0,
            "Submission Time": 10,
            "Stage IDs": [0],
        },
        {
            "Event": "SparkListenerStageSubmitted",
            "Stage Info": {
                "Stage ID": 0,
                "Stage Name": "count",
                "Number of Tasks": 4,
                "Submission Time": 10,
            },
        },
        *events,
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": end - 10},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": end},
    ]


def build(events: list[dict[str, Any]]) -> tuple[pl.DataFrame, ImportStats]:
    model = SparkModel()
    for event in events:
        model.feed(event)
    return model.build(final=True), model.stats


def whole_run(trace: pl.DataFrame) -> pl.DataFrame:
    origin = int(trace["start_ns"].min())  # type: ignore[arg-type]
    span = int(trace["end_ns"].max()) - origin  # type: ignore[arg-type]
    stats = sparktrail.snapshot_stats(trace, span, origin)
    assert stats["log10_paths"][0] is not None and stats["spans_window"][0]
    return sparktrail.critical_participation(trace, span, origin)


def test_master_cores() -> None:
    assert master_cores("local[3]") == 3
    assert master_cores("local[2,4]") == 2
    assert master_cores("local-cluster[2, 3, 1024]") == 3
    assert master_cores("yarn") is None


def test_overlapping_tasks_are_clipped_and_acyclic() -> None:
    # Two cores; task 2 launches at 50 while tasks 0 and 1 are "running" until
    # 52 and 60 (the driver logged their finish late): task 0 is clipped to 50.
    # Task 3 launches at 60 exactly when task 1 finishes (equal timestamps).
    events = app(
        task_events(0, 0, 20, 52)
        + task_events(1, 0, 20, 60)
        + task_events(2, 0, 50, 60)
        + task_events(3, 0, 60, 90, run=20)
    )
    trace, stats = build(events)
    assert stats.clipped_tasks == 1 and stats.clipped_ns == 2 * MS
    assert stats.slots == 2
    t0 = trace.filter(
        (pl.col("task_id") == 0) & (pl.col("src_worker") == pl.col("dst_worker"))
    )
    assert t0["end_ns"].max() == 50 * MS
    assert t0["clipped_ns"].unique().to_list() == [2 * MS]
    length = (t0["end_ns"] - t0["start_ns"]).sum()
    assert length + 2 * MS == 32 * MS
    completion = trace.filter(
        (pl.col("task_id") == 0) & (pl.col("dst_worker") == "driver")
    )
    assert completion.select("start_ns", "end_ns").row(0) == (50 * MS, 52 * MS)
    # zero-length scheduling rows join task 0 to task 2 and task 2 to task 3
    slot = trace.filter(pl.col("src_worker") == completion["src_worker"][0])
    gaps = slot.filter(pl.col("task_id").is_null())
    assert gaps.select("start_ns", "end_ns", "activity").rows() == [
        (50 * MS, 50 * MS, "scheduling"),
        (60 * MS, 60 * MS, "scheduling"),
    ]
    assert slot.filter(pl.col("task_id") == 3)["src_worker"][0] == slot["src_worker"][0]
    cp = whole_run(trace)
    assert cp["cp"].sum() == pytest.approx(1.0)


def test_tasks_tile_their_duration() -> None:
    trace, _ = build(app(task_events(0, 0, 20, 40, run=5)))
    task = trace.filter(
        (pl.col("task_id") == 0) & (pl.col("src_worker") == pl.col("dst_worker"))
    )
    pieces = dict(zip(task["activity"], task["end_ns"] - task["start_ns"], strict=True))
    # scheduler delay = 20 - 5 - 1 = 14; run 5 = fetch 1 + write 1.5 + processing 2.5
    assert pieces == {
        "scheduling": 14 * MS,
        "deserialization": MS,
        "shuffle_read": MS,
        "processing": 2_500_000,
        "shuffle_write": 1_500_000,
    }
    assert (task["start_ns"][1:] == task["end_ns"][:-1]).all()
    processing = task.filter(pl.col("activity") == "processing")
    assert processing.select("records", "bytes", "shuffle_write_bytes").row(0) == (
        3,
        15,
        7,
    )
    assert task.filter(pl.col("activity") != "processing")["records"].is_null().all()


def test_overrunning_metrics_are_scaled() -> None:
    trace, _ = build(app(task_events(0, 0, 20, 24, run=10)))
    task = trace.filter(
        (pl.col("task_id") == 0) & (pl.col("src_worker") == pl.col("dst_worker"))
    )
    assert (task["end_ns"] - task["start_ns"]).sum() == 4 * MS
    assert (task["end_ns"] >= task["start_ns"]).all()


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


def test_slot_gaps_and_driver_labels() -> None:
    # one core: tasks 0 and 1 of the stage run back to back with a gap
    trace, _ = build(
        app(task_events(0, 0, 20, 40) + task_events(1, 0, 45, 70), "local[1]")
    )
    slot = trace.filter(
        (pl.col("src_worker") == "exec-driver/0") & pl.col("task_id").is_null()
    )
    assert slot.select("start_ns", "end_ns", "activity").rows() == [
        (40 * MS, 45 * MS, "scheduling")
    ]
    driver = trace.filter(
        (pl.col("src_worker") == "driver") & (pl.col("dst_worker") == "driver")
    )
    labels = [
        (s // MS, e // MS, a)
        for s, e, a in driver.select("start_ns", "end_ns", "activity").rows()
    ]
    assert labels == [
        (0, 10, "driver"),
        (10, 20, "scheduling"),
        (20, 40, "waiting"),
        (40, 45, "scheduling"),
        (45, 70, "waiting"),
        (70, 190, "scheduling"),
        (190, 200, "driver"),
    ]


def test_unknown_cores_grow_to_concurrency() -> None:
    events = app(
        task_events(0, 0, 20, 40, executor="7")
        + task_events(1, 0, 21, 41, executor="7")
        + task_events(2, 0, 22, 42, executor="7"),
        master="yarn",
    )
    trace, stats = build(events)
    assert stats.slots == 3 and stats.clipped_tasks == 0
    assert {w for w in trace["src_worker"] if w != "driver"} == {
        "exec-7/0",
        "exec-7/1",
        "exec-7/2",
    }
    whole_run(trace)
