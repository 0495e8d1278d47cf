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
slots would help). Slots are the cores of the executors alive while the
stage ran (``ExecutorAdded``), not the task timelines it happened to use:
a one-task stage on a two-core executor left a slot idle. Records only
give the rates in the evidence: ``pi = ceil(useful time / T*)`` needs
none, so a CPU-bound stage that reads nothing is sized too. When ``pi``
fits in the slots the application has, the action is more partitions;
beyond them, more executors (``local[pi]`` on a local master).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from sparktrail.whatif.changes import StagePartitions

from ._common import Context, Hint, fmt_s, severity

__all__ = ["parallelism"]


def _stage(ctx: Context, stage_id: int) -> tuple[dict[str, float], int | None]:
    """The stage's task numbers, and its first task's launch (None: no task)."""
    # A stage whose rows carry no task ids (a hand-made trace) has no tasks.
    row = ctx.stage_row(stage_id)
    if row is None:
        zero = {"tasks": 0, "records": 0.0, "useful_ns": 0.0}
        return zero | {"stage_time_ns": 0.0, "slots_now": 0}, None
    numbers = {
        "tasks": row["tasks"],
        "records": float(row["records"]),
        "useful_ns": float(row["useful_ns"]),
        "stage_time_ns": float(row["end_ns"] - row["launch_ns"]),
        "slots_now": row["workers"],
    }
    return numbers, row["launch_ns"]


def _action(
    ctx: Context, op: dict[str, Any], s: dict[str, Any], pi: int, partitions: int
) -> str:
    where = op["call_site"] or op["name"] or f"stage {op['stage_id']}"
    head = (
        f"stage {op['stage_id']} ({where}) is {op['cp_share']:.0%} of the critical path"
    )
    if s["records"] > 0:
        head += (
            f"; its true rate is {s['true_rate']:.3g} records/s per slot "
            f"(observed {s['observed_rate']:.3g}/s on {s['slots_now']} slots)"
        )
    split = (
        f"at least {partitions} partitions (repartition({partitions}) before it, "
        f"or spark.sql.shuffle.partitions={partitions} / "
        f"spark.default.parallelism={partitions} where it reads a shuffle)"
    )
    if pi <= s["slots"]:
        return (
            f"{head}. It ran {s['tasks']} task(s) on {s['slots_now']} of the "
            f"{s['slots']} slots the application had: split its work into {split}"
        )
    cores = ctx.slots_per_executor()
    if ctx.app.is_local:
        more = f"run with local[{pi}] on a machine with {pi} cores"
    else:
        executors = math.ceil(pi / cores)
        more = (
            f"spark.executor.cores={cores} with spark.executor.instances={executors} "
            f"(or spark.dynamicAllocation.maxExecutors={executors})"
        )
    return (
        f"{head}. To finish in {fmt_s(s['target_ns'])} it needs pi = {pi} slots "
        f"(it had {s['slots']}): {more}, and {split}"
    )


def parallelism(ctx: Context) -> list[Hint]:
    """Slot counts and partitions (DS2) for stages that dominate the path."""
    opts = ctx.options
    stages = ctx.operator.filter(
        pl.col("stage_id").is_not_null()
        & (pl.col("cp_share") >= opts.parallelism_min_share)
    )
    if stages.is_empty():
        return []
    hints = []
    for op in stages.iter_rows(named=True):
        numbers, first = _stage(ctx, op["stage_id"])
        s: dict[str, Any] = dict(numbers)
        if s["tasks"] == 0 or s["useful_ns"] <= 0 or s["stage_time_ns"] <= 0:
            continue
        start = int(first)  # type: ignore[arg-type]
        s["slots"] = ctx.slots_during(start, start + int(s["stage_time_ns"]))
        if opts.target_stage_seconds is not None:
            target_ns = opts.target_stage_seconds * 1e9
        elif s["slots_now"] < s["slots"]:
            target_ns = s["useful_ns"] / s["slots"]
        else:
            continue
        # DS2: pi = target rate / true rate per slot = useful time / target.
        pi = math.ceil(s["useful_ns"] / target_ns - 1e-9)
        if pi <= s["slots_now"]:
            continue
        partitions = max(int(s["tasks"]), pi)
        s |= {
            "target_ns": target_ns,
            "true_rate": s["records"] / s["useful_ns"] * 1e9,
            "observed_rate": s["records"] / s["stage_time_ns"] * 1e9,
        }
        evidence = {k: v for k, v in s.items() if k not in ("true_rate",)} | {
            "cp_share": op["cp_share"],
            "true_rate_per_slot": s["true_rate"] if s["records"] > 0 else None,
            "observed_rate": s["observed_rate"] if s["records"] > 0 else None,
            "target_stage_ns": target_ns,
            "target_rate": s["records"] / target_ns * 1e9 if s["records"] > 0 else None,
            "pi": pi,
            "partitions": partitions,
        }
        predicted = s["useful_ns"] / min(pi, s["slots"])
        critical_ns = op["cp_share"] * ctx.wall_ns
        saving = min(critical_ns, max(0.0, s["stage_time_ns"] - predicted))
        hints.append(
            Hint(
                "parallelism",
                severity(op["cp_share"], opts.parallelism_min_share),
                op["cp_share"],
                evidence,
                _action(ctx, op, s, pi, partitions),
                stage_id=op["stage_id"],
                predicted_saving_ns=saving,
                change=StagePartitions(op["stage_id"], partitions),
            )
        )
    return hints
