"""Phases of a run where no task of the program's ran: the driver reading
tables' metadata, building broadcasts, and jobs waiting to launch.

* ``driver_phase`` (``metadata``): the jobs Spark runs to list a table's
  files and read its schema (:attr:`~.facts.StageFacts.purpose`), and the
  driver's time between them, before the program's queries: giving the
  reader its schema, or reading through a catalog that keeps it, skips
  them. Replayed with those stages' tasks at no time and the driver's gaps
  between them dropped.
* ``driver_phase`` (``broadcast``): broadcast jobs (``broadcast exchange``)
  whose span is many times their tasks' time: the driver collected and
  built the broadcast tables while the query waited.
* ``driver_phase`` (``after_jobs``): a SQL execution that ended long
  after its last job did, no task of its running meanwhile: the driver
  finished the query alone (a write's commit: renaming the output files,
  adding partitions to the metastore; or collecting a result).
* ``driver_phase`` (``before_jobs``): the driver's own code before the
  first job, from the first executor's registration, at least
  :data:`BEFORE_JOBS_SHARE` of the run and ``PHASE_NS``, executors held
  idle meanwhile; not on a local master (no executor waits), nor in an
  interactive session (a person typing).
* ``cold_start`` (a job's first task launched long after the job started):
  with no executor alive when it started, it waited for executors to
  register (containers or pods starting, or new ones after dynamic
  allocation released the idle ones); with executors idle, the scheduler
  held it (said as known, with the executors that were free).

The broadcast and launch waits are the rule's estimates (the replay keeps
a job's launch lags as traced); the evidence says so.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from sparktrail.pag.context import AppContext, JobSpan
from sparktrail.units import duration
from sparktrail.whatif.changes import DropDriverGap, TaskTimes, Together

from .hint import Hint
from .inputs import Context
from .platform import cluster_manager, interactive_signs

__all__ = ["driver_phases"]

#: A wait to launch shorter than this is the scheduler's usual pace.
MIN_WAIT_NS = 2_000_000_000
#: A metadata phase, or the application's first wait for its executors,
#: is a finding when it is this share of the run and this long: shorter,
#: it is what reading a table or starting a cluster costs.
PHASE_SHARE, PHASE_NS = 0.25, 10_000_000_000
#: Metadata jobs this close together are one phase.
PHASE_GAP_NS = 5_000_000_000
#: A broadcast job spanning this many times its longest task waited for
#: the driver.
BROADCAST_RATIO = 4.0
_BROADCAST = re.compile(r"^broadcast exchange", re.IGNORECASE)


def driver_phases(ctx: Context) -> list[Hint]:
    """The phases of the module notes that hold the run back."""
    app = ctx.app
    if not app.jobs or ctx.tasks.is_empty():
        return []
    hints = [
        *_metadata(ctx),
        *_broadcasts(ctx),
        *_after_jobs(ctx),
        *_before_jobs(ctx),
        *_launch_waits(ctx),
    ]
    return [h for h in hints if h is not None]


def _first_launches(ctx: Context) -> dict[int, int]:
    """Each job's first task launch."""
    first = (
        ctx.tasks.lazy()
        .filter(pl.col("job_id").is_not_null())
        .group_by("job_id")
        .agg(pl.col("launch_ns").min())
        .collect()
    )
    return {int(j): int(t) for j, t in first.iter_rows()}


def _metadata(ctx: Context) -> list[Hint]:
    facts = ctx.facts
    meta_stages = {s.stage_id for s in facts.stages.values() if s.purpose}
    if not meta_stages:
        return []
    jobs = [
        j
        for j in ctx.app.jobs
        if j.start_ns is not None
        and j.end_ns is not None
        and j.stage_ids
        and set(j.stage_ids) <= meta_stages
    ]
    if not jobs:
        return []
    jobs.sort(key=lambda j: j.start_ns or 0)
    phases: list[list[JobSpan]] = [[jobs[0]]]
    for job in jobs[1:]:
        if (job.start_ns or 0) - (phases[-1][-1].end_ns or 0) <= PHASE_GAP_NS:
            phases[-1].append(job)
        else:
            phases.append([job])
    phase = max(phases, key=lambda p: (p[-1].end_ns or 0) - (p[0].start_ns or 0))
    start, end = phase[0].start_ns or 0, phase[-1].end_ns or 0
    if not _dominant(ctx, end - start):
        return []
    stages = [s for j in phase for s in j.stage_ids]
    tasks = ctx.tasks.filter(pl.col("stage_id").is_in(stages)).select("task_id")
    gaps = [
        g
        for g in (ctx.replay.gaps.iter_rows(named=True) if ctx.replay else ())
        if g["activity"] == "driver" and start <= g["start_ns"] and g["end_ns"] <= end
    ]
    listing = sum(1 for s in stages if facts.purpose(s) == "listing")
    change = Together(
        (
            TaskTimes(tuple(tasks["task_id"].to_list()), (0,) * tasks.height),
            *(DropDriverGap(g["start_ns"]) for g in gaps),
        )
    )
    evidence = {
        "phase": "metadata",
        "jobs": [j.job_id for j in phase][:30],
        "stages": stages[:30],
        "listing_jobs": listing,
        "schema_jobs": len(phase) - listing,
        "phase_ns": end - start,
    }
    action = (
        f"before its queries the driver read the tables' metadata for "
        f"{duration(end - start)}: {len(phase)} jobs (jobs {phase[0].job_id}.."
        f"{phase[-1].job_id}) listing files ({listing}) and reading schemas "
        f"({len(phase) - listing}), one after the other, with the driver's own "
        "work between them: give the reader its schema (spark.read.schema(...)) "
        "instead of inferring it, read the tables through a catalog that keeps "
        "their schema and files (a Hive metastore, Delta, Iceberg), and keep "
        "their files fewer and larger (each is a request to list on object "
        "storage)"
    )
    return [
        Hint(
            "driver_phase",
            _serial_share(ctx, end - start),
            evidence,
            action,
            predicted_saving_ns=float(end - start),
            change=change,
        )
    ]


def _broadcasts(ctx: Context) -> list[Hint]:
    jobs = [
        j
        for j in ctx.app.jobs
        if _BROADCAST.match(j.description or "")
        and j.start_ns is not None
        and j.end_ns is not None
    ]
    if not jobs:
        return []
    longest = (
        ctx.tasks.lazy()
        .filter(pl.col("job_id").is_in([j.job_id for j in jobs]))
        .group_by("job_id")
        .agg(pl.col("duration_ns").max())
        .collect()
    )
    task_ns = {int(j): int(d or 0) for j, d in longest.iter_rows()}
    slow = [
        j
        for j in jobs
        if (j.end_ns - j.start_ns) >= BROADCAST_RATIO * max(1, task_ns.get(j.job_id, 0))  # type: ignore[operator]
        and (j.end_ns - j.start_ns) >= MIN_WAIT_NS  # type: ignore[operator]
    ]
    if not slow:
        return []
    start = min(j.start_ns for j in slow)  # type: ignore[type-var]
    end = max(j.end_ns for j in slow)  # type: ignore[type-var]
    tasks = max(task_ns.get(j.job_id, 0) for j in slow)
    wait = max(0, end - start - tasks)  # type: ignore[operator]
    evidence = {
        "phase": "broadcast",
        "jobs": [j.job_id for j in slow][:20],
        "span_ns": end - start,  # type: ignore[operator]
        "longest_task_ns": tasks,
        "estimated": True,
    }
    ids = ", ".join(str(j.job_id) for j in slow[:6])
    action = (
        f"{len(slow)} broadcast job(s) (jobs {ids}) took {duration(end - start)} "  # type: ignore[operator]
        f"while their tasks ran at most {duration(tasks)}: "
        "the driver collected and built the broadcast tables meanwhile, and the "
        "query waited for them: look at the driver's GC and memory "
        "(spark.driver.memory) and at the broadcasts' sizes (a lower "
        "spark.sql.autoBroadcastJoinThreshold joins a large side by shuffle)"
    )
    return [
        Hint(
            "driver_phase",
            _serial_share(ctx, wait),
            evidence,
            action,
            predicted_saving_ns=float(wait),
        )
    ]


def _after_jobs(ctx: Context) -> list[Hint]:
    """The SQL execution whose driver work after its last job is longest,
    when that work dominates the run (:func:`_dominant`)."""
    last_end: dict[int, int] = {}
    for job in ctx.app.jobs:
        if job.sql_id is not None and job.end_ns is not None:
            last_end[job.sql_id] = max(last_end.get(job.sql_id, 0), job.end_ns)
    tails = [
        (q.end_ns - last_end[q.execution_id], q)
        for q in ctx.app.sql
        if q.end_ns is not None and q.execution_id in last_end
    ]
    if not tails:
        return []
    tail, query = max(tails, key=lambda t: t[0])
    if not _dominant(ctx, tail):
        return []
    what = (query.description or "").strip().splitlines()
    named = f" ({what[0][:80]})" if what else ""
    evidence = {
        "phase": "after_jobs",
        "execution_id": query.execution_id,
        "after_jobs_ns": tail,
        "estimated": True,
    }
    action = (
        f"SQL query {query.execution_id}{named} ended {duration(tail)} after its "
        "last job, with none of its tasks running: the driver finished it "
        "alone. For a write that is its commit (renaming the output files, "
        "adding each new partition to the metastore): write fewer, larger "
        "files and partitions, and use a committer made for the storage (on "
        "S3 the S3A magic committer or EMRFS's S3-optimized committer; a "
        "table format such as Delta or Iceberg commits without renames); "
        "for a collect, return less to the driver"
    )
    return [
        Hint(
            "driver_phase",
            _serial_share(ctx, tail),
            evidence,
            action,
            predicted_saving_ns=float(tail),
        )
    ]


#: The driver's own time before the first job, from when executors could
#: run tasks, that is a finding: this share of the run and :data:`PHASE_NS`.
BEFORE_JOBS_SHARE = 0.15


def _registrations(app: AppContext) -> list[int]:
    """When the executors (not a cluster's driver) registered, in order."""
    return sorted(
        e.added_ns
        for e in app.executors
        if e.added_ns is not None and e.executor_id != "driver"
    )


def _before_jobs(ctx: Context) -> list[Hint]:
    """The driver's own code before the first job, after the first executor
    registered, when no task ran meanwhile: executors held idle (never on a
    local master, where none waits)."""
    app = ctx.app
    if app.is_local or app.start_ns is None:
        return []  # one machine: no executor waited for the driver
    if interactive_signs(app, ctx.stage_labels.values()):
        return []  # in a session, a person typing
    starts = [j.start_ns for j in app.jobs if j.start_ns is not None]
    added = _registrations(app)
    if not starts or not added:
        return []
    ready = max(app.start_ns, added[0])
    gap = min(starts) - ready
    if gap < PHASE_NS or gap < BEFORE_JOBS_SHARE * ctx.judged_ns:
        return []
    since = f"its first executor registered ({duration(ready - app.start_ns)} in)"
    action = (
        f"the driver ran its own code for {duration(gap)} before the first job, "
        f"after {since}, with no task running: look at what the program does "
        "before its first action (reading input or building data in the driver "
        "to parallelize it, a HiveContext or catalog starting its metastore "
        "client: a plain SQLContext where no Hive table is read, a call to an "
        "outside service); read the input with Spark itself (spark.read, "
        "sc.textFile) so the executors share the work, or do the local work "
        "before the session starts, so no executor waits for it"
    )
    evidence = {"phase": "before_jobs", "before_jobs_ns": gap, "estimated": True}
    return [
        Hint(
            "driver_phase",
            _serial_share(ctx, gap),
            evidence,
            action,
            predicted_saving_ns=float(gap),
        )
    ]


def _serial_share(ctx: Context, length_ns: int) -> float:
    """The critical path's share of a phase nothing else ran beside: its
    length over the run's (the path passes through it whole)."""
    return min(1.0, length_ns / ctx.wall_ns) if ctx.wall_ns > 0 else 0.0


def _dominant(ctx: Context, length_ns: int) -> bool:
    """Whether a phase of ``length_ns`` is :data:`PHASE_SHARE` of the run
    (of the time jobs ran, in an interactive session) and :data:`PHASE_NS`."""
    return length_ns >= PHASE_NS and length_ns >= PHASE_SHARE * ctx.judged_ns


def _alive(app: AppContext, at: int) -> list[str]:
    """The executors (not a cluster's driver) alive at ``at``."""
    return [
        e.executor_id
        for e in app.executors
        if (e.executor_id != "driver" or app.is_local)
        and (e.added_ns is None or e.added_ns <= at)
        and (e.removed_ns is None or e.removed_ns > at)
    ]


def _had_executors(app: AppContext, job_id: int, started: int | None) -> bool:
    """Whether executors had registered before job ``job_id`` started."""
    job = next((j for j in app.jobs if j.job_id == job_id), None)
    return (
        job is not None
        and job.start_ns is not None
        and started is not None
        and started < job.start_ns
    )


#: Why executors were slow to come, by cluster manager: what starts them.
_STARTS = {
    "yarn": "YARN took that long to grant and start the containers (the "
    "queue's free capacity, the container's localisation)",
    "kubernetes": "the pods took that long to be scheduled and start (their "
    "image pull, their requests' place in the cluster's queue)",
    "standalone": "the standalone master had no free cores for this "
    "application yet (other applications held the workers' cores, or the "
    "workers were starting): cap the others' spark.cores.max, or run it when "
    "the cluster is free",
}


def _startup_wait_cause(ctx: Context, wait: dict[str, Any]) -> str:
    """Why the first job waited with no executor: the cluster manager's
    start of them, and, when one registered before the first task, the
    scheduler's own wait after it."""
    app = ctx.app
    job = next((j for j in app.jobs if j.job_id == wait["job_id"]), None)
    start = job.start_ns if job is not None else None
    added = _registrations(app)
    first_task = (start or 0) + int(wait["wait_ns"])
    came = [a for a in added if start is not None and start <= a <= first_task]
    manager = cluster_manager(app)
    starts = _STARTS.get(
        manager or "",
        "the cluster took that long to start them",
    )
    if not came or start is None:
        return f"no executor had registered yet: {starts}"
    registered = came[0] - start
    idle = first_task - came[0]
    if idle < 0.25 * wait["wait_ns"]:
        return f"the first executor registered after {duration(registered)}: {starts}"
    return (
        f"the first executor registered after {duration(registered)}, yet the "
        f"first task started {duration(idle)} later, when "
        f"{len(came)} had: the scheduler waited for "
        "more executors (spark.scheduler.minRegisteredResourcesRatio, "
        "maxRegisteredResourcesWaitingTime) or for its own placement; before "
        f"that, {starts}"
    )


def _launch_waits(ctx: Context) -> list[Hint]:
    app = ctx.app
    if app.is_local or not app.executors:
        return []
    firsts = _first_launches(ctx)
    waits: list[dict[str, Any]] = []
    for job in app.jobs:
        first = firsts.get(job.job_id)
        if job.start_ns is None or first is None:
            continue
        wait = first - job.start_ns
        if wait < MIN_WAIT_NS:
            continue
        alive = _alive(app, job.start_ns)
        waits.append(
            {"job_id": job.job_id, "wait_ns": wait, "executors_alive": len(alive)}
        )
    # A wait for executors after some had lived (released since) is churn;
    # the first one is the cluster starting, a finding only when it dominates.
    started = min((e.added_ns for e in app.executors if e.added_ns), default=None)
    empty = [
        w
        for w in waits
        if w["executors_alive"] == 0
        and (
            _had_executors(app, w["job_id"], started)
            or _dominant(ctx, int(w["wait_ns"]))
        )
    ]
    if not empty:
        return []
    total = float(sum(w["wait_ns"] for w in empty))
    da = ctx.facts.dynamic_allocation
    released = da.enabled and da.released > 0
    listed = "; ".join(f"job {w['job_id']} {duration(w['wait_ns'])}" for w in empty[:4])
    if released:
        why = (
            f"dynamic allocation had released the idle executors "
            f"(executorIdleTimeout {duration(da.idle_timeout_ns or 0)}) and new ones "
            "started cold: keep executors between jobs "
            "(spark.dynamicAllocation.executorIdleTimeout longer, or "
            "spark.dynamicAllocation.minExecutors)"
        )
    else:
        why = _startup_wait_cause(ctx, empty[0])
    evidence = {
        "waits": empty[:10],
        "released_by_dynamic_allocation": released,
        "estimated": True,
    }
    return [
        Hint(
            "cold_start",
            _serial_share(ctx, int(total)),
            evidence,
            f"{len(empty)} job(s) waited for executors before their first task "
            f"({listed}): {why}",
            predicted_saving_ns=total,
        )
    ]
