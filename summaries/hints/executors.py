"""``straggler_executor`` and ``idle_capacity`` hints.

* ``straggler_executor``: an executor that is slow at the same work, or
  holds more of the path than its share:

  - *slowdown*: in each stage where it and other executors each ran a
    task or more, its median task time over theirs; the median of those
    ratios over the stages (at least ``straggler_slowdown``), once those
    stages hold ``straggler_min_tasks`` of its tasks and of the others'
    in all. Evidence pools across stages: ten stages of one task per
    executor count like one stage of ten. Cold tasks are left out: each
    executor's first wave (launched before any task there finished), and
    in its first stage the tasks that spent most of their time before
    running (deserializing: a new executor of dynamic allocation is
    churn, not a slow host). This compares like with like, so it does
    not flip with how the run's windows split the fair share;
  - or, when no slowdown can be measured, its whole-run CP share is
    ``straggler_factor`` x its fair share (see
    :mod:`~sparktrail.summaries.straggler`) and at least
    ``straggler_min_share`` (a measured slowdown under
    ``straggler_slowdown`` vetoes it: the executor holds the path because
    it ran more, or ran a slow task, which the task hints name).

  Needs two or more executors. When the context knows the executors'
  hosts, its slowdown against the executors of its own host
  (``host_slowdown``) says what to act on: slow beside them too, the
  executor itself (its JVM), not the host; alone on its host, or its
  host's executors as slow, the host. Its GC share is ``gc`` time / busy
  (non-waiting) time of its slots. Estimated saving: its critical time
  times ``1 - 1 / slowdown``; the replay runs its tasks at the others'
  speed stage by stage (each stage's own ratio of medians, where above 1),
  so a stage it was not slow in saves nothing.
* ``idle_capacity``: each executor's slots (its cores; on a GPU
  executor its GPU slots, :func:`.capacity.gpu_slots`) times how long it
  lived (``ExecutorAdded``/``Removed``; an executor the log does not state
  lives the whole run); idle time is that slot time minus the slots' busy
  (not ``waiting``) rows. Fires when idle / slot time >= ``idle_min_share``
  and an idle timeout (30 s, or the one in force if lower: never one at or
  above it) replayed per executor frees core time: each idle interval
  longer than the timeout releases the executor once it passed, and a new
  one starts up for the next busy period (its start-up is taken off).
  Never on a ``local`` master (one JVM: dynamic allocation is ignored and
  idle cores cost nothing). Its saving is capacity, not wall time:
  ``predicted_saving_ns`` is the core time freed, ``saving_share`` its
  share of the slot time; the action is the cluster manager's
  (:func:`.capacity.recipe`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from sparktrail.pag.memory import trim_heap
from sparktrail.units import duration
from sparktrail.whatif.changes import TaskTimes

from .capacity import (
    PROPOSED_TIMEOUT_NS,
    busy_rows,
    busy_slots,
    executor_slots,
    gpu_slots,
    idle_timeout_ns,
    max_executors,
    recipe,
    replay_idle_timeout,
    startup_ns,
)
from .hint import Hint
from .inputs import Context
from .memory_pressure import heap_remedy
from .platform import cluster_manager, interactive_signs
from .saturation import ran_to_a_failure
from .slowdowns import slowdowns

__all__ = ["idle_capacity", "straggler_executor"]


def _gc_share(slot_time: pl.DataFrame, executor: str) -> float:
    rows = slot_time.filter(
        (pl.col("executor") == executor) & (pl.col("activity") != "waiting")
    )
    busy = int(rows["time_ns"].sum())
    gc = int(rows.filter(pl.col("activity") == "gc")["time_ns"].sum())
    return gc / busy if busy else 0.0


def _saving(
    ctx: Context, executor: str, critical_ns: float, slowdown: float | None
) -> float:
    """Critical time saved if the executor's tasks ran at the others' speed:
    ``critical x (1 - 1 / slowdown)``; without a robust slowdown, the ratio
    of its mean task time to the others' in the stages both ran."""
    if slowdown is None:
        done = ctx.tasks.select("executor", "stage_id", "duration_ns").filter(
            pl.col("executor").is_not_null()
        )
        mine = done.filter(pl.col("executor") == executor)
        others = done.filter(
            (pl.col("executor") != executor)
            & pl.col("stage_id").is_in(mine["stage_id"].unique().implode())
        )
        if mine.is_empty() or others.is_empty():
            return 0.0
        mean_mine = float(mine["duration_ns"].mean() or 0.0)  # type: ignore[arg-type]
        mean_others = float(others["duration_ns"].mean() or 0.0)  # type: ignore[arg-type]
        slowdown = mean_mine / mean_others if mean_others > 0 else 1.0
    return critical_ns * max(0.0, 1 - 1 / slowdown) if slowdown > 0 else 0.0


def _speculation_advice(
    ctx: Context, hosts: int, own_fault: bool, slowdown: float | None = None
) -> str:
    """What speculation can do, and what to leave out if it stays slow
    (``hosts``: the distinct hosts of the executors, 0 when unknown;
    ``own_fault``: it is slow beside its own host's executors; ``slowdown``
    its measured slowdown, under which speculation copies no task)."""
    if own_fault:
        leave_out = (
            "kill it (SparkContext.killExecutors) so a fresh one replaces it; "
            "its host's other executors are not slow, so keep the host"
        )
    else:
        setting = _exclude_setting(ctx)
        leave_out = (
            f"exclude its host ({setting}, or leave the node out)"
            if setting
            else "leave its host out of the cluster"
        )
    if ctx.app.is_local or hosts == 1:
        # Spark never launches a copy on a host where the task already has
        # an attempt (TaskSetManager), and here there is one host.
        return (
            "speculation cannot help: every executor is on one host, and Spark "
            f"never runs a copy on the host of the original; {leave_out}"
        )
    if slowdown is not None and slowdown < SPECULATION_MULTIPLIER:
        return (
            f"its {slowdown:.2g}x is under what speculation copies (a task "
            f"{SPECULATION_MULTIPLIER:g}x its stage's median): {leave_out}"
        )
    if ctx.app.flag("spark.speculation"):
        multiplier = ctx.app.setting("spark.speculation.multiplier") or "1.5"
        quantile = ctx.app.setting("spark.speculation.quantile") or "0.75"
        return (
            f"speculation is already on (multiplier {multiplier}, quantile "
            f"{quantile}) and did not catch it, since every task there is slow, "
            f"not a few: {leave_out}"
        )
    return (
        "set spark.speculation=true, spark.speculation.multiplier=1.5, "
        "spark.speculation.quantile=0.75 so its slow tasks get copies; if it "
        f"stays slow {leave_out}"
    )


def _exclude_setting(ctx: Context) -> str | None:
    """The setting that keeps tasks off a bad host in the run's Spark:
    ``spark.excludeOnFailure.enabled`` from 3.1, ``spark.blacklist.enabled``
    from 2.1 (``None`` before, or when the version is unknown). Both act on
    hosts where tasks fail, not on slow ones, so the words say 'or'."""
    if ctx.facts.at_least(3, 1):
        return "spark.excludeOnFailure.enabled=true"
    if ctx.facts.at_least(2, 1):
        return "spark.blacklist.enabled=true"
    return None


#: Spark's default spark.speculation.multiplier: a task is copied only once
#: it runs this many times its stage's median.
SPECULATION_MULTIPLIER = 1.5
#: A slow executor's replayed saving under this share of the judged time is
#: no finding (info): one of many slower hosts costs little.
EXECUTOR_MIN_SHARE = 0.05
#: An executor with less of the critical path than this held nothing back.
MIN_CRITICAL_SHARE = 0.02
#: Tasks shorter than this (Spark's own floor for speculating a task,
#: spark.speculation.minTaskRuntime) say nothing of an executor's speed.
MIN_TASK_NS = 100_000_000


def _median_task_ns(ctx: Context, executor: str) -> float:
    """The median duration of the executor's task attempts (0: none)."""
    mine = ctx.tasks.filter(pl.col("executor") == executor)["duration_ns"]
    median = mine.median() if len(mine) else None
    return float(median) if median is not None else 0.0  # type: ignore[arg-type]


def _hosts(ctx: Context) -> dict[str, str]:
    """Executor id -> host, for the executors whose host the context knows."""
    return {
        e.executor_id: e.host
        for e in ctx.app.executors
        if e.host and e.executor_id != "driver"
    }


def straggler_executor(ctx: Context) -> list[Hint]:
    """Executors that are slow at the same work, or hold the run back more
    than their fair share."""
    opts = ctx.options
    rows = ctx.executor.filter(pl.col("role") == "executor")
    if len(rows) < 2:
        return []
    measured = slowdowns(ctx.tasks, opts.straggler_min_tasks)
    hosts = _hosts(ctx)
    beside_own = slowdowns(ctx.tasks, opts.straggler_min_tasks, hosts) if hosts else {}
    # Their numpy copies of the tasks' columns (~60 MiB at 3.3·10^6 tasks)
    # leave the C heap before the next rule's group-bys.
    trim_heap()
    has_path = bool(ctx.executor["cp_share"].sum() > 0)
    hints = []
    for ex in rows.iter_rows(named=True):
        executor = str(ex["executor_id"])
        slowdown = measured.get(executor)
        if not _holds_the_run_back(ctx, ex, slowdown, has_path):
            continue
        slow = slowdown is not None and slowdown >= opts.straggler_slowdown
        host_slowdown = beside_own.get(executor)
        own_fault = (host_slowdown or 0.0) >= opts.straggler_slowdown
        gc = _gc_share(ctx.slot_time, ex["executor_id"])
        evidence = {
            "cp_share": ex["cp_share"],
            "fair_share": ex["fair_share"],
            "ratio": ex["ratio"],
            "slowdown": slowdown,
            "host": hosts.get(executor),
            "host_slowdown": host_slowdown,
            "slots": ex["slots"],
            "gc_share": gc,
            "executors": len(rows),
            "min_share": EXECUTOR_MIN_SHARE,
        }
        speed = ""
        if slow and slowdown is not None:
            speed = _speed_text(slowdown, own_fault, host_slowdown, hosts, executor)
        advice = _speculation_advice(ctx, len(set(hosts.values())), own_fault, slowdown)
        action = (
            f"executor {ex['executor_id']}: {speed}carries {ex['cp_share']:.0%} of "
            f"the critical path against a fair share of {ex['fair_share']:.0%}: "
            f"{advice}; {_why_text(ctx, gc, own_fault)}"
        )
        critical_ns = ex["cp_share"] * ctx.wall_ns
        saving = _saving(ctx, executor, critical_ns, slowdown)
        hints.append(
            Hint(
                "straggler_executor",
                ex["cp_share"],
                evidence,
                action,
                executor_id=ex["executor_id"],
                predicted_saving_ns=saving,
                change=_at_peer_speed(ctx, executor, slowdown) if slow else None,
            )
        )
    return hints


def _at_peer_speed(ctx: Context, executor: str, slowdown: float | None) -> Any:
    """The replay of the executor's settled tasks at its peers' speed, stage
    by stage: in each stage where other executors ran tasks too, its tasks
    over that stage's ratio of its median task time to theirs (when above
    1); elsewhere as they ran. What replacing it saves, the stages that
    waited for its last tasks included, and only where it was slow: one
    slow stage (a warm-up, a code path first run there) says nothing of
    the rest."""
    if slowdown is None or slowdown <= 1:
        return None
    settled = ~pl.col("status").fill_null("success").is_in(["failed", "killed"])
    done = ctx.tasks.filter(settled & pl.col("executor").is_not_null()).select(
        "task_id", "stage_id", "executor", "duration_ns"
    )
    mine = pl.col("executor") == executor
    ran = done.filter(mine)["stage_id"].unique().implode()
    ratios = (
        done.filter(pl.col("stage_id").is_in(ran))
        .group_by("stage_id")
        .agg(
            pl.col("duration_ns").filter(mine).median().alias("mine"),
            pl.col("duration_ns").filter(~mine).median().alias("theirs"),
        )
        .select("stage_id", (pl.col("mine") / pl.col("theirs")).alias("ratio"))
        .filter(pl.col("ratio") > 1)
    )
    slow = done.filter(mine).join(ratios, on="stage_id", how="inner")
    if slow.is_empty():
        return None
    faster = (
        (slow["duration_ns"].cast(pl.Float64) / slow["ratio"]).round(0).cast(pl.Int64)
    )
    return TaskTimes(tuple(slow["task_id"].to_list()), tuple(faster.to_list()))


def _holds_the_run_back(
    ctx: Context, ex: dict[str, Any], slowdown: float | None, has_path: bool
) -> bool:
    """Whether executor row ``ex`` is slow at the same work, or over its fair
    share of the critical path, and holds enough of it to matter."""
    opts = ctx.options
    ratio = ex["ratio"]
    slow = slowdown is not None and slowdown >= opts.straggler_slowdown
    unfair = ratio is not None and ratio >= opts.straggler_factor
    unfair = unfair and ex["cp_share"] >= opts.straggler_min_share
    if not (slow or unfair) or (has_path and ex["cp_share"] < MIN_CRITICAL_SHARE):
        return False  # a slow executor off the critical path held nothing back
    if slowdown is not None and not slow:
        # Measured at the same work, it is not slow: it holds the path
        # because it ran more, or a slow task of its (the task hints').
        return False
    if not slow and has_path and ratio is not None and ratio < 1.0:
        return False  # below its fair share: it held the run back least
    # 1.6x of a few ms is fixed costs, not a slow host
    return _median_task_ns(ctx, str(ex["executor_id"])) >= MIN_TASK_NS


def _why_text(ctx: Context, gc: float, own_fault: bool) -> str:
    """Where to look on a straggling executor: its memory, itself or its host."""
    if gc >= ctx.options.gc_high_share:
        return f"GC took {gc:.0%} of its task time: {heap_remedy(ctx)} on it"
    if own_fault:
        return (
            f"GC is only {gc:.0%} of its task time, so look at the executor "
            "itself (its stderr, a thread dump: a stuck or busy thread, its "
            "Python workers)"
        )
    return (
        f"GC is only {gc:.0%} of its task time, so check its host "
        "(CPU steal, disk, network)"
    )


def _speed_text(
    slowdown: float,
    own_fault: bool,
    host_slowdown: float | None,
    hosts: dict[str, str],
    executor: str,
) -> str:
    """How much slower its tasks are than the same stages' elsewhere."""
    speed = (
        f"its tasks take {slowdown:.1f}x as long as the same stages' tasks elsewhere"
    )
    if own_fault and host_slowdown is not None and len(set(hosts.values())) > 1:
        speed += (
            f" ({host_slowdown:.1f}x those of the other executors on its "
            f"host {hosts.get(executor)})"
        )
    return speed + ", and it "


#: Cluster managers whose dynamic allocation is on unless turned off.
_DYNAMIC_BY_DEFAULT = frozenset({"emr-serverless", "dataproc-serverless"})
#: Cluster managers that ignore ``spark.dynamicAllocation.executorIdleTimeout``.
_OWN_AUTOSCALER = frozenset({"databricks", "glue"})
#: Executors listed in the evidence's ``freed_by_executor``.
_LISTED = 10


def _timeouts(ctx: Context, manager: str | None) -> tuple[int, int | None]:
    """The timeout to replay and the one in force (``None``: executors are
    not released today). Never one at or above the timeout in force: with
    dynamic allocation on and a timeout of 30 s or less, the replay is of
    the timeout in force (what Spark should already have released)."""
    dynamic = ctx.app.flag("spark.dynamicAllocation.enabled")
    if dynamic is None:
        dynamic = manager in _DYNAMIC_BY_DEFAULT
    if not dynamic or manager in _OWN_AUTOSCALER:
        return PROPOSED_TIMEOUT_NS, None
    in_force = idle_timeout_ns(ctx.app)
    return min(PROPOSED_TIMEOUT_NS, in_force), in_force


def idle_capacity(ctx: Context) -> list[Hint]:
    """Executors that sat idle longer than an idle timeout would keep them.

    Not on a ``local`` or ``local-cluster`` master (one machine, a test
    harness: no executor to give back), nor in an interactive session,
    whose slots wait while a person thinks (:mod:`.platform`), nor in a
    run with a failed job (:func:`.saturation.ran_to_a_failure`). Fires when
    the slots (cores, or GPU slots on a GPU executor) waited
    ``idle_min_share`` of their executors' lifetimes and the proposed idle
    timeout, replayed per executor (:func:`.capacity.replay_idle_timeout`),
    frees core time; its saving is that core time, ``saving_share`` its
    share of the slot time. The action is the cluster manager's
    (:func:`.capacity.recipe`); a log without a master or without its
    executors gets an ``unchecked`` hint instead of a guess.
    """
    manager = cluster_manager(ctx.app)
    if ctx.trace.is_empty() or manager == "local":
        return []
    if interactive_signs(ctx.app, ctx.stage_labels.values()):
        return []
    if ran_to_a_failure(ctx.app):
        return []  # slots idle waiting on a failing job: its failure first
    idle = _idle_slots(ctx)
    if idle is None:
        return []
    timeout, in_force = _timeouts(ctx, manager)
    startup, startup_source = startup_ns(ctx.app, idle.start_ns)
    replayed = replay_idle_timeout(idle.lives, idle.busy, timeout, startup)
    unchecked = _unchecked(ctx, manager, in_force, idle.unchecked)
    if replayed.freed_core_ns <= 0 and not unchecked:
        return []  # the run is too short for the timeout to free anything
    evidence = _idle_evidence(idle, manager, timeout, in_force, replayed) | {
        "cores_per_executor": ctx.slots_per_executor(),
        "startup_ns": startup,
        "startup_source": startup_source,
    }
    share = replayed.freed_slot_ns / idle.slot_ns
    said = (
        f"{_idle_head(idle)}; {_idle_replay(idle, timeout, startup, replayed, share)}"
    )
    if unchecked:
        evidence["unchecked"] = "; ".join(unchecked)
        action = f"{said}. Not checked: {evidence['unchecked']}"
    else:
        assert manager is not None
        high = max_executors(idle.peak, max(life.slots for life in idle.lives))
        text, more = recipe(ctx.app, manager, timeout, high, len(idle.lives))
        evidence |= more
        action = f"{said}: {text}"
    return [
        Hint(
            "idle_capacity",
            0.0,  # idle time is never on the critical path
            evidence,
            action,
            predicted_saving_ns=float(replayed.freed_core_ns),
            saving_share=share,
            share_of="slot_time",
        )
    ]


@dataclass(frozen=True)
class _IdleSlots:
    """How long a run's executor slots waited: over ``idle_min_share``."""

    start_ns: int
    span_ns: int
    gpu: int | None
    lives: list[Any]
    unchecked: list[str]
    busy: Any
    slot_ns: float
    busy_ns: float
    peak: int
    idle_share: float

    @property
    def unit(self) -> str:
        return "GPU slot" if self.gpu else "core"

    @property
    def slots(self) -> int:
        return round(self.slot_ns / self.span_ns)


def _idle_slots(ctx: Context) -> _IdleSlots | None:
    """The run's slots and how long they waited (None: not long enough)."""
    start, end = ctx.span_ns
    span = end - start
    workers, cpu_busy = ctx.slot_busy
    if workers == 0 or span <= 0:
        return None
    gpu = gpu_slots(ctx.app, ctx.slots_per_executor())
    cpu_slot_time = ctx.app.slot_ns(start, end) or workers * span
    if gpu is None and 1.0 - cpu_busy / cpu_slot_time < ctx.options.idle_min_share:
        return None  # the cheap check (no rows read) when slots are cores
    lives, unchecked = executor_slots(ctx, gpu)
    slot_time = sum(life.lived_ns * life.slots for life in lives)
    if slot_time <= 0:
        return None
    busy = busy_rows(ctx)
    busy_ns, peak = busy_slots(busy, {life.executor: life.slots for life in lives})
    idle = max(0.0, 1.0 - busy_ns / slot_time)
    if idle < ctx.options.idle_min_share:
        return None
    return _IdleSlots(
        start, span, gpu, lives, unchecked, busy, slot_time, busy_ns, peak, idle
    )


def _unchecked(
    ctx: Context, manager: str | None, in_force: int | None, found: list[str]
) -> list[str]:
    """What the log does not show that the hint's action would rest on."""
    unchecked = list(found)
    if manager is None:
        unchecked.insert(
            0,
            "the log states no master nor a platform's keys: which cluster "
            "manager releases executors, and how, is unknown",
        )
    if not ctx.app.properties:
        unchecked.insert(0, "the log states no Spark properties")
    if in_force is not None and in_force <= PROPOSED_TIMEOUT_NS:
        unchecked.append(
            f"dynamic allocation is on with executorIdleTimeout {duration(in_force)}, "
            "yet executors outlived it: cached blocks "
            "(spark.dynamicAllocation.cachedExecutorIdleTimeout), shuffle "
            "tracking or minExecutors kept them, which the log does not show"
        )
    return unchecked


def _idle_evidence(
    idle: _IdleSlots,
    manager: str | None,
    timeout: int,
    in_force: int | None,
    replayed: Any,
) -> dict[str, object]:
    evidence: dict[str, object] = {
        "idle_share": idle.idle_share,
        "slot_unit": idle.unit,
        "slot_time_ns": idle.slot_ns,
        "idle_ns": idle.slot_ns - idle.busy_ns,
        "slots": idle.slots,
        "executors": len(idle.lives),
        "mean_busy_slots": idle.busy_ns / idle.span_ns,
        "peak_busy_slots": idle.peak,
        "span_ns": idle.span_ns,
        "cluster_manager": manager,
        "timeout_ns": timeout,
        "timeout_in_force_ns": in_force,
        "releases": replayed.releases,
        "cold_starts": replayed.cold_starts,
        "freed_slot_ns": replayed.freed_slot_ns,
        "freed_core_ns": replayed.freed_core_ns,
        "freed_core_s": replayed.freed_core_ns / 1e9,
        "freed_core_h": replayed.freed_core_ns / 3.6e12,
        "gross_freed_core_s": replayed.gross_core_ns / 1e9,
        "freed_by_executor": dict(
            sorted(replayed.by_executor.items(), key=lambda kv: -kv[1])[:_LISTED]
        ),
    }
    if idle.gpu:
        evidence["gpu_slots_per_executor"] = idle.gpu
    return evidence


def _idle_head(idle: _IdleSlots) -> str:
    """How long the slots waited, in a sentence."""
    unit, waited = idle.unit, idle.slot_ns - idle.busy_ns
    head = (
        f"executor {unit}s waited {idle.idle_share:.0%} of their executors' "
        f"lifetimes ({duration(waited)} of {duration(idle.slot_ns)} {unit}-time; on "
        f"average {idle.busy_ns / idle.span_ns:.2g} of {idle.slots} {unit}s were "
        f"busy, at most {idle.peak})"
    )
    if idle.gpu:
        head += (
            f" counting {idle.gpu} GPU slot(s) per executor (concurrent GPU tasks; "
            "idle CPU cores beside a busy GPU are not spare)"
        )
    return head


def _idle_replay(
    idle: _IdleSlots, timeout: int, startup: int, replayed: Any, share: float
) -> str:
    """What the proposed timeout frees, replayed, in a sentence."""
    core_s = replayed.freed_core_ns / 1e9
    return (
        f"an idle timeout of {duration(timeout)} replayed per executor releases "
        f"executors {replayed.releases} time(s) and frees "
        f"{core_s:.3g} core-s ({core_s / 3600:.2g} core-h, {share:.1%} of the "
        f"{idle.unit}-time), net of {replayed.cold_starts} cold start(s) of "
        f"{duration(startup)}"
    )
