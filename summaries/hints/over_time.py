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
import statistics
from dataclasses import replace
from typing import Any

import polars as pl

from sparktrail.pag.query_engine import collect
from sparktrail.pag.trace import Trace
from sparktrail.units import clock, duration
from sparktrail.whatif.changes import SplitPartition
from sparktrail.whatif.contention import split_slowdowns

from ..operator import stage_label
from ..run_shares import run_share
from .hint import Hint
from .inputs import Context
from .stream_progress import after_first, falling_behind, first_batch_ids
from .tasks import SPLIT_PIECES

__all__ = [
    "behind_cause",
    "first_batch_stages",
    "moves_text",
    "moving_hotspot",
    "operator_keys",
    "stage_batches",
    "stage_queries",
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
        keys[int(stage)] = name or operator or stage_label(stage)
    return keys


def stage_batches(ctx: Context) -> dict[int, int]:
    """Stage id -> the micro-batch its job ran (stages of streaming queries)."""
    batch_of = {j.job_id: j.batch_id for j in ctx.app.jobs if j.batch_id is not None}
    if not batch_of:
        return {}
    pairs = ctx.stage_jobs.filter(pl.col("job_id").is_in(list(batch_of)))
    return {int(s): batch_of[int(j)] for s, j in pairs.iter_rows()}


def first_batch_stages(ctx: Context) -> set[int]:
    """Stages that ran in the first batch of a streaming query's run
    (:func:`~.stream_progress.first_batch_ids`): its start-up, a one-off."""
    firsts = first_batch_ids(ctx.app.batches)
    if not firsts:
        runs: dict[tuple[str, str | None], int] = {}
        for j in ctx.app.jobs:
            if j.query_id is not None and j.batch_id is not None:
                key = (j.query_id, j.run_id)
                runs[key] = min(runs.get(key, j.batch_id), j.batch_id)
        firsts = {(query, batch) for (query, _), batch in runs.items()}
    jobs = [
        j.job_id
        for j in ctx.app.jobs
        if j.query_id is not None and (j.query_id, j.batch_id) in firsts
    ]
    if not jobs:
        return set()
    pairs = ctx.stage_jobs.filter(pl.col("job_id").is_in(jobs))
    return {int(s) for s in pairs["stage_id"]}


def stage_queries(ctx: Context, stages: list[int]) -> set[str]:
    """The streaming queries whose micro-batches ran ``stages``."""
    jobs = set(
        ctx.stage_jobs.filter(pl.col("stage_id").is_in(stages))["job_id"].to_list()
    )
    return {
        j.query_id for j in ctx.app.jobs if j.job_id in jobs and j.query_id is not None
    }


def query_busy_ns(ctx: Context, queries: set[str]) -> float | None:
    """The trigger time of ``queries``' batches after each run's first
    (all of them when no other batch ran), ns; ``None`` when unknown."""
    ran = [b for b in ctx.app.batches if b.query_id in queries]
    later = after_first(ran) or ran
    busy = sum((b.duration_ms or {}).get("triggerExecution", 0) for b in later)
    return busy * 1e6 if busy > 0 else None


def streaming_busy_ns(ctx: Context, stages: list[int]) -> float | None:
    """The trigger time of the streaming queries whose micro-batches ran
    ``stages`` (``None``: no stage of a streaming query): what a saving on
    those stages is a share of, a streaming run lasting until stopped.
    Start-up is left out: the batches after each run's first
    (:func:`query_busy_ns`)."""
    queries = stage_queries(ctx, stages)
    return query_busy_ns(ctx, queries) if queries else None


def _hot_partitions(ctx: Context) -> pl.DataFrame:
    """``stage_id, partition, task_id, skew, duration_ns, median_ns,
    launch_ns``: each stage's partition (and its task) with the most
    records (bytes when records are unknown), where that is
    ``skew_factor`` x the stage's median, and the stage's first launch."""
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
            pl.col("task_id").sort_by("_work").last(),
            pl.col("duration_ns").sort_by("_work").last(),
            pl.col("duration_ns").median().alias("median_ns"),
            pl.col("launch_ns").min(),
        )
        .filter(
            (pl.col("_tasks") >= opts.min_stage_tasks)
            & (pl.col("_median") > 0)
            & (pl.col("_max") >= opts.skew_factor * pl.col("_median"))
        )
        .with_columns((pl.col("_max") / pl.col("_median")).alias("skew"))
        .select(
            "stage_id",
            "partition",
            "task_id",
            "skew",
            "duration_ns",
            "median_ns",
            "launch_ns",
        )
        .sort("stage_id"),
        len(ctx.tasks),
    )


def _splits(ctx: Context, found: list[dict[str, Any]]) -> tuple[SplitPartition, ...]:
    """Each run's hot partition split as the hotspot hint splits one."""
    slowdowns = split_slowdowns(
        Trace(ctx.trace, ctx.app), [r["task_id"] for r in found], SPLIT_PIECES
    )
    return tuple(
        SplitPartition(
            r["stage_id"], r["partition"], SPLIT_PIECES, slowdowns[r["task_id"]]
        )
        for r in found
    )


def _moves(partitions: list[int]) -> int:
    return sum(a != b for a, b in itertools.pairwise(partitions))


#: Hot partitions :func:`moves_text` lists before it stops.
MOVES_LISTED = 6


def moves_text(found: list[dict[str, Any]]) -> str:
    """Where an operator's hot partition went and when: each partition it
    moved to, from its first run's launch (UTC), the first
    :data:`MOVES_LISTED`.

    >>> runs = [{"partition": 5, "launch_ns": 0}, {"partition": 5, "launch_ns": 2e9},
    ...     {"partition": 0, "launch_ns": 4e9}]
    >>> moves_text(runs)
    'partition 5 from 00:00:00, 0 from 00:00:04 UTC'
    """
    starts = [
        r
        for i, r in enumerate(found)
        if i == 0 or r["partition"] != found[i - 1]["partition"]
    ]
    listed = [
        f"{'partition ' if i == 0 else ''}{r['partition']} from {clock(r['launch_ns'])}"
        for i, r in enumerate(starts[:MOVES_LISTED])
    ]
    more = len(starts) - MOVES_LISTED
    return ", ".join(listed) + " UTC" + (f", then {more} more" if more > 0 else "")


def moving_hotspot(ctx: Context) -> list[Hint]:
    """``moving_hotspot``: an operator's hot partition changes across runs.

    Examples
    --------
    See ``tests/summaries/test_over_time_hints.py``.
    """
    opts = ctx.options
    # A run is a stage with a hot partition: fewer stages than the runs a
    # hint needs (one stage a window, online) cannot make one.
    stages = ctx.tasks.select(pl.col("stage_id").drop_nulls().n_unique()).item()
    if stages < opts.moving_min_runs:
        return []
    hot = _hot_partitions(ctx)
    firsts = first_batch_stages(ctx)
    if firsts:  # a query's first batch is its start-up, not a run like the others
        hot = hot.filter(~pl.col("stage_id").is_in(list(firsts)))
    if hot.is_empty():
        return []
    keys = operator_keys(ctx)
    stage_cp = dict(
        ctx.partials.stages.group_by("stage_id").agg(pl.col("cp").sum()).iter_rows()
    )
    runs: dict[str, list[dict[str, Any]]] = {}
    for row in hot.iter_rows(named=True):
        key = keys.get(row["stage_id"], stage_label(row["stage_id"]))
        runs.setdefault(key, []).append(row)
    hints = []
    for operator, found in runs.items():
        partitions = [r["partition"] for r in found]
        moves = _moves(partitions)
        if len(found) < opts.moving_min_runs or moves < opts.moving_min_moves:
            continue
        stages = [r["stage_id"] for r in found]
        cp = run_share(sum(stage_cp.get(s, 0.0) for s in stages), ctx.n_windows)
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
                cp,
                evidence,
                f"{operator}: in {len(found)} runs (stages {stages[0]}.."
                f"{stages[-1]}) its hot partition moved {moves} times over "
                f"partitions {', '.join(map(str, distinct[:8]))} (up to "
                f"{worst['skew']:.1f}x the median records; {moves_text(found)}): "
                "the hot key changes, "
                "so a static split of one partition, or a fixed key list, fixes "
                "one run only. Salt the key in every run (add a random 0..n-1 "
                "to it and aggregate or join in two steps), or route each key "
                "to the lighter of two partitions (two-choice partitioning, "
                "partial key grouping).",
                stage_id=worst["stage_id"],
                partition=worst["partition"],
                share_of_ns=busy,
                share_of="query_batch_time" if busy else "run",
                change=_splits(ctx, found),
            )
        )
    return hints


#: State rows a stateful stage must hold before its skew is worth a hint.
STATE_SKEW_MIN_ROWS = 1000
#: Batches of an operator that must hold its state skewed for a small,
#: off-path skew to count as a trend.
STATE_SKEW_MIN_BATCHES = 3
#: ... and the state rows its stage must then hold (a steady skew of a
#: thousand rows matters to no one).
STATE_SKEW_STEADY_ROWS = 10_000
#: State rows, or state memory, of the hot partition that matter whether
#: or not its task is on the critical path (a partition's state is loaded,
#: updated and checkpointed every batch; a million rows or 256 MiB of it
#: on one executor is what a restart, a rebalance or memory pays for).
STATE_SKEW_LARGE_ROWS = 1_000_000
STATE_SKEW_LARGE_BYTES = 256 << 20


def _state_stages(ctx: Context) -> pl.DataFrame:
    """Per stateful stage outside a query's first batch: its state rows,
    the partition holding most (its rows, memory, time and CP share), the
    state partitions and the median task time."""
    stateful = ctx.tasks.lazy().filter(
        pl.col("state_rows").is_not_null() & pl.col("partition").is_not_null()
    )
    firsts = first_batch_stages(ctx)
    if firsts:
        stateful = stateful.filter(~pl.col("stage_id").is_in(list(firsts)))
    cp = (
        pl.col("running_cp_share")
        if "running_cp_share" in ctx.tasks.columns
        else pl.lit(0.0)
    )
    memory = (
        pl.col("state_memory_bytes")
        if "state_memory_bytes" in ctx.tasks.columns
        else pl.lit(None, dtype=pl.Int64)
    )
    return collect(
        stateful.with_columns(cp.alias("_cp"), memory.alias("_memory"))
        .group_by("stage_id")
        .agg(
            pl.col("state_rows").sum().alias("_total"),
            pl.col("state_rows").max().alias("_max"),
            pl.col("partition").sort_by("state_rows").last(),
            pl.col("partition").n_unique().alias("partitions"),
            pl.col("duration_ns").sort_by("state_rows").last(),
            pl.col("_cp").sort_by("state_rows").last().alias("hot_cp_share"),
            pl.col("_memory").sort_by("state_rows").last().alias("hot_memory_bytes"),
            pl.col("duration_ns").median().alias("median_ns"),
            pl.col("_memory").sum().alias("state_memory_bytes"),
        )
        .filter(pl.col("partitions") >= 2)
        .with_columns((pl.col("_max") / pl.col("_total")).alias("share"))
        .sort("stage_id"),
        len(ctx.tasks),
    )


def state_skew(ctx: Context) -> list[Hint]:
    """``state_skew``: one state partition holds much of an operator's state.

    Advisory (state partitions are fixed by the checkpoint), and only where
    the state matters: the stage holds :data:`STATE_SKEW_MIN_ROWS` state
    rows or more, and the hot partition's state is large
    (:data:`STATE_SKEW_LARGE_ROWS` rows or :data:`STATE_SKEW_LARGE_BYTES`)
    or its task is on the critical path (``task_min_share`` of it while it
    ran, and slower than the stage's median task), or the operator's median
    hot share is skewed over :data:`STATE_SKEW_MIN_BATCHES` batches or more
    (a trend, not a batch's). Over an operator's
    stages after each query's first batch, the median hot share must be
    skewed too: one skewed batch among even ones is no trend.
    """
    if "state_rows" not in ctx.tasks.columns:
        return []
    stages = _state_stages(ctx)
    if stages.is_empty():
        return []
    keys = operator_keys(ctx)
    shares: dict[str, list[float]] = {}
    for stage, share in stages.select("stage_id", "share").iter_rows():
        key = keys.get(stage, stage_label(stage))
        shares.setdefault(key, []).append(float(share or 0.0))
    typical = {key: statistics.median(found) for key, found in shares.items()}
    hints = []
    for row in _skewed_state(ctx, stages, keys, shares, typical).iter_rows(named=True):
        operator = keys.get(row["stage_id"], stage_label(row["stage_id"]))
        if typical[operator] < ctx.options.state_skew_min_share:
            continue  # skewed in a batch or two of many: no trend
        hints.append(_state_skew_hint(ctx, row, operator, typical[operator]))
    return hints


def _skewed_state(
    ctx: Context,
    stages: pl.DataFrame,
    keys: dict[int, str],
    shares: dict[str, list[float]],
    typical: dict[str, float],
) -> pl.DataFrame:
    """The state stages skewed where the state matters (see :func:`state_skew`),
    with whether their hot state is ``large`` and their task ``on_path``."""
    opts = ctx.options
    skewed = (
        (pl.col("_total") >= STATE_SKEW_MIN_ROWS)
        & (pl.col("share") >= opts.state_skew_min_share)
        & (pl.col("share") * pl.col("partitions") >= opts.state_skew_factor)
    )
    large = (pl.col("_max") >= STATE_SKEW_LARGE_ROWS) | (
        pl.col("hot_memory_bytes").fill_null(0) >= STATE_SKEW_LARGE_BYTES
    )
    on_path = (pl.col("hot_cp_share") >= opts.task_min_share) & (
        pl.col("duration_ns") > pl.col("median_ns")
    )
    # ... or it persists: most of the operator's batches (three or more)
    # hold it skewed, the trend the rule is for.
    steady = {
        key
        for key, found in shares.items()
        if len(found) >= STATE_SKEW_MIN_BATCHES
        and typical[key] >= opts.state_skew_min_share
    }
    steady_stages = [
        s for s in stages["stage_id"].to_list() if keys.get(s, stage_label(s)) in steady
    ]
    persistent = (pl.col("_total") >= STATE_SKEW_STEADY_ROWS) & pl.col(
        "stage_id"
    ).is_in(steady_stages)
    return stages.filter(skewed & (large | on_path | persistent)).with_columns(
        large.alias("large"), on_path.alias("on_path")
    )


def _state_skew_hint(
    ctx: Context, row: dict[str, Any], operator: str, typical: float
) -> Hint:
    busy = streaming_busy_ns(ctx, [row["stage_id"]])
    excess = max(0.0, float(row["duration_ns"] - row["median_ns"]))
    evidence = {
        "busy_ns": busy,
        "operator": operator,
        "state_rows": row["_total"],
        "hot_state_rows": row["_max"],
        "hot_state_memory_bytes": row["hot_memory_bytes"],
        "state_share": row["share"],
        "median_state_share": typical,
        "state_partitions": row["partitions"],
        "state_memory_bytes": row["state_memory_bytes"],
        "duration_ns": row["duration_ns"],
        "median_ns": row["median_ns"],
        "hot_cp_share": row["hot_cp_share"],
        "on_critical_path": row["on_path"],
    }
    why = (
        f"its task took {duration(row['duration_ns'])} against a median "
        f"{duration(row['median_ns'])}, on the critical path"
        if row["on_path"]
        else f"{row['_max']:,} state rows in one partition"
    )
    return Hint(
        "state_skew",
        0.0,
        evidence,
        f"Advisory: partition {row['partition']} of stage "
        f"{row['stage_id']} ({operator}) holds {row['share']:.0%} of the "
        f"{row['_total']:,} state rows of {row['partitions']} state "
        f"partitions ({why}). State partitions are fixed by the "
        "checkpoint (spark.sql.shuffle.partitions at its first run): "
        "salt the state key (key plus a random 0..n-1, then combine) in "
        "a new query, or restart from a new checkpoint with more "
        "shuffle partitions.",
        stage_id=row["stage_id"],
        partition=row["partition"],
        predicted_saving_ns=excess,
        share_of_ns=busy,
        share_of="query_batch_time" if busy else "run",
    )


#: Kinds whose finding slows the tasks of a stage: on a streaming query
#: that falls behind, the reason it does.
_CAUSE_WORDS = {
    "hotspot": "skew",
    "skew_unsplittable": "skew",
    "moving_hotspot": "moving skew",
    "state_skew": "state skew",
    "straggler_task": "straggler",
    "straggler_executor": "straggler",
}


def behind_cause(ctx: Context, hints: list[Hint]) -> list[Hint]:
    """``hints`` of skew or stragglers on the stages of a streaming query
    that falls behind (its median processed rate below its input rate,
    batches after the first: :func:`~.stream_progress.falling_behind`),
    with an action that says so and the processed rate after the fix: the
    batches' time less the hint's predicted saving (its share of the
    query's busy time), so ``processed / (1 - share)``."""
    if not ctx.app.batches:
        return hints
    out = []
    for hint in hints:
        word = _CAUSE_WORDS.get(hint.kind)
        stages = [hint.stage_id] if hint.stage_id is not None else []
        stages += [s for s in hint.evidence.get("stages") or () if s not in stages]
        share = hint.saving_share
        if word is None or not stages or hint.share_of_ns is None or not share:
            out.append(hint)
            continue
        queries = stage_queries(ctx, stages)
        if len(queries) != 1:
            out.append(hint)
            continue
        [query] = queries
        batches = sorted(
            (b for b in ctx.app.batches if b.query_id == query),
            key=lambda b: (b.batch_id is None, b.batch_id or 0),
        )
        behind = falling_behind(batches, ctx.options)
        if (
            behind is None
            or not behind.by_rate
            or not behind.input_rate
            or not behind.processed_rate
        ):
            out.append(hint)
            continue
        saved = min(max(share, 0.0), 0.95)
        after = behind.processed_rate / (1 - saved)
        stage_text = ""
        before_ns = hint.evidence.get("replayed_stage_ns")
        after_ns = hint.evidence.get("predicted_stage_ns_after")
        if before_ns and after_ns is not None:
            stage_text = (
                f"; stage {hint.stage_id} from {duration(before_ns)} "
                f"to {duration(after_ns)}"
            )
        keeps_up = after >= behind.input_rate
        outcome = (
            "enough to keep up"
            if keeps_up
            else "still short of the input: see stream_backlog for the cores"
        )
        name = next(
            (
                f"query {q.name!r}"
                for q in ctx.app.queries
                if q.query_id == query and q.name
            ),
            f"query {query[:8]}",
        )
        text = (
            f" This {word} is why {name} falls behind: it processes a median "
            f"{behind.processed_rate:,.0f} rows/s of {behind.input_rate:,.0f} "
            f"arriving; after the fix its batches take {saved:.0%} less time"
            f"{stage_text}, so it processes about {after:,.0f} rows/s, {outcome}."
        )
        evidence = hint.evidence | {
            "falls_behind": True,
            "query_id": query,
            "input_rate": behind.input_rate,
            "processed_rate": behind.processed_rate,
            "processed_rate_after": after,
        }
        out.append(replace(hint, action=hint.action + text, evidence=evidence))
    return out
