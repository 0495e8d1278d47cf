"""``straggler_executor`` and ``idle_capacity`` hints.

* ``straggler_executor``: an executor that is slow at the same work, or
  holds more of the path than its share:

  - *slowdown*: in the stages where it and other executors each ran
    ``straggler_min_tasks`` tasks or more (each executor's first wave left
    out: it carries start-up), its median task time over theirs; the
    median of those ratios (at least ``straggler_slowdown``). This
    compares like with like, so it does not flip with how the run's
    windows split the fair share;
  - or its whole-run CP share is ``straggler_factor`` x its fair share
    (see :mod:`~sparktrail.summaries.straggler`) and at least
    ``straggler_min_share``.

  Needs two or more executors. Its GC share is ``gc`` time / busy
  (non-waiting) time of its slots. Predicted saving: its critical time
  times ``1 - 1 / slowdown`` (its tasks at the others' speed).
* ``idle_capacity``: slot time is each executor's cores times how long it
  lived (``ExecutorAdded``/``Removed``; without them, the task timelines
  times the run span); idle time is slot time minus the slots' busy (not
  ``waiting``) rows. Fires when idle / slot time >= ``idle_min_share``,
  never on a ``local`` master (one JVM: dynamic allocation is ignored and
  idle cores cost nothing). Suggested dynamic-allocation bounds:
  ``minExecutors = floor(mean busy slots / cores)``, ``maxExecutors =
  ceil(peak busy slots / cores)``; when dynamic allocation is already on,
  the action names what to tune instead. Its saving is capacity, not wall
  time: ``predicted_saving_ns`` is the core time freed (``maxExecutors``
  below today's count frees the rest of the span; dynamic allocation, when
  not on yet, is assumed to free ``DYNAMIC_RELEASE`` of the idle core
  time) and ``saving_share`` its share of the slot time.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from ._common import Context, Hint, fmt_s, settings_text, severity
from .platform import interactive_signs

__all__ = ["idle_capacity", "straggler_executor"]

#: The share of idle core time that dynamic allocation is assumed to free.
DYNAMIC_RELEASE = 0.5


def _gc_share(slot_time: pl.DataFrame, executor: str) -> float:
    rows = slot_time.filter(
        (pl.col("executor") == executor) & (pl.col("activity") != "waiting")
    )
    busy = int(rows["time_ns"].sum())
    gc = int(rows.filter(pl.col("activity") == "gc")["time_ns"].sum())
    return gc / busy if busy else 0.0


def _first_waves(tasks: pl.DataFrame) -> pl.Expr:
    """Tasks launched on an executor before any task there finished: they
    carry its start-up (JVM, Python workers), not its speed."""
    first_end = pl.col("end_ns").min().over("executor")
    return pl.col("launch_ns") < first_end


def _slowdowns(tasks: pl.DataFrame, min_tasks: int) -> dict[str, float]:
    """Each executor's median over stages of (its median task time / the
    other executors' median task time in the same stage), counting only
    stages where each side ran ``min_tasks`` tasks or more, and leaving out
    each executor's first wave of tasks."""
    # Only the columns read are filtered (selecting them copies nothing).
    tasks = tasks.select(
        "executor", "stage_id", "status", "duration_ns", "launch_ns", "end_ns"
    )
    done = (
        tasks.filter(
            pl.col("executor").is_not_null()
            & pl.col("stage_id").is_not_null()
            & (pl.col("status").is_null() | (pl.col("status") == "success"))
        )
        .filter(~_first_waves(tasks))
        .select("stage_id", "executor", "duration_ns")
    )
    if done.is_empty():
        return {}
    own = done.group_by("stage_id", "executor").agg(
        pl.col("duration_ns").median().alias("own"), pl.len().alias("n")
    )
    # The others' medians in numpy, over executor codes: a polars filter
    # per (stage, executor) was a query each (~0.2 ms).
    names = done["executor"].unique().to_list()
    codes = done["executor"].replace_strict(
        names, list(range(len(names))), return_dtype=pl.Int64
    )
    code, stage_of = codes.to_numpy(), done["stage_id"].to_numpy()
    durations = done["duration_ns"].to_numpy()
    ratios: dict[str, list[float]] = {}
    for stage, executor, median_own, _ in own.filter(pl.col("n") >= min_tasks).rows():
        others = durations[(stage_of == stage) & (code != names.index(executor))]
        if len(others) < min_tasks:
            continue
        median = float(np.median(others))
        if median > 0:
            ratios.setdefault(str(executor), []).append(float(median_own) / median)
    return {ex: sorted(r)[len(r) // 2] for ex, r in ratios.items()}


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


def _speculation_advice(ctx: Context) -> str:
    if ctx.app.flag("spark.speculation"):
        multiplier = ctx.app.setting("spark.speculation.multiplier") or "1.5"
        quantile = ctx.app.setting("spark.speculation.quantile") or "0.75"
        return (
            f"speculation is already on (multiplier {multiplier}, quantile "
            f"{quantile}) and did not catch it, since every task there is slow, "
            "not a few: exclude its host (spark.excludeOnFailure.enabled=true, "
            "or leave the node out)"
        )
    return (
        "set spark.speculation=true, spark.speculation.multiplier=1.5, "
        "spark.speculation.quantile=0.75 so its slow tasks get copies; if it "
        "stays slow exclude its host (spark.excludeOnFailure.enabled=true, or "
        "leave the node out)"
    )


#: An executor with less of the critical path than this held nothing back.
MIN_CRITICAL_SHARE = 0.02


def straggler_executor(ctx: Context) -> list[Hint]:
    """Executors that are slow at the same work, or hold the run back more
    than their fair share."""
    opts = ctx.options
    rows = ctx.executor.filter(pl.col("role") == "executor")
    if len(rows) < 2:
        return []
    slowdowns = _slowdowns(ctx.tasks, opts.straggler_min_tasks)
    has_path = bool(ctx.executor["cp_share"].sum() > 0)
    hints = []
    for ex in rows.iter_rows(named=True):
        ratio = ex["ratio"]
        slowdown = slowdowns.get(str(ex["executor_id"]))
        slow = slowdown is not None and slowdown >= opts.straggler_slowdown
        unfair = ratio is not None and ratio >= opts.straggler_factor
        unfair = unfair and ex["cp_share"] >= opts.straggler_min_share
        if not (slow or unfair) or (has_path and ex["cp_share"] < MIN_CRITICAL_SHARE):
            continue  # a slow executor off the critical path held nothing back
        if slowdown is not None and slowdown < 1.0:
            continue  # it holds the path because it ran more, not slower
        gc = _gc_share(ctx.slot_time, ex["executor_id"])
        evidence = {
            "cp_share": ex["cp_share"],
            "fair_share": ex["fair_share"],
            "ratio": ratio,
            "slowdown": slowdown,
            "slots": ex["slots"],
            "gc_share": gc,
            "executors": len(rows),
        }
        if gc >= opts.gc_high_share:
            memory = "spark.executor.memory"
            if ctx.app.is_local:
                memory = "spark.driver.memory"  # local executors live in the driver
            why = (
                f"GC took {gc:.0%} of its task time: raise {memory} "
                "or lower spark.memory.fraction / cache less on it"
            )
        else:
            why = (
                f"GC is only {gc:.0%} of its task time, so check its host "
                "(CPU steal, disk, network)"
            )
        speed = (
            f"its tasks take {slowdown:.1f}x as long as the same stages' tasks "
            "elsewhere and it "
            if slow and slowdown is not None
            else ""
        )
        action = (
            f"executor {ex['executor_id']}: {speed}carries {ex['cp_share']:.0%} of "
            f"the critical path against a fair share of {ex['fair_share']:.0%}: "
            f"{_speculation_advice(ctx)}; {why}"
        )
        critical_ns = ex["cp_share"] * ctx.wall_ns
        saving = _saving(ctx, str(ex["executor_id"]), critical_ns, slowdown)
        hints.append(
            Hint(
                "straggler_executor",
                severity(ratio or 0.0, opts.straggler_factor),
                ex["cp_share"],
                evidence,
                action,
                executor_id=ex["executor_id"],
                predicted_saving_ns=saving,
            )
        )
    return hints


def _peak_busy(rows: pl.LazyFrame) -> int:
    events = pl.concat(
        [
            rows.select(pl.col("start_ns").alias("t"), pl.lit(1, pl.Int8).alias("d")),
            rows.select(pl.col("end_ns").alias("t"), pl.lit(-1, pl.Int8).alias("d")),
        ]
    ).sort("t", "d")
    peak = events.select(pl.col("d").cast(pl.Int64).cum_sum().max()).collect().item()
    return int(peak or 0)


def _dynamic_allocation_advice(ctx: Context, low: int, high: int) -> str:
    app = ctx.app
    if app.flag("spark.dynamicAllocation.enabled"):
        now_max = app.setting("spark.dynamicAllocation.maxExecutors") or "unbounded"
        timeout = app.setting("spark.dynamicAllocation.executorIdleTimeout") or "60s"
        return (
            "dynamic allocation is already on, yet executors sat idle: they "
            f"are released only after spark.dynamicAllocation.executorIdleTimeout "
            f"({timeout}) and up to maxExecutors ({now_max}); lower the timeout "
            f"(e.g. 30s) and set spark.dynamicAllocation.maxExecutors={high}"
        )
    wanted = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.minExecutors": str(low),
        "spark.dynamicAllocation.maxExecutors": str(high),
        "spark.dynamicAllocation.executorIdleTimeout": "30s",
    }
    return f"set {settings_text(app, wanted)}"


def idle_capacity(ctx: Context) -> list[Hint]:
    """Executor slots that mostly waited: fewer executors or dynamic bounds.

    Not on a ``local`` or ``local-cluster`` master (one machine, a test
    harness: no executor to give back), nor in an interactive session,
    whose slots wait while a person thinks (:mod:`.platform`).
    """
    trace = ctx.trace
    master = (ctx.app.master or "").strip()
    if trace.is_empty() or ctx.app.is_local or master.startswith("local-cluster"):
        return []
    if interactive_signs(ctx.app, ctx.stage_labels.values()):
        return []
    workers, busy = ctx.slot_busy
    if workers == 0:
        return []
    start, end = ctx.span_ns
    span = end - start
    slot_time = ctx.app.slot_ns(start, end) or workers * span
    if slot_time <= 0:
        return []
    idle = max(0.0, 1.0 - busy / slot_time)
    if idle < ctx.options.idle_min_share:
        return []
    cores = ctx.slots_per_executor()
    # Rows, not sums: read again from the trace only when the hint fires.
    busy_rows = ctx.slot_rows().filter(
        (pl.col("activity") != "waiting") & (pl.col("end_ns") > pl.col("start_ns"))
    )
    peak = _peak_busy(busy_rows)
    mean = busy / span
    low, high = math.floor(mean / cores), max(1, math.ceil(peak / cores))
    executors = max(1, round(slot_time / span / cores))
    if high >= executors and not ctx.app.flag("spark.dynamicAllocation.enabled"):
        # Every executor was busy at the peak: fewer would slow that part.
        high = executors
    dynamic = bool(ctx.app.flag("spark.dynamicAllocation.enabled"))
    static = max(0, slot_time - high * cores * span)
    # Releasing idle executors frees part of their idle time: executors
    # live out the idle timeout, and come back for the next burst.
    freed = static if dynamic else max(static, DYNAMIC_RELEASE * (slot_time - busy))
    evidence: dict[str, object] = {
        "idle_share": idle,
        "slot_time_ns": slot_time,
        "idle_ns": slot_time - busy,
        "slots": round(slot_time / span),
        "cores_per_executor": cores,
        "mean_busy_slots": mean,
        "peak_busy_slots": peak,
        "span_ns": span,
        "freed_core_ns": freed,
    }
    if not ctx.app.properties:
        # No EnvironmentUpdate: what the application ran with is unknown.
        evidence["unchecked"] = "the log states no Spark properties"
    action = (
        f"executor slots waited {idle:.0%} of the run "
        f"({fmt_s(slot_time - busy)} of {fmt_s(slot_time)} slot time; on average "
        f"{mean:.2g} of {evidence['slots']} slots were busy, at most {peak}): "
        f"{_dynamic_allocation_advice(ctx, low, high)}"
    )
    return [
        Hint(
            "idle_capacity",
            severity(idle, ctx.options.idle_min_share),
            0.0,  # idle time is never on the critical path
            evidence,
            action,
            predicted_saving_ns=float(freed),
            saving_share=freed / slot_time,
        )
    ]
