"""``over_partitioned`` hint: stages of many tiny tasks whose fixed costs
dominate.

A task pays fixed costs however little data it has: the driver's launch
(``scheduling``), task deserialization, result serialization and the
result's trip back (``result``). Spark's tuning guide aims for tasks of
about 100 ms (``target_task_ms``); far below that, those costs are most of
the stage. For a stage with at least ``over_partitioned_min_tasks`` tasks
and twice as many tasks as the application has slots:

* its median task is shorter than ``over_partitioned_task_ms`` and its
  fixed costs (CP per activity of the stage, launch messages included)
  are at least ``over_partitioned_fixed_share`` of its critical time; or
  its median task reads under ``over_partitioned_task_bytes`` (far below
  AQE's 64 MB target partition size, so timings inflated by a busy
  machine cannot hide it) and the fixed costs are at least
  ``over_partitioned_fixed_share_small_data``;
* its critical time is at least ``over_partitioned_min_share`` of the run.

Suggested partitions ``n = max(slots, ceil(work / target_task_ms))``, with
``work`` the stage's task time less its fixed costs (by size: ``max(slots,
ceil(bytes / 64 MB))``). The predicted stage
time is ``ceil(n / slots)`` waves of ``work / n`` plus one fixed cost
(the median's) each; the saving is the stage's critical time less that.
The action names the shuffle setting to lower, or, where it is already at
``n`` or below, AQE's coalescing (or why AQE did not coalesce, when it is
on: ``parallelismFirst`` keeps the default parallelism).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from sparktrail.units import duration
from sparktrail.whatif.changes import StagePartitions

from ..operator import stage_label
from .hint import Hint
from .inputs import Context
from .remedies import remedies, remedy_text

__all__ = ["FIXED_ACTIVITIES", "over_partitioned", "over_partitioned_stages"]

#: Per-task costs that do not shrink with the task's data.
FIXED_ACTIVITIES = (
    "scheduling",
    "deserialization",
    "serialization",
    "result",
    "control",
)
#: AQE's target partition size (spark.sql.adaptive.advisoryPartitionSizeInBytes).
ADVISORY_BYTES = 64 << 20


@dataclass(frozen=True)
class TinyStage:
    """A stage whose fixed per-task costs dominate (see the module notes)."""

    stage_id: int
    tasks: int
    median_task_ns: float
    fixed_share: float
    critical_ns: float
    work_ns: float
    slots: int
    partitions: int
    predicted_stage_ns: float
    stage_ns: float
    #: A task's floor (the time it takes however little it reads), when
    #: that, not its launch, is the fixed cost (``None``: the launch).
    floor_ns: float | None = None


def _stage_cp(ctx: Context) -> pl.DataFrame:
    """``stage_id, cp, fixed_cp``: each stage's CP and its fixed-cost part."""
    fixed = pl.col("activity").is_in(FIXED_ACTIVITIES)
    return (
        ctx.partials.stages.filter(pl.col("stage_id").is_not_null())
        .group_by("stage_id")
        .agg(pl.col("cp").sum(), pl.col("cp").filter(fixed).sum().alias("fixed_cp"))
        .filter(pl.col("cp") > 0)
    )


#: Engines whose tasks run Python code: each pays the Python side's start.
PYTHON_ENGINES = frozenset({"pandas_udf", "python_udf", "pyspark_rdd"})
#: Waves of tasks (tasks over slots) a stage needs for its floor to be
#: told from its tasks' work.
FLOOR_WAVES = 10
#: Bytes of a median (JVM) task few enough that its time is its floor.
TINY_BYTES = 64 << 10
#: Records of a median task few enough that its time is its floor.
FLOOR_MAX_RECORDS = 10_000
#: A stage's floor: this quantile of its tasks' times.
FLOOR_QUANTILE = 0.1
#: A floor at least this share of the median task is most of every task.
FLOOR_SHARE = 0.4


def _floor_ns(ctx: Context, stage_id: int, median_ns: float) -> float | None:
    """The time every task of the stage takes however little it reads: the
    :data:`FLOOR_QUANTILE` of its settled tasks' times, when that is at
    least :data:`FLOOR_SHARE` of the median (``None`` otherwise)."""
    settled = ~pl.col("status").fill_null("success").is_in(["failed", "killed"])
    times = ctx.tasks.filter((pl.col("stage_id") == stage_id) & settled)["duration_ns"]
    if times.is_empty() or median_ns <= 0:
        return None
    floor = float(times.quantile(FLOOR_QUANTILE, "lower") or 0.0)
    return floor if floor >= FLOOR_SHARE * median_ns else None


def _median_written(ctx: Context, stage_id: int) -> float:
    """The median shuffle bytes a task of the stage wrote (0: none)."""
    if "shuffle_write_bytes" not in ctx.tasks.columns:
        return 0.0
    written = ctx.tasks.filter(pl.col("stage_id") == stage_id)["shuffle_write_bytes"]
    median = written.fill_null(0).median()
    return float(median or 0.0)  # type: ignore[arg-type]


def _python_floor(ctx: Context, stage: dict[str, Any], slots: int) -> float | None:
    """The floor of a Python stage's tasks over a few rows each (its
    worker's batches, the UDF's start: what every task pays however little
    it reads; a JVM task's time over tiny data is its launch, which the
    fixed activities count), when :func:`_floor_ns` finds one: a stage of
    :data:`FLOOR_WAVES` waves or more (a few slow first tasks, starting the
    workers, aside)."""
    stage_id = stage["stage_id"]
    median_records = stage["median_records"]
    median_bytes = stage["median_bytes"]
    python = ctx.facts.engine(stage_id) in PYTHON_ENGINES
    tiny = (
        median_records is not None and float(median_records) < FLOOR_MAX_RECORDS
    ) and (python or (median_bytes is not None and float(median_bytes) < TINY_BYTES))
    if not tiny or stage["tasks"] < FLOOR_WAVES * slots:
        return None
    if _median_written(ctx, stage_id) >= TINY_BYTES:
        return None  # it made data of its own (a range, a generator): work
    return _floor_ns(ctx, stage_id, float(stage["median_ns"] or 0.0))


def over_partitioned_stages(ctx: Context) -> list[TinyStage]:
    """The stages :func:`over_partitioned` names, largest critical time first."""
    opts = ctx.options
    if ctx.n_windows == 0 or ctx.tasks.is_empty():
        return []
    window_ns = ctx.wall_ns / max(1, ctx.n_windows)
    base = ctx.judged_ns
    found = []
    for row in _stage_cp(ctx).iter_rows(named=True):
        critical_ns = row["cp"] * window_ns
        fixed_share = row["fixed_cp"] / row["cp"]
        if critical_ns < opts.over_partitioned_min_share * base:
            continue
        stage = ctx.stage_row(row["stage_id"])
        if stage is None:  # CP rows without a task (a hand-made trace)
            continue
        if not ctx.facts.whole_stage(row["stage_id"]):
            continue
        n = stage["tasks"]
        slots = ctx.slots_during(stage["launch_ns"], stage["end_ns"])
        if n < max(opts.over_partitioned_min_tasks, 2 * slots):
            continue
        floor = None
        if fixed_share < min(
            opts.over_partitioned_fixed_share,
            opts.over_partitioned_fixed_share_small_data,
        ):
            # Launches are cheap, but a Python task pays a floor of its own.
            floor = _python_floor(ctx, stage, slots)
            if floor is None:
                continue
            fixed_share = floor / float(stage["median_ns"])
        median = float(stage["median_ns"] or 0.0)
        median_bytes = stage["median_bytes"]
        tiny_time = 0 < median / 1e6 < opts.over_partitioned_task_ms
        tiny_data = (
            median_bytes is not None
            and float(median_bytes) < opts.over_partitioned_task_bytes  # type: ignore[arg-type]
            and fixed_share >= opts.over_partitioned_fixed_share_small_data
        )
        if not (tiny_time or tiny_data):
            continue
        total = float(stage["duration_ns"])
        work = max(0.0, total * (1 - fixed_share))
        by_time = math.ceil(work / 1e6 / opts.target_task_ms)
        by_size = math.ceil(float(stage["bytes"] or 0) / ADVISORY_BYTES)
        partitions = max(slots, by_size if tiny_data else by_time)
        if partitions >= n:
            continue
        fixed_each = floor if floor is not None else median * fixed_share
        predicted = math.ceil(partitions / slots) * (work / partitions + fixed_each)
        # Merging tasks never shortens the longest one (a hot partition
        # stays whole): the stage takes at least as long as it.
        predicted = max(predicted, float(stage["longest_ns"] or 0.0))
        if (
            tiny_time
            and not tiny_data
            and fixed_share < opts.over_partitioned_fixed_share
        ):
            continue
        found.append(
            TinyStage(
                row["stage_id"],
                n,
                median,
                fixed_share,
                critical_ns,
                work,
                slots,
                partitions,
                predicted,
                float(stage["end_ns"] - stage["launch_ns"]),
                floor,
            )
        )
    return sorted(found, key=lambda s: (-s.critical_ns, s.stage_id))


def _remedy(ctx: Context, stage: TinyStage) -> str:
    """The catalogue's remedies for fewer partitions that fit the stage
    (:mod:`.remedies`), else the rule's own advice."""
    facts = ctx.facts
    found = facts.stage(stage.stage_id)
    if found is None or found.engine is None:
        return _setting_advice(ctx, stage)
    now = facts.setting("spark.sql.shuffle.partitions", stage.stage_id) or "200"
    texts = remedies(
        "fewer_partitions",
        facts,
        engine=found.engine,
        reads=found.reads,
        stage_id=stage.stage_id,
        n=stage.partitions,
        now=now,
    )
    return remedy_text(texts, _setting_advice(ctx, stage))


def _setting_advice(ctx: Context, stage: TinyStage) -> str:
    app, n = ctx.app, stage.partitions
    now = app.setting("spark.sql.shuffle.partitions")
    advice = []
    if now is None or not now.strip().isdigit() or int(now) > n:
        was = f" (now {now})" if now else ""
        advice.append(f"spark.sql.shuffle.partitions={n}{was}")
    if not app.flag("spark.sql.adaptive.enabled"):
        advice.append(
            "spark.sql.adaptive.enabled=true with "
            "spark.sql.adaptive.coalescePartitions.enabled=true"
        )
    elif (
        app.flag("spark.sql.adaptive.coalescePartitions.parallelismFirst") is not False
    ):
        advice.append(
            "AQE is on but coalesces only down to the default parallelism "
            "(parallelismFirst): set "
            "spark.sql.adaptive.coalescePartitions.parallelismFirst=false"
        )
    advice.append(f"or coalesce({n}) before the stage for RDD or file input")
    return "; ".join(advice)


def over_partitioned(ctx: Context) -> list[Hint]:
    """Stages of many tiny tasks: fewer, larger partitions."""
    hints = []
    for stage in over_partitioned_stages(ctx):
        saving = max(
            0.0, min(stage.critical_ns, stage.stage_ns - stage.predicted_stage_ns)
        )
        evidence: dict[str, Any] = {
            "tasks": stage.tasks,
            "median_task_ns": stage.median_task_ns,
            "fixed_share": stage.fixed_share,
            "critical_ns": stage.critical_ns,
            "slots": stage.slots,
            "suggested_partitions": stage.partitions,
            "stage_time_ns": stage.stage_ns,
            "predicted_stage_time_ns": stage.predicted_stage_ns,
        }
        remedy = _remedy(ctx, stage)
        if "spark.sql.shuffle.partitions=" in remedy:
            evidence["setting"] = "spark.sql.shuffle.partitions"
        if stage.floor_ns is None:
            cost = (
                f"{stage.fixed_share:.0%} of its critical time went to launching, "
                "deserializing and returning tasks"
            )
        else:
            evidence["floor_ns"] = stage.floor_ns
            cost = (
                f"each task takes at least {duration(stage.floor_ns)} however little "
                f"it reads ({stage.fixed_share:.0%} of the median task), which "
                "fewer tasks pay fewer times"
            )
        where = stage_label(stage.stage_id, ctx.stage_labels.get(stage.stage_id))
        action = (
            f"{where} ran {stage.tasks} tasks of "
            f"{duration(stage.median_task_ns)} (median) and {cost}: use "
            f"about {stage.partitions} partition{'s' if stage.partitions > 1 else ''}: "
            f"{remedy}. "
            f"Predicted stage time {duration(stage.stage_ns)} -> "
            f"{duration(stage.predicted_stage_ns)}."
        )
        hints.append(
            Hint(
                "over_partitioned",
                stage.critical_ns / ctx.wall_ns if ctx.wall_ns else 0.0,
                evidence,
                action,
                stage_id=stage.stage_id,
                predicted_saving_ns=saving,
                change=StagePartitions(
                    stage.stage_id,
                    stage.partitions,
                    None if stage.floor_ns is None else int(stage.floor_ns),
                ),
                # The replay spreads the stage's work evenly; merged tasks
                # keep a hot partition whole, so no more than the estimate,
                # which waits for the longest task.
                max_saving_ns=max(0.0, stage.stage_ns - stage.predicted_stage_ns),
            )
        )
    return hints
