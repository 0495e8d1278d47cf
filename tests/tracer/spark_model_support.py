"""Hand-made listener events for the Spark -> PAG model tests (DESIGN §5).

``app`` wraps task events in one application (start, ``spark.master``, job
0 with stage 0, job end, end); ``build`` feeds them to a
:class:`~sparktrail.tracer.spark_model.SparkModel`; ``whole_run`` checks
the trace is a valid PAG and returns its critical participation.
"""

from __future__ import annotations

from typing import Any

import polars as pl

import sparktrail
from sparktrail.tracer.spark_model import ImportStats, SparkModel

__all__ = ["MS", "app", "build", "task_events", "whole_run"]

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
    if "cpu_ns" in extra:  # Spark 2.1 on; older logs state no CPU time
        metrics["Executor CPU Time"] = extra["cpu_ns"]
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
