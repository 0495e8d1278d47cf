"""The Spark -> PAG model (DESIGN §5): listener events in, trace rows out.

:class:`SparkModel` collects the events of one application (``feed``) and
turns them into trace rows (``build``). The rules, beyond DESIGN §5:

* Slots: an executor has ``Total Cores`` slots (``ExecutorAdded``); the local
  executor ``driver`` falls back to ``local[N]`` of ``spark.master``; with no
  core count the slots grow to the highest concurrency seen. A launch takes
  the lowest free slot; with none free (and the cap reached) it takes the
  slot that frees first and the task there is *clipped*: it ends at this
  launch, and the clipped time (driver-side result handling, part of Spark's
  scheduler delay) is taken from that task's ``scheduling`` piece first; its
  completion edge runs from the clipped end to the recorded finish.
* A task's pieces (scheduling, deserialization, shuffle_read, processing,
  gc, shuffle_write, serialization, result) are computed in ns as Spark's UI
  does (scheduler delay = duration - run - deserialize - result
  serialization - getting result, floored at 0; processing = run - fetch
  wait - shuffle write - GC, floored at 0) and, if floors make them
  overrun, scaled so they tile the task exactly. Zero-length pieces are left
  out. ``records``/``bytes`` (input plus shuffle read) sit on the task's
  ``processing`` row only, as does ``shuffle_write_bytes``, and only for
  the attempt whose result counts: the first successful attempt of its
  partition (in log order) in the stage. Failed, killed and later
  duplicate attempts (a speculative copy, a rerun after an executor was
  lost) keep their time but carry none, so sums over rows count each
  partition once, in a followed trace as in a full import.
* An attempt ends once: a second ``TaskEnd`` of the same task id (Spark's
  ``Resubmitted``, posted when the executor that holds a finished map
  task's output is lost and the partition is run again) changes nothing;
  the rerun is a new attempt.
* Extra columns: ``attempt``, ``status`` (``success``, ``failed``,
  ``killed``, ``running``), ``speculative``, ``executor_id`` and
  ``clipped_ns`` on a task's rows; ``shuffle_write_bytes`` on its
  ``processing`` row.
* A slot's gap between two tasks is ``scheduling`` while some submitted
  stage has partitions not yet launched, else ``waiting``. Before its first
  and after its last task a slot has no rows (uncovered: waiting).
* Driver: each gap between consecutive driver events (application start,
  job start/end, launches, completions, application end) is named by the
  event that ends it: a launch -> ``scheduling``, a completion ->
  ``waiting``, anything else -> ``scheduling`` while a job runs, else
  ``driver``.
* seq: every vertex of a worker gets the next value of that worker's
  counter (the driver's events in (time, log order)), so equal timestamps
  never make a cycle.

Assumptions
-----------
* Event timestamps are driver-clock milliseconds; ``Shuffle Write Time`` is
  in nanoseconds; "Getting Result Time" is the time the driver started
  fetching a result (0: not fetched).
* Events arrive in log order, which is roughly time order.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from sparktrail.errors import InputError

__all__ = ["EventError", "ImportStats", "SparkModel", "TaskRecord"]

MS = 1_000_000
INF = 1 << 62
PIECES = (
    "scheduling",
    "deserialization",
    "shuffle_read",
    "processing",
    "gc",
    "shuffle_write",
    "serialization",
    "result",
)
_LOCAL = re.compile(r"^local(?:\[(\d+|\*)(?:\s*,\s*\d+)?\])?$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*\d+\s*,\s*(\d+)\s*,")

# Driver event kinds, in tie order they never need (order breaks ties).
_START, _JOB_START, _JOB_END, _LAUNCH, _COMPLETION, _END = range(6)


@dataclass
class ImportStats:
    """What an import read and built (filled by ``import_eventlog``).

    ``clipped_tasks`` counts tasks whose end was clipped to the next launch
    on their slot (DESIGN §5), ``clipped_ns`` the time clipped in total.
    """

    app_id: str | None = None
    app_name: str | None = None
    spark_version: str | None = None
    files: int = 0
    lines: int = 0
    events: int = 0
    skipped_lines: int = 0
    jobs: int = 0
    stages: int = 0
    tasks: int = 0
    executors: int = 0
    slots: int = 0
    rows: int = 0
    clipped_tasks: int = 0
    clipped_ns: int = 0

    def summary(self) -> str:
        """One line for the command line."""
        return (
            f"{self.app_id or '?'}: {self.tasks} tasks, {self.stages} stages, "
            f"{self.jobs} jobs, {self.rows} rows, {self.clipped_tasks} clipped "
            f"tasks, {self.skipped_lines} skipped lines"
        )


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


@dataclass
class _Job:
    start_ms: int | None = None
    end_ms: int | None = None
    start_order: int = 0
    end_order: int = 0


@dataclass
class _Stage:
    name: str | None = None
    num_tasks: int | None = None
    submitted_ms: int | None = None
    completed_ms: int | None = None
    launched: set[int] = field(default_factory=set)
    all_launched_ms: int | None = None


class EventError(InputError):
    """An event has a field the model cannot use (the message names it)."""


#: Largest magnitude of a count, id or duration field: sums of a few such
#: values (input plus shuffle bytes) stay inside int64.
COUNT_LIMIT = 1 << 60
#: Largest magnitude of a timestamp (ms): in ns it stays below ``INF``, the
#: end of a task that has not finished (about the year 2116).
TIME_LIMIT_MS = INF // MS


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _opt_int(obj: dict[str, Any], key: str, limit: int = COUNT_LIMIT) -> int | None:
    """The integer at ``obj[key]`` (``None`` if missing or null).

    Raises
    ------
    EventError
        If the value is not a number, not finite, or ``limit`` or more away
        from 0 (it would overflow the trace's int64 columns).
    """
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or value != value:  # NaN != NaN
        raise EventError(f"{key!r} is {_shown(value)}, expected an integer")
    if not -limit < value < limit:
        raise EventError(
            f"{key!r} is {_shown(value)}, out of range (expected |x| < {limit})"
        )
    return int(value)


def _int(obj: dict[str, Any], key: str) -> int:
    value = _opt_int(obj, key)
    return 0 if value is None else value


def _time(obj: dict[str, Any], key: str) -> int | None:
    """A timestamp (ms) at ``obj[key]``, in the range ns int64 can hold."""
    return _opt_int(obj, key, TIME_LIMIT_MS)


def _str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise EventError(f"{key!r} is {_shown(value)}, expected a string")


def _dict(obj: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = obj.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise EventError(f"{key!r} is {_shown(value)}, expected an object")


def _list(obj: dict[str, Any], key: str) -> list[Any] | None:
    value = obj.get(key)
    if value is None or isinstance(value, list):
        return value
    raise EventError(f"{key!r} is {_shown(value)}, expected a list")


def _status(event: dict[str, Any], info: dict[str, Any]) -> str:
    reason = event.get("Task End Reason")
    name = reason.get("Reason") if isinstance(reason, dict) else None
    if info.get("Killed") or name in ("TaskKilled", "TaskCommitDenied"):
        return "killed"
    # Resubmitted: the attempt had succeeded; its output was lost later.
    if info.get("Failed") or name not in (None, "Success", "Resubmitted"):
        return "failed"
    return "success"


def _metric_values(metrics: dict[str, Any]) -> dict[str, Any]:
    """The :class:`TaskRecord` fields a task's ``Task Metrics`` set."""
    records = nbytes = None
    values: dict[str, Any] = {
        "has_metrics": True,
        "deserialize_ms": _int(metrics, "Executor Deserialize Time"),
        "run_ms": _int(metrics, "Executor Run Time"),
        "gc_ms": _int(metrics, "JVM GC Time"),
        "serialize_ms": _int(metrics, "Result Serialization Time"),
    }
    read = _dict(metrics, "Shuffle Read Metrics")
    if read is not None:
        values["fetch_wait_ms"] = _int(read, "Fetch Wait Time")
        total = "Total Records Read"
        records = _opt_int(read, total if total in read else "Records Read")
        nbytes = _int(read, "Remote Bytes Read") + _int(read, "Local Bytes Read")
    write = _dict(metrics, "Shuffle Write Metrics")
    if write is not None:
        values["write_ns"] = _int(write, "Shuffle Write Time")
        values["shuffle_write_bytes"] = _opt_int(write, "Shuffle Bytes Written")
    inp = _dict(metrics, "Input Metrics")
    if inp is not None:
        in_records = _opt_int(inp, "Records Read")
        in_bytes = _opt_int(inp, "Bytes Read")
        if in_records is not None:
            records = (records or 0) + in_records
        if in_bytes is not None:
            nbytes = (nbytes or 0) + in_bytes
    values["records"], values["bytes"] = records, nbytes
    return values


def master_cores(master: str | None) -> int | None:
    """Cores per executor that ``spark.master`` implies, if it says.

    >>> master_cores("local[4]"), master_cores("local"), master_cores("local[*]")
    (4, 1, None)
    """
    if not master:
        return None
    master = master.strip()
    match = _LOCAL.match(master)
    if match:
        count = match.group(1)
        if count is None:
            return 1
        return None if count == "*" else int(count)
    match = _LOCAL_CLUSTER.match(master)
    return int(match.group(1)) if match else None


def task_pieces(task: TaskRecord, duration_ns: int) -> list[int]:
    """Split a task's ``duration_ns`` into the eight :data:`PIECES` (ns).

    Follows Spark's UI formulas; if floors at 0 make the pieces overrun the
    duration they are scaled down (cumulative rounding) to tile it exactly.

    >>> t = TaskRecord(0, 0, 0, 0, 0, 0, "1", False, 0, 0, has_metrics=True,
    ...     deserialize_ms=2, run_ms=5, gc_ms=1)
    >>> [p // MS for p in task_pieces(t, 10 * MS)]
    [3, 2, 0, 4, 1, 0, 0, 0]
    """
    if not task.has_metrics:
        return [0, 0, 0, duration_ns, 0, 0, 0, 0]
    getting = 0
    if task.getting_result_at > 0 and task.finish_ms is not None:
        getting = max(0, task.finish_ms - task.getting_result_at) * MS
    deser, run = task.deserialize_ms * MS, task.run_ms * MS
    gc, ser = task.gc_ms * MS, task.serialize_ms * MS
    fetch, write = task.fetch_wait_ms * MS, task.write_ns
    sched = max(0, duration_ns - run - deser - ser - getting)
    proc = max(0, run - fetch - write - gc)
    pieces = [sched, deser, fetch, proc, gc, write, ser, getting]
    return fit(pieces, duration_ns)


def fit(pieces: list[int], total: int) -> list[int]:
    """Scale non-negative ``pieces`` so they sum to ``total`` exactly.

    >>> fit([1, 1, 1], 10)
    [3, 4, 3]
    >>> fit([0, 0], 5)
    [5, 0]
    """
    pieces = [max(0, p) for p in pieces]
    current = sum(pieces)
    if current == total:
        return pieces
    if current == 0:
        return [total] + [0] * (len(pieces) - 1)
    out, acc, prev = [], 0, 0
    for p in pieces:
        acc += p
        edge = (acc * total + current // 2) // current
        out.append(edge - prev)
        prev = edge
    return out


def clip_pieces(pieces: list[int], available: int) -> list[int]:
    """Shorten pieces to ``available`` ns, taking from scheduling first.

    >>> clip_pieces([5, 10, 0, 10, 0, 0, 0, 0], 15)
    [0, 8, 0, 7, 0, 0, 0, 0]
    """
    excess = sum(pieces) - available
    if excess <= 0:
        return pieces
    taken = min(excess, pieces[0])
    pieces = [pieces[0] - taken, *pieces[1:]]
    return fit(pieces, available)


_TASK_COLUMNS = (
    "task_id",
    "partition",
    "attempt",
    "status",
    "speculative",
    "executor_id",
    "clipped_ns",
)
_NO_TASK = (None,) * len(_TASK_COLUMNS)


class _Rows:
    """Columnar accumulation of trace rows."""

    COLUMNS = (
        "src_worker",
        "dst_worker",
        "start_ns",
        "end_ns",
        "activity",
        "src_seq",
        "dst_seq",
        "operator",
        "job_id",
        "stage_id",
        "records",
        "bytes",
        "shuffle_write_bytes",
        *_TASK_COLUMNS,
        "settled_ns",
    )

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self._cols: dict[str, list[Any]] | None = None

    def add(
        self,
        src: str,
        dst: str,
        start: int,
        end: int,
        activity: str,
        src_seq: int,
        dst_seq: int,
        task: tuple[Any, ...] | None = None,
        job_stage: tuple[str | None, int | None, int | None] = (None, None, None),
        work: tuple[int | None, int | None, int | None] = (None, None, None),
        settled: int | None = None,
    ) -> None:
        self.rows.append(
            (
                src,
                dst,
                start,
                end,
                activity,
                src_seq,
                dst_seq,
                *job_stage,
                *work,
                *(task or _NO_TASK),
                end if settled is None else settled,
            )
        )

    @property
    def cols(self) -> dict[str, list[Any]]:
        """The rows as columns (transposed once, after the last ``add``)."""
        if self._cols is None:
            columns = (
                zip(*self.rows, strict=True) if self.rows else [()] * len(self.COLUMNS)
            )
            self._cols = {
                name: list(values)
                for name, values in zip(self.COLUMNS, columns, strict=True)
            }
        return self._cols

    def frame(self) -> pl.DataFrame:
        schema = {
            "src_worker": pl.String,
            "dst_worker": pl.String,
            "activity": pl.String,
            "operator": pl.String,
            "status": pl.String,
            "executor_id": pl.String,
            "speculative": pl.Boolean,
        }
        return pl.DataFrame(
            self.cols,
            schema={c: schema.get(c, pl.Int64) for c in self.COLUMNS},
        )


@dataclass
class _DriverEvent:
    time_ms: int
    order: int
    kind: int
    task: TaskRecord | None = None
    job_id: int | None = None


class SparkModel:
    """Collect one application's listener events and build its trace.

    Examples
    --------
    An application that ran no job spent its whole time in driver code:

    >>> m = SparkModel()
    >>> m.feed({"Event": "SparkListenerApplicationStart", "Timestamp": 0,
    ...     "App ID": "app-1"})
    >>> m.feed({"Event": "SparkListenerApplicationEnd", "Timestamp": 5})
    >>> m.build(final=True).select("src_worker", "end_ns", "activity").rows()
    [('driver', 5000000, 'driver')]
    """

    def __init__(self) -> None:
        self.stats = ImportStats()
        self.app_start_ms: int | None = None
        self.app_end_ms: int | None = None
        self.master: str | None = None
        self.executor_cores: dict[str, int] = {}
        self.tasks: dict[int, TaskRecord] = {}
        self.stages: dict[tuple[int, int], _Stage] = {}
        self.stage_names: dict[int, str] = {}
        self.stage_job: dict[int, int] = {}
        self.jobs: dict[int, _Job] = {}
        self.max_ms = 0
        self._counted: set[int] = set()  # tasks whose records count (build)
        self._order = 0
        self._handlers = {
            "SparkListenerApplicationStart": self._app_start,
            "SparkListenerApplicationEnd": self._app_end,
            "SparkListenerEnvironmentUpdate": self._environment,
            "SparkListenerExecutorAdded": self._executor_added,
            "SparkListenerJobStart": self._job_start,
            "SparkListenerJobEnd": self._job_end,
            "SparkListenerStageSubmitted": self._stage_submitted,
            "SparkListenerStageCompleted": self._stage_completed,
            "SparkListenerTaskStart": self._task_start,
            "SparkListenerTaskEnd": self._task_end,
        }

    # -- events --------------------------------------------------------------

    def feed(self, event: dict[str, Any]) -> None:
        """Take one listener event (unused kinds are ignored)."""
        self._order += 2
        handler = self._handlers.get(event.get("Event", ""))
        if handler is not None:
            handler(event)

    def _seen(self, ms: int | None) -> None:
        if ms is not None and ms > self.max_ms:
            self.max_ms = ms

    def _app_start(self, e: dict[str, Any]) -> None:
        start = _time(e, "Timestamp")
        app_id, name = _str(e, "App ID"), _str(e, "App Name")
        self.app_start_ms = start
        self.stats.app_id = app_id or self.stats.app_id
        self.stats.app_name = name
        self._seen(self.app_start_ms)

    def _app_end(self, e: dict[str, Any]) -> None:
        self.app_end_ms = _time(e, "Timestamp")
        self._seen(self.app_end_ms)

    def _environment(self, e: dict[str, Any]) -> None:
        props = e.get("Spark Properties")
        if isinstance(props, dict):
            self.master = _str(props, "spark.master")
        elif isinstance(props, list):  # very old logs: [[key, value], ...]
            for pair in props:
                if isinstance(pair, list) and pair[:1] == ["spark.master"]:
                    value = pair[1] if len(pair) > 1 else None
                    self.master = _str({"spark.master": value}, "spark.master")

    def _executor_added(self, e: dict[str, Any]) -> None:
        info = e.get("Executor Info")
        cores = _opt_int(info, "Total Cores") if isinstance(info, dict) else None
        if cores is not None and cores > 0:
            self.executor_cores[str(e.get("Executor ID"))] = cores

    def _job_start(self, e: dict[str, Any]) -> None:
        job = _opt_int(e, "Job ID")
        if job is None:
            return
        start = _time(e, "Submission Time")
        infos = _list(e, "Stage Infos") or []
        ids = _list(e, "Stage IDs") or [
            s.get("Stage ID") for s in infos if isinstance(s, dict)
        ]
        record = self.jobs.setdefault(job, _Job())
        record.start_ms, record.start_order = start, self._order
        self._seen(start)
        for sid in ids:
            if isinstance(sid, int):
                self.stage_job[sid] = job
        for info in infos:
            name = info.get("Stage Name") if isinstance(info, dict) else None
            if isinstance(name, str) and isinstance(info.get("Stage ID"), int):
                self.stage_names.setdefault(info["Stage ID"], name)

    def _job_end(self, e: dict[str, Any]) -> None:
        job = _opt_int(e, "Job ID")
        end = _time(e, "Completion Time")
        if job is not None:
            record = self.jobs.setdefault(job, _Job())
            record.end_ms, record.end_order = end, self._order
            self._seen(end)

    def _stage(self, info: dict[str, Any]) -> tuple[int, _Stage] | None:
        sid = _opt_int(info, "Stage ID")
        if sid is None:
            return None
        attempt, name = _int(info, "Stage Attempt ID"), _str(info, "Stage Name")
        tasks = _opt_int(info, "Number of Tasks")
        stage = self.stages.setdefault((sid, attempt), _Stage())
        stage.name = name or stage.name
        if stage.name:
            self.stage_names[sid] = stage.name
        stage.num_tasks = tasks or stage.num_tasks
        return sid, stage

    def _stage_submitted(self, e: dict[str, Any]) -> None:
        info = _dict(e, "Stage Info") or {}
        submitted = _time(info, "Submission Time")
        found = self._stage(info)
        if found:
            found[1].submitted_ms = submitted

    def _stage_completed(self, e: dict[str, Any]) -> None:
        info = _dict(e, "Stage Info") or {}
        completed = _time(info, "Completion Time")
        found = self._stage(info)
        if found:
            found[1].completed_ms = completed
            self._seen(found[1].completed_ms)

    def _task(self, e: dict[str, Any], info: dict[str, Any]) -> TaskRecord | None:
        tid, launch = _opt_int(info, "Task ID"), _time(info, "Launch Time")
        if tid is None or launch is None:
            return None
        task = self.tasks.get(tid)
        if task is None:
            index = _opt_int(info, "Index")
            partition = _opt_int(info, "Partition ID")
            task = TaskRecord(
                task_id=tid,
                stage_id=_int(e, "Stage ID"),
                stage_attempt=_int(e, "Stage Attempt ID"),
                index=index,
                partition=index if partition is None or partition < 0 else partition,
                attempt=_opt_int(info, "Attempt"),
                executor_id=str(info.get("Executor ID")),
                speculative=bool(info.get("Speculative", False)),
                launch_ms=launch,
                order=self._order,
            )
            self.tasks[tid] = task
            self._seen(launch)
            self._launched(task)
        return task

    def _launched(self, task: TaskRecord) -> None:
        stage = self.stages.setdefault((task.stage_id, task.stage_attempt), _Stage())
        if stage.submitted_ms is None:
            stage.submitted_ms = task.launch_ms
        if task.index is not None and stage.all_launched_ms is None:
            stage.launched.add(task.index)
            if stage.num_tasks is not None and len(stage.launched) >= stage.num_tasks:
                stage.all_launched_ms = task.launch_ms

    def _task_start(self, e: dict[str, Any]) -> None:
        info = _dict(e, "Task Info")
        if info is not None:
            self._task(e, info)

    def _task_end(self, e: dict[str, Any]) -> None:
        info = _dict(e, "Task Info")
        if info is None:
            return
        tid = _opt_int(info, "Task ID")
        known = self.tasks.get(tid) if tid is not None else None
        if known is not None and known.finish_ms is not None:
            return  # ended already: Resubmitted (see the module docstring)
        # Read every field first: a bad one skips the event, changing nothing.
        finish = _time(info, "Finish Time")
        getting = _time(info, "Getting Result Time")
        metrics = _dict(e, "Task Metrics")
        measured = _metric_values(metrics) if metrics is not None else {}
        task = self._task(e, info)
        if task is None:
            return
        if task.order == self._order:  # no TaskStart seen: launch just before
            task.order -= 1
        task.finish_ms = max(finish, task.launch_ms) if finish else task.launch_ms
        task.end_order = self._order
        task.status = _status(e, info)
        task.getting_result_at = getting or 0
        for name, value in measured.items():
            setattr(task, name, value)
        self._seen(task.finish_ms)

    # -- build ---------------------------------------------------------------

    def build(self, final: bool = True, settled: bool = False) -> pl.DataFrame:
        """Turn the events fed so far into trace rows.

        Parameters
        ----------
        final
            The log is complete (or will not grow): unfinished tasks run to
            the application's end and the driver timeline closes there. With
            ``False`` unfinished tasks get only their launch edge and the
            driver timeline stops at its last event.
        settled
            Add a column ``settled_ns``: the time of the event that fixed the
            row (a task's rows are fixed by its finish, a slot's gap by the
            next launch). Rows settled before the latest event time never
            change when more events arrive (for ``--follow``).

        Returns
        -------
        polars.DataFrame
            Trace rows sorted by ``(start_ns, src_worker)`` (not validated).
        """
        end_ms = self._end_ms()
        rows = _Rows()
        ordered = sorted(self.tasks.values(), key=lambda t: (t.launch_ms, t.order))
        self._counted = _counted_attempts(self.tasks.values())
        slots = self._assign_slots(ordered, final, end_ms)
        pending = self._pending_intervals(final, end_ms)
        for worker, tasks in slots.items():
            self._slot_rows(rows, worker, tasks, pending)
        seq_of = self._driver_rows(rows, ordered, final, end_ms)
        _fix_driver_seqs(rows, seq_of)
        stats = self.stats
        stats.tasks = len(self.tasks)
        stats.jobs = len(self.jobs)
        stats.stages = len({sid for sid, _ in self.stages})
        stats.slots = len(slots)
        stats.executors = len({t.executor_id for t in self.tasks.values()})
        frame = rows.frame().sort(
            "start_ns", "src_worker", "src_seq", "dst_seq", maintain_order=True
        )
        if not settled:
            frame = frame.drop("settled_ns")
        stats.rows = frame.height
        return frame

    def _end_ms(self) -> int:
        end = self.app_end_ms if self.app_end_ms is not None else self.max_ms
        return max(end, self.max_ms)

    def _cores(self, executor: str) -> int | None:
        cores = self.executor_cores.get(executor)
        if cores is None and (executor == "driver" or self.master):
            cores = master_cores(self.master)
        return cores

    def _assign_slots(
        self, ordered: list[TaskRecord], final: bool, end_ms: int
    ) -> dict[str, list[tuple[TaskRecord, int, int]]]:
        """Map each slot to its (task, end_ns, clipped_ns) in launch order."""
        free_at: dict[str, list[int]] = {}
        placed: dict[str, list[list[Any]]] = {}
        self.stats.clipped_tasks = self.stats.clipped_ns = 0
        for task in ordered:
            ex = task.executor_id
            busy = free_at.setdefault(ex, [])
            launch = task.launch_ms * MS
            slot = next((k for k, t in enumerate(busy) if t <= launch), None)
            if slot is None:
                cap = self._cores(ex)
                if cap is None or len(busy) < cap:
                    slot = len(busy)
                    busy.append(0)
                    placed[f"exec-{ex}/{slot}"] = []
                else:
                    slot = min(range(len(busy)), key=busy.__getitem__)
                    previous = placed[f"exec-{ex}/{slot}"][-1]
                    previous[2] = busy[slot] - launch
                    previous[1] = launch
            finish = task.finish_ms if task.finish_ms is not None else None
            end = (end_ms * MS if final else INF) if finish is None else finish * MS
            busy[slot] = end
            placed[f"exec-{ex}/{slot}"].append([task, end, 0])
        out: dict[str, list[tuple[TaskRecord, int, int]]] = {}
        for worker, items in placed.items():
            out[worker] = [(t, e, c) for t, e, c in items]
            for t, _, c in items:
                if c > 0 and t.finish_ms is not None:
                    self.stats.clipped_tasks += 1
                    self.stats.clipped_ns += c
        return out

    def _pending_intervals(self, final: bool, end_ms: int) -> list[tuple[int, int]]:
        """Merged times (ns) when some submitted stage has unlaunched tasks."""
        spans = []
        for stage in self.stages.values():
            if stage.submitted_ms is None:
                continue
            stop = stage.all_launched_ms
            if stop is None:
                stop = stage.completed_ms
            if stop is None:
                stop = end_ms if final else INF // MS
            spans.append((stage.submitted_ms * MS, stop * MS))
        merged: list[tuple[int, int]] = []
        for start, stop in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
            elif stop > start:
                merged.append((start, stop))
        return merged

    def _label(self, task: TaskRecord) -> tuple[str | None, int | None, int | None]:
        name = self.stage_names.get(task.stage_id)
        operator = (
            f"stage {task.stage_id}: {name}" if name else f"stage {task.stage_id}"
        )
        return operator, self.stage_job.get(task.stage_id), task.stage_id

    def _slot_rows(
        self,
        rows: _Rows,
        worker: str,
        tasks: list[tuple[TaskRecord, int, int]],
        pending: list[tuple[int, int]],
    ) -> None:
        seq = 0
        prev_end: int | None = None
        for task, end, clipped in tasks:
            launch = task.launch_ms * MS
            label = self._label(task)
            if prev_end is not None:
                seq = _gap_rows(rows, worker, prev_end, launch, seq, pending, label)
            ident = (
                task.task_id,
                task.partition,
                task.attempt,
                task.status,
                task.speculative,
                task.executor_id,
                clipped,
            )
            fixed = max(end, (task.finish_ms or 0) * MS)
            rows.add(
                "driver",
                worker,
                launch,
                launch,
                "control",
                -1,
                seq,
                ident,
                label,
                settled=fixed,
            )
            if end >= INF:  # unfinished task, log still growing: no rows yet
                prev_end = None
                seq += 1
                continue
            duration = (task.finish_ms or end // MS) * MS - launch
            pieces = clip_pieces(task_pieces(task, max(duration, 0)), end - launch)
            t = launch
            for activity, length in zip(PIECES, pieces, strict=True):
                if length <= 0:
                    continue
                work = (
                    (task.records, task.bytes, task.shuffle_write_bytes)
                    if activity == "processing" and task.task_id in self._counted
                    else (None, None, None)
                )
                rows.add(
                    worker,
                    worker,
                    t,
                    t + length,
                    activity,
                    seq,
                    seq + 1,
                    ident,
                    label,
                    work,
                    fixed,
                )
                t += length
                seq += 1
            if task.finish_ms is not None:
                finish = task.finish_ms * MS
                rows.add(
                    worker,
                    "driver",
                    end,
                    finish,
                    "control",
                    seq,
                    -1,
                    ident,
                    label,
                    settled=fixed,
                )
            prev_end = end

    def _driver_rows(
        self, rows: _Rows, ordered: list[TaskRecord], final: bool, end_ms: int
    ) -> dict[tuple[int, int], int]:
        events = self._driver_events(ordered, final, end_ms)
        seq_of: dict[tuple[int, int], int] = {}
        for i, ev in enumerate(events):
            if ev.task is not None:
                seq_of[(ev.task.task_id, ev.kind)] = i
        running: dict[int, int] = {}
        last_job: int | None = None
        for i in range(len(events) - 1):
            ev, nxt = events[i], events[i + 1]
            if ev.kind == _JOB_START and ev.job_id is not None:
                running[ev.job_id] = running.get(ev.job_id, 0) + 1
                last_job = ev.job_id
            elif ev.kind == _JOB_END and ev.job_id in running:
                running.pop(ev.job_id)
            if nxt.kind == _LAUNCH:
                activity = "scheduling"
            elif nxt.kind == _COMPLETION:
                activity = "waiting"
            else:
                activity = "scheduling" if running else "driver"
            job = (
                (last_job if last_job in running else max(running)) if running else None
            )
            rows.add(
                "driver",
                "driver",
                ev.time_ms * MS,
                nxt.time_ms * MS,
                activity,
                i,
                i + 1,
                job_stage=(None, job, None),
            )
        return seq_of

    def _driver_events(
        self, ordered: list[TaskRecord], final: bool, end_ms: int
    ) -> list[_DriverEvent]:
        events: list[_DriverEvent] = []
        for job, rec in self.jobs.items():
            if rec.start_ms is not None:
                events.append(
                    _DriverEvent(rec.start_ms, rec.start_order, _JOB_START, job_id=job)
                )
            if rec.end_ms is not None:
                events.append(
                    _DriverEvent(rec.end_ms, rec.end_order, _JOB_END, job_id=job)
                )
        for task in ordered:
            events.append(_DriverEvent(task.launch_ms, task.order, _LAUNCH, task))
            if task.finish_ms is not None:
                events.append(
                    _DriverEvent(task.finish_ms, task.end_order, _COMPLETION, task)
                )
        first = min((e.time_ms for e in events), default=end_ms)
        start = self.app_start_ms if self.app_start_ms is not None else first
        events.append(_DriverEvent(min(start, first), -1, _START))
        if final:
            events.append(_DriverEvent(end_ms, 1 << 62, _END))
        events.sort(key=lambda e: (e.time_ms, e.order, e.kind))
        return events


def _counted_attempts(tasks: Iterable[TaskRecord]) -> set[int]:
    """Task ids whose records count: each partition's first success per stage.

    >>> ok = [TaskRecord(t, 0, 0, 0, 0, a, "1", False, 0, 0, status="success",
    ...     end_order=o) for t, a, o in [(1, 0, 9), (2, 1, 5)]]
    >>> sorted(_counted_attempts(ok))
    [2]
    """
    first: dict[tuple[int, int], TaskRecord] = {}
    counted: set[int] = set()
    for task in tasks:
        if task.status != "success":
            continue
        if task.partition is None:
            counted.add(task.task_id)
            continue
        key = (task.stage_id, task.partition)
        best = first.get(key)
        if best is None or task.end_order < best.end_order:
            first[key] = task
    counted.update(t.task_id for t in first.values())
    return counted


def _fix_driver_seqs(rows: _Rows, seq_of: dict[tuple[int, int], int]) -> None:
    """Put the driver's seq on control rows (added with -1 as a placeholder)."""
    c = rows.cols
    for i, activity in enumerate(c["activity"]):
        if activity != "control":
            continue
        tid = c["task_id"][i]
        if c["src_worker"][i] == "driver":
            c["src_seq"][i] = seq_of[(tid, _LAUNCH)]
        else:
            c["dst_seq"][i] = seq_of[(tid, _COMPLETION)]


def _gap_rows(
    rows: _Rows,
    worker: str,
    start: int,
    stop: int,
    seq: int,
    pending: list[tuple[int, int]],
    label: tuple[str | None, int | None, int | None],
) -> int:
    """Rows for a slot's idle gap [start, stop]; returns the seq after it."""
    if stop <= start:
        rows.add(
            worker,
            worker,
            start,
            start,
            "scheduling",
            seq,
            seq + 1,
            job_stage=label,
            settled=stop,
        )
        return seq + 1
    cuts = [start]
    k = max(0, bisect.bisect_right(pending, (start, INF)) - 1)
    while k < len(pending) and pending[k][0] < stop:
        lo, hi = max(pending[k][0], start), min(pending[k][1], stop)
        if lo < hi:
            cuts.extend(x for x in (lo, hi) if x != cuts[-1])
        k += 1
    if cuts[-1] != stop:
        cuts.append(stop)
    for a, b in itertools.pairwise(cuts):
        if _covered(pending, a, b):
            rows.add(
                worker,
                worker,
                a,
                b,
                "scheduling",
                seq,
                seq + 1,
                job_stage=label,
                settled=stop,
            )
        else:
            rows.add(worker, worker, a, b, "waiting", seq, seq + 1, settled=stop)
        seq += 1
    return seq


def _covered(pending: list[tuple[int, int]], a: int, b: int) -> bool:
    k = bisect.bisect_right(pending, (a, INF)) - 1
    return k >= 0 and pending[k][0] <= a and b <= pending[k][1]
