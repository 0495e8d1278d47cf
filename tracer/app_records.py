"""What the event log says about each task attempt, stage attempt and job.

:class:`~sparktrail.tracer.spark_model.SparkModel` keeps one record per
task attempt (by task id), stage attempt and job as their events arrive;
the trace is built from these records, not from the events.

Assumptions
-----------
* Times are driver-clock milliseconds, except ``write_ns`` (Spark's
  ``Shuffle Write Time`` is in nanoseconds); ``getting_result_at`` is the
  time the driver started fetching a result (0: not fetched).
* ``order`` and ``end_order`` are log positions (the model counts events),
  so equal timestamps are ordered as the log wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .fields import dict_field, int_field, opt_int

__all__ = ["JobRecord", "StageRecord", "TaskRecord", "metric_values", "task_status"]


@dataclass(slots=True)
class TaskRecord:
    """One task attempt as the log describes it (times in ms)."""

    task_id: int
    stage_id: int
    stage_attempt: int
    index: int | None
    partition: int | None
    attempt: int | None
    executor_id: str
    speculative: bool
    launch_ms: int
    order: int
    finish_ms: int | None = None
    end_order: int = 0
    status: str = "running"
    has_metrics: bool = False
    deserialize_ms: int = 0
    run_ms: int = 0
    gc_ms: int = 0
    serialize_ms: int = 0
    fetch_wait_ms: int = 0
    write_ns: int = 0
    getting_result_at: int = 0
    records: int | None = None
    bytes: int | None = None
    shuffle_write_bytes: int | None = None
    memory_bytes_spilled: int | None = None
    disk_bytes_spilled: int | None = None


@dataclass
class JobRecord:
    """When a job started and ended (ms) and where in the log."""

    start_ms: int | None = None
    end_ms: int | None = None
    start_order: int = 0
    end_order: int = 0


@dataclass
class StageRecord:
    """One stage attempt: its size, times (ms) and the partitions launched.

    ``all_launched_ms`` is the launch of its last unlaunched partition:
    from then on the stage no longer waits for a slot.
    """

    name: str | None = None
    num_tasks: int | None = None
    submitted_ms: int | None = None
    completed_ms: int | None = None
    launched: set[int] = field(default_factory=set)
    all_launched_ms: int | None = None


def task_status(event: dict[str, Any], info: dict[str, Any]) -> str:
    """``success``, ``failed`` or ``killed``, from a ``TaskEnd`` event.

    >>> task_status({"Task End Reason": {"Reason": "TaskKilled"}}, {})
    'killed'
    >>> task_status({"Task End Reason": {"Reason": "Resubmitted"}}, {})
    'success'
    """
    reason = event.get("Task End Reason")
    name = reason.get("Reason") if isinstance(reason, dict) else None
    if info.get("Killed") or name in ("TaskKilled", "TaskCommitDenied"):
        return "killed"
    # Resubmitted: the attempt had succeeded; its output was lost later.
    if info.get("Failed") or name not in (None, "Success", "Resubmitted"):
        return "failed"
    return "success"


def metric_values(metrics: dict[str, Any]) -> dict[str, Any]:
    """The :class:`TaskRecord` fields a task's ``Task Metrics`` set.

    ``records`` and ``bytes`` add input and shuffle read (``None`` if the
    task had neither); ``memory_bytes_spilled`` and ``disk_bytes_spilled``
    are Spark's ``Memory Bytes Spilled`` (the deserialized size of what was
    spilled) and ``Disk Bytes Spilled`` (its size on disk), ``None`` if the
    log does not state them.

    >>> v = metric_values({"Executor Run Time": 5, "Disk Bytes Spilled": 9,
    ...     "Input Metrics": {"Records Read": 3, "Bytes Read": 40}})
    >>> v["run_ms"], v["records"], v["bytes"], v["disk_bytes_spilled"]
    (5, 3, 40, 9)
    """
    records = nbytes = None
    values: dict[str, Any] = {
        "has_metrics": True,
        "deserialize_ms": int_field(metrics, "Executor Deserialize Time"),
        "run_ms": int_field(metrics, "Executor Run Time"),
        "gc_ms": int_field(metrics, "JVM GC Time"),
        "serialize_ms": int_field(metrics, "Result Serialization Time"),
        "memory_bytes_spilled": opt_int(metrics, "Memory Bytes Spilled"),
        "disk_bytes_spilled": opt_int(metrics, "Disk Bytes Spilled"),
    }
    read = dict_field(metrics, "Shuffle Read Metrics")
    if read is not None:
        values["fetch_wait_ms"] = int_field(read, "Fetch Wait Time")
        total = "Total Records Read"
        records = opt_int(read, total if total in read else "Records Read")
        nbytes = int_field(read, "Remote Bytes Read") + int_field(
            read, "Local Bytes Read"
        )
    write = dict_field(metrics, "Shuffle Write Metrics")
    if write is not None:
        values["write_ns"] = int_field(write, "Shuffle Write Time")
        values["shuffle_write_bytes"] = opt_int(write, "Shuffle Bytes Written")
    inp = dict_field(metrics, "Input Metrics")
    if inp is not None:
        in_records = opt_int(inp, "Records Read")
        in_bytes = opt_int(inp, "Bytes Read")
        if in_records is not None:
            records = (records or 0) + in_records
        if in_bytes is not None:
            nbytes = (nbytes or 0) + in_bytes
    values["records"], values["bytes"] = records, nbytes
    return values
