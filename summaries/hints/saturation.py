"""``capacity_bound``: every slot was busy while the jobs ran.

The inverse of ``idle_capacity``: the executors' slots were busy for most
of the time jobs ran (:data:`BUSY_SHARE` of slot time over the jobs' time,
:func:`~..run_shares.job_time_ns`), so the run waited for slots, not for a
slow task or an idle driver. The change replayed is more executors
(:class:`~sparktrail.whatif.changes.Executors`, twice today's); the hint
stands when that saves :data:`MIN_SAVING_SHARE` of the run (of the jobs'
time in an interactive session), never on one machine (a ``local``
master has the cores it has), and its remedy is the platform's (the
catalogue's ``more_slots``: maximum executors under dynamic allocation,
executor instances, a standalone application's cores, a managed cluster's
autoscaling maximum, ``local[N]``).

Assumptions
-----------
* Busy slot time is the slot timelines' rows but ``waiting``
  (:attr:`~.inputs.Context.slot_busy`); capacity is the slots the
  application had while its jobs ran (:meth:`~.inputs.Context.
  slots_during` over the first job's start to the last job's end) times
  the jobs' time.
* Doubling the executors keeps each one's cores; the replay places the
  same tasks on twice the slots, its launch lags kept (a stage with fewer
  tasks than slots gains nothing, which the replay shows).
"""

from __future__ import annotations

import math

from sparktrail.errors import InputError
from sparktrail.pag.context import AppContext, Failure
from sparktrail.units import duration
from sparktrail.whatif import predict
from sparktrail.whatif.changes import Executors

from ..run_shares import job_time_ns
from .failures import SHUT_DOWN
from .hint import Hint
from .inputs import Context
from .remedies import remedies, remedy_text

__all__ = ["BUSY_SHARE", "capacity_bound", "ran_to_a_failure"]

#: Slot time busy over the jobs' time at which the run waited for slots.
BUSY_SHARE = 0.6
#: The replayed saving, as a share of the jobs' time (an interactive
#: session's) or the run, under which more executors are no finding: a
#: run that fits its slots gains a little from any more.
MIN_SAVING_SHARE = 0.15
#: The executor count the replay tries, as a multiple of today's.
SCALE = 2


#: A busy share over this says the log misses some of the slots.
MAX_BUSY_SHARE = 1.02


def _most_alive(app: AppContext, start: int, end: int) -> int:
    """The most executors (not a cluster's driver) alive at once between
    ``start`` and ``end``: what the application ran on, however many it
    replaced over the run.

    >>> from sparktrail.pag.context import ExecutorLife
    >>> app = AppContext(executors=(ExecutorLife("1", 2, added_ns=0,
    ...     removed_ns=50), ExecutorLife("2", 2, added_ns=60),
    ...     ExecutorLife("3", 2, added_ns=0)))
    >>> _most_alive(app, 0, 100)
    2
    """
    lives = [
        (e.added_ns or start, e.removed_ns or end)
        for e in app.executors
        if e.executor_id != "driver" or app.is_local
    ]
    # A sweep over the lives' ends (before starts at the same time) and
    # starts: a run with dynamic allocation may have thousands.
    overlapping = [(a, b) for a, b in lives if a < b and b > start and a <= end]
    changes = sorted(
        [(b, -1) for _, b in overlapping] + [(max(a, start), 1) for a, _ in overlapping]
    )
    alive = most = 0
    for at, step in changes:
        alive += step
        if at <= end:
            most = max(most, alive)
    return most


def _failed_midway(failure: Failure) -> bool:
    """Whether a job failed on its own (not cancelled by the application's
    stop, which leaves the work before it as it ran)."""
    return failure.kind == "JobFailed" and SHUT_DOWN not in (failure.message or "")


#: Over-partitioned stages spanning this share of the jobs' time keep the
#: slots busy launching tiny tasks: more slots would launch more of them.
FIXED_COST_SHARE = 0.5


def _busy_with_fixed_costs(ctx: Context, busy_time: int) -> bool:
    """Whether the stages ``over_partitioned`` names span
    :data:`FIXED_COST_SHARE` of the jobs' time."""
    from .partitions import over_partitioned_stages

    spans = sum(s.stage_ns for s in over_partitioned_stages(ctx))
    return spans >= FIXED_COST_SHARE * busy_time


def _requested(ctx: Context) -> int | None:
    """The executors a static allocation asked for (``None``: dynamic, or
    not stated)."""
    if ctx.facts.dynamic_allocation.enabled:
        return None
    text = ctx.app.setting("spark.executor.instances")
    return int(text) if text is not None and text.strip().isdigit() else None


#: Where a cluster manager's capacity for an application is set.
_CAPACITY = {
    "yarn": "the YARN queue's free capacity",
    "kubernetes": "the namespace's quota and the nodes' free resources",
}


def _not_granted(platform: str | None, ran: int, requested: int) -> str:
    """The remedy when fewer executors ran than the application asked for.

    >>> _not_granted("yarn", 24, 36)[:60]
    'only 24 of the 36 executors it asked for (spark.executor.ins'
    """
    where = _CAPACITY.get(platform or "", "the cluster's free capacity")
    return (
        f"only {ran} of the {requested} executors it asked for "
        f"(spark.executor.instances) ever ran at once: the cluster did not grant "
        f"more ({where}), so a larger request adds none: give the application "
        "more capacity there"
    )


def ran_to_a_failure(app: AppContext) -> bool:
    """Whether a job of the run failed on its own: its failure comes first,
    and the capacity it left idle or busy says little of the work it had.

    >>> ran_to_a_failure(AppContext())
    False
    """
    return any(_failed_midway(f) for f in app.failures)


def capacity_bound(ctx: Context) -> list[Hint]:
    """More executors would have finished the jobs sooner (module notes)."""
    app = ctx.app
    facts = ctx.facts
    if facts.platform in (None, "local"):
        return []  # one machine: its cores are what it has
    if any(s.engine == "gpu" for s in facts.stages.values()):
        return []  # a GPU executor's unit is its GPU, not its cores
    if ran_to_a_failure(app):
        return []  # the run did not finish its work: its failure comes first
    jobs = [j for j in app.jobs if j.start_ns is not None and j.end_ns is not None]
    busy_time = job_time_ns(app)
    if not jobs or not busy_time or ctx.replay is None:
        return []
    first = min(j.start_ns for j in jobs)  # type: ignore[type-var]
    last = max(j.end_ns for j in jobs)  # type: ignore[type-var]
    slots = ctx.slots_during(first, last)  # type: ignore[arg-type]
    _, busy = ctx.slot_busy
    share = busy / (slots * busy_time) if slots and busy_time else 0.0
    if share < BUSY_SHARE or share > MAX_BUSY_SHARE:
        return []  # over 100%: the log does not state every slot it had
    if _busy_with_fixed_costs(ctx, busy_time):
        return []  # the slots paid per-task costs: fewer tasks first
    try:
        # Twice the slots: the replay scales slots by count / its executors.
        found = predict(ctx.replay, Executors(SCALE * ctx.replay.executors))
    except InputError:
        return []
    if found.saving_ns < MIN_SAVING_SHARE * ctx.judged_ns:
        return []
    executors = max(1, _most_alive(app, first, last))  # type: ignore[arg-type]
    cores = max(1, round(slots / executors))
    wanted = SCALE * executors
    now_max = app.setting("spark.dynamicAllocation.maxExecutors")
    requested = _requested(ctx)
    if requested is not None and executors < requested:
        # The request was not the limit: asking for more adds none.
        texts = [_not_granted(facts.platform, executors, requested)]
    else:
        texts = remedies(
            "more_slots",
            facts,
            executors=wanted,
            max_now=now_max or "unset",
            instances=app.setting("spark.executor.instances") or "unset",
            cores=SCALE * slots,
        )
    evidence = {
        "requested_executors": requested,
        "busy_share": share,
        "slots": slots,
        "executors": executors,
        "cores_per_executor": cores,
        "job_time_ns": busy_time,
        "replayed_executors": wanted,
        "replayed_wall_ns": found.predicted_wall_ns,
        "replayed_saving_ns": found.saving_ns,
    }
    action = (
        f"the executors' {slots} slots were {share:.0%} busy while the jobs ran "
        f"({duration(busy_time)}): the run waited for slots, not for one task or "
        f"the driver. Replayed on {wanted} executors of {cores} cores, it ends "
        f"{duration(found.saving_ns)} sooner: "
        + remedy_text(texts, f"give it about {math.ceil(SCALE * slots)} slots")
    )
    return [
        Hint(
            "capacity_bound",
            share,
            evidence,
            action,
            predicted_saving_ns=float(found.saving_ns),
            change=Executors(wanted),
        )
    ]
