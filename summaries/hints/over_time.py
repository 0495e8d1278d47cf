"""Hints over an operator's runs: ``moving_hotspot`` and ``state_skew``.

A long-running application runs the same operator (DESIGN §8: a stable
call site or plan node) in many stages: every round of a loop, every
micro-batch of a streaming query. Two findings only show across those
runs:

* ``moving_hotspot`` (AutoFlow): the operator's hot partition, the one
  whose records (or bytes) are ``skew_factor`` times its stage's median,
  changes from run to run. A static split of one partition (or AQE's
  per-join split) fixes one run; salting the key or two-choice
  partitioning (partial key grouping) fixes them all. The saving is the
  replay of splitting each run's hot partition in two.
* ``state_skew`` (Megaphone, advisory): one partition of a stateful
  operator holds a large share of its state rows (``state_rows`` of the
  stateful tasks). State partitions are fixed by the checkpoint, so the
  action says what can be done: salt the key, or a new checkpoint with
  more partitions. Its saving is the hot task's time above its stage's
  median (what an even spread would save at most), as a share of the run.

Assumptions
-----------
* ``ctx.tasks`` has one row per task attempt; only the first successful
  attempt of a partition carries ``records``/``bytes``/``state_rows``
  (the others are null), so sums and medians use those.
* Operators are named by :func:`operator_keys` (the same key the merging
  of repeated hints uses).
* On the stages of a streaming query, a saving is a share of the query's
  busy time (its batches' trigger time, :func:`streaming_busy_ns`), not of
  the run, which lasts until the query is stopped.
"""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl

from sparktrail.pag.query_engine import collect
from sparktrail.whatif.changes import SplitPartition

from ._common import Context, Hint, severity

__all__ = [
    "moving_hotspot",
    "operator_keys",
    "stage_batches",
    "state_skew",
    "streaming_busy_ns",
]


def operator_keys(ctx: Context) -> dict[int, str]:
    """Stage id -> its operator (DESIGN §8: call site and plan node).

    The stable label, not the call site alone: one call site runs several
    operators (a join's two scans and the join).
    """
    ops = ctx.operator.filter(pl.col("stage_id").is_not_null())
    keys = {}
    for stage, operator, name in ops.select("stage_id", "operator", "name").iter_rows():
        keys[int(stage)] = name or operator or f"stage {stage}"
    return keys


def stage_batches(ctx: Context) -> dict[int, int]:
    """Stage id -> the micro-batch its job ran (stages of streaming queries)."""
    batch_of = {j.job_id: j.batch_id for j in ctx.app.jobs if j.batch_id is not None}
    if not batch_of:
        return {}
    pairs = (
        ctx.tasks.select("stage_id", "job_id")
        .drop_nulls()
        .unique()
        .filter(pl.col("job_id").is_in(list(batch_of)))
    )
    return {int(s): batch_of[int(j)] for s, j in pairs.iter_rows()}


def streaming_busy_ns(ctx: Context, stages: list[int]) -> float | None:
    """The trigger time of the streaming queries whose micro-batches ran
    ``stages`` (``None``: no stage of a streaming query): what a saving on
    those stages is a share of, a streaming run lasting until stopped."""
    jobs = set(
        collect(
            ctx.tasks.lazy()
            .filter(pl.col("stage_id").is_in(stages))
            .select(pl.col("job_id").drop_nulls()),
            len(ctx.tasks),
        )["job_id"].to_list()
    )
    queries = {
        j.query_id for j in ctx.app.jobs if j.job_id in jobs and j.query_id is not None
    }
    if not queries:
        return None
    busy = sum(
        (b.duration_ms or {}).get("triggerExecution", 0)
        for b in ctx.app.batches
        if b.query_id in queries
    )
    return busy * 1e6 if busy > 0 else None


def _hot_partitions(ctx: Context) -> pl.DataFrame:
    """``stage_id, partition, skew, duration_ns, median_ns``: each stage's
    partition with the most records (bytes when records are unknown), where
    that is ``skew_factor`` x the stage's median."""
    opts = ctx.options
    work = pl.coalesce(pl.col("records"), pl.col("bytes")).cast(pl.Float64)
    # Lazy: only the columns read are filtered, not every fact of millions
    # of tasks.
    stated = (
        ctx.tasks.lazy()
        .filter(
            pl.col("stage_id").is_not_null()
            & pl.col("partition").is_not_null()
            & pl.coalesce(pl.col("records"), pl.col("bytes")).is_not_null()
        )
        .with_columns(work.alias("_work"))
    )
    return collect(
        stated.group_by("stage_id")
        .agg(
            pl.len().alias("_tasks"),
            pl.col("_work").median().alias("_median"),
            pl.col("_work").max().alias("_max"),
            pl.col("partition").sort_by("_work").last(),
            pl.col("duration_ns").sort_by("_work").last(),
            pl.col("duration_ns").median().alias("median_ns"),
        )
        .filter(
            (pl.col("_tasks") >= opts.min_stage_tasks)
            & (pl.col("_median") > 0)
            & (pl.col("_max") >= opts.skew_factor * pl.col("_median"))
        )
        .with_columns((pl.col("_max") / pl.col("_median")).alias("skew"))
        .select("stage_id", "partition", "skew", "duration_ns", "median_ns")
        .sort("stage_id"),
        len(ctx.tasks),
    )


def _moves(partitions: list[int]) -> int:
    return sum(a != b for a, b in itertools.pairwise(partitions))


def moving_hotspot(ctx: Context) -> list[Hint]:
    """``moving_hotspot``: an operator's hot partition changes across runs.

    Examples
    --------
    See ``tests/summaries/test_over_time_hints.py``.
    """
    opts = ctx.options
    # A run is a stage with a hot partition: fewer stages than the runs a
    # hint needs (one stage a window, online) cannot make one.
    if ctx.tasks["stage_id"].drop_nulls().n_unique() < opts.moving_min_runs:
        return []
    hot = _hot_partitions(ctx)
    if hot.is_empty():
        return []
    keys = operator_keys(ctx)
    stage_cp = dict(
        ctx.partials.stages.group_by("stage_id").agg(pl.col("cp").sum()).iter_rows()
    )
    runs: dict[str, list[dict[str, Any]]] = {}
    for row in hot.iter_rows(named=True):
        key = keys.get(row["stage_id"], f"stage {row['stage_id']}")
        runs.setdefault(key, []).append(row)
    hints = []
    for operator, found in runs.items():
        partitions = [r["partition"] for r in found]
        moves = _moves(partitions)
        if len(found) < opts.moving_min_runs or moves < opts.moving_min_moves:
            continue
        stages = [r["stage_id"] for r in found]
        cp = sum(stage_cp.get(s, 0.0) for s in stages) / ctx.n_windows
        distinct = sorted(set(partitions))
        worst = max(found, key=lambda r: r["skew"])
        busy = streaming_busy_ns(ctx, stages)
        batches = sorted(
            {b for s in stages if (b := stage_batches(ctx).get(s)) is not None}
        )
        evidence = {
            "busy_ns": busy,
            "first_batch": batches[0] if batches else None,
            "last_batch": batches[-1] if batches else None,
            "operator": operator,
            "runs": len(found),
            "moves": moves,
            "hot_partitions": partitions[:20],
            "distinct_partitions": distinct[:20],
            "stages": stages[:20],
            "first_stage": stages[0],
            "last_stage": stages[-1],
            "max_skew_ratio": worst["skew"],
        }
        hints.append(
            Hint(
                "moving_hotspot",
                severity(float(moves), float(opts.moving_min_moves)),
                cp,
                evidence,
                f"{operator}: in {len(found)} runs (stages {stages[0]}.."
                f"{stages[-1]}) its hot partition moved {moves} times over "
                f"partitions {', '.join(map(str, distinct[:8]))} (up to "
                f"{worst['skew']:.1f}x the median records): the hot key changes, "
                "so a static split of one partition, or a fixed key list, fixes "
                "one run only. Salt the key in every run (add a random 0..n-1 "
                "to it and aggregate or join in two steps), or route each key "
                "to the lighter of two partitions (two-choice partitioning, "
                "partial key grouping).",
                stage_id=worst["stage_id"],
                partition=worst["partition"],
                share_of_ns=busy,
                change=tuple(
                    SplitPartition(r["stage_id"], r["partition"], 2) for r in found
                ),
            )
        )
    return hints


#: State rows a stateful stage must hold before its skew is worth a hint.
STATE_SKEW_MIN_ROWS = 1000


def state_skew(ctx: Context) -> list[Hint]:
    """``state_skew``: one state partition holds much of an operator's state."""
    opts = ctx.options
    if "state_rows" not in ctx.tasks.columns:
        return []
    stateful = ctx.tasks.lazy().filter(
        pl.col("state_rows").is_not_null() & pl.col("partition").is_not_null()
    )
    per_stage = collect(
        stateful.group_by("stage_id")
        .agg(
            pl.col("state_rows").sum().alias("_total"),
            pl.col("state_rows").max().alias("_max"),
            pl.col("partition").sort_by("state_rows").last(),
            pl.col("partition").n_unique().alias("partitions"),
            pl.col("duration_ns").sort_by("state_rows").last(),
            pl.col("duration_ns").median().alias("median_ns"),
            pl.col("state_memory_bytes").sum().alias("state_memory_bytes"),
        )
        # A state of a few rows is no skew, whichever partition holds them.
        .filter((pl.col("_total") >= STATE_SKEW_MIN_ROWS) & (pl.col("partitions") >= 2))
        .with_columns((pl.col("_max") / pl.col("_total")).alias("share"))
        .filter(
            (pl.col("share") >= opts.state_skew_min_share)
            & (pl.col("share") * pl.col("partitions") >= opts.state_skew_factor)
        )
        .sort("stage_id"),
        len(ctx.tasks),
    )
    if per_stage.is_empty():
        return []
    keys = operator_keys(ctx)
    hints = []
    for row in per_stage.iter_rows(named=True):
        busy = streaming_busy_ns(ctx, [row["stage_id"]])
        operator = keys.get(row["stage_id"], f"stage {row['stage_id']}")
        excess = max(0.0, float(row["duration_ns"] - row["median_ns"]))
        evidence = {
            "busy_ns": busy,
            "operator": operator,
            "state_rows": row["_total"],
            "hot_state_rows": row["_max"],
            "state_share": row["share"],
            "state_partitions": row["partitions"],
            "state_memory_bytes": row["state_memory_bytes"],
            "duration_ns": row["duration_ns"],
            "median_ns": row["median_ns"],
        }
        hints.append(
            Hint(
                "state_skew",
                severity(row["share"], opts.state_skew_min_share),
                0.0,
                evidence,
                f"partition {row['partition']} of stage {row['stage_id']} "
                f"({operator}) holds {row['share']:.0%} of the state rows of "
                f"{row['partitions']} state partitions. State partitions are "
                "fixed by the checkpoint (spark.sql.shuffle.partitions at its "
                "first run): salt the state key (key plus a random 0..n-1, then "
                "combine) in a new query, or restart from a new checkpoint with "
                "more shuffle partitions; the hot partition's task also shows "
                "how much state it commits each batch.",
                stage_id=row["stage_id"],
                partition=row["partition"],
                predicted_saving_ns=excess,
                share_of_ns=busy,
            )
        )
    return hints
