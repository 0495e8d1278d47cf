"""``failures`` hints: what failed, why, and what to do about it.

The application's context carries its failures (:class:`~sparktrail.pag.
context.Failure`: failed task attempts with their end reason, failed
stages and jobs) and its executors' removal reasons. The rule gives one
hint per cause group:

* ``task_error``: a stage's task attempts that raised an exception (or
  lost their result); the exception, its message, the user code's frame
  (``call_site``) and the executors. A user-code exception is fixed in
  the code, not by a Spark setting;
* ``out_of_memory``: any failure whose text says the JVM or the
  container ran out of memory (``OutOfMemoryError``, "exceeding memory
  limits", ``OOMKilled``, exit code 52, 137, -103 or -104): more memory
  per task (heap, overhead) and more partitions;
* ``executor_lost``: executors that died (``ExecutorLostFailure``, or
  removed for a reason other than a requested release), with their
  hosts, exit code and what it means, and the tasks they took down
  (failed attempts, and finished map outputs lost with them: Spark's
  ``Resubmitted``);
* ``fetch_failed``: a stage that could not fetch shuffle output (its
  shuffle id and the executor that held it); after an executor loss the
  shuffle files died with it: the external shuffle service or
  decommissioning keep them;
* ``job_failed``: a failed job that no hint above explains (e.g. one
  cancelled when the application stopped).

Severity: a group that failed a job (a stage of a failed job) is ``high``
whatever time it cost, with no predicted saving (the run did not finish
its work). Otherwise the attempts were retried and the run went on: the
saving is the failed attempts' time on the critical path (their CP share x
the wall time; the retries and any rerun of lost map outputs are not
counted, which the evidence says), and severity follows from its share
like any hint's, ``info`` under ``min_saving_s``. Both are decided where
every hint's severity is, ``hint.rated``; the ranking keeps this saving
(``ranking._OWN_SAVING``).

Assumptions
-----------
* ``TaskKilled`` attempts are not failures here: Spark kills the losing
  speculative copy ("another attempt succeeded") and the running tasks of
  an aborted stage (a consequence, counted in the evidence).
* The context keeps at most ``MAX_FAILURES_PER_KIND`` records of a kind;
  ``failure_counts`` counts them all, and a truncated group says so.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import polars as pl

from sparktrail.pag.context import AppContext, ExecutorLife, Failure
from sparktrail.units import duration

from ..operator import stage_label
from .capacity import duration_ns
from .hint import Hint
from .inputs import Context
from .memory_pressure import memory_of
from .platform import cluster_manager, spark_at_least
from .remedies import remedies, remedy_text
from .wording import settings_text

__all__ = ["SHUT_DOWN", "exit_code", "exit_meaning", "failures", "is_oom"]

#: What Spark says of a job or stage it cancelled because the application
#: stopped (``SparkContext.stop``) while it ran.
SHUT_DOWN = "SparkContext was shut down"

#: Task end reasons of an attempt that failed on its own (not its executor).
TASK_ERRORS = frozenset(
    {"ExceptionFailure", "TaskResultLost", "ResultLost", "UnknownReason"}
)
#: Texts that say the JVM or its container ran out of memory.
_OOM = re.compile(
    r"OutOfMemory|Java heap space|GC overhead limit exceeded|"
    r"exceeding (?:physical |virtual )?memory limits?|OOMKilled|"
    r"Container killed on request\. Exit code is 137",
    re.IGNORECASE,
)
_EXIT = re.compile(r"(?:exit (?:status|code)(?: is)?[:=]?\s*|exitCode=)(-?\d+)", re.I)
#: Exit codes of an executor that ran out of memory.
OOM_EXITS = frozenset({52, 137, -103, -104})
#: What an executor's exit code says (Spark's ExecutorExitCode and
#: SparkExitCode, signals, YARN's ContainerExitStatus).
EXIT_MEANING = {
    1: "the executor's JVM exited with an error (see its stderr)",
    50: "an uncaught exception in the executor (Spark's exit code 50)",
    52: "the executor's JVM ran out of memory (Spark's exit code 52)",
    53: "the executor could not create its local directories (exit code 53)",
    56: "the executor could not send heartbeats to the driver (Spark's exit code 56)",
    134: "the JVM aborted (SIGABRT, often a native crash)",
    137: "the container was killed (SIGKILL: usually its memory limit)",
    143: "the container was stopped (SIGTERM: its memory limit or preemption)",
    -100: "YARN released the container (its node was lost or decommissioned)",
    -102: "YARN preempted the container",
    -103: "YARN killed the container for exceeding its virtual memory",
    -104: "YARN killed the container for exceeding its physical memory",
}
#: Removal reasons of an executor released on purpose (not a failure).
_RELEASED = re.compile(
    r"explicit termination request|killed by driver|decommission|idle timeout",
    re.IGNORECASE,
)
#: Items listed in a hint's evidence.
MAX_LISTED = 10


def exit_code(text: str | None) -> int | None:
    """The exit code a failure text states, if any.

    >>> exit_code("Container marked as failed: ... Exit status: 56. Diagnostics")
    56
    >>> exit_code("Container killed on request. Exit code is 143"), exit_code("x")
    (143, None)
    """
    match = _EXIT.search(text or "")
    return int(match.group(1)) if match else None


def exit_meaning(code: int | None) -> str | None:
    """What an executor's exit code means (``None``: not known).

    >>> exit_meaning(56)
    "the executor could not send heartbeats to the driver (Spark's exit code 56)"
    """
    return None if code is None else EXIT_MEANING.get(code)


def is_oom(text: str | None) -> bool:
    """Whether a failure text says memory ran out.

    >>> is_oom("java.lang.OutOfMemoryError: Java heap space"), is_oom("bad")
    (True, False)
    >>> is_oom("Container marked as failed ... Exit status: 137.")
    True
    """
    return bool(text) and (
        _OOM.search(text or "") is not None or exit_code(text) in OOM_EXITS
    )


def _attempts(n: int) -> str:
    return "1 task attempt" if n == 1 else f"{n} task attempts"


def _ending(run: _Run, job: Failure) -> str:
    """How the application ended after a failed job, if it was the last."""
    if job.job_id is None or job.job_id != run.last_job:
        return ""
    if run.app.end_ns is None:
        return "; it was the last job and the log has no application end"
    return "; it was the application's last job"


def _failure_text(f: Failure) -> str:
    return " ".join(t for t in (f.exception, f.message) if t)


def _lost_executors(app: AppContext) -> dict[str, ExecutorLife]:
    """Executors removed for a reason other than a requested release."""
    return {
        e.executor_id: e
        for e in app.executors
        # A removal whose time was set aside (an implausible timestamp) is
        # no death the run saw.
        if e.removed_reason
        and e.removed_ns is not None
        and not _RELEASED.search(e.removed_reason)
    }


def _top(values: Iterable[Any]) -> Any:
    counted = Counter(v for v in values if v is not None)
    return counted.most_common(1)[0][0] if counted else None


def _listed(values: Iterable[Any]) -> list[Any]:
    seen = list(dict.fromkeys(v for v in values if v is not None))
    return sorted(seen, key=str)[:MAX_LISTED]


class _Run:
    """What every group's hint needs: costs, jobs, settings."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.app = before_the_end(ctx.app)
        tasks = ctx.tasks
        cols = [c for c in ("task_id", "cp_share", "duration_ns") if c in tasks.columns]
        self.cost: dict[int, tuple[float, float]] = {}
        if {"task_id", "cp_share", "duration_ns"} <= set(cols):
            ids = {f.task_id for f in self.app.failures if f.task_id is not None}
            rows = tasks.select(cols).filter(pl.col("task_id").is_in(list(ids)))
            self.cost = {
                int(t): (float(cp or 0.0), float(d or 0.0))
                for t, cp, d in rows.iter_rows()
            }
        self.stage_job: dict[int, int] = {}
        if {"stage_id", "job_id"} <= set(tasks.columns):
            pairs = tasks.select("stage_id", "job_id").drop_nulls().unique()
            self.stage_job = {int(s): int(j) for s, j in pairs.iter_rows()}
        jobs = [f for f in self.app.failures if f.kind == "JobFailed"]
        self.failed_jobs = {f.job_id: f for f in jobs if f.job_id is not None}
        self.aborted = {f.stage_id: f for f in jobs if f.stage_id is not None}
        job_ids = [j.job_id for j in self.app.jobs]
        self.last_job = max(job_ids) if job_ids else None

    def failed_job(self, stages: Iterable[int | None]) -> Failure | None:
        """The failed job a stage of ``stages`` aborted or ran in."""
        for stage in stages:
            if stage in self.aborted:
                return self.aborted[stage]
        for stage in stages:
            job = self.stage_job.get(stage) if stage is not None else None
            if job in self.failed_jobs:
                return self.failed_jobs[job]
        return None

    def torn_down(self, job: Failure) -> bool:
        """Whether ``job`` is a streaming application's batch cut off as it
        stopped: its last jobs cancelled by the shutdown, with no task
        failure to explain it (a stream stops between or inside a batch)."""
        if self.ctx.facts.kind not in ("dstream", "structured_streaming"):
            return False
        if SHUT_DOWN not in (job.message or ""):
            return False
        others = [
            f
            for f in self.app.failures
            if f.kind not in ("JobFailed", "TaskKilled")
            and SHUT_DOWN not in (f.message or "")
        ]
        return not others

    def where(self, stage: int | None) -> str:
        label = None if stage is None else self.ctx.stage_labels.get(stage)
        return stage_label(stage, label)

    def hint(
        self,
        cause: str,
        found: list[Failure],
        evidence: dict[str, Any],
        action: str,
        stage: int | None,
        executor: str | None,
    ) -> Hint:
        """The group's hint, its severity and saving (module docstring)."""
        ids = {f.task_id for f in found if f.task_id is not None}
        cp_share = sum(self.cost.get(t, (0.0, 0.0))[0] for t in ids)
        core_ns = sum(self.cost.get(t, (0.0, 0.0))[1] for t in ids)
        stages = [f.stage_id for f in found] + [stage]
        own = [f for f in found if f.kind == "JobFailed"]
        job = own[0] if own else self.failed_job(stages)
        if job is not None and (cancelled(job) or self.torn_down(job)):
            job = None  # a stop, not a failure: rated by what it cost
        evidence = {"cause": cause, **evidence, "failed_core_ns": core_ns}
        counts = self.app.failure_counts
        kinds = {f.kind for f in found}
        if any(
            counts.get(k, 0) > sum(f.kind == k for f in self.app.failures)
            for k in kinds
        ):
            evidence["truncated"] = (
                "the context keeps the first failures of each kind: "
                + ", ".join(f"{k} {counts.get(k, 0)}" for k in sorted(kinds))
                + " in all"
            )
        if self.app.end_ns is None:
            evidence["application_end"] = False
        if job is not None:
            evidence |= {
                "failed_job": job.job_id,
                "job_message": job.message,
                "last_job": job.job_id is not None and job.job_id == self.last_job,
            }
            return Hint(
                "failures",
                cp_share,
                evidence,
                action,
                stage_id=stage,
                executor_id=executor,
            )
        wall = self.ctx.wall_ns
        saving = cp_share * wall
        share = saving / wall if wall > 0 else None
        evidence["saving"] = (
            "the failed attempts' time on the critical path; their retries "
            "and any rerun of lost map outputs are not counted"
        )
        return Hint(
            "failures",
            cp_share,
            evidence,
            action,
            stage_id=stage,
            executor_id=executor,
            predicted_saving_ns=saving,
            saving_share=share,
        )


#: Failures this long after ``ApplicationEnd`` are the teardown's: the
#: program had stopped (a file system closed under a last task, say).
TEARDOWN_NS = 0


def before_the_end(app: AppContext) -> AppContext:
    """``app`` without the task failures that ended after the application
    did (its teardown's: a file system closed under a last task, not the
    program's error); a job or stage cut off then stays (the stop is its
    cause). Unchanged without an end.

    >>> from sparktrail.pag.context import Failure
    >>> app = AppContext(end_ns=100, failures=(Failure("ExceptionFailure",
    ...     time_ns=90), Failure("ExceptionFailure", time_ns=170)))
    >>> [f.time_ns for f in before_the_end(app).failures]
    [90]
    """
    end = app.end_ns
    if end is None:
        return app
    kept = tuple(
        f
        for f in app.failures
        if f.kind in ("JobFailed", "StageFailed")
        or f.time_ns is None
        or f.time_ns <= end + TEARDOWN_NS
    )
    return app if len(kept) == len(app.failures) else replace(app, failures=kept)


def failures(ctx: Context) -> list[Hint]:
    """``failures``: one hint per root cause (module docstring)."""
    app = before_the_end(ctx.app)
    lost = _lost_executors(app)
    if not app.failures and not lost:
        return []
    run = _Run(ctx)
    return _folded(run, _hints(ctx, run, lost))


def _hints(ctx: Context, run: _Run, lost: dict[str, ExecutorLife]) -> list[Hint]:
    """Every cause group's hint, before consequences are folded in."""
    app = run.app
    oom = [
        f for f in app.failures if f.kind != "JobFailed" and is_oom(_failure_text(f))
    ]
    oom_lost = {e for e, life in lost.items() if is_oom(life.removed_reason)}
    hints = []
    if oom or oom_lost:
        hints.append(_oom_hint(run, oom, oom_lost))
    seen_oom = {id(f) for f in oom}
    errors: dict[int | None, list[Failure]] = {}
    for f in app.failures:
        if f.kind in TASK_ERRORS and id(f) not in seen_oom:
            errors.setdefault(f.stage_id, []).append(f)
    hints += [_task_error_hint(run, stage, found) for stage, found in errors.items()]
    executor_lost = [
        f
        for f in app.failures
        if f.kind == "ExecutorLostFailure" and id(f) not in seen_oom
    ]
    dead = {e: life for e, life in lost.items() if e not in oom_lost}
    fetch: dict[int | None, list[Failure]] = {}
    for f in app.failures:
        if f.kind == "FetchFailed":
            fetch.setdefault(f.stage_id, []).append(f)
    # Executors lost as the context shut down under a running job, and the
    # fetches that failed on them, are that shutdown: one finding, the job's.
    shutdown = _shutdown_losses(run, dead)
    if shutdown:
        fetch = {
            stage: found
            for stage, found in fetch.items()
            if not {f.source_executor for f in found} <= shutdown
        }
    elif executor_lost or dead:
        hints.append(_lost_hint(run, executor_lost, dead))
    hints += [_fetch_hint(run, stage, found, lost) for stage, found in fetch.items()]
    # A job aborted by a stage failure is told by that stage's hint (the
    # stage or any stage its hint names: an OOM's stages).
    hinted = {h.stage_id for h in hints if h.stage_id is not None}
    for h in hints:
        hinted.update(s for s in h.evidence.get("stages") or () if isinstance(s, int))
    for job in run.failed_jobs.values():
        if job.stage_id is None or job.stage_id not in hinted:
            hints.append(_job_hint(run, job, shutdown))
    return hints


#: A job cancelled by the context's shutdown this soon after another job
#: failed went down with it: a consequence of that failure, not a cause.
CONSEQUENCE_NS = 10_000_000_000


def _folded(run: _Run, hints: list[Hint]) -> list[Hint]:
    """``hints`` with the jobs that a failure took down folded into its
    hint (one root cause, one hint): the jobs cancelled because the
    SparkContext was shut down within :data:`CONSEQUENCE_NS` after
    another job failed."""
    roots = [
        h
        for h in hints
        if h.evidence.get("failed_job") is not None and not _shut_down(h)
    ]
    if not roots:
        return hints
    failed_at = {
        h.evidence["failed_job"]: run.failed_jobs[h.evidence["failed_job"]].time_ns
        for h in roots
        if h.evidence["failed_job"] in run.failed_jobs
    }
    folded: dict[int, list[str]] = {}
    kept = []
    for h in hints:
        root = _root_of(run, h, failed_at) if _shut_down(h) else None
        if root is None:
            kept.append(h)
            continue
        job = run.failed_jobs.get(int(h.evidence.get("job_id") or -1))
        gap = (job.time_ns or 0) - (failed_at[root] or 0) if job else 0
        folded.setdefault(root, []).append(
            f"job {h.evidence.get('job_id')} cancelled {duration(gap)} later"
        )
    out = []
    for h in kept:
        extra = folded.get(int(h.evidence["failed_job"])) if h in roots else None
        if extra:
            h = replace(
                h,
                evidence=h.evidence | {"consequences": extra},
                action=f"{h.action}; the shutdown that followed cancelled "
                f"{len(extra)} more job(s) ({', '.join(extra[:4])}): the same failure",
            )
        out.append(h)
    return out


def _shut_down(hint: Hint) -> bool:
    """Whether a job hint is of a job cancelled as the context shut down."""
    return hint.evidence.get("cause") == "job_failed" and SHUT_DOWN in (
        hint.evidence.get("message") or ""
    )


def _root_of(run: _Run, hint: Hint, failed_at: dict[int, int | None]) -> int | None:
    """The failed job whose failure this shutdown's cancelled job followed
    within :data:`CONSEQUENCE_NS` (``None``: none did)."""
    job = run.failed_jobs.get(int(hint.evidence.get("job_id") or -1))
    if job is None or job.time_ns is None:
        return None
    before = [
        (at, root)
        for root, at in failed_at.items()
        if at is not None
        and root != job.job_id
        and 0 <= job.time_ns - at <= CONSEQUENCE_NS
    ]
    return max(before)[1] if before else None


#: Executors removed this close to the application's end went with it.
SHUTDOWN_NS = 2_000_000_000


def _shutdown_losses(run: _Run, dead: dict[str, ExecutorLife]) -> set[str]:
    """The lost executors, when every one of them was removed within
    :data:`SHUTDOWN_NS` of the end of an application whose context shut
    down under a running job (empty otherwise)."""
    end = run.app.end_ns
    stopped = any(SHUT_DOWN in (job.message or "") for job in run.failed_jobs.values())
    if not dead or end is None or not stopped:
        return set()
    if all(
        life.removed_ns is not None and end - life.removed_ns <= SHUTDOWN_NS
        for life in dead.values()
    ):
        return set(dead)
    return set()


def _oom_hint(run: _Run, found: list[Failure], lost: set[str]) -> Hint:
    app = run.app
    stages = _listed(f.stage_id for f in found)
    executors = _listed([f.executor_id for f in found] + sorted(lost))
    first = found[0] if found else None
    reason = first.message if first else app_reason(app, sorted(lost)[0])
    codes = _listed(
        [exit_code(_failure_text(f)) for f in found]
        + [exit_code(app_reason(app, e)) for e in lost]
    )
    stage = _top(f.stage_id for f in found)
    memory = memory_of(run.ctx)
    container = any(c in (137, 143, -104, -103) for c in codes) or any(
        "memory limit" in (f.message or "") for f in found
    )
    gpu = any("GPU" in _failure_text(f) for f in found)
    if gpu:
        fixes = _gpu_fixes(run, stage)
    else:
        fixes = [memory.heap_action()]
        if container and not app.is_local:
            fixes.insert(
                0,
                "raise spark.executor.memoryOverhead (the container's memory beyond "
                "the heap: Python workers, off-heap, native buffers)",
            )
        fixes.append(_smaller_tasks(run, stage))
    evidence = {
        "attempts": len(found),
        "stages": stages,
        "executors": executors,
        "executors_lost": sorted(lost)[:MAX_LISTED],
        "exit_codes": codes,
        "message": reason,
        **memory.evidence(),
    }
    action = (
        f"memory ran out{' in ' + run.where(stage) if stage is not None else ''}"
        f" ({reason}; executors {', '.join(map(str, executors)) or '?'}): "
        + "; ".join(fixes)
    )
    return run.hint("out_of_memory", found, evidence, action, stage, _top(executors))


def _setting_float(app: AppContext, key: str, default: float) -> float:
    try:
        return float(app.setting(key) or default)
    except ValueError:
        return default


#: The RAPIDS plugin's defaults: the share of a GPU's memory it pools, and
#: the tasks that share a GPU.
GPU_ALLOC_FRACTION, GPU_CONCURRENT_TASKS = 1.0, 2


def _gpu_fixes(run: _Run, stage: int | None) -> list[str]:
    """The remedies of a GPU's memory running out (:mod:`.remedies`): the
    plugin's pool, the tasks sharing a GPU, the input each task reads; the
    JVM heap is not the GPU's memory."""
    app, facts = run.app, run.ctx.facts
    alloc = _setting_float(
        app, "spark.rapids.memory.gpu.allocFraction", GPU_ALLOC_FRACTION
    )
    tasks = int(
        _setting_float(app, "spark.rapids.sql.concurrentGpuTasks", GPU_CONCURRENT_TASKS)
    )
    split = facts.scan_cap(stage)
    found = remedies(
        "gpu_memory",
        facts,
        engine="gpu",
        stage_id=stage,
        alloc=f"{min(0.9, max(0.5, alloc * 4)):g}",
        alloc_now=f"{alloc:g}",
        gpu_alloc_low=alloc < 0.5,
        gpu_tasks=max(1, tasks // 2),
        gpu_tasks_now=tasks,
        gpu_concurrency=tasks > 1,
        split="512m",
        split_now=f"{split >> 20}MB",
        large_splits=split > 1 << 30,
    )
    return [
        remedy_text(
            found,
            "give each task less to hold on the GPU (fewer concurrent GPU tasks, "
            "smaller input splits); the executor's JVM heap is not the GPU's "
            "memory",
        )
    ]


def _smaller_tasks(run: _Run, stage: int | None) -> str:
    """How to give the failing stage's tasks less each: by what it reads."""
    facts = run.ctx.facts
    reads = facts.reads(stage)
    where = run.where(stage)
    if reads == "input":
        return (
            f"split {where} into smaller tasks: it scans its input, so lower "
            "spark.sql.files.maxPartitionBytes (or the input's minPartitions)"
        )
    if reads == "shuffle":
        return (
            f"split {where} into more, smaller partitions (spark.sql.shuffle."
            "partitions, or the shuffle's numPartitions)"
        )
    return (
        f"split {where} into more, smaller partitions "
        "(spark.sql.shuffle.partitions, or repartition before it)"
    )


def app_reason(app: AppContext, executor: str) -> str | None:
    """An executor's removal reason, its first line."""
    for life in app.executors:
        if life.executor_id == executor and life.removed_reason:
            return life.removed_reason.splitlines()[0][:300]
    return None


def _task_error_hint(run: _Run, stage: int | None, found: list[Failure]) -> Hint:
    exception = _top(f.exception or f.kind for f in found)
    message = _top(f.message for f in found)
    site = _top(f.call_site for f in found)
    partitions = {f.partition for f in found if f.partition is not None}
    executors = _listed(f.executor_id for f in found)
    retried = max((f.attempt or 0) for f in found) + 1
    job = run.failed_job([stage])
    evidence = {
        "attempts": len(found),
        "partitions": len(partitions),
        "max_attempts_of_a_task": retried,
        "exception": exception,
        "message": message,
        "call_site": site,
        "executors": executors,
        "hosts": _listed(f.host for f in found),
    }
    raised = f"{exception}: {message}" if message else str(exception)
    root = _top(f.root_cause for f in found)
    if root and root not in raised:
        evidence["root_cause"] = root
        raised = f"{root} (raised inside {raised})"
    at = f" at {site}" if site else ""
    many = f"{_attempts(len(found))} of {run.where(stage)} failed"
    if job is not None:
        action = (
            f"{many} and job {job.job_id} was aborted ({job.message}"
            f"{_ending(run, job)}): fix "
            f"{raised}{at}; the exception is the program's, retries or a Spark "
            "setting will not make it pass"
        )
    elif (elsewhere := _passed_elsewhere(run, stage, found)) is not None:
        evidence["retries_passed_on"] = elsewhere
        exclude = settings_text(run.app, {_exclusion_setting(run.app): "true"})
        action = (
            f"{many} ({len(partitions)} partitions), all on executor "
            f"{', '.join(map(str, executors))}, and the same partitions passed on "
            f"executor {', '.join(elsewhere)}: {raised}{at}; the executor or its "
            "host fails them, not the program: look at its host's logs"
            + (f", and keep tasks off it ({exclude})" if exclude else "")
        )
    else:
        action = (
            f"{many} ({len(partitions)} partitions, executors "
            f"{', '.join(map(str, executors))}) and passed on retry: {raised}{at}; "
            "a transient error in the program (make the call it retries "
            "robust) or on those executors' hosts (look at their logs)"
        )
    return run.hint("task_error", found, evidence, action, stage, _top(executors))


def _passed_elsewhere(
    run: _Run, stage: int | None, found: list[Failure]
) -> list[str] | None:
    """The executors the failed partitions' retries passed on, when every
    failure stayed on at most two executors that none of them is (a bad
    executor or host, not a bad partition); ``None`` otherwise."""
    failed_on = {f.executor_id for f in found if f.executor_id is not None}
    partitions = {f.partition for f in found if f.partition is not None}
    if stage is None or not failed_on or len(failed_on) > 2 or not partitions:
        return None
    tasks = run.ctx.tasks
    if "status" not in tasks.columns:
        return None
    passed = tasks.filter(
        (pl.col("stage_id") == stage)
        & pl.col("partition").is_in(list(partitions))
        & (pl.col("status").fill_null("success") == "success")
    )["executor"].drop_nulls()
    others = sorted(set(passed.to_list()) - failed_on, key=str)
    if not others or set(passed.to_list()) & failed_on:
        return None
    return others


def _exclusion_setting(app: AppContext) -> str:
    """Spark's switch that keeps tasks off failing executors (renamed in 3.1)."""
    if spark_at_least(app, 3, 1) is False:
        return "spark.blacklist.enabled"
    return "spark.excludeOnFailure.enabled"


def _lost_hint(run: _Run, found: list[Failure], dead: dict[str, ExecutorLife]) -> Hint:
    app = run.app
    ids = sorted({*dead, *(f.executor_id for f in found if f.executor_id)}, key=str)
    lives = {e.executor_id: e for e in app.executors}
    hosts = _listed(
        [lives[e].host for e in ids if e in lives] + [f.host for f in found]
    )
    reasons = {e: app_reason(app, e) for e in ids}
    for f in found:
        if f.executor_id and not reasons.get(f.executor_id):
            reasons[f.executor_id] = f.message
    codes = Counter(exit_code(r) for r in reasons.values() if exit_code(r) is not None)
    code = codes.most_common(1)[0][0] if codes else None
    resubmitted = [
        f for f in app.failures if f.kind == "Resubmitted" and f.executor_id in ids
    ]
    everyone = [e for e in app.executors if e.executor_id != "driver"]
    all_died = bool(everyone) and all(e.executor_id in ids for e in everyone)
    stage = _top(f.stage_id for f in found)
    reason = _top(reasons.values())
    evidence = {
        "executors_lost": ids[:MAX_LISTED],
        "executors_lost_count": len(ids),
        "executors": len(everyone),
        "all_executors_lost": all_died,
        "hosts": hosts,
        "reason": reason,
        "exit_code": code,
        "exit_meaning": exit_meaning(code),
        "exit_caused_by_app": _top(f.by_app for f in found),
        "failed_attempts": len(found),
        "map_outputs_lost": len(resubmitted),
        "stages": _listed(f.stage_id for f in found),
    }
    what = (
        f"{len(ids)} of {len(everyone)} executors"
        if everyone
        else f"{len(ids)} executors"
    )
    took = f"{_attempts(len(found)).replace('task', 'running task')}"
    if resubmitted:
        took += f" and {len(resubmitted)} finished map outputs"
    head = (
        f"{what} died ({', '.join(ids[:MAX_LISTED])} on "
        f"{', '.join(hosts) or '?'}; {reason}), taking down {took}"
    )
    action = f"{head}: {_lost_fix(run.app, code, reason)}"
    return run.hint(
        "executor_lost",
        found + resubmitted,
        evidence,
        action,
        stage,
        ids[0] if ids else None,
    )


#: Spark's defaults: an executor exits (code 56) after this many heartbeats
#: failed in a row, sent this often.
HEARTBEAT_MAX_FAILURES = 60
HEARTBEAT_INTERVAL_MS = 10_000.0


#: Where an executor's own last words are, by cluster manager.
_EXECUTOR_LOGS = {
    "yarn": "the containers' stderr (yarn logs -applicationId <app id>)",
    "kubernetes": "the executor pods' logs and status (kubectl logs, "
    "kubectl describe pod: OOMKilled, Evicted)",
    "standalone": "the workers' logs on those hosts (the Worker's own log, "
    "and work/<app id>/<executor id>/stderr)",
}


def _where_to_read(app: AppContext, reason: str | None) -> str:
    """Where to read why executors died, on the run's cluster manager."""
    manager = cluster_manager(app) or ""
    logs = _EXECUTOR_LOGS.get(manager, "the lost executors' stderr on their hosts")
    if manager == "standalone" and reason and "worker lost" in reason.lower():
        # The master lost the Worker daemon: the host or the Worker went.
        return (
            "the standalone Worker of each host went away with its executors: "
            f"read {logs}"
        )
    return f"read {logs}"


def _lost_fix(app: AppContext, code: int | None, reason: str | None = None) -> str:
    if code == 56:
        # A bare number is ms for this setting.
        interval_ns = duration_ns(app.setting("spark.executor.heartbeatInterval"), 1e6)
        interval = None if interval_ns is None else interval_ns / 1e6
        failures = app.setting("spark.executor.heartbeat.maxFailures")
        tries = int(failures) if failures and failures.isdigit() else None
        tries = tries or HEARTBEAT_MAX_FAILURES
        if interval is not None and interval < HEARTBEAT_INTERVAL_MS:
            return (
                "exit code 56: the executors gave up after "
                f"{tries} failed heartbeats, and the application sends one "
                f"every {interval:g} ms (it set spark.executor.heartbeatInterval "
                f"to {app.setting('spark.executor.heartbeatInterval')}), so "
                f"{duration(tries * interval * 1e6)} without the driver's answer "
                "kills an executor: restore the default 10s (and look at what "
                "paused the driver)"
            )
        wanted = settings_text(app, {"spark.network.timeout": "300s"})
        return (
            "exit code 56: the executors could not reach the driver with their "
            "heartbeats; look at the driver's load and GC and the network "
            "between them" + (f", or allow longer ({wanted})" if wanted else "")
        )
    if code in (143, -100, -102):
        fix = (
            f"{exit_meaning(code)}: if it was memory, raise "
            "spark.executor.memoryOverhead; if preemption or lost nodes, "
        )
        keep = _shuffle_keepers(app)
        return fix + (
            f"keep shuffle output alive ({keep})" if keep else "retry elsewhere"
        )
    meaning = exit_meaning(code)
    lead = f"exit code {code}: {meaning}" if meaning else "the log states no cause"
    return f"{lead}; {_where_to_read(app, reason)}"


def _shuffle_keepers(app: AppContext) -> str:
    """Settings that keep shuffle files when an executor goes, not in force."""
    if app.is_local:
        return ""
    master = (app.master or "").lower()
    if master.startswith("k8s"):
        wanted = {
            "spark.decommission.enabled": "true",
            "spark.storage.decommission.enabled": "true",
            "spark.storage.decommission.shuffleBlocks.enabled": "true",
        }
    else:
        wanted = {"spark.shuffle.service.enabled": "true"}
    return settings_text(app, wanted)


def _fetch_hint(
    run: _Run, stage: int | None, found: list[Failure], lost: dict[str, ExecutorLife]
) -> Hint:
    app = run.app
    sources = _listed(f.source_executor for f in found)
    shuffles = _listed(f.shuffle_id for f in found)
    gone = [s for s in sources if s in lost]
    message = _top(f.message for f in found)
    evidence = {
        "attempts": len(found),
        "shuffle_ids": shuffles,
        "source_executors": sources,
        "source_executors_lost": gone,
        "message": message,
        "executors": _listed(f.executor_id for f in found),
    }
    head = (
        f"{_attempts(len(found))} of {run.where(stage)} could not fetch shuffle "
        f"{', '.join(map(str, shuffles))} from executor {', '.join(map(str, sources))}"
    )
    if gone:
        keep = _shuffle_keepers(app)
        released = [e for e in gone if _RELEASED.search(lost[e].removed_reason or "")]
        if released and app.flag("spark.dynamicAllocation.enabled"):
            keep = ", ".join(
                x
                for x in (
                    keep,
                    settings_text(
                        app, {"spark.dynamicAllocation.shuffleTracking.enabled": "true"}
                    ),
                )
                if x
            )
        fix = (
            f"the shuffle files died with executor {', '.join(gone)} "
            f"({app_reason(app, gone[0])}), so Spark reruns the map stage"
            + (
                f": keep them outside the executors ({keep}), and see why it died"
                if keep
                else ": see why it died (the executor_lost hint)"
            )
        )
    else:
        wanted = settings_text(
            app,
            {"spark.shuffle.io.maxRetries": "10", "spark.shuffle.io.retryWait": "15s"},
        )
        fix = (
            f"the executor holding it was not lost ({message}): check its host's "
            "disks and network" + (f"; retry longer ({wanted})" if wanted else "")
        )
    return run.hint(
        "fetch_failed",
        found,
        evidence,
        f"{head}: {fix}",
        stage,
        sources[0] if sources else None,
    )


#: What Spark says of a job that was cancelled (a query stopped, the
#: context shut down, the program cancelled it), not failed.
_CANCELLED = ("cancelled", "canceled", "SPARK_JOB_CANCELLED")


def cancelled(job: Failure) -> bool:
    """Whether a failed job was cancelled on purpose (a streaming query
    stopped, the program cancelled it) rather than failed by a task or cut
    off by the context shutting down under it (which may be a crash).

    >>> from sparktrail.pag.context import Failure
    >>> cancelled(Failure("JobFailed", message="Job 65 cancelled Query q was stopped"))
    True
    >>> cancelled(Failure("JobFailed",
    ...     message="Job 79 cancelled because SparkContext was shut down"))
    False
    """
    message = job.message or ""
    if "aborted due to stage failure" in message or "SparkContext was shut" in message:
        return False
    return any(word in message for word in _CANCELLED)


def _job_hint(run: _Run, job: Failure, shutdown: set[str] | None = None) -> Hint:
    ended = run.app.end_ns
    evidence: dict[str, Any] = {
        "job_id": job.job_id,
        "message": job.message,
        "stage": job.stage_id,
    }
    if shutdown:
        evidence["executors_lost_at_shutdown"] = sorted(shutdown)
    stopped = SHUT_DOWN in (job.message or "")
    if stopped and ended is not None and job.time_ns is not None:
        evidence["ended_before_job_ns"] = job.time_ns - ended
    action = f"job {job.job_id} failed ({job.message}{_ending(run, job)})"
    if run.torn_down(job):
        evidence["teardown"] = True
        action += (
            ": the stream was stopped while a batch ran (its application's "
            "teardown); nothing to fix unless the stop was unexpected"
        )
    elif stopped:
        action += (
            ": the application stopped while it ran; the driver's log says "
            "what stopped the SparkContext (an error in the driver, a kill, "
            "or the program's own stop)"
        )
        if shutdown:
            action += (
                f"; executor {', '.join(sorted(shutdown))} went with it in its "
                "last seconds, and the fetches that failed on them are part of "
                "the same stop, not a shuffle problem"
            )
    elif cancelled(job):
        action += (
            ": it was cancelled (a streaming query stopped, or the program "
            "cancelled it), not failed by a task; nothing to fix unless the "
            "stop was unexpected"
        )
    else:
        action += ": its message names the cause to fix"
    return run.hint("job_failed", [job], evidence, action, job.stage_id, None)
