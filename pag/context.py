"""The application's context: what a trace's rows do not say (DESIGN §5).

Spark properties, master and deploy mode, Spark version, the executors with
their cores and lifetimes, the jobs' own start and end times (and, for a
Structured Streaming micro-batch, its query and batch) and the streaming
queries with their micro-batches (:mod:`~sparktrail.pag.streams`) travel
with a trace as an :class:`AppContext`: in the Arrow metadata of a trace
file (:data:`CONTEXT_KEY`, JSON) and on :class:`~sparktrail.pag.trace.Trace`.
The hint rules read it to count capacity only while an executor lived and
never to recommend a setting already in force or one the deploy mode
ignores.

Assumptions
-----------
* Every field may be missing (an old log, a trace written by hand, a
  damaged ``EnvironmentUpdate``): ``None``, or empty. A rule that needs a
  field it lacks does not fire.
* Times are ns on the trace's clock (the driver's).
* An executor's ``removed_ns`` is ``None`` while it lives (it lives to the
  end of the run).
* ``failures`` holds what failed (:class:`Failure`: failed, killed and
  resubmitted task attempts with their end reason, failed stages and
  jobs), at most :data:`MAX_FAILURES_PER_KIND` of each kind (the first);
  ``failure_counts`` counts every one of each kind, so a log with 10^5
  failed attempts keeps a small context.
* ``stages`` holds what each stage declared at its submission (its task
  count, name, parents and RDDs), ``sql`` each SQL execution's description
  and the settings it changed at run time (``modifiedConfigs``), ``log``
  what the event log itself says of its integrity (:class:`LogIntegrity`);
  all empty (``None``) in a trace written before they were read.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from sparktrail.errors import InputError

from .streams import StreamBatch, StreamQuery, batches_of, queries_of

__all__ = [
    "CONTEXT_KEY",
    "MAX_FAILURES_PER_KIND",
    "AppContext",
    "ContextError",
    "ExecutorLife",
    "Failure",
    "JobSpan",
    "LogIntegrity",
    "SqlExecution",
    "StageInfo",
    "local_cores",
]

#: Arrow schema metadata key of a trace file's context (a JSON object).
CONTEXT_KEY = b"sparktrail.context"

#: Failures of one kind kept in a context (the rest are only counted).
MAX_FAILURES_PER_KIND = 100

_LOCAL = re.compile(r"^local(?:\[(\d+|\*)(?:\s*,\s*\d+)?\])?$")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class ContextError(InputError):
    """A context (JSON in a trace file's metadata) that cannot be read."""


def local_cores(master: str | None) -> int | None:
    """Cores of a ``local`` master (``None``: not local, or ``local[*]``).

    >>> local_cores("local[4]"), local_cores("local"), local_cores("yarn")
    (4, 1, None)
    """
    match = _LOCAL.match((master or "").strip())
    if not match:
        return None
    count = match.group(1)
    if count is None:
        return 1
    return None if count == "*" else int(count)


@dataclass(frozen=True)
class ExecutorLife:
    """One executor: its cores and when it lived (ns; ``None``: unknown)."""

    executor_id: str
    cores: int | None = None
    host: str | None = None
    added_ns: int | None = None
    removed_ns: int | None = None
    removed_reason: str | None = None

    def lived_ns(self, start_ns: int, end_ns: int) -> int:
        """How much of ``[start_ns, end_ns)`` the executor lived.

        >>> ExecutorLife("1", 2, added_ns=5, removed_ns=8).lived_ns(0, 10)
        3
        """
        a = max(start_ns, self.added_ns if self.added_ns is not None else start_ns)
        b = min(end_ns, self.removed_ns if self.removed_ns is not None else end_ns)
        return max(0, b - a)


@dataclass(frozen=True)
class JobSpan:
    """A job's own start and end (``JobStart``/``JobEnd``, ns).

    A job of a Structured Streaming micro-batch names its query, the
    query's run and the batch (``None`` for other jobs).
    """

    job_id: int
    start_ns: int | None = None
    end_ns: int | None = None
    query_id: str | None = None
    run_id: str | None = None
    batch_id: int | None = None
    #: ``spark.job.description`` (a DStream batch's "Streaming job from
    #: [output operation 0, batch time ...]"), the job group and the short
    #: call site, as the job's properties state them.
    description: str | None = None
    group: str | None = None
    call_site: str | None = None
    #: The SQL execution the job ran for (``spark.sql.execution.id``).
    sql_id: int | None = None
    #: A DStream batch's time (``spark.streaming.internal.batchTime``), ns.
    batch_time_ns: int | None = None
    stage_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class StageInfo:
    """What a stage declared when it was submitted (``StageSubmitted``).

    ``declared_tasks`` is Spark's ``Number of Tasks``; ``attempts`` counts
    its stage attempts; ``rdds`` the names of its RDDs and of their scopes
    (``PythonRDD``, ``textFile``, ``Exchange``, ``ArrowEvalPython``, ...:
    what tells its engine and its input), at most :data:`MAX_STAGE_RDDS`;
    ``cached`` whether one of them is persisted; ``partitions`` the
    partitions of its first RDD (its input's split).
    """

    stage_id: int
    name: str | None = None
    declared_tasks: int | None = None
    job_id: int | None = None
    attempts: int = 1
    parents: tuple[int, ...] = ()
    rdds: tuple[str, ...] = ()
    cached: bool = False
    partitions: int | None = None
    submitted_ns: int | None = None
    completed_ns: int | None = None


@dataclass(frozen=True)
class SqlExecution:
    """One SQL execution: its description, when it ran, and the SQL settings
    the session had changed at run time (``modifiedConfigs``, Spark 3.1+:
    ``spark.conf.set`` before it ran)."""

    execution_id: int
    description: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    modified_configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LogIntegrity:
    """What the event log says of itself: whether it is whole.

    ``lines`` read and ``skipped_lines`` (not JSON, not an event, a field
    of the wrong type); ``set_aside`` implausible timestamps set aside
    (:mod:`~sparktrail.tracer.outliers`) with the events that held them;
    ``app_end`` whether ``ApplicationEnd`` was read and ``after_end`` the
    events logged after it (teardown); ``complete`` whether the log's
    files say the application finished (no ``.inprogress``, an
    ``appstatus``/``APPLICATION_COMPLETE`` marker); ``cut_last_line``
    whether its last line ends mid-event; ``bad_environment`` the line of
    an ``EnvironmentUpdate`` that could not be read (its settings lost).
    """

    lines: int = 0
    skipped_lines: int = 0
    set_aside: int = 0
    set_aside_events: tuple[str, ...] = ()
    app_end: bool = False
    after_end: int = 0
    complete: bool = True
    cut_last_line: bool = False
    bad_environment: str | None = None


#: RDD and scope names kept per stage in a context.
MAX_STAGE_RDDS = 16


@dataclass(frozen=True)
class Failure:
    """Something that failed, with its cause, as the log states it.

    ``kind`` is a task attempt's end reason (Spark's ``Reason``:
    ``ExceptionFailure``, ``FetchFailed``, ``ExecutorLostFailure``,
    ``TaskKilled``, ``TaskResultLost``, ``TaskCommitDenied``,
    ``Resubmitted``: a finished map task whose output was lost with its
    executor, ...), ``StageFailed`` (a stage attempt's ``Failure
    Reason``) or ``JobFailed`` (a job's result). ``message`` is short (the
    gist of Spark's text: its first line, and a Python traceback's last);
    ``exception`` the exception's class, ``call_site`` the first frame of
    user code in its stack; for ``FetchFailed``, ``shuffle_id`` and
    ``source_executor`` (whose shuffle output could not be fetched); for
    ``ExecutorLostFailure``, ``by_app`` (Spark's "Exit Caused By App").
    ``time_ns`` is when it ended, ``duration_ns`` how long the attempt ran.
    """

    kind: str
    stage_id: int | None = None
    stage_attempt: int | None = None
    task_id: int | None = None
    attempt: int | None = None
    partition: int | None = None
    executor_id: str | None = None
    host: str | None = None
    job_id: int | None = None
    message: str | None = None
    time_ns: int | None = None
    duration_ns: int | None = None
    exception: str | None = None
    call_site: str | None = None
    shuffle_id: int | None = None
    source_executor: str | None = None
    by_app: bool | None = None
    #: The deepest ``Caused by:`` of its stack trace: what the wrapping
    #: exceptions were raised for.
    root_cause: str | None = None


@dataclass(frozen=True)
class AppContext:
    """What the application ran with, beside its trace rows.

    Examples
    --------
    >>> c = AppContext(master="local[2]", properties={"spark.speculation": "true"})
    >>> c.is_local, c.flag("spark.speculation"), c.flag("spark.sql.adaptive.enabled")
    (True, True, None)
    >>> AppContext.from_json(c.to_json()) == c
    True
    """

    app_id: str | None = None
    app_name: str | None = None
    attempt_id: str | None = None
    spark_version: str | None = None
    master: str | None = None
    deploy_mode: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    properties: dict[str, str] = field(default_factory=dict)
    executors: tuple[ExecutorLife, ...] = ()
    jobs: tuple[JobSpan, ...] = ()
    queries: tuple[StreamQuery, ...] = ()
    batches: tuple[StreamBatch, ...] = ()
    failures: tuple[Failure, ...] = ()
    failure_counts: dict[str, int] = field(default_factory=dict)
    stages: tuple[StageInfo, ...] = ()
    sql: tuple[SqlExecution, ...] = ()
    log: LogIntegrity | None = None

    # -- what the rules ask ---------------------------------------------------

    @property
    def known(self) -> bool:
        """Whether anything at all is known (a hand-made trace has nothing)."""
        return self != AppContext()

    @property
    def is_local(self) -> bool:
        """``local``/``local[N]``: one JVM, executor settings are ignored."""
        return _LOCAL.match((self.master or "").strip()) is not None

    def setting(self, name: str) -> str | None:
        """A Spark property as the application ran with it, or ``None``."""
        return self.properties.get(name)

    def flag(self, name: str) -> bool | None:
        """A boolean Spark property (``None``: unset or not a boolean)."""
        value = self.setting(name)
        if value is None:
            return None
        value = value.strip().lower()
        return True if value in _TRUE else False if value in _FALSE else None

    @property
    def first_job_ns(self) -> int | None:
        """When the first job started, if any job did."""
        starts = [j.start_ns for j in self.jobs if j.start_ns is not None]
        return min(starts) if starts else None

    def executor_cores(self) -> dict[str, int]:
        """Cores by executor id, for the executors whose cores are known."""
        return {e.executor_id: e.cores for e in self.executors if e.cores}

    def slot_ns(self, start_ns: int, end_ns: int) -> int | None:
        """Core-ns of capacity in ``[start_ns, end_ns)``: each executor's
        cores times how long it lived there (``None``: cores unknown).

        >>> AppContext(executors=(ExecutorLife("1", 2, added_ns=5),)).slot_ns(0, 10)
        10
        """
        lives = [
            e for e in self.executors if e.executor_id != "driver" or self.is_local
        ]
        if not lives or any(not e.cores for e in lives):
            return None
        return sum(e.cores * e.lived_ns(start_ns, end_ns) for e in lives if e.cores)

    # -- JSON -----------------------------------------------------------------

    def to_json(self) -> str:
        """The context as a JSON object (what a trace file's metadata holds;
        a failure's unknown fields are left out)."""
        raw = asdict(self)
        for name in ("failures", "jobs", "stages"):
            raw[name] = [
                {k: v for k, v in f.items() if v not in (None, (), [])}
                for f in raw[name]
            ]
        return json.dumps(raw, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> AppContext:
        """Read :meth:`to_json`'s output; unknown keys are ignored.

        >>> try:
        ...     AppContext.from_json("[]")
        ... except ContextError as err:
        ...     print(err)
        a trace context must be a JSON object, not list
        """
        try:
            raw = json.loads(text)
        except (ValueError, UnicodeDecodeError) as err:
            raise ContextError(f"a trace context is not JSON ({err})") from err
        if not isinstance(raw, dict):
            kind = type(raw).__name__
            raise ContextError(f"a trace context must be a JSON object, not {kind}")
        try:
            return _context_of(raw)
        except (TypeError, ValueError, AttributeError, KeyError) as err:
            raise ContextError(f"a trace context has a bad field ({err})") from err


def _opt(value: Any, kind: type) -> Any:
    if value is None:
        return None
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"expected an integer, found {value!r}")
    if kind is str and not isinstance(value, str):
        raise ValueError(f"expected a string, found {value!r}")
    return value


def _context_of(raw: dict[str, Any]) -> AppContext:
    strings = ("app_id", "app_name", "attempt_id", "spark_version", "master")
    props = raw.get("properties") or {}
    if not isinstance(props, dict):
        raise ValueError(f"properties must be an object, found {type(props).__name__}")
    return AppContext(
        **{name: _opt(raw.get(name), str) for name in strings},
        deploy_mode=_opt(raw.get("deploy_mode"), str),
        start_ns=_opt(raw.get("start_ns"), int),
        end_ns=_opt(raw.get("end_ns"), int),
        properties={str(k): str(v) for k, v in props.items()},
        executors=tuple(
            ExecutorLife(
                executor_id=str(e["executor_id"]),
                cores=_opt(e.get("cores"), int),
                host=_opt(e.get("host"), str),
                added_ns=_opt(e.get("added_ns"), int),
                removed_ns=_opt(e.get("removed_ns"), int),
                removed_reason=_opt(e.get("removed_reason"), str),
            )
            for e in raw.get("executors") or ()
        ),
        jobs=tuple(_job_of(j) for j in raw.get("jobs") or ()),
        queries=queries_of(raw.get("queries")),
        batches=batches_of(raw.get("batches")),
        failures=tuple(_failure_of(f) for f in raw.get("failures") or ()),
        failure_counts={
            str(k): int(_opt(v, int) or 0)
            for k, v in (raw.get("failure_counts") or {}).items()
        },
        stages=tuple(_stage_of(st) for st in raw.get("stages") or ()),
        sql=tuple(_sql_of(q) for q in raw.get("sql") or ()),
        log=None if raw.get("log") is None else _log_of(raw["log"]),
    )


def _ints(values: Any) -> tuple[int, ...]:
    return tuple(int(_opt(v, int)) for v in values or ())


def _job_of(j: dict[str, Any]) -> JobSpan:
    return JobSpan(
        int(j["job_id"]),
        _opt(j.get("start_ns"), int),
        _opt(j.get("end_ns"), int),
        _opt(j.get("query_id"), str),
        _opt(j.get("run_id"), str),
        _opt(j.get("batch_id"), int),
        _opt(j.get("description"), str),
        _opt(j.get("group"), str),
        _opt(j.get("call_site"), str),
        _opt(j.get("sql_id"), int),
        _opt(j.get("batch_time_ns"), int),
        _ints(j.get("stage_ids")),
    )


def _stage_of(st: dict[str, Any]) -> StageInfo:
    return StageInfo(
        int(st["stage_id"]),
        _opt(st.get("name"), str),
        _opt(st.get("declared_tasks"), int),
        _opt(st.get("job_id"), int),
        int(_opt(st.get("attempts"), int) or 1),
        _ints(st.get("parents")),
        tuple(str(r) for r in st.get("rdds") or ()),
        bool(st.get("cached", False)),
        _opt(st.get("partitions"), int),
        _opt(st.get("submitted_ns"), int),
        _opt(st.get("completed_ns"), int),
    )


def _sql_of(q: dict[str, Any]) -> SqlExecution:
    configs = q.get("modified_configs") or {}
    if not isinstance(configs, dict):
        raise ValueError(f"modified_configs must be an object, found {configs!r}")
    return SqlExecution(
        int(q["execution_id"]),
        _opt(q.get("description"), str),
        _opt(q.get("start_ns"), int),
        _opt(q.get("end_ns"), int),
        {str(k): str(v) for k, v in configs.items()},
    )


def _log_of(raw: dict[str, Any]) -> LogIntegrity:
    if not isinstance(raw, dict):
        raise ValueError(f"log must be an object, found {type(raw).__name__}")
    return LogIntegrity(
        lines=int(_opt(raw.get("lines"), int) or 0),
        skipped_lines=int(_opt(raw.get("skipped_lines"), int) or 0),
        set_aside=int(_opt(raw.get("set_aside"), int) or 0),
        set_aside_events=tuple(str(e) for e in raw.get("set_aside_events") or ()),
        app_end=bool(raw.get("app_end", False)),
        after_end=int(_opt(raw.get("after_end"), int) or 0),
        complete=bool(raw.get("complete", True)),
        cut_last_line=bool(raw.get("cut_last_line", False)),
        bad_environment=_opt(raw.get("bad_environment"), str),
    )


_FAILURE_INTS = (
    "stage_id",
    "stage_attempt",
    "task_id",
    "attempt",
    "partition",
    "job_id",
    "time_ns",
    "duration_ns",
    "shuffle_id",
)
_FAILURE_STRINGS = (
    "executor_id",
    "host",
    "message",
    "exception",
    "call_site",
    "source_executor",
    "root_cause",
)


def _failure_of(raw: dict[str, Any]) -> Failure:
    by_app = raw.get("by_app")
    if by_app is not None and not isinstance(by_app, bool):
        raise ValueError(f"expected a boolean, found {by_app!r}")
    return Failure(
        kind=str(raw["kind"]),
        **{name: _opt(raw.get(name), int) for name in _FAILURE_INTS},
        **{name: _opt(raw.get(name), str) for name in _FAILURE_STRINGS},
        by_app=by_app,
    )
