"""A trace as OpenTelemetry spans: an OTLP ``ExportTraceServiceRequest``.

The application is one trace. Its spans (all ``SPAN_KIND_INTERNAL``):

* the application (the root): from the application's start to its end
  (the context's, widened to its rows); the app's id, name, Spark version,
  master, deploy mode and every Spark property as attributes; the
  driver's own stretches (``startup``, ``driver``) as span events;
* a job under the root: its start and end from the context (else its
  rows'); ``spark.job.id``, and a streaming job's query, run and batch;
* a stage under its job (the root when its rows name no job): from its
  first task row's start to its last one's end;
* a task attempt under its stage: from its first local row's start to its
  last one's end; one span event per activity (``processing``, ``gc``,
  ...) at its start, with ``sparktrail.duration_ns``, ``sparktrail.cp_ns``
  and ``sparktrail.criticality``; ``spark.task.*`` attributes; an error
  status when the attempt failed or was killed.

CP attributes (from :class:`~sparktrail.dashboard.trace_export.CriticalRows`):
``sparktrail.cp_ns`` (critical time), ``sparktrail.cp.share`` (of the
run's critical time) on every span below the root,
``sparktrail.cp.stage_share`` on a stage and its tasks,
``sparktrail.cp.task_share`` on a task. Ids are derived from the app id
and the span's Spark id (a hash), so one input gives the same request.

:func:`otlp_request` needs the ``opentelemetry-proto`` package (the
``otel`` extra); :func:`otlp_json` is the OTLP/JSON encoding (protobuf's
JSON mapping with ids as hex and enums as integers, as OTLP/JSON asks).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NamedTuple

import polars as pl

from sparktrail.errors import InputError
from sparktrail.summaries.operator import stage_label

from .trace_export import CP_NS, CRITICALITY, CriticalRows

__all__ = [
    "DRIVER_ACTIVITIES",
    "SCOPE",
    "otlp_json",
    "otlp_request",
    "span_tree",
]

#: The instrumentation scope the spans come from.
SCOPE = "sparktrail"
#: The driver's activities that become the root span's events.
DRIVER_ACTIVITIES = ("startup", "driver")
_FAILED = ("failed", "killed")
_SPAN_KIND_INTERNAL = 1
_STATUS_ERROR = 2


def _proto() -> Any:
    try:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    except ImportError as err:
        raise InputError(
            "--format otlp needs the opentelemetry-proto package: "
            "pip install 'sparktrail[otel]'"
        ) from err
    return trace_service_pb2


def _id(size: int, *parts: object) -> bytes:
    digest = hashlib.blake2b(
        "\x1f".join(map(str, parts)).encode(), digest_size=size
    ).digest()
    # An all-zero id is invalid in OTLP.
    return digest if any(digest) else b"\x01" + digest[1:]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool_value": value}
    if isinstance(value, int):
        return {"int_value": value}
    if isinstance(value, float):
        return {"double_value": value}
    return {"string_value": str(value)}


def _attributes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {"key": key, "value": _value(value)}
        for key, value in values.items()
        if value is not None
    ]


def _share(part: float, total: float) -> float:
    return part / total if total > 0 else 0.0


def _span(
    trace_id: bytes,
    span_id: bytes,
    parent: bytes | None,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, Any],
    events: list[dict[str, Any]] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "trace_id": trace_id,
        "span_id": span_id,
        "name": name,
        "kind": _SPAN_KIND_INTERNAL,
        "start_time_unix_nano": max(0, start_ns),
        "end_time_unix_nano": max(0, start_ns, end_ns),
        "attributes": _attributes(attributes),
        "events": events or [],
    }
    if parent is not None:
        span["parent_span_id"] = parent
    if error is not None:
        span["status"] = {"code": _STATUS_ERROR, "message": error}
    return span


def _event(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "time_unix_nano": max(0, int(row["start_ns"])),
        "name": row["activity"],
        "attributes": _attributes(
            {
                "sparktrail.duration_ns": int(row["end_ns"] - row["start_ns"]),
                "sparktrail.cp_ns": float(row[CP_NS]),
                "sparktrail.criticality": float(row[CRITICALITY]),
            }
        ),
    }


def _col(rows: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in rows.columns else pl.lit(None).alias(name)


def span_tree(data: CriticalRows) -> list[dict[str, Any]]:
    """The spans of ``data`` as dicts in the proto's field names (module
    docstring): the root, then jobs, stages and tasks."""
    context = data.context
    app = context.app_id or data.name
    tree = _Tree(_id(16, "trace", app), app, _id(8, app, "app"), data.total_cp_ns)
    local = _local_rows(data.rows)
    start, end = _run_bounds(data)
    spans = [_root_span(data, tree, local, start, end)]
    job_rows = _job_rows(local)
    jobs = _job_times(data, job_rows, end)
    spans += _job_spans(tree, job_rows, jobs)
    stage_spans, stage_share = _stage_spans(tree, local, jobs)
    spans += stage_spans
    spans += _task_spans(tree, local, stage_share)
    return spans


class _Tree(NamedTuple):
    """What every span of one export shares."""

    trace_id: bytes
    app: str
    root_id: bytes
    #: The run's critical time, of which each span's share is.
    total: float

    def span_id(self, *key: object) -> bytes:
        """The id of the span of a Spark object (``"job", 3``)."""
        return _id(8, self.app, *key)


_LOCAL_COLUMNS = (
    "job_id",
    "stage_id",
    "task_id",
    "partition",
    "records",
    "bytes",
    "operator",
    "attempt",
    "status",
    "speculative",
    "executor_id",
)


def _local_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows on one worker (no message), with the columns spans read."""
    return rows.filter(pl.col("src_worker") == pl.col("dst_worker")).select(
        "src_worker",
        "start_ns",
        "end_ns",
        "activity",
        CP_NS,
        CRITICALITY,
        *(_col(rows, c) for c in _LOCAL_COLUMNS),
    )


def _run_bounds(data: CriticalRows) -> tuple[int, int]:
    """The application's start and end: the context's, widened to its rows."""
    rows, context = data.rows, data.context
    first = [int(rows["start_ns"].min())] if len(rows) else []  # type: ignore[arg-type]
    last = [int(rows["end_ns"].max())] if len(rows) else []  # type: ignore[arg-type]
    start = min([t for t in (context.start_ns, *first) if t is not None], default=0)
    end = max([t for t in (context.end_ns, *last) if t is not None], default=start)
    return start, end


def _root_span(
    data: CriticalRows, tree: _Tree, local: pl.DataFrame, start: int, end: int
) -> dict[str, Any]:
    """The application's span, the driver's own stretches as its events."""
    context = data.context
    driver = local.filter(
        pl.col("activity").is_in(DRIVER_ACTIVITIES)
        & (pl.col("end_ns") > pl.col("start_ns"))
    ).sort("start_ns")
    root_attributes: dict[str, Any] = {
        "spark.app.id": context.app_id,
        "spark.app.name": context.app_name,
        "spark.app.attempt": context.attempt_id,
        "spark.version": context.spark_version,
        "spark.master": context.master,
        "spark.deploy_mode": context.deploy_mode,
        "sparktrail.cp_ns": tree.total,
        "sparktrail.window_ns": data.window_ns,
        **dict(sorted(context.properties.items())),
    }
    return _span(
        tree.trace_id,
        tree.root_id,
        None,
        context.app_name or data.name,
        start,
        end,
        root_attributes,
        [_event(r) for r in driver.iter_rows(named=True)],
    )


#: job id -> (start, end, its streaming query's attributes).
_Jobs = dict[int, tuple[int, int, dict[str, Any]]]


def _job_rows(local: pl.DataFrame) -> pl.DataFrame:
    """Each job's first start, last end and critical time in the rows."""
    return (
        local.filter(pl.col("job_id").is_not_null())
        .group_by("job_id")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max(), pl.col(CP_NS).sum())
    )


def _job_times(data: CriticalRows, job_rows: pl.DataFrame, end: int) -> _Jobs:
    """Each job's start and end: the context's, widened to its rows (a job
    the context knows and that has no row in an exported range left out)."""
    jobs: _Jobs = {}
    for job in data.context.jobs:
        if job.start_ns is None:
            continue
        jobs[job.job_id] = (
            job.start_ns,
            job.end_ns if job.end_ns is not None else end,
            {
                "spark.streaming.query_id": job.query_id,
                "spark.streaming.run_id": job.run_id,
                "spark.streaming.batch_id": job.batch_id,
            },
        )
    for job_id, a, b, _ in job_rows.iter_rows():
        if job_id in jobs:
            j0, j1, extra = jobs[job_id]
            jobs[job_id] = (min(j0, a), max(j1, b), extra)
        else:
            jobs[job_id] = (a, b, {})
    # A job only the context knows ran outside the exported range.
    if data.range_ns is not None:
        ran = set(job_rows["job_id"].to_list())
        jobs = {k: v for k, v in jobs.items() if k in ran}
    return jobs


def _job_spans(
    tree: _Tree, job_rows: pl.DataFrame, jobs: _Jobs
) -> list[dict[str, Any]]:
    """A span per job under the root, in job id order."""
    job_cp = dict(zip(job_rows["job_id"], job_rows[CP_NS], strict=True))
    spans = []
    for job_id in sorted(jobs):
        a, b, extra = jobs[job_id]
        cp_ns = float(job_cp.get(job_id, 0.0))
        attributes = {
            "spark.job.id": job_id,
            "sparktrail.cp_ns": cp_ns,
            "sparktrail.cp.share": _share(cp_ns, tree.total),
            **extra,
        }
        spans.append(
            _span(
                tree.trace_id,
                tree.span_id("job", job_id),
                tree.root_id,
                f"job {job_id}",
                a,
                b,
                attributes,
            )
        )
    return spans


def _stage_spans(
    tree: _Tree, local: pl.DataFrame, jobs: _Jobs
) -> tuple[list[dict[str, Any]], dict[int, float]]:
    """A span per stage under its job (the root when it names none), and
    each stage's share of the run's critical time."""
    stage_facts = (
        local.filter(pl.col("stage_id").is_not_null())
        .group_by("stage_id")
        .agg(
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col(CP_NS).sum(),
            pl.col("job_id").drop_nulls().first(),
            pl.col("operator").drop_nulls().first(),
            pl.col("task_id").drop_nulls().n_unique().alias("tasks"),
        )
        .sort("stage_id")
    )
    spans = []
    stage_share: dict[int, float] = {}
    for stage in stage_facts.iter_rows(named=True):
        stage_id = stage["stage_id"]
        share = _share(stage[CP_NS], tree.total)
        stage_share[stage_id] = share
        job_id = stage["job_id"]
        parent = tree.span_id("job", job_id) if job_id in jobs else tree.root_id
        attributes = {
            "spark.stage.id": stage_id,
            "spark.job.id": job_id,
            "spark.stage.operator": stage["operator"],
            "spark.stage.tasks": stage["tasks"],
            "sparktrail.cp_ns": float(stage[CP_NS]),
            "sparktrail.cp.share": share,
            "sparktrail.cp.stage_share": share,
        }
        spans.append(
            _span(
                tree.trace_id,
                tree.span_id("stage", stage_id),
                parent,
                stage_label(stage_id),
                stage["start_ns"],
                stage["end_ns"],
                attributes,
            )
        )
    return spans, stage_share


def _by_task(local: pl.DataFrame) -> pl.DataFrame:
    """One row per task attempt, its rows (in time order) as lists."""
    return (
        local.filter(pl.col("task_id").is_not_null())
        .sort("start_ns")
        .group_by("task_id", maintain_order=True)
        .agg(
            pl.col("start_ns").min().alias("first_ns"),
            pl.col("end_ns").max().alias("last_ns"),
            pl.col(CP_NS).sum().alias("task_cp_ns"),
            pl.col("records").max().alias("task_records"),
            pl.col("bytes").max().alias("task_bytes"),
            pl.struct("start_ns", "end_ns", "activity", CP_NS, CRITICALITY).alias(
                "parts"
            ),
            *(
                pl.col(c).first()
                for c in (
                    "stage_id",
                    "job_id",
                    "partition",
                    "attempt",
                    "status",
                    "speculative",
                    "executor_id",
                    "src_worker",
                )
            ),
        )
    )


def _task_attributes(
    task: dict[str, Any], total: float, stage_share: dict[int, float]
) -> dict[str, Any]:
    """A task attempt's attributes, its time per activity among them."""
    cp_ns = float(task["task_cp_ns"])
    time_ns: dict[str, int] = {}
    for part in task["parts"]:
        length = part["end_ns"] - part["start_ns"]
        time_ns[part["activity"]] = time_ns.get(part["activity"], 0) + length
    return {
        "spark.task.id": task["task_id"],
        "spark.stage.id": task["stage_id"],
        "spark.job.id": task["job_id"],
        "spark.task.partition": task["partition"],
        "spark.task.attempt": task["attempt"],
        "spark.task.status": task["status"],
        "spark.task.speculative": task["speculative"],
        "spark.executor.id": task["executor_id"],
        "sparktrail.worker": task["src_worker"],
        "spark.task.records": task["task_records"],
        "spark.task.bytes": task["task_bytes"],
        "sparktrail.cp_ns": cp_ns,
        "sparktrail.cp.share": _share(cp_ns, total),
        "sparktrail.cp.task_share": _share(cp_ns, total),
        "sparktrail.cp.stage_share": stage_share.get(task["stage_id"]),
        **{
            f"sparktrail.time_ns.{activity}": ns
            for activity, ns in sorted(time_ns.items())
        },
    }


def _task_spans(
    tree: _Tree, local: pl.DataFrame, stage_share: dict[int, float]
) -> list[dict[str, Any]]:
    """A span per task attempt under its stage, an event per activity; an
    error status when it failed or was killed."""
    spans = []
    for task in _by_task(local).iter_rows(named=True):
        task_id, stage_id, status = task["task_id"], task["stage_id"], task["status"]
        parent = (
            tree.span_id("stage", stage_id) if stage_id is not None else tree.root_id
        )
        spans.append(
            _span(
                tree.trace_id,
                tree.span_id("task", task_id),
                parent,
                f"task {task_id}",
                task["first_ns"],
                task["last_ns"],
                _task_attributes(task, tree.total, stage_share),
                [_event(part) for part in task["parts"]],
                error=f"task {status}" if status in _FAILED else None,
            )
        )
    return spans


def otlp_request(data: CriticalRows, version: str = "") -> Any:
    """The ``ExportTraceServiceRequest`` of ``data``: one resource (the
    application: ``service.name`` its name), one scope (:data:`SCOPE`),
    the spans of :func:`span_tree`.

    Raises
    ------
    InputError
        If ``opentelemetry-proto`` is not installed.
    """
    module = _proto()
    context = data.context
    resource = _attributes(
        {
            "service.name": context.app_name or data.name,
            "spark.app.id": context.app_id,
            "spark.version": context.spark_version,
            "spark.master": context.master,
        }
    )
    return module.ExportTraceServiceRequest(
        resource_spans=[
            {
                "resource": {"attributes": resource},
                "scope_spans": [
                    {
                        "scope": {"name": SCOPE, "version": version},
                        "spans": span_tree(data),
                    }
                ],
            }
        ]
    )


_IDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(node: Any) -> Any:
    """OTLP/JSON writes ids as hex, not as protobuf JSON's base64."""
    import base64

    if isinstance(node, dict):
        return {
            key: base64.b64decode(value).hex()
            if key in _IDS and isinstance(value, str)
            else _hex_ids(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def otlp_json(request: Any) -> dict[str, Any]:
    """``request`` in the OTLP/JSON encoding: protobuf's JSON mapping
    (``google.protobuf.json_format``, lowerCamelCase names, 64-bit
    integers as strings) with ids as hex and enums as integers."""
    from google.protobuf.json_format import MessageToDict

    document = MessageToDict(request, use_integers_for_enums=True)
    result: dict[str, Any] = _hex_ids(document)
    return result
