"""``scheduling_bound``, ``shuffle_bound`` and ``driver_bound`` hints.

Each fires when one activity group's whole-run CP share crosses its
threshold, and names the stage (or driver interval) that carries most of it.

* ``scheduling_bound``: scheduling + deserialization share >=
  ``scheduling_min_share`` and the median task of the stage with the most
  such CP is shorter than ``target_task_ms``. Suggested partitions:
  ``max(slots, ceil(tasks x median ms / target_task_ms))``; no hint when
  that is not fewer than today's.
* ``shuffle_bound``: shuffle_read share >= ``shuffle_min_share``; names the
  reading stage with most fetch-wait CP, the top shuffle channels, and,
  when two or more stages of its job wrote shuffle output (a join), a
  broadcast threshold above the smaller side's bytes.
* ``driver_bound``: the CP share of ``driver`` intervals *between* two jobs
  (by the jobs' own start and end) >= ``driver_min_share``; lists those
  with most CP. Only they are the program's own work the run waits for:
  the application's start-up is its own activity (``startup``), the time
  after the last job is mentioned but does not fire the rule (stopping,
  or work after the last action), and an application with no job has
  nothing to profile. Predicted saving: the listed intervals' length (no
  job runs then, so the run waits for them).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from sparktrail.units import duration
from sparktrail.whatif.changes import DropDriverGap, StagePartitions

from ..operator import stage_label
from ..run_shares import run_share
from .dstreams import dstream_waits
from .hint import Hint
from .inputs import Context
from .partitions import over_partitioned_stages
from .platform import interactive_signs

__all__ = ["driver_bound", "scheduling_bound", "short_tasks", "shuffle_bound"]

MB = 1 << 20
#: Broadcast threshold headroom over the smaller side's shuffle bytes.
BROADCAST_HEADROOM = 1.25
TOP = 3


def _top_stage(ctx: Context, *activities: str) -> int | None:
    rows = ctx.stage_cp(*activities)
    return None if rows.is_empty() else int(rows["stage_id"][0])


def _site(ctx: Context, stage_id: int) -> str:
    row = ctx.operator.filter(pl.col("stage_id") == stage_id)
    if row.is_empty():
        return stage_label(stage_id)
    return stage_label(stage_id, row["call_site"][0] or row["name"][0])


def short_tasks(ctx: Context, stage_id: int) -> bool:
    """Whether the median task of stage ``stage_id`` runs under
    ``target_task_ms`` (Spark's tuning guide's ~100 ms; a stage without
    tasks has none longer): fewer, larger tasks would pay their fixed
    costs less often, and more, smaller ones would pay them more."""
    row = ctx.stage_row(stage_id) or {}
    return float(row.get("median_ns") or 0.0) / 1e6 < ctx.options.target_task_ms


def scheduling_bound(ctx: Context) -> list[Hint]:
    """Many short tasks: scheduling and deserialization dominate the path."""
    opts = ctx.options
    share = ctx.activity_share("scheduling", "deserialization")
    if share < opts.scheduling_min_share:
        return []
    stage = _top_stage(ctx, "scheduling", "deserialization")
    if stage is None or stage in {s.stage_id for s in over_partitioned_stages(ctx)}:
        return []  # over_partitioned names that stage, with its numbers
    row = ctx.stage_row(stage)
    if row is None or not short_tasks(ctx, stage):
        return []
    median_ns = float(row["median_ns"] or 0.0)
    now, slots = row["tasks"], ctx.total_slots()
    suggested = max(slots, math.ceil(now * median_ns / 1e6 / opts.target_task_ms))
    in_force = ctx.app.setting("spark.sql.shuffle.partitions")
    if suggested >= now or in_force == str(suggested):
        return []
    evidence = {
        "scheduling_share": share,
        "tasks": now,
        "median_task_ns": median_ns,
        "target_task_ns": opts.target_task_ms * 1e6,
        "slots": slots,
        "suggested_partitions": suggested,
    }
    action = (
        f"scheduling and task deserialization are {share:.0%} of the critical "
        f"path and the median task of {_site(ctx, stage)} runs "
        f"{duration(median_ns)} (aim for >= "
        f"{duration(opts.target_task_ms * 1e6)}): use "
        f"fewer, larger partitions: spark.sql.shuffle.partitions={suggested} "
        f"(now {now} tasks) or coalesce({suggested}) before it, and "
        "spark.sql.adaptive.coalescePartitions.enabled=true"
    )
    # Fewer tasks pay the per-task cost fewer times: the stage's share of
    # scheduling CP shrinks by suggested/now.
    sched = ctx.stage_cp("scheduling", "deserialization")
    critical = float(sched.filter(pl.col("stage_id") == stage)["cp"].sum())
    window_ns = ctx.wall_ns / max(1, ctx.n_windows)
    saving = critical * window_ns * (1 - suggested / now)
    return [
        Hint(
            "scheduling_bound",
            share,
            evidence,
            action,
            stage_id=stage,
            predicted_saving_ns=saving,
            change=StagePartitions(stage, suggested),
        )
    ]


def _broadcast(ctx: Context, stage: int) -> tuple[int, int] | None:
    """``(stage, bytes)`` of the smaller shuffle side of ``stage``'s job."""
    ops = ctx.operator
    job = ops.filter(pl.col("stage_id") == stage)["job_id"]
    if job.is_empty() or job[0] is None:
        return None
    sides = ops.filter(
        (pl.col("job_id") == job[0])
        & (pl.col("stage_id") != stage)
        & (pl.col("shuffle_write_bytes") > 0)
    ).sort("shuffle_write_bytes", "stage_id")
    if len(sides) < 2:
        return None
    return int(sides["stage_id"][0]), int(sides["shuffle_write_bytes"][0])


def shuffle_bound(ctx: Context) -> list[Hint]:
    """Shuffle fetch waits dominate: broadcast, or co-locate top channels."""
    opts = ctx.options
    share = ctx.activity_share("shuffle_read")
    if share < opts.shuffle_min_share:
        return []
    stage = _top_stage(ctx, "shuffle_read")
    channels = ctx.communication.filter(pl.col("kind") == "shuffle").head(TOP)
    top = [
        {"src": r["src"], "dst": r["dst"], "cp_share": r["cp_share"]}
        for r in channels.iter_rows(named=True)
    ]
    evidence: dict[str, Any] = {"shuffle_read_share": share, "top_channels": top}
    where = _site(ctx, stage) if stage is not None else "the reducers"
    action = (
        f"fetching shuffle blocks is {share:.0%} of the critical path, most in {where}"
    )
    side = _broadcast(ctx, stage) if stage is not None else None
    limit = math.ceil(side[1] * BROADCAST_HEADROOM / MB) if side else 0
    if side is not None and _threshold_mb(ctx) >= limit:
        action += (
            f": the smaller side (written by stage {side[0]}, {side[1] / MB:.3g} MB) "
            "is under spark.sql.autoBroadcastJoinThreshold already, yet it was "
            "shuffled: broadcast(df) it explicitly (the size estimate before the "
            "shuffle was larger)"
        )
        evidence |= {"small_side_stage_id": side[0], "small_side_bytes": side[1]}
    elif side is not None:
        evidence |= {"small_side_stage_id": side[0], "small_side_bytes": side[1]}
        action += (
            f": broadcast the smaller side (written by stage {side[0]}, "
            f"{side[1] / MB:.3g} MB): broadcast(df) or "
            f"spark.sql.autoBroadcastJoinThreshold={limit}m"
        )
    else:
        action += ": if it is a join, broadcast the smaller side (broadcast(df))"
    if top:
        named = ", ".join(
            f"{c['src'] or 'an unknown executor'} -> {c['dst']} {c['cp_share']:.0%}"
            for c in top
        )
        action += (
            f"; top channels {named}: co-locate them with fewer, larger "
            "executors (raise spark.executor.cores) so more blocks are local"
        )
    # A broadcast join (or local blocks) takes the fetch wait off the path.
    saving = share * ctx.wall_ns
    return [
        Hint(
            "shuffle_bound",
            share,
            evidence,
            action,
            stage_id=stage,
            predicted_saving_ns=saving,
        )
    ]


def _threshold_mb(ctx: Context) -> float:
    """spark.sql.autoBroadcastJoinThreshold in MB (10 MB unset; -1 off)."""
    text = (ctx.app.setting("spark.sql.autoBroadcastJoinThreshold") or "10m").strip()
    units = {"b": 1 / MB, "k": 1 / 1024, "m": 1.0, "g": 1024.0}
    text = (
        text.lower().removesuffix("b")
        if text.lower().endswith(("kb", "mb", "gb"))
        else text.lower()
    )
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text) / MB
    except ValueError:
        return 10.0


def _jobs(ctx: Context) -> pl.DataFrame:
    """``job_id, start, end``: the jobs' own JobStart/JobEnd times when the
    trace's context has them (a job's earliest row may be a driver row
    tagged with it long before it started), else its rows' extent."""
    spans = [
        (j.job_id, j.start_ns, j.end_ns)
        for j in ctx.app.jobs
        if j.start_ns is not None and j.end_ns is not None
    ]
    if spans:
        return pl.DataFrame(
            spans,
            schema={"job_id": pl.Int64, "start": pl.Int64, "end": pl.Int64},
            orient="row",
        )
    trace = ctx.trace
    return (
        trace.filter(pl.col("job_id").is_not_null())
        .group_by("job_id")
        .agg(
            pl.col("start_ns").min().alias("start"), pl.col("end_ns").max().alias("end")
        )
    )


def _intervals(ctx: Context) -> list[dict[str, Any]]:
    """Every driver interval with CP, largest first, placed among the jobs."""
    rows = ctx.partials.driver.select(
        "edge_index", run_share(pl.col("cp"), ctx.n_windows).alias("cp_share")
    ).sort([pl.col("cp_share").round(9), "edge_index"], descending=[True, False])
    jobs = _jobs(ctx)
    out = []
    for r in rows.iter_rows(named=True):
        row = ctx.trace.row(r["edge_index"], named=True)
        start, end = row["start_ns"], row["end_ns"]
        before = jobs.filter(pl.col("end") <= start).sort("end")["job_id"]
        after = jobs.filter(pl.col("start") >= end).sort("start")["job_id"]
        out.append(
            {
                "start_ns": start,
                "end_ns": end,
                "duration_ns": end - start,
                "cp_share": r["cp_share"],
                "after_job": None if before.is_empty() else int(before[-1]),
                "before_job": None if after.is_empty() else int(after[0]),
            }
        )
    return out


def _waiting(interval: dict[str, Any], waits: list[tuple[int, int]]) -> bool:
    """Whether the interval lies (mostly) in one of ``waits``."""
    length = max(1, interval["end_ns"] - interval["start_ns"])
    for start, end in waits:
        overlap = min(end, interval["end_ns"]) - max(start, interval["start_ns"])
        if overlap >= 0.5 * length:
            return True
    return False


def _between_jobs(interval: dict[str, Any]) -> bool:
    return interval["after_job"] is not None and interval["before_job"] is not None


def _describe(interval: dict[str, Any]) -> str:
    after, before = interval["after_job"], interval["before_job"]
    if after is None and before is None:
        where = "with no job at all"
    elif after is None:
        where = f"before job {before} (from the start)"
    elif before is None:
        where = f"after the last job, {after}, to the application's end"
    else:
        where = f"between job {after} and job {before}"
    return f"{duration(interval['duration_ns'])} {where}"


def driver_bound(ctx: Context) -> list[Hint]:
    """The driver's own code between jobs dominates the path.

    Not in an interactive session (a shell, a notebook): there the time
    between jobs is a person thinking (:func:`.platform.interactive_signs`).
    """
    opts = ctx.options
    if interactive_signs(ctx.app, ctx.stage_labels.values()):
        return []
    intervals = _intervals(ctx)
    waits = dstream_waits(ctx.app) if ctx.facts.kind == "dstream" else []
    # A DStream's waits for its next batch are the stream idling.
    between = [i for i in intervals if _between_jobs(i) and not _waiting(i, waits)]
    share = sum(i["cp_share"] for i in between)
    if share < opts.driver_min_share:
        return []
    listed = between[:TOP]
    tail = [
        i for i in intervals if i["after_job"] is not None and i["before_job"] is None
    ]
    evidence = {
        "driver_share": ctx.activity_share("driver"),
        "between_jobs_share": share,
        "intervals": listed,
    }
    spans = "; ".join(_describe(i) for i in listed)
    action = (
        f"between its Spark jobs the driver ran its own code for {share:.0%} "
        f"of the critical path ({spans}): look at what the program does "
        "there (a Python loop, collect()/toPandas() and local processing of "
        "the result, planning of a large plan: explain()); move that work into "
        "Spark, or run independent actions side by side (threads, or one job "
        "instead of several)"
    )
    # The tail is worth a word only when it is long enough to matter.
    tail = [i for i in tail if i["duration_ns"] >= max(1e9, 0.05 * ctx.wall_ns)]
    if tail:
        action += (
            f"; after the last job it ran {duration(tail[0]['duration_ns'])} more "
            "before the application ended (work after the last action, or a late "
            "spark.stop())"
        )
    # Removing a listed gap shortens the run by its length: no job runs then.
    saving = float(sum(i["duration_ns"] for i in listed))
    return [
        Hint(
            "driver_bound",
            share,
            evidence,
            action,
            predicted_saving_ns=saving,
            change=tuple(DropDriverGap(i["start_ns"]) for i in listed),
        )
    ]
