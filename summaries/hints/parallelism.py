"""``parallelism`` hint: DS2's slot count for stages on the critical path.

DS2 (Kalavri et al., OSDI 2018) sizes an operator by its *true* rate, the
rate it processes at while doing useful work, not its observed rate, which
also counts time spent waiting. For a stage (operator) whose whole-run CP
share is at least ``parallelism_min_share``:

* true rate per slot = records / useful time, summed over the stage's
  tasks; useful time is deserialization + processing + GC + shuffle write +
  result serialization (not scheduler delay, fetch wait or result fetch);
* target time ``T*`` = ``target_stage_seconds`` if given; target rate =
  records / ``T*``. Without a target the only evidence for more slots is
  capacity the stage left idle: when it ran on fewer slots than the
  application has, ``T*`` is its useful time spread over all of them (so
  ``pi`` = every slot); when it used them all, there is no hint;
* ``pi = ceil(target rate / true rate per slot)`` (= ceil(useful time /
  ``T*``)) slots, and at least ``pi`` partitions so every slot has a task.

The hint fires only when ``pi`` exceeds the slots the stage ran on (more
slots would help); a stage with no records has no rate and no hint.
"""

from __future__ import annotations

import math

import polars as pl

from ._common import Context, Hint, fmt_s, severity

__all__ = ["parallelism"]


def _stage(tasks: pl.DataFrame, stage_id: int) -> dict[str, float]:
    rows = tasks.filter(pl.col("stage_id") == stage_id)
    # A stage whose rows carry no task ids (a hand-made trace) has no tasks.
    span = rows.select(pl.col("end_ns").max() - pl.col("launch_ns").min()).item()
    return {
        "tasks": len(rows),
        "records": float(rows["records"].sum()),
        "useful_ns": float(rows["useful_ns"].sum()),
        "stage_time_ns": float(span or 0),
        "slots_now": rows["worker"].n_unique(),
    }


def parallelism(ctx: Context) -> list[Hint]:
    """Slot counts and partitions (DS2) for stages that dominate the path."""
    opts = ctx.options
    stages = ctx.operator.filter(
        pl.col("stage_id").is_not_null()
        & (pl.col("cp_share") >= opts.parallelism_min_share)
    )
    if stages.is_empty():
        return []
    tasks = ctx.tasks
    cores = ctx.slots_per_executor()
    hints = []
    for op in stages.iter_rows(named=True):
        s = _stage(tasks, op["stage_id"])
        if s["tasks"] == 0 or s["records"] <= 0 or s["useful_ns"] <= 0:
            continue
        if s["stage_time_ns"] <= 0:
            continue
        if opts.target_stage_seconds is not None:
            target_ns = opts.target_stage_seconds * 1e9
        elif s["slots_now"] < ctx.total_slots():
            target_ns = s["useful_ns"] / ctx.total_slots()
        else:
            continue
        true_rate = s["records"] / s["useful_ns"] * 1e9  # records/s per slot
        target_rate = s["records"] / target_ns * 1e9
        pi = math.ceil(target_rate / true_rate - 1e-9)
        if pi <= s["slots_now"]:
            continue
        partitions = max(int(s["tasks"]), pi)
        evidence = s | {
            "cp_share": op["cp_share"],
            "true_rate_per_slot": true_rate,
            "observed_rate": s["records"] / s["stage_time_ns"] * 1e9,
            "target_stage_ns": target_ns,
            "target_rate": target_rate,
            "pi": pi,
            "partitions": partitions,
        }
        where = op["call_site"] or op["name"] or f"stage {op['stage_id']}"
        action = (
            f"stage {op['stage_id']} ({where}) is {op['cp_share']:.0%} of the "
            f"critical path; its true rate is {true_rate:.3g} records/s per slot "
            f"(observed {evidence['observed_rate']:.3g}/s on {s['slots_now']} "
            f"slots). To finish in {fmt_s(target_ns)} ({target_rate:.3g} "
            f"records/s) it needs pi = {pi} slots: spark.executor.cores={cores} "
            f"with spark.executor.instances={math.ceil(pi / cores)} (or "
            f"spark.dynamicAllocation.maxExecutors={math.ceil(pi / cores)}), "
            f"and at least {partitions} partitions "
            f"(spark.sql.shuffle.partitions={partitions} or "
            f"repartition({partitions}) before it)"
        )
        hints.append(
            Hint(
                "parallelism",
                severity(op["cp_share"], opts.parallelism_min_share),
                op["cp_share"],
                evidence,
                action,
                stage_id=op["stage_id"],
            )
        )
    return hints
