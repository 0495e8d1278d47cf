"""The Spark -> PAG model (DESIGN §5): listener events in, trace rows out.

:class:`SparkModel` collects the events of one application (``feed``) into
records (:mod:`~sparktrail.tracer.app_records`), reading every field through
:mod:`~sparktrail.tracer.fields`, and turns them into trace rows
(``build``): each task on its slot (:mod:`~sparktrail.tracer.task_pieces`),
the slots' gaps and the driver (:mod:`~sparktrail.tracer.timelines`).
The rules those modules do not state:

* An attempt ends once: a second ``TaskEnd`` of the same task id (Spark's
  ``Resubmitted``, posted when the executor that holds a finished map
  task's output is lost and the partition is run again) changes nothing;
  the rerun is a new attempt. Nor is a late ``Success`` of an attempt
  already ended as ``ExecutorLostFailure`` (the lost executor's report
  arriving after all, Spark 1.x) a failure of its own.
* An event with a bad field (:class:`~sparktrail.tracer.fields.EventError`)
  changes nothing: a ``TaskEnd`` reads all its fields before it touches
  the task.
* Extra columns: ``attempt``, ``status`` (``success``, ``failed``,
  ``killed``, ``running``), ``speculative``, ``executor_id``,
  ``clipped_ns`` and Spark's ``executor_run_ns``, ``jvm_gc_ns`` and
  ``executor_cpu_ns`` (null without task metrics) on a task's rows;
  ``shuffle_write_bytes``, ``memory_bytes_spilled``,
  ``disk_bytes_spilled`` and a stateful task's ``state_rows``,
  ``state_updated_rows`` and ``state_memory_bytes`` on its ``processing`` row (see
  :mod:`~sparktrail.tracer.task_pieces`).
* Structured Streaming: the query events go to
  :class:`~sparktrail.tracer.streaming.StreamRecords` (the context's
  ``queries`` and ``batches``), a micro-batch's jobs carry its query, run
  and batch (``JobSpan``), and the driver's wait for a query's next
  trigger is ``trigger_wait`` (:mod:`~sparktrail.tracer.timelines`).

Assumptions
-----------
* Event timestamps are driver-clock milliseconds; ``Shuffle Write Time`` is
  in nanoseconds; "Getting Result Time" is the time the driver started
  fetching a result (0: not fetched).
* Events arrive in log order, which is roughly time order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import polars as pl

from sparktrail.pag.context import (
    AppContext,
    ExecutorLife,
    JobSpan,
    SqlExecution,
    StageInfo,
    local_cores,
)

from .app_records import (
    JobRecord,
    StageRecord,
    TaskRecord,
    job_properties,
    job_tags,
    metric_values,
    rdd_facts,
    state_values,
    task_status,
)
from .eventlog import DATABRICKS_METADATA
from .failure_records import FailureRecords
from .fields import (
    MS,
    dict_field,
    executor_id,
    int_field,
    list_field,
    opt_int,
    str_field,
    time_field,
)
from .sql_plans import SQL_END, SQL_PLAN_UPDATE, SQL_START, SqlPlans
from .streaming import STREAM_EVENTS, StreamRecords
from .task_pieces import Label, counted_attempts
from .timelines import (
    assign_slots,
    driver_rows,
    fix_driver_seqs,
    master_cores,
    pending_intervals,
    slot_rows,
)
from .trace_rows import TraceRows

__all__ = ["ImportStats", "SparkModel"]


@dataclass
class ImportStats:
    """What an import read and built (filled by ``import_eventlog``).

    ``clipped_tasks`` counts tasks whose end was clipped to the next launch
    on their slot (DESIGN §5), ``clipped_ns`` the time clipped in total.

    >>> ImportStats(app_id="app-1", tasks=3).summary()
    'app-1: 3 tasks, 0 stages, 0 jobs, 0 rows, 0 clipped tasks, 0 skipped lines'
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


#: Longest stage name or SQL description kept in the context.
MAX_NAME = 200


def _ns(ms: int | None) -> int | None:
    return None if ms is None else ms * MS


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
        self.properties: dict[str, str] = {}
        self.spark_version: str | None = None
        self.attempt_id: str | None = None
        self.executor_cores: dict[str, int] = {}
        self.executors: dict[str, ExecutorLife] = {}
        self.tasks: dict[int, TaskRecord] = {}
        self.stages: dict[tuple[int, int], StageRecord] = {}
        self.stage_names: dict[int, str] = {}
        self.stage_job: dict[int, int] = {}
        self.jobs: dict[int, JobRecord] = {}
        self.sql = SqlPlans()
        #: Each stage's operator label, fixed at its submission (sql_plans).
        self.stage_operator: dict[int, str] = {}
        self.max_ms = 0
        #: Events read after ``ApplicationEnd`` (the teardown's).
        self.after_end = 0
        self._counted: set[int] = set()  # tasks whose records count (build)
        self._order = 0
        self._handlers = {
            "SparkListenerApplicationStart": self._app_start,
            "SparkListenerApplicationEnd": self._app_end,
            "SparkListenerEnvironmentUpdate": self._environment,
            "SparkListenerExecutorAdded": self._executor_added,
            "SparkListenerExecutorRemoved": self._executor_removed,
            "SparkListenerLogStart": self._log_start,
            DATABRICKS_METADATA: self._log_start,
            "SparkListenerJobStart": self._job_start,
            "SparkListenerJobEnd": self._job_end,
            "SparkListenerStageSubmitted": self._stage_submitted,
            "SparkListenerStageCompleted": self._stage_completed,
            "SparkListenerTaskStart": self._task_start,
            "SparkListenerTaskEnd": self._task_end,
            SQL_START: self.sql.execution_start,
            SQL_PLAN_UPDATE: self.sql.execution_start,
            SQL_END: self.sql.execution_end,
        }
        self.streams = StreamRecords()
        self.failures = FailureRecords()
        self._handlers.update(dict.fromkeys(STREAM_EVENTS, self._stream_event))

    # -- events --------------------------------------------------------------

    def feed(self, event: dict[str, Any]) -> None:
        """Take one listener event (unused kinds are ignored)."""
        self._order += 2
        if self.app_end_ms is not None:
            self.after_end += 1
        handler = self._handlers.get(event.get("Event", ""))
        if handler is not None:
            handler(event)

    def _seen(self, ms: int | None) -> None:
        if ms is not None and ms > self.max_ms:
            self.max_ms = ms

    def _app_start(self, e: dict[str, Any]) -> None:
        start = time_field(e, "Timestamp")
        app_id, name = str_field(e, "App ID"), str_field(e, "App Name")
        self.attempt_id = str_field(e, "App Attempt ID") or self.attempt_id
        self.app_start_ms = start
        self.stats.app_id = app_id or self.stats.app_id
        self.stats.app_name = name
        self._seen(self.app_start_ms)

    def _app_end(self, e: dict[str, Any]) -> None:
        self.app_end_ms = time_field(e, "Timestamp")
        self._seen(self.app_end_ms)

    def _log_start(self, e: dict[str, Any]) -> None:
        self.spark_version = str_field(e, "Spark Version") or self.spark_version

    def _environment(self, e: dict[str, Any]) -> None:
        props = e.get("Spark Properties")
        if isinstance(props, list):  # very old logs: [[key, value], ...]
            props = {
                pair[0]: pair[1]
                for pair in props
                # Only string keys are kept below; any other (a list, from
                # a damaged log) could not even be a dict key.
                if isinstance(pair, list)
                and len(pair) == 2
                and isinstance(pair[0], str)
            }
        if not isinstance(props, dict):
            return
        for key, value in props.items():
            if isinstance(key, str) and isinstance(value, str | int | float | bool):
                self.properties[key] = str(value)
        self.master = str_field(self.properties, "spark.master") or self.master

    def _executor_added(self, e: dict[str, Any]) -> None:
        info = e.get("Executor Info")
        info = info if isinstance(info, dict) else {}
        cores = opt_int(info, "Total Cores")
        executor = executor_id(e)
        if cores is not None and cores > 0:
            self.executor_cores[executor] = cores
        added = time_field(e, "Timestamp")
        before = self.executors.get(executor)
        self.executors[executor] = ExecutorLife(
            executor,
            cores if cores and cores > 0 else None,
            str_field(info, "Host"),
            # A re-announced executor (attach) keeps its first time.
            before.added_ns if before and before.added_ns is not None else _ns(added),
        )

    def _executor_removed(self, e: dict[str, Any]) -> None:
        executor = executor_id(e)
        removed = time_field(e, "Timestamp")
        before = self.executors.get(executor, ExecutorLife(executor))
        self.executors[executor] = ExecutorLife(
            executor,
            before.cores,
            before.host,
            before.added_ns,
            _ns(removed),
            str_field(e, "Removed Reason"),
        )
        self._seen(removed)

    def _job_start(self, e: dict[str, Any]) -> None:
        job = opt_int(e, "Job ID")
        if job is None:
            return
        start = time_field(e, "Submission Time")
        infos = list_field(e, "Stage Infos") or []
        ids = list_field(e, "Stage IDs") or [
            s.get("Stage ID") for s in infos if isinstance(s, dict)
        ]
        properties = dict_field(e, "Properties")
        record = self.jobs.setdefault(job, JobRecord())
        record.start_ms, record.start_order = start, self._order
        tags = job_properties(e.get("Properties")) | job_tags(e.get("Properties"))
        for tag, value in tags.items():
            setattr(record, tag, value)
        record.stage_ids = tuple(s for s in ids if isinstance(s, int))
        self.sql.job_start(job, properties)
        self._seen(start)
        for sid in ids:
            if isinstance(sid, int):
                self.stage_job[sid] = job
        for info in infos:
            name = info.get("Stage Name") if isinstance(info, dict) else None
            if isinstance(name, str) and isinstance(info.get("Stage ID"), int):
                self.stage_names.setdefault(info["Stage ID"], name)

    def _job_end(self, e: dict[str, Any]) -> None:
        job = opt_int(e, "Job ID")
        end = time_field(e, "Completion Time")
        if job is not None:
            record = self.jobs.setdefault(job, JobRecord())
            record.end_ms, record.end_order = end, self._order
            self._seen(end)
            self.failures.job_end(e)

    def _stage(self, info: dict[str, Any]) -> tuple[int, StageRecord] | None:
        sid = opt_int(info, "Stage ID")
        if sid is None:
            return None
        attempt = int_field(info, "Stage Attempt ID")
        name = str_field(info, "Stage Name")
        tasks = opt_int(info, "Number of Tasks")
        stage = self.stages.setdefault((sid, attempt), StageRecord())
        stage.name = name or stage.name
        parents = list_field(info, "Parent IDs")
        if parents:
            stage.parents = tuple(p for p in parents if isinstance(p, int))
        rdds = list_field(info, "RDD Info")
        if rdds:
            facts = rdd_facts(rdds)
            stage.rdds = facts["rdds"] or stage.rdds
            stage.cached = stage.cached or facts["cached"]
            stage.partitions = facts["partitions"] or stage.partitions
        if stage.name:
            self.stage_names[sid] = stage.name
        stage.num_tasks = tasks or stage.num_tasks
        return sid, stage

    def _stage_submitted(self, e: dict[str, Any]) -> None:
        info = dict_field(e, "Stage Info") or {}
        submitted = time_field(info, "Submission Time")
        rdds = list_field(info, "RDD Info") or []
        found = self._stage(info)
        if found:
            found[1].submitted_ms = submitted
            sid = found[0]
            job, name = self.stage_job.get(sid), self.stage_names.get(sid)
            label = self.sql.stage_label(job, name, rdds)
            if label and sid not in self.stage_operator:  # first attempt's plan
                self.stage_operator[sid] = label

    def _stage_completed(self, e: dict[str, Any]) -> None:
        info = dict_field(e, "Stage Info") or {}
        completed = time_field(info, "Completion Time")
        found = self._stage(info)
        if found:
            found[1].completed_ms = completed
            found[1].failed = bool(info.get("Failure Reason"))
            self._seen(found[1].completed_ms)
            self.failures.stage_completed(e)

    def _task(self, e: dict[str, Any], info: dict[str, Any]) -> TaskRecord | None:
        tid, launch = opt_int(info, "Task ID"), time_field(info, "Launch Time")
        if tid is None or launch is None:
            return None
        task = self.tasks.get(tid)
        if task is None:
            index = opt_int(info, "Index")
            partition = opt_int(info, "Partition ID")
            task = TaskRecord(
                task_id=tid,
                stage_id=int_field(e, "Stage ID"),
                stage_attempt=int_field(e, "Stage Attempt ID"),
                index=index,
                partition=index if partition is None or partition < 0 else partition,
                attempt=opt_int(info, "Attempt"),
                executor_id=executor_id(info),
                speculative=bool(info.get("Speculative", False)),
                launch_ms=launch,
                order=self._order,
            )
            self.tasks[tid] = task
            self._seen(launch)
            self._launched(task)
        return task

    def _launched(self, task: TaskRecord) -> None:
        key = (task.stage_id, task.stage_attempt)
        stage = self.stages.setdefault(key, StageRecord())
        if stage.submitted_ms is None:
            stage.submitted_ms = task.launch_ms
        if task.index is not None and stage.all_launched_ms is None:
            stage.launched.add(task.index)
            if stage.num_tasks is not None and len(stage.launched) >= stage.num_tasks:
                stage.all_launched_ms = task.launch_ms

    def _task_start(self, e: dict[str, Any]) -> None:
        info = dict_field(e, "Task Info")
        if info is not None:
            self._task(e, info)

    def _task_end(self, e: dict[str, Any]) -> None:
        info = dict_field(e, "Task Info")
        if info is None:
            return
        tid = opt_int(info, "Task ID")
        known = self.tasks.get(tid) if tid is not None else None
        if known is not None and known.finish_ms is not None:
            reason = dict_field(e, "Task End Reason") or {}
            if reason.get("Reason") == "Resubmitted":
                self.failures.task_end(e, info)  # its output was lost
            return  # ended already (see the module docstring)
        # Read every field first: a bad one skips the event, changing nothing.
        finish = time_field(info, "Finish Time")
        getting = time_field(info, "Getting Result Time")
        metrics = dict_field(e, "Task Metrics")
        measured = metric_values(metrics) if metrics is not None else {}
        measured.update(state_values(info))
        task = self._task(e, info)
        if task is None:
            return
        if task.order == self._order:  # no TaskStart seen: launch just before
            task.order -= 1
        task.finish_ms = max(finish, task.launch_ms) if finish else task.launch_ms
        task.end_order = self._order
        task.status = task_status(e, info)
        task.getting_result_at = getting or 0
        for name, value in measured.items():
            setattr(task, name, value)
        self._seen(task.finish_ms)
        self.failures.task_end(e, info)

    def _stream_event(self, e: dict[str, Any]) -> None:
        self._seen(self.streams.feed(e, self.max_ms or None))

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
        rows = TraceRows()
        ordered = sorted(
            (self._ended_with_stage(t) for t in self.tasks.values()),
            key=lambda t: (t.launch_ms, t.order),
        )
        self._counted = counted_attempts(self.tasks.values())
        stats = self.stats
        slots, stats.clipped_tasks, stats.clipped_ns = assign_slots(
            ordered, final, end_ms, self._cores
        )
        pending = pending_intervals(self.stages.values(), final, end_ms)
        for worker, tasks in slots.items():
            slot_rows(rows, worker, tasks, pending, self._label, self._counted)
        streaming = bool(self.streams.runs)
        seq_of = driver_rows(
            rows,
            self.jobs,
            ordered,
            self.app_start_ms,
            final,
            end_ms,
            self.streams.waits() if streaming else None,
            self.streams.settled if streaming else None,
        )
        fix_driver_seqs(rows, seq_of)
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

    def _ended_with_stage(self, task: TaskRecord) -> TaskRecord:
        """``task``, or, when the log holds no end of it but its stage
        attempt completed without a failure, a copy that ends then: a
        speculative copy whose ``TaskEnd`` a log (or a relay of its events)
        left out ran no longer than its stage. Its status stays what the log
        says (no end: ``running``); a failed attempt's tasks may run on as
        zombies, so they keep running. A ``TaskEnd`` that arrives later
        still ends the task itself."""
        if task.finish_ms is not None:
            return task
        stage = self.stages.get((task.stage_id, task.stage_attempt))
        if stage is None or stage.completed_ms is None or stage.failed:
            return task
        return dataclasses.replace(
            task, finish_ms=max(task.launch_ms, stage.completed_ms)
        )

    def context(self) -> AppContext:
        """What the application ran with (DESIGN §5), as far as the log says.

        In local mode the one executor is the driver with the master's
        cores (Spark may not announce it in old logs).
        """
        executors = dict(self.executors)
        cores = local_cores(self.master)
        if cores and "driver" not in executors:
            start = _ns(self.app_start_ms)
            executors["driver"] = ExecutorLife("driver", cores, added_ns=start)
        return AppContext(
            app_id=self.stats.app_id,
            app_name=self.stats.app_name,
            attempt_id=self.attempt_id,
            spark_version=self.spark_version,
            master=self.master,
            deploy_mode=self.properties.get("spark.submit.deployMode"),
            start_ns=_ns(self.app_start_ms),
            end_ns=_ns(self.app_end_ms),
            properties=dict(self.properties),
            executors=tuple(executors.values()),
            jobs=tuple(
                JobSpan(
                    job,
                    _ns(rec.start_ms),
                    _ns(rec.end_ms),
                    rec.query_id,
                    rec.run_id,
                    rec.batch_id,
                    rec.description,
                    rec.group,
                    rec.call_site,
                    rec.sql_id,
                    _ns(rec.batch_time_ms),
                    rec.stage_ids,
                )
                for job, rec in sorted(self.jobs.items())
            ),
            queries=self.streams.queries(),
            batches=tuple(self.streams.batches),
            failures=self.failures.failures(),
            failure_counts=dict(self.failures.counts),
            stages=self._stage_infos(),
            sql=self._sql_executions(),
        )

    def _stage_infos(self) -> tuple[StageInfo, ...]:
        """Each stage as its first attempt declared it, with its attempts."""
        firsts: dict[int, StageRecord] = {}
        attempts: dict[int, int] = {}
        last: dict[int, StageRecord] = {}
        for (sid, _attempt), record in sorted(self.stages.items()):
            firsts.setdefault(sid, record)
            attempts[sid] = attempts.get(sid, 0) + 1
            last[sid] = record
        return tuple(
            StageInfo(
                sid,
                (rec.name or "")[:MAX_NAME] or None,
                rec.num_tasks,
                self.stage_job.get(sid),
                attempts[sid],
                rec.parents,
                rec.rdds,
                rec.cached,
                rec.partitions,
                _ns(rec.submitted_ms),
                _ns(last[sid].completed_ms),
            )
            for sid, rec in sorted(firsts.items())
        )

    def _sql_executions(self) -> tuple[SqlExecution, ...]:
        return tuple(
            SqlExecution(
                execution,
                (self.sql.descriptions.get(execution) or "")[:MAX_NAME] or None,
                _ns(self.sql.starts.get(execution)),
                _ns(self.sql.ends.get(execution)),
                dict(self.sql.modified.get(execution, {})),
            )
            for execution in sorted(self.sql.starts)
        )

    def _end_ms(self) -> int:
        end = self.app_end_ms if self.app_end_ms is not None else self.max_ms
        return max(end, self.max_ms)

    def _cores(self, executor: str) -> int | None:
        cores = self.executor_cores.get(executor)
        if cores is None and (executor == "driver" or self.master):
            cores = master_cores(self.master)
        return cores

    def _label(self, task: TaskRecord) -> Label:
        # The stable operator (DESIGN §8); the stage id is its drill-down.
        sid = task.stage_id
        operator = self.stage_operator.get(sid) or self.stage_names.get(sid)
        return operator or f"stage {sid}", self.stage_job.get(sid), sid
