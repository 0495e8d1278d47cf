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

from .fields import dict_field, int_field, list_field, opt_int

__all__ = [
    "STATE_METRICS",
    "JobRecord",
    "StageRecord",
    "TaskRecord",
    "job_properties",
    "job_tags",
    "metric_values",
    "rdd_facts",
    "state_values",
    "task_status",
]

#: The stateful operators' SQL metrics (``StateStoreWriter``) a task's
#: accumulables name, and the :class:`TaskRecord` field each sets.
STATE_METRICS = {
    "number of total state rows": "state_rows",
    "number of updated state rows": "state_updated_rows",
    "memory used by state": "state_memory_bytes",
}
#: Metrics every stateful task reports, even when 0 (timing and size
#: metrics start at -1, so Spark sends them; a row count of 0 it drops).
_STATEFUL_MARKS = frozenset({"memory used by state", "time to commit changes"})


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
    cpu_ns: int | None = None
    serialize_ms: int = 0
    fetch_wait_ms: int = 0
    write_ns: int = 0
    getting_result_at: int = 0
    records: int | None = None
    bytes: int | None = None
    shuffle_write_bytes: int | None = None
    memory_bytes_spilled: int | None = None
    disk_bytes_spilled: int | None = None
    state_rows: int | None = None
    state_updated_rows: int | None = None
    state_memory_bytes: int | None = None


@dataclass
class JobRecord:
    """When a job started and ended (ms) and where in the log; a streaming
    micro-batch's job names its query, run and batch."""

    start_ms: int | None = None
    end_ms: int | None = None
    start_order: int = 0
    end_order: int = 0
    query_id: str | None = None
    run_id: str | None = None
    batch_id: int | None = None
    description: str | None = None
    group: str | None = None
    call_site: str | None = None
    sql_id: int | None = None
    batch_time_ms: int | None = None
    stage_ids: tuple[int, ...] = ()


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
    parents: tuple[int, ...] = ()
    rdds: tuple[str, ...] = ()
    cached: bool = False
    partitions: int | None = None
    #: Whether the attempt completed with a ``Failure Reason``.
    failed: bool = False


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
        "cpu_ns": opt_int(metrics, "Executor CPU Time"),
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


#: Longest job description or name kept (a SQL text can be pages long).
MAX_TEXT = 200


def job_properties(properties: Any) -> dict[str, Any]:
    """The :class:`JobRecord` fields any job's properties set: its
    description, group, short call site, SQL execution and (a DStream
    batch's job) batch time.

    >>> job_properties({"spark.job.description": "Streaming job from [output "
    ...     "operation 0, batch time 10:00:01]", "spark.streaming.internal."
    ...     "batchTime": "1000", "spark.sql.execution.id": "3"})["batch_time_ms"]
    1000
    >>> job_properties(None)
    {}
    """
    if not isinstance(properties, dict):
        return {}

    def text(key: str) -> str | None:
        value = properties.get(key)
        return value[:MAX_TEXT] if isinstance(value, str) and value else None

    def number(key: str) -> int | None:
        value = properties.get(key)
        return int(value) if isinstance(value, str) and value.isdigit() else None

    return {
        "description": text("spark.job.description"),
        "group": text("spark.jobGroup.id"),
        "call_site": text("callSite.short"),
        "sql_id": number("spark.sql.execution.id"),
        "batch_time_ms": number("spark.streaming.internal.batchTime"),
    }


def rdd_facts(rdds: list[Any]) -> dict[str, Any]:
    """What a stage's ``RDD Info`` list says of its engine and input: the
    names of its RDDs (file paths as their scheme and suffix) and of their
    scopes, whether one is persisted, and the partitions of its first RDD.

    >>> found = rdd_facts([{"RDD ID": 2, "Name": "PythonRDD",
    ...     "Number of Partitions": 4, "Scope": '{"id":"1","name":"map"}',
    ...     "Storage Level": {"Use Memory": True}}, {"RDD ID": 1,
    ...     "Name": "hdfs://nn/data/x.csv", "Number of Partitions": 3,
    ...     "Scope": '{"id":"0","name":"textFile"}'}])
    >>> found["rdds"], found["cached"], found["partitions"]
    (('PythonRDD', 'map', 'path:.csv', 'textFile'), True, 3)
    """
    import json

    names: list[str] = []
    cached, first, first_parts = False, None, None
    for rdd in rdds:
        if not isinstance(rdd, dict):
            continue
        name = rdd.get("Name")
        if isinstance(name, str) and name:
            names.append(_rdd_name(name))
        scope = rdd.get("Scope")
        if isinstance(scope, str) and scope.startswith("{"):
            try:
                parsed = json.loads(scope)
            except ValueError:
                parsed = None
            scope_name = parsed.get("name") if isinstance(parsed, dict) else None
            if isinstance(scope_name, str):
                names.append(scope_name.split(" (")[0][:60])
        level = rdd.get("Storage Level")
        if isinstance(level, dict) and (
            level.get("Use Memory") or level.get("Use Disk")
        ):
            cached = True
        rid, parts = opt_int(rdd, "RDD ID"), opt_int(rdd, "Number of Partitions")
        if rid is not None and (first is None or rid < first):
            first, first_parts = rid, parts
    unique = tuple(dict.fromkeys(names))[:16]
    return {"rdds": unique, "cached": cached, "partitions": first_parts}


def _rdd_name(name: str) -> str:
    """An RDD's name, a file path as ``path:<suffix>`` (a HadoopRDD is named
    by the path it reads)."""
    if "/" in name or ":" in name:
        tail = name.rstrip("/").rsplit("/", 1)[-1]
        suffix = tail.rsplit(".", 1)[-1] if "." in tail else ""
        return f"path:.{suffix}" if suffix and len(suffix) <= 8 else "path"
    return name[:60]


def job_tags(properties: Any) -> dict[str, Any]:
    """The :class:`JobRecord` fields a ``JobStart``'s properties set.

    A micro-batch runs its jobs in the job group of its query's run, with
    the query id and batch id as properties.

    >>> job_tags({"sql.streaming.queryId": "q", "streaming.sql.batchId": "4",
    ...     "spark.jobGroup.id": "r"})
    {'query_id': 'q', 'run_id': 'r', 'batch_id': 4}
    >>> job_tags({"spark.jobGroup.id": "mine"}), job_tags(None)
    ({}, {})
    """
    if not isinstance(properties, dict):
        return {}
    query = properties.get("sql.streaming.queryId")
    if not isinstance(query, str):
        return {}
    group = properties.get("spark.jobGroup.id")
    batch = properties.get("streaming.sql.batchId")
    try:
        batch_id = int(batch) if batch is not None else None
    except (TypeError, ValueError):
        batch_id = None
    return {
        "query_id": query,
        "run_id": group if isinstance(group, str) else None,
        "batch_id": batch_id,
    }


def _update(value: Any) -> int | None:
    """An accumulable's ``Update``: SQL metrics write it as text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def state_values(info: dict[str, Any]) -> dict[str, int]:
    """The state fields of a :class:`TaskRecord`, from a ``TaskEnd``'s
    ``Task Info`` accumulables (empty if the task holds no state).

    Values of one name add up (a stage with two stateful operators); a
    stateful task that does not report a row count had none (Spark drops
    a 0 count).

    >>> acc = [{"Name": "memory used by state", "Update": "400"},
    ...     {"Name": "number of total state rows", "Update": "3"}]
    >>> state_values({"Accumulables": acc})
    {'state_rows': 3, 'state_updated_rows': 0, 'state_memory_bytes': 400}
    >>> state_values({"Accumulables": [{"Name": "duration", "Update": "3"}]})
    {}
    """
    found: dict[str, int] = {}
    stateful = False
    for acc in list_field(info, "Accumulables") or ():
        name = acc.get("Name") if isinstance(acc, dict) else None
        if not isinstance(name, str):
            continue
        if name in _STATEFUL_MARKS:
            stateful = True
        field_name = STATE_METRICS.get(name)
        value = _update(acc.get("Update")) if field_name else None
        if field_name and value is not None:
            found[field_name] = found.get(field_name, 0) + value
    if not stateful and not found:
        return {}
    return {name: found.get(name, 0) for name in STATE_METRICS.values()}
