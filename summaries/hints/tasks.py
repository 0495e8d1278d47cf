"""``straggler_task`` (time skew) and ``hotspot`` (data skew) hints.

Per stage with at least ``min_stage_tasks`` tasks, each task with a high
CP share (``task_min_share``) is compared with the stage's medians:

* records or bytes >= ``skew_factor`` x median -> ``hotspot``. Predicted
  stage time if the hot partition were split in two (partial key grouping:
  half its keys' records go to a second partition): the stage takes as long
  as its longest task (tasks run in parallel when slots suffice), so after
  the split ``max(longest other task, hot task / 2)`` (the second-longest
  task when the hot one is the longest).
* else duration >= ``straggler_task_factor`` x median -> ``straggler_task``
  (the task is slow, not big). Speculation catches it when the multiplier
  is below its slowdown: a copy launched at ``multiplier x median`` that
  takes a median time ends at ``(multiplier + 1) x median``; the quantile
  must let the check start while only the straggler runs,
  ``quantile <= (n - 1) / n``.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from ..operator import stage_name
from ._common import Context, Hint, fmt_s, severity

__all__ = ["task_hints"]

SPECULATION_QUANTILE = 0.75
MIN_MULTIPLIER, MAX_MULTIPLIER = 1.5, 3.0


def _ratio(value: Any, median: Any) -> float | None:
    if value is None or median is None:
        return None
    if median <= 0:
        return math.inf if value > 0 else None
    return float(value) / float(median)


def _critical_with_stage_stats(
    tasks: pl.DataFrame, min_tasks: int, critical: pl.Expr
) -> pl.DataFrame:
    """The ``critical`` tasks of stages with ``min_tasks`` tasks or more,
    each with its stage's task count and medians (in task order)."""
    stats = (
        tasks.lazy()
        .filter(pl.col("stage_id").is_not_null())
        .group_by("stage_id")
        .agg(
            pl.col("task_id").count().alias("stage_tasks"),
            pl.col("duration_ns").median().alias("median_ns"),
            pl.col("records").median().alias("median_records"),
            pl.col("bytes").median().alias("median_bytes"),
        )
        .filter(pl.col("stage_tasks") >= min_tasks)
    )
    name, call_site = stage_name(pl.col("operator"))
    # The few critical tasks are picked before the join and the name
    # parsing: a long trace has millions of tasks.
    return (
        tasks.lazy()
        .filter(pl.col("stage_id").is_not_null() & critical)
        .join(stats, on="stage_id", how="inner", maintain_order="left")
        .with_columns(name.alias("name"), call_site.alias("call_site"))
        .collect()
    )


def _where(task: dict[str, Any]) -> str:
    site = task["call_site"] or task["name"] or "unknown call site"
    return f"partition {task['partition']} of stage {task['stage_id']} ({site})"


def _base_evidence(task: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "task_id",
        "worker",
        "duration_ns",
        "median_ns",
        "records",
        "median_records",
        "bytes",
        "median_bytes",
        "stage_tasks",
        "cp_share",
        "running_cp_share",
    )
    return {k: task[k] for k in keys}


def _hotspot(
    task: dict[str, Any], ratio: float, durations: list[int], ctx: Context
) -> Hint:
    longest = durations[0]
    others = list(durations)
    others.remove(task["duration_ns"])
    second = others[0] if others else 0
    predicted = max(second, task["duration_ns"] / 2)
    evidence = _base_evidence(task) | {
        "skew_ratio": ratio,
        "stage_time_ns": longest,
        "longest_other_ns": second,
        "predicted_stage_time_ns": predicted,
    }
    factor = ctx.options.skew_factor
    action = (
        f"{_where(task)} holds {ratio:.1f}x the stage's median records/bytes: "
        "salt its hot key and split it over two partitions (partial key "
        "grouping: add a random 0/1 to the key, aggregate, then combine the "
        "two halves); for a join set spark.sql.adaptive.enabled=true, "
        "spark.sql.adaptive.skewJoin.enabled=true, "
        f"spark.sql.adaptive.skewJoin.skewedPartitionFactor={factor:g}. "
        f"Predicted stage time {fmt_s(longest)} -> {fmt_s(predicted)}."
    )
    return Hint(
        "hotspot",
        severity(ratio, factor),
        task["cp_share"],
        evidence,
        action,
        task["stage_id"],
        task["executor"],
        task["partition"],
    )


def _straggler(task: dict[str, Any], ratio: float, ctx: Context) -> Hint:
    n = task["stage_tasks"]
    quantile = min(SPECULATION_QUANTILE, math.floor(100 * (n - 1) / n) / 100)
    multiplier = round(min(MAX_MULTIPLIER, max(MIN_MULTIPLIER, ratio / 2)), 1)
    predicted = (multiplier + 1) * task["median_ns"]
    evidence = _base_evidence(task) | {
        "duration_ratio": ratio,
        "predicted_task_ns": predicted,
    }
    action = (
        f"task {task['task_id']} ran {ratio:.1f}x the stage's median time on "
        "normal-sized input: set spark.speculation=true, "
        f"spark.speculation.quantile={quantile:g}, "
        f"spark.speculation.multiplier={multiplier:g} (a copy would end after "
        f"~{fmt_s(predicted)} instead of {fmt_s(task['duration_ns'])}); inspect "
        f"{_where(task)} on {task['worker']}"
    )
    return Hint(
        "straggler_task",
        severity(ratio, ctx.options.straggler_task_factor),
        task["cp_share"],
        evidence,
        action,
        task["stage_id"],
        task["executor"],
        task["partition"],
    )


def task_hints(ctx: Context) -> list[Hint]:
    """``hotspot`` and ``straggler_task`` hints of every stage.

    Examples
    --------
    See ``tests/summaries/test_hints.py``; a balanced trace gives none.
    """
    opts = ctx.options
    critical = pl.col("running_cp_share") >= opts.task_min_share
    tasks = _critical_with_stage_stats(ctx.tasks, opts.min_stage_tasks, critical)
    hints: list[Hint] = []
    for task in tasks.iter_rows(named=True):
        skew = [
            r
            for r in (
                _ratio(task["records"], task["median_records"]),
                _ratio(task["bytes"], task["median_bytes"]),
            )
            if r is not None
        ]
        if skew and max(skew) >= opts.skew_factor:
            stage = ctx.tasks.filter(pl.col("stage_id") == task["stage_id"])
            durations = sorted(stage["duration_ns"].to_list(), reverse=True)
            hints.append(_hotspot(task, max(skew), durations, ctx))
            continue
        slow = _ratio(task["duration_ns"], task["median_ns"])
        if slow is not None and slow >= opts.straggler_task_factor:
            hints.append(_straggler(task, slow, ctx))
    return hints
