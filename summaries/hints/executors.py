"""``straggler_executor`` and ``idle_capacity`` hints.

* ``straggler_executor``: an executor whose whole-run CP share is at least
  ``straggler_factor`` x its fair share (see
  :mod:`~sparktrail.summaries.straggler`) and at least
  ``straggler_min_share``; needs two or more executors. Its GC share is
  ``gc`` time / busy (non-waiting) time of its slots.
* ``idle_capacity``: slot time is (executor slots) x (run span, the trace's
  first start to last end); idle time is what ``waiting`` rows and
  uncovered gaps take of it, i.e. slot time minus the slots' other local
  activities. Fires when idle / slot time >= ``idle_min_share``. Suggested
  dynamic-allocation bounds: ``minExecutors = floor(mean busy slots /
  cores)``, ``maxExecutors = ceil(peak busy slots / cores)``.
"""

from __future__ import annotations

import math

import polars as pl

from ._common import Context, Hint, fmt_s, severity

__all__ = ["idle_capacity", "straggler_executor"]


def _gc_share(slot_time: pl.DataFrame, executor: str) -> float:
    rows = slot_time.filter(
        (pl.col("executor") == executor) & (pl.col("activity") != "waiting")
    )
    busy = int(rows["time_ns"].sum())
    gc = int(rows.filter(pl.col("activity") == "gc")["time_ns"].sum())
    return gc / busy if busy else 0.0


def straggler_executor(ctx: Context) -> list[Hint]:
    """Executors that hold the run back more than their fair share."""
    opts = ctx.options
    rows = ctx.executor.filter(pl.col("role") == "executor")
    if len(rows) < 2:
        return []
    hints = []
    for ex in rows.iter_rows(named=True):
        ratio = ex["ratio"]
        if ratio is None or ratio < opts.straggler_factor:
            continue
        if ex["cp_share"] < opts.straggler_min_share:
            continue
        gc = _gc_share(ctx.slot_time, ex["executor_id"])
        evidence = {
            "cp_share": ex["cp_share"],
            "fair_share": ex["fair_share"],
            "ratio": ratio,
            "slots": ex["slots"],
            "gc_share": gc,
            "executors": len(rows),
        }
        if gc >= opts.gc_high_share:
            why = (
                f"GC took {gc:.0%} of its task time: raise spark.executor.memory "
                "or lower spark.memory.fraction / cache less on it"
            )
        else:
            why = (
                f"GC is only {gc:.0%} of its task time, so check its host "
                "(CPU steal, disk, network)"
            )
        action = (
            f"executor {ex['executor_id']} carries {ex['cp_share']:.0%} of the "
            f"critical path against a fair share of {ex['fair_share']:.0%}: set "
            "spark.speculation=true, spark.speculation.multiplier=1.5, "
            "spark.speculation.quantile=0.75 so its slow tasks get copies; if "
            "it stays slow exclude its host (spark.excludeOnFailure.enabled=true, "
            f"or leave the node out); {why}"
        )
        hints.append(
            Hint(
                "straggler_executor",
                severity(ratio, opts.straggler_factor),
                ex["cp_share"],
                evidence,
                action,
                executor_id=ex["executor_id"],
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


def idle_capacity(ctx: Context) -> list[Hint]:
    """Executor slots that mostly waited: fewer executors or dynamic bounds."""
    trace = ctx.trace
    if trace.is_empty():
        return []
    slots = ctx.slot_time
    workers = slots["src_worker"].n_unique()
    if workers == 0:
        return []
    span = int(trace["end_ns"].max()) - int(trace["start_ns"].min())  # type: ignore[arg-type]
    busy = int(slots.filter(pl.col("activity") != "waiting")["positive_ns"].sum())
    slot_time = workers * span
    if slot_time <= 0:
        return []
    idle = 1.0 - busy / slot_time
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
    local = set(slots["executor"].unique().to_list()) == {"driver"}
    evidence = {
        "idle_share": idle,
        "slot_time_ns": slot_time,
        "idle_ns": slot_time - busy,
        "slots": workers,
        "cores_per_executor": cores,
        "mean_busy_slots": mean,
        "peak_busy_slots": peak,
        "span_ns": span,
    }
    action = (
        f"executor slots waited {idle:.0%} of the run "
        f"({fmt_s(slot_time - busy)} of {fmt_s(slot_time)} slot time; on average "
        f"{mean:.2g} of {workers} slots were busy, at most {peak}): set "
        "spark.dynamicAllocation.enabled=true, "
        f"spark.dynamicAllocation.minExecutors={low}, "
        f"spark.dynamicAllocation.maxExecutors={high}, "
        "spark.dynamicAllocation.executorIdleTimeout=30s"
    )
    if local and peak < workers:
        action += f"; in local mode run with local[{max(1, peak)}]"
    return [
        Hint(
            "idle_capacity",
            severity(idle, ctx.options.idle_min_share),
            0.0,  # idle time is never on the critical path
            evidence,
            action,
        )
    ]
