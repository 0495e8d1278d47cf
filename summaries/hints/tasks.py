"""``straggler_task`` (time skew), ``hotspot`` and ``skew_unsplittable``
(data skew) hints.

Per stage with at least ``min_stage_tasks`` tasks, each task with a high
CP share (``task_min_share``) is compared with the stage's medians:

* records or bytes >= ``skew_factor`` x a median above 0 (a ratio over a
  median of 0 is no measure of skew) -> data skew. Predicted stage time if
  the hot partition were split in two (partial key grouping: half its
  keys' records go to a second partition): the stage takes as long as its
  longest task (tasks run in parallel when slots suffice), so after the
  split ``max(longest other task, hot task / 2 * slowdown)``, the halves
  slowed by sharing the cores the whole had alone
  (:func:`~sparktrail.whatif.contention.split_slowdowns`, 1 without
  Spark's CPU times).

  - In a join (two or more stages of its job wrote shuffle output), AQE can
    split the partition: ``hotspot``, with AQE's skew-join settings, or,
    when they are on already, why AQE left it (a partition is skewed only
    above ``skewedPartitionThresholdInBytes`` as well).
  - Otherwise (an aggregation), AQE cannot split it: ``skew_unsplittable``,
    salt the key or aggregate in two steps (two-choice partial
    aggregation, then merge).
* else duration >= ``straggler_task_factor`` x median, and
  ``straggler_min_excess_ms`` over it -> ``straggler_task`` (the task is
  slow, not big). Speculation catches it when the multiplier
  is below its slowdown: a copy launched at ``multiplier x median`` that
  takes a median time ends at ``(multiplier + 1) x median``; the quantile
  must let the check start while only the straggler runs,
  ``quantile <= (n - 1) / n``. Where no copy can help (a local master, or
  another attempt of the partition as slow) the saving is replayed with the
  partition at the stage's median time (the fix is in its own work). Not
  flagged: killed speculative copies (the
  original won), and the executors' first waves in their first stage when
  two or more of those tasks are slow (they carry the executor's and the Python
  workers' start-up, not their partitions' work).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from sparktrail.pag.query_engine import collect
from sparktrail.pag.trace import Trace, slices_query
from sparktrail.units import count, duration, size
from sparktrail.whatif.changes import (
    SpeculateTask,
    SplitPartition,
    StagePartitions,
    TaskTimes,
)
from sparktrail.whatif.contention import split_slowdowns

from ..operator import stage_label, stage_name
from .hint import Hint
from .inputs import UNEVEN_RATIO, Context
from .platform import aqe_enabled, can_speculate, why_no_speculation
from .remedies import NOTES, remedies, remedy_text

__all__ = [
    "SPLIT_PIECES",
    "own_work_change",
    "skew_medians",
    "skew_of",
    "task_hints",
]

SPECULATION_QUANTILE = 0.75
MIN_MULTIPLIER, MAX_MULTIPLIER = 1.5, 3.0


def _ratio(value: Any, median: Any) -> float | None:
    if value is None or median is None:
        return None
    if median <= 0:
        return None  # no measure of skew: any value is "infinitely" more
    return float(value) / float(median)


def _ratio_of(value: str, median: str) -> pl.Expr:
    """:func:`_ratio` as an expression (null where it is None)."""
    return (
        pl.when(pl.col(median) > 0)
        .then(pl.col(value).cast(pl.Float64) / pl.col(median).cast(pl.Float64))
        .otherwise(None)
    )


def _critical_with_stage_stats(
    ctx: Context, min_tasks: int, critical: pl.Expr, outlier: pl.Expr
) -> pl.DataFrame:
    """The ``critical`` tasks of stages with ``min_tasks`` tasks or more,
    each with its stage's task count and medians (in task order), that are
    an ``outlier`` against those medians."""
    stats = (
        ctx.stage_facts.lazy()
        .select(
            "stage_id",
            pl.col("busy_tasks").alias("stage_tasks"),
            pl.col("median_busy_ns").alias("median_ns"),
            *_SKEW_MEDIANS,
        )
        .filter(pl.col("stage_tasks") >= min_tasks)
    )
    name, call_site = stage_name(pl.col("operator"))
    # The few critical tasks are picked before the join, and the outliers
    # among them before the name parsing: a long trace has millions of
    # tasks, and a window of a busy stage thousands of critical ones. A
    # slice of a long trace's tasks at a time: every task of a stage on the
    # path is critical, and their join with the medians held every column
    # of every task (~90 bytes a task).
    return collect(
        slices_query(
            ctx.tasks,
            lambda _, part: (
                part.lazy()
                .filter(pl.col("stage_id").is_not_null() & critical)
                .join(stats, on="stage_id", how="inner", maintain_order="left")
                .filter(outlier)
            ),
        ).with_columns(name.alias("name"), call_site.alias("call_site")),
        len(ctx.tasks),
    )


def _where(task: dict[str, Any]) -> str:
    site = task["call_site"] or task["name"] or "unknown call site"
    return f"partition {task['partition']} of {stage_label(task['stage_id'], site)}"


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


def _join_sides(ctx: Context, stage_id: int) -> int:
    """Stages of ``stage_id``'s job, besides it, that wrote shuffle output."""
    ops = ctx.operator
    job = ops.filter(pl.col("stage_id") == stage_id)["job_id"]
    if job.is_empty() or job[0] is None:
        return 0
    return ops.filter(
        (pl.col("job_id") == job[0])
        & (pl.col("stage_id") != stage_id)
        & (pl.col("shuffle_write_bytes") > 0)
    ).height


def _reads_shuffle(ctx: Context, stage_id: int) -> bool:
    """Whether the stage's tasks read shuffle output, else its input files:
    some waited for shuffle blocks, or another stage of its job wrote them
    (a local fetch may wait 0 ms and leave no ``shuffle_read`` row)."""
    fetched = (pl.col("stage_id") == stage_id) & (pl.col("activity") == "shuffle_read")
    waited = ctx.trace.lazy().filter(fetched).select(pl.len()).collect().item()
    return bool(waited) or _join_sides(ctx, stage_id) > 0


#: Into how many pieces the hints split a hot partition (the prediction,
#: the replayed change and the AQE sizes they advise).
SPLIT_PIECES = 2

#: Spark's defaults for AQE's skew join (OptimizeSkewedJoin): a partition
#: is split only above skewedPartitionThresholdInBytes (and
#: skewedPartitionFactor x the median), into pieces of
#: advisoryPartitionSizeInBytes (or the other partitions' mean, if larger).
AQE_SKEW_THRESHOLD_BYTES = 256 << 20
AQE_ADVISORY_BYTES = 64 << 20
_AQE_THRESHOLD = f"{AQE_SKEW_THRESHOLD_BYTES >> 20}MB"
_AQE_ADVISORY = f"{AQE_ADVISORY_BYTES >> 20}MB"


def _aqe_split_sizes(size: int, threshold_too: bool = False) -> list[str]:
    """The size settings with which AQE splits a partition of ``size``
    bytes in two: the threshold below it and the advisory size at half of
    it, each where its default would leave the partition whole (the
    threshold always with ``threshold_too``)."""
    half = max(1 << 20, size // SPLIT_PIECES)
    settings = []
    if threshold_too or size <= AQE_SKEW_THRESHOLD_BYTES:
        settings.append(
            f"spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes={half >> 20}m"
        )
    if half < AQE_ADVISORY_BYTES:
        settings.append(
            f"spark.sql.adaptive.advisoryPartitionSizeInBytes={half >> 20}m"
        )
    return settings


def _aqe_skew_advice(ctx: Context, task: dict[str, Any]) -> str:
    """AQE's skew join for this partition, where the run's Spark has it
    (3.0 on); what the log leaves unknown, it says."""
    app, factor = ctx.app, ctx.options.skew_factor
    nbytes = task["bytes"] or 0
    since = ctx.facts.at_least(3, 0)
    if since is False:
        return (
            f"AQE's skew join came with Spark 3.0 (this run: {ctx.facts.version}), "
            "so salting is the fix here"
        )
    if since is None:
        return (
            "the log states no Spark version, so only the fix of every version "
            "is named (from Spark 3.0, AQE's skew join splits such a partition)"
        )
    if (
        aqe_enabled(app)
        and app.flag("spark.sql.adaptive.skewJoin.enabled") is not False
    ):
        return (
            "AQE's skew join is on but left this partition whole: it splits a "
            "partition only above both skewedPartitionFactor x the median and "
            f"skewedPartitionThresholdInBytes ({_AQE_THRESHOLD} by default), into "
            f"pieces of advisoryPartitionSizeInBytes ({_AQE_ADVISORY} by default); "
            "set " + ", ".join(_aqe_split_sizes(nbytes, threshold_too=True))
        )
    sizes = _aqe_split_sizes(nbytes) if nbytes else []
    advice = (
        "for this join set spark.sql.adaptive.enabled=true, "
        "spark.sql.adaptive.skewJoin.enabled=true, "
        f"spark.sql.adaptive.skewJoin.skewedPartitionFactor={factor:g}"
    )
    if not sizes:
        return advice
    return (
        f"{advice}, and, as the partition is only {size(nbytes)} "
        f"(AQE splits above {_AQE_THRESHOLD} into {_AQE_ADVISORY} pieces by "
        f"default), {', '.join(sizes)}"
    )


def _two_longest(ctx: Context, stage_id: int) -> list[int]:
    """The two longest task times of stage ``stage_id`` (one for a stage of
    one task), longest first: all a skew hint reads of its stage, where a
    sorted list of every time there took a Python int a task."""
    longest = (
        ctx.tasks.lazy()
        .filter(pl.col("stage_id") == stage_id)
        .select(pl.col("duration_ns").drop_nulls().top_k(2))
        .collect()
    )
    return sorted(longest["duration_ns"].to_list(), reverse=True)


def _hotspot(
    task: dict[str, Any],
    ratio: float,
    two_longest: list[int],
    slowdown: float,
    ctx: Context,
) -> Hint:
    """The skew hint of ``task``, whose halves, split, run ``slowdown``
    times half its time (:func:`~sparktrail.whatif.contention.
    split_slowdowns`: they share the cores the whole had to itself);
    ``two_longest`` are its stage's longest task times (:func:`_two_longest`)."""
    longest = two_longest[0]
    # The longest of the others: the second longest when the task is the
    # longest (it need not be: a hot task may run shorter than another).
    if task["duration_ns"] != longest:
        second = longest
    else:
        second = two_longest[1] if len(two_longest) > 1 else 0
    predicted = max(second, task["duration_ns"] / SPLIT_PIECES * slowdown)
    evidence = _base_evidence(task) | {
        "skew_ratio": ratio,
        "stage_time_ns": longest,
        "longest_other_ns": second,
        "predicted_stage_time_ns": predicted,
        "split_slowdown": slowdown,
    }
    # The plan node of a stable operator label names a join outright; older
    # labels leave it to the shuffle stages the job read.
    join = "Join" in str(task.get("operator") or "") or (
        _join_sides(ctx, task["stage_id"]) >= 2
    )
    if not _reads_shuffle(ctx, task["stage_id"]):
        # A scan's partitions are file splits: no key to salt, and AQE
        # splits shuffle partitions only.
        kind = "hotspot"
        fix = (
            "the stage reads its input files, not a shuffle, so the skew is the "
            "files' layout: rewrite the input in even files (repartition before "
            "the write, smaller row groups), or let Spark cut smaller splits "
            "(lower spark.sql.files.maxPartitionBytes, 128MB by default)"
        )
    elif join:
        kind = "hotspot"
        fix = (
            "salt its hot key and split it over two partitions (partial key "
            "grouping: add a random 0/1 to the key on one side, replicate the "
            f"other side's rows for both); {_aqe_skew_advice(ctx, task)}"
        )
    else:
        kind = "skew_unsplittable"
        fix = (
            "AQE cannot split a skewed aggregation, only joins: salt the key "
            "(add a random 0..1 to it), aggregate, then aggregate the partial "
            "results by the real key (two-choice partial aggregation, then "
            "merge)"
        )
    action = (
        f"{_where(task)} holds {ratio:.1f}x the stage's median records/bytes: "
        f"{fix}. Predicted stage time {duration(longest)} -> {duration(predicted)}"
        f"{_slowed(slowdown)}."
    )
    critical_ns = task["running_cp_share"] * task["duration_ns"]
    return Hint(
        kind,
        task["cp_share"],
        evidence,
        action,
        task["stage_id"],
        task["executor"],
        task["partition"],
        predicted_saving_ns=min(critical_ns, max(0.0, longest - predicted)),
        change=None
        if task["partition"] is None
        else SplitPartition(
            task["stage_id"], task["partition"], SPLIT_PIECES, slowdown
        ),
    )


def _slowed(slowdown: float) -> str:
    if slowdown <= 1:
        return ""
    return (
        f" (each half at {slowdown:.2f}x half the task's time: the task ran "
        "with its executor's other cores idle, the halves will share them as "
        "its tasks beside others did, by Spark's CPU times)"
    )


def _speculation(ctx: Context, task: dict[str, Any], ratio: float) -> str:
    n = task["stage_tasks"]
    quantile = min(SPECULATION_QUANTILE, math.floor(100 * (n - 1) / n) / 100)
    multiplier = round(min(MAX_MULTIPLIER, max(MIN_MULTIPLIER, ratio / 2)), 1)
    settings = (
        f"spark.speculation.quantile={quantile:g}, "
        f"spark.speculation.multiplier={multiplier:g}"
    )
    app = ctx.app
    if not app.flag("spark.speculation"):
        return f"set spark.speculation=true, {settings}"
    now_q = _number(app.setting("spark.speculation.quantile"), 0.75)
    now_m = _number(app.setting("spark.speculation.multiplier"), 1.5)
    if now_q <= quantile and now_m <= multiplier:
        return (
            f"speculation is on (quantile {now_q:g}, multiplier {now_m:g}) and "
            "should have copied it: check spark.speculation.minTaskRuntime and "
            "that a free slot was left for the copy"
        )
    return (
        f"speculation is on but its quantile {now_q:g} / multiplier {now_m:g} "
        f"start a copy too late for a stage of {n} tasks: {settings}"
    )


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text is not None else default
    except ValueError:
        return default


def _slow_copy_ns(ctx: Context, task: dict[str, Any]) -> int | None:
    """The longest other attempt of the task's partition (a speculative
    copy, a retry), when it too ran ``straggler_task_factor`` x the median:
    the partition is slow wherever it runs."""
    if task["partition"] is None:
        return None
    others = ctx.tasks.filter(
        (pl.col("stage_id") == task["stage_id"])
        & (pl.col("partition") == task["partition"])
        & (pl.col("task_id") != task["task_id"])
    )["duration_ns"]
    longest = others.max() if len(others) else None
    bound = ctx.options.straggler_task_factor * task["median_ns"]
    return int(longest) if longest is not None and longest >= bound else None  # type: ignore[arg-type]


def _straggler(task: dict[str, Any], ratio: float, ctx: Context) -> Hint:
    multiplier = round(min(MAX_MULTIPLIER, max(MIN_MULTIPLIER, ratio / 2)), 1)
    predicted = (multiplier + 1) * task["median_ns"]
    evidence = _base_evidence(task) | {
        "duration_ratio": ratio,
        "predicted_task_ns": predicted,
    }
    slow_copy = _slow_copy_ns(ctx, task)
    sized = task["records"] or task["bytes"]
    took = f"task {task['task_id']} ran {ratio:.1f}x the stage's median time on " + (
        "normal-sized input" if sized else "input whose size Spark did not report"
    )
    if ctx.facts.purpose(task["stage_id"]) == "listing":
        # Spark's own job listing a table's files: one slow directory.
        evidence["purpose"] = "listing"
        took = (
            f"task {task['task_id']} of a job listing a table's files ran "
            f"{ratio:.1f}x the stage's median time: one directory listed slowly "
            "(the object store's or the namenode's latency, not the data)"
        )
    where = f"{_where(task)} on {task['worker']}"
    critical_ns = task["running_cp_share"] * task["duration_ns"]
    cpu, gc_ns, gc_share = _measured(ctx, [task])
    evidence |= {"cpu_share": cpu, "gc_ns": gc_ns, "gc_of_excess": gc_share}
    cause = _slow_cause(ctx, task["stage_id"], cpu, gc_share, one=True)
    if slow_copy is not None or not can_speculate(ctx.app):
        # A copy cannot help: the partition's other attempt was as slow, or
        # Spark never speculates here (a local master).
        why = (
            f"another attempt of the partition ran {duration(slow_copy)} too, so the "
            "partition itself is slow, not its host"
            if slow_copy is not None
            else why_no_speculation(ctx.app)
        )
        evidence |= {"other_attempt_ns": slow_copy}
        look = (
            f"{cause} ({where})"
            if cause is not None
            else f"look at what makes {where} slow (its input, a UDF or external "
            "call on its rows, a lock)"
        )
        return Hint(
            "straggler_task",
            task["cp_share"],
            evidence,
            f"{took}; {why}: {look}",
            task["stage_id"],
            task["executor"],
            task["partition"],
            predicted_saving_ns=min(
                critical_ns, max(0.0, task["duration_ns"] - task["median_ns"])
            ),
            # Replayed: the partition made as fast as the stage's median
            # task, every attempt of it (a speculative copy that ran beside
            # it too, or the stage would still wait for the copy).
            change=own_work_change(
                ctx, task["stage_id"], [task], int(task["median_ns"])
            ),
        )
    action = (
        f"{took}: {_speculation(ctx, task, ratio)} (a copy would "
        f"end after ~{duration(predicted)} instead of "
        f"{duration(task['duration_ns'])}); "
        + (f"{cause} ({where})" if cause is not None else f"inspect {where}")
    )
    return Hint(
        "straggler_task",
        task["cp_share"],
        evidence,
        action,
        task["stage_id"],
        task["executor"],
        task["partition"],
        predicted_saving_ns=min(critical_ns, max(0.0, task["duration_ns"] - predicted)),
        change=SpeculateTask(task["task_id"], int(multiplier * task["median_ns"])),
    )


def _warm_up_tasks(tasks: pl.DataFrame, factor: float) -> set[int]:
    """Slow tasks of each executor's first wave in its first stage (launched
    before any task on that executor finished), where two or more of a
    stage's first-wave tasks are slow (>= ``factor`` x the stage median)
    and their executor then ran a task of that stage at the stage's pace:
    their slowness is the executors' start-up (JVM, Python workers), not
    their partitions'."""
    known = (
        tasks.lazy()
        .select("task_id", "executor", "stage_id", "launch_ns", "end_ns", "duration_ns")
        .filter(pl.col("executor").is_not_null() & pl.col("stage_id").is_not_null())
    )
    firsts = known.group_by("executor").agg(
        pl.col("end_ns").min().alias("_first_end"),
        pl.col("stage_id").sort_by("launch_ns").first().alias("_first_stage"),
    )
    medians = known.group_by("stage_id").agg(
        pl.col("duration_ns").median().alias("_median")
    )
    # One query over the columns read: on a long trace (streamed) the joins
    # no longer copy six columns of millions of tasks twice.
    first_wave = pl.col("launch_ns") < pl.col("_first_end")
    slow = pl.col("duration_ns") >= factor * pl.col("_median")
    # Warm once started: a later task of the stage on the same executor
    # ran at the stage's pace (else the executor, not its start, is slow).
    warmed = (~first_wave & ~slow).any().over("executor", "stage_id")
    slow_wave = collect(
        known.join(firsts, on="executor")
        .join(medians, on="stage_id")
        .filter(pl.col("stage_id") == pl.col("_first_stage"))
        .filter(first_wave & slow & warmed)
        .select("task_id", "stage_id"),
        len(tasks),
    ).filter(pl.len().over("stage_id") >= 2)
    return set(slow_wave["task_id"].to_list())


def _killed_copies(ctx: Context, task_ids: list[int]) -> set[int]:
    trace = ctx.trace
    if "speculative" not in trace.columns or "status" not in trace.columns:
        return set()
    rows = trace.filter(
        pl.col("task_id").is_in(task_ids)
        & pl.col("speculative").fill_null(False)
        & (pl.col("status") == "killed")
    )
    return set(rows["task_id"].to_list())


def task_hints(ctx: Context) -> list[Hint]:
    """``hotspot``, ``skew_unsplittable``, ``straggler_task`` and
    ``cold_start`` hints.

    The slow tasks of each stage on the critical path are sorted by cause
    (:func:`_cause`): more data than the stage's median (``data``), an
    executor's first wave starting up (``cold``), a wave that stalled
    together (no finding), or their own work (``own``). One slow task of a
    cause is named on its own; several are the stage's shared tail, named
    together and replayed together (:func:`_shared_tail`): fixing one of
    them alone saves nothing while the others still run.

    Examples
    --------
    See ``tests/summaries/test_hints.py``; a balanced trace gives none.
    """
    opts = ctx.options
    # A task holds the path back when it carries CP where it runs, or when
    # its stage is on the critical path (a straggler that ends with the
    # other slots' queue shares its CP with them; the replay then says
    # what a copy of it saves).
    stages = ctx.operator.filter(
        pl.col("stage_id").is_not_null()
        & (pl.col("cp_share") >= opts.task_stage_min_share)
    )["stage_id"]
    critical = (
        (pl.col("running_cp_share") >= opts.task_min_share)
        | pl.col("stage_id").is_in(stages.implode())
    ) & ~_FAILED  # a failed attempt is the failures hint's, not a straggler
    # Only tasks that can fire go through the Python loop below: a window
    # of a busy stage has thousands of critical tasks and a few outliers.
    # A shared tail counts its tasks from UNEVEN_RATIO x the median (what
    # makes a stage uneven for the count rules), a lone straggler from
    # straggler_task_factor.
    tail_factor = min(UNEVEN_RATIO, opts.straggler_task_factor)
    outlier = (skew_of() >= opts.skew_factor) | (
        _ratio_of("duration_ns", "median_ns") >= tail_factor
    )
    tasks = _critical_with_stage_stats(ctx, opts.min_stage_tasks, critical, outlier)
    if tasks.is_empty():
        return []
    warm_up = _warm_up_tasks(ctx.tasks, tail_factor)
    killed = _killed_copies(ctx, tasks["task_id"].to_list())
    facts = ctx.facts
    # Each stage's slow tasks by cause, in task order.
    found: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for task in tasks.iter_rows(named=True):
        if task["task_id"] in killed or not facts.whole_stage(task["stage_id"]):
            continue
        cause = _cause(ctx, task, task["task_id"] in warm_up, tail_factor)
        if cause is not None:
            found.setdefault(task["stage_id"], {}).setdefault(cause[0], []).append(
                task | {"ratio": cause[1]}
            )
    hints: list[Hint] = []
    # Skewed tasks wait for their halves' slowdowns, read together after
    # the loop (passes over the trace per executor, not per task); each
    # keeps its place among the hints.
    hot: list[tuple[int, dict[str, Any], float, list[int]]] = []
    for stage_id, by_cause in found.items():
        data = by_cause.get("data", [])
        if len(data) == 1:
            task = data[0]
            longest = _two_longest(ctx, stage_id)
            hot.append((len(hints), task, task["ratio"], longest))
        elif data:
            hints.append(_shared_tail(ctx, stage_id, data, "data"))
        own = _tail_or_lone(ctx, by_cause.get("own", []))
        if len(own) == 1:
            hints.append(_straggler(own[0], own[0]["ratio"], ctx))
        elif own:
            hints.append(_shared_tail(ctx, stage_id, own, "own"))
        cold = _tail_or_lone(ctx, by_cause.get("cold", []))
        if cold:
            hints.append(_shared_tail(ctx, stage_id, cold, "cold"))
    if hot:
        slowdowns = split_slowdowns(
            Trace(ctx.trace, ctx.app),
            [t["task_id"] for _, t, _, _ in hot],
            SPLIT_PIECES,
        )
        for at, task, skew, two_longest in reversed(hot):
            slowdown = slowdowns[task["task_id"]]
            hints.insert(at, _hotspot(task, skew, two_longest, slowdown, ctx))
    return hints


def _tail_or_lone(ctx: Context, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The slow tasks of one cause in a stage that make a finding: all of
    them when two or more, on two executors or more, hold the stage
    :data:`TAIL_MIN_SHARE` of the judged time past its median (a shared
    tail), else those slower than
    ``straggler_task_factor`` x the median (a lone straggler's bound)."""
    # On one executor, the executor is the suspect (straggler_executor's).
    executors = {t["executor"] for t in tasks}
    if len(tasks) >= 2 and len(executors) >= 2:
        longest = max(t["duration_ns"] - t["median_ns"] for t in tasks)
        if longest >= TAIL_MIN_SHARE * ctx.judged_ns:
            return tasks
    factor = ctx.options.straggler_task_factor
    return [t for t in tasks if t["ratio"] >= factor]


#: The time past its median a stage's shared tail of moderately slow tasks
#: (under ``straggler_task_factor``) holds it, as a share of the judged time,
#: at which it is a finding.
TAIL_MIN_SHARE = 0.05


def _cause(
    ctx: Context, task: dict[str, Any], warm_up: bool, factor: float
) -> tuple[str, float] | None:
    """Why a critical task is slow, and by how much (its skew or its
    slowdown over the stage's median): ``data``, ``cold``, ``own``, or
    ``None`` when it is no finding (not slow enough, or it stalled with
    the tasks beside it)."""
    opts = ctx.options
    # Records before bytes: a partition of as many rows in wider ones is no
    # hot key. But a PySpark RDD's shuffle records are pickled batches of
    # rows, not rows: its bytes tell the skew.
    skew = None
    if ctx.facts.engine(task["stage_id"]) != "pyspark_rdd":
        skew = _ratio(task["records"], task["median_records"])
    if skew is None:
        skew = _ratio(task["bytes"], task["median_bytes"])
    slow = _ratio(task["duration_ns"], task["median_ns"])
    if skew is not None and skew >= opts.skew_factor:
        if slow is None or slow < HOT_MIN_SLOWDOWN:
            return None  # more data, no more time: nothing held back
        return "data", skew
    if slow is None or slow < factor:
        return None
    if task["duration_ns"] - task["median_ns"] < opts.straggler_min_excess_ms * 1e6:
        return None
    if warm_up or _cold_executor(ctx, task):
        return "cold", slow
    if _stalled_together(ctx, task):
        return None
    return "own", slow


#: A hot partition counts when it also ran this many times the median.
HOT_MIN_SLOWDOWN = 1.5
#: A slow task whose wave was slow too: at least this share of the stage's
#: tasks running beside it were as slow (a pause of the JVM or the host,
#: a stage's first wave compiling its code), ...
WAVE_STALL_SHARE = 0.5
#: ... where "as slow" is at least this share of its time (a task just
#: under the straggler bound beside it stalled the same way).
STALL_LIKENESS = 0.5
_FAILED = pl.col("status").is_in(["failed", "killed"]).fill_null(False)


#: The stage medians a task's skew is measured against: of its busy tasks.
_SKEW_MEDIANS = (
    pl.col("median_busy_records").alias("median_records"),
    pl.col("median_busy_bytes").alias("median_bytes"),
)


def skew_medians(ctx: Context) -> pl.LazyFrame:
    """``stage_id, median_records, median_bytes``: what :func:`skew_of`
    reads of a task's stage, to be joined to the tasks."""
    return ctx.stage_facts.lazy().select("stage_id", *_SKEW_MEDIANS)


def skew_of() -> pl.Expr:
    """A task's records over its stage's median, else its bytes' (null
    where neither is a measure): the data-skew test of the hotspot rules,
    against ``skew_factor``, beside :func:`skew_medians`."""
    return pl.coalesce(
        _ratio_of("records", "median_records"), _ratio_of("bytes", "median_bytes")
    )


def _stalled_together(ctx: Context, task: dict[str, Any]) -> bool:
    """Whether a slow task's time is not its partition's doing: most of the
    tasks of its stage that ran beside it were as slow (a wave that stalled
    together: a JVM-wide GC pause, a slow host).

    With one task beside it (two slots), that task must also have run
    beside it for most of its time: two slow tasks side by side on two
    slots are a stall (they cannot be told from two slow partitions that
    ran at once)."""
    others = pl.col("task_id") != task["task_id"]
    stage = ctx.tasks.filter((pl.col("stage_id") == task["stage_id"]) & others)
    beside = stage.filter(
        (pl.col("launch_ns") < task["end_ns"]) & (pl.col("end_ns") > task["launch_ns"])
    )
    as_slow = beside.filter(
        pl.col("duration_ns") >= STALL_LIKENESS * task["duration_ns"]
    )
    if beside.height >= 2 and as_slow.height >= WAVE_STALL_SHARE * beside.height:
        return True
    if beside.height == 1 and as_slow.height == 1:
        overlap = min(task["end_ns"], as_slow["end_ns"][0]) - max(
            task["launch_ns"], as_slow["launch_ns"][0]
        )
        if overlap >= WAVE_STALL_SHARE * task["duration_ns"]:
            return True
    return False


def _cold_executor(ctx: Context, task: dict[str, Any]) -> bool:
    """Whether a slow task was its executor's first and spent most of its
    time before running (a cold executor: its JVM, its Python workers)."""
    executor = task["executor"]
    if executor is None or "run_ns" not in ctx.tasks.columns:
        return False
    first = ctx.tasks.filter(pl.col("executor") == executor)["launch_ns"].min()
    before_run = task["duration_ns"] - (task.get("run_ns") or 0)
    return bool(task["launch_ns"] == first and before_run >= 0.5 * task["duration_ns"])


#: Partitions a shared-tail hint names (the rest are counted).
MAX_NAMED = 6
#: A group of slow tasks whose Spark CPU time is under this share of their
#: run time waited (I/O, a lock, an external call), not computed.
WAITED_CPU_SHARE = 0.3


def _tail_change(
    ctx: Context, stage_id: int, tasks: list[dict[str, Any]], median: int, cause: str
) -> Any:
    """The replay of a shared tail's fix: a tail of more data than the
    others (``cause`` ``data``) keeps its work, spread evenly over the
    stage's tasks (its data evened out: the rows do not vanish); any other
    tail's tasks at the median time (:func:`own_work_change`)."""
    if cause == "data":
        n = ctx.facts.partition_count(stage_id)
        n = int(tasks[0]["stage_tasks"]) if n is None else n
        return StagePartitions(stage_id, max(1, n))
    return own_work_change(ctx, stage_id, tasks, median)


def own_work_change(
    ctx: Context, stage_id: int, tasks: list[dict[str, Any]], median_ns: int
) -> TaskTimes:
    """The replay of a fix of ``tasks``' own work: every attempt of their
    partitions in stage ``stage_id`` (speculative copies and retries that
    ran beside them, but the failed) at ``median_ns``."""
    partitions = [t["partition"] for t in tasks if t["partition"] is not None]
    ids = {t["task_id"] for t in tasks}
    if partitions:
        settled = ~pl.col("status").fill_null("").is_in(["failed"])
        attempts = ctx.tasks.filter(
            (pl.col("stage_id") == stage_id)
            & pl.col("partition").is_in(partitions)
            & settled
        )
        ids |= set(attempts["task_id"].to_list())
    ordered = tuple(sorted(ids))
    return TaskTimes(ordered, (max(0, median_ns),) * len(ordered))


#: Spark's task metrics the cause of a slow tail reads, by trace column.
_TASK_METRICS = ("executor_cpu_ns", "executor_run_ns", "jvm_gc_ns")


def _slow_cause(
    ctx: Context,
    stage_id: int,
    cpu: float | None,
    gc_share: float | None,
    one: bool = False,
) -> str | None:
    """What slowed tasks of stage ``stage_id`` (``one``: a task), as Spark's
    metrics of them say: the JVM's pauses (GC past :data:`GC_CAUSE_SHARE` of
    their time past the median), waiting (CPU under :data:`WAITED_CPU_SHARE`
    of their run time) or computing; ``None`` when the log states neither
    GC nor CPU time. A Python stage's CPU time tells neither: Spark counts
    the JVM thread that waits on the Python worker, not the worker."""
    from .partitions import PYTHON_ENGINES

    if ctx.facts.engine(stage_id) in PYTHON_ENGINES:
        cpu = None
    they, their, them = ("it", "its", "it") if one else ("they", "their", "them")
    if gc_share is not None and gc_share >= GC_CAUSE_SHARE:
        # memory_pressure reads the skew test here: imported when used
        from .memory_pressure import heap_remedy

        return (
            f"{their} JVM paused: GC took {min(1.0, gc_share):.0%} of {their} time "
            f"past the median, so the heap, not {their} rows, slowed {them}: "
            f"{heap_remedy(ctx)}"
        )
    if cpu is not None and cpu < WAITED_CPU_SHARE:
        return (
            f"{they} waited, not computed (Spark's CPU time is {cpu:.0%} of "
            f"{their} run time): an external call, I/O, a lock or a sleep in the "
            f"code {'that partition runs' if one else 'those partitions run'}"
        )
    if cpu is not None:
        return (
            f"{they} computed longer (CPU {cpu:.0%} of {their} run time): what "
            f"{their} rows hold (nested or wide values, a UDF's slow path)"
        )
    return None


def _task_metrics(ctx: Context, task_ids: list[int]) -> pl.DataFrame:
    """``task_id`` and each of :data:`_TASK_METRICS` the trace states, one
    row per task of ``task_ids``: one pass over the trace for the CPU and
    GC reads below."""
    stated = [c for c in _TASK_METRICS if c in ctx.trace.columns]
    return (
        ctx.trace.lazy()
        .filter(pl.col("task_id").is_in(task_ids))
        .group_by("task_id")
        .agg(*[pl.col(c).max() for c in stated])
        .collect()
    )


def _measured(
    ctx: Context, tasks: list[dict[str, Any]]
) -> tuple[float | None, float | None, float | None]:
    """Spark's CPU share of ``tasks``, their GC time, and that GC time's
    share of their time past their stage's median (each ``None`` where the
    trace does not state it)."""
    metrics = _task_metrics(ctx, [t["task_id"] for t in tasks])
    gc_ns = _gc_ns(metrics)
    excess = sum(max(0, t["duration_ns"] - t["median_ns"]) for t in tasks)
    gc_share = gc_ns / excess if gc_ns is not None and excess > 0 else None
    return _cpu_share(metrics), gc_ns, gc_share


def _cpu_share(metrics: pl.DataFrame) -> float | None:
    """Spark's CPU time of the tasks over their run time (``None``: the
    trace does not state it)."""
    if not {"executor_cpu_ns", "executor_run_ns"} <= set(metrics.columns):
        return None
    per_task = metrics.select("executor_cpu_ns", "executor_run_ns").drop_nulls()
    run = float(per_task["executor_run_ns"].sum() or 0)
    return float(per_task["executor_cpu_ns"].sum() or 0) / run if run > 0 else None


def _gc_ns(metrics: pl.DataFrame) -> float | None:
    """Spark's JVM GC time of the tasks, summed (``None``: the trace does
    not state it)."""
    if "jvm_gc_ns" not in metrics.columns:
        return None
    gc = metrics["jvm_gc_ns"].drop_nulls()
    return float(gc.sum()) if len(gc) else None


#: A slow tail whose GC time is this share of its time past the stage's
#: median or more was slowed by the JVM's pauses, not by its rows.
GC_CAUSE_SHARE = 0.5


def _listed(values: list[Any]) -> str:
    shown = ", ".join(str(v) for v in values[:MAX_NAMED])
    more = len(values) - MAX_NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def _shared_tail(
    ctx: Context, stage_id: int, tasks: list[dict[str, Any]], cause: str
) -> Hint:
    """One hint for the slow tasks of one ``cause`` in stage ``stage_id``:
    replayed with all of them at the stage's median time, since the stage
    waits for the last of them (a fix of one alone saves nothing)."""
    tasks = sorted(tasks, key=lambda t: -t["duration_ns"])
    first = tasks[0]
    median = int(first["median_ns"])
    site = first["call_site"] or first["name"] or "unknown call site"
    where = stage_label(stage_id, site)
    partitions = sorted({t["partition"] for t in tasks if t["partition"] is not None})
    executors = sorted({str(t["executor"]) for t in tasks if t["executor"] is not None})
    ratios = [t["ratio"] for t in tasks]
    longest = int(first["duration_ns"])
    critical = max(t["running_cp_share"] * t["duration_ns"] for t in tasks)
    cpu, gc_ns, gc_share = _measured(ctx, tasks)
    evidence = {
        "cause": cause,
        "slow_tasks": len(tasks),
        "stage_tasks": first["stage_tasks"],
        "task_ids": [t["task_id"] for t in tasks][:20],
        "partitions": partitions[:20],
        "executors": executors[:20],
        "median_ns": median,
        "longest_ns": longest,
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "records": [t["records"] for t in tasks][:20],
        "median_records": first["median_records"],
        "bytes": [t["bytes"] for t in tasks][:20],
        "median_bytes": first["median_bytes"],
        "cpu_share": cpu,
        "gc_ns": gc_ns,
        "gc_of_excess": gc_share,
        "cp_share": sum(t["cp_share"] for t in tasks),
        "running_cp_share": max(t["running_cp_share"] for t in tasks),
    }
    count = f"{len(tasks)} of {first['stage_tasks']} tasks of {where}"
    if partitions:
        count += f" (partitions {_listed(partitions)})"
    kind, action = _tail_words(
        ctx, stage_id, tasks, cause, count, cpu, executors, gc_share
    )
    if kind == "cold_start" and not _churned(ctx):
        evidence["one_off"] = True  # executors start once: nothing to act on
    return Hint(
        kind,
        evidence["cp_share"],
        evidence,
        f"{action}. Replayed with them at the stage's median time "
        f"({duration(median)}), the stage would no longer wait for them.",
        stage_id,
        executors[0] if len(executors) == 1 else None,
        partitions[0] if len(partitions) == 1 else None,
        predicted_saving_ns=min(critical, max(0.0, longest - median)),
        change=_tail_change(ctx, stage_id, tasks, median, cause),
    )


def _tail_words(
    ctx: Context,
    stage_id: int,
    tasks: list[dict[str, Any]],
    cause: str,
    count: str,
    cpu: float | None,
    executors: list[str],
    gc_share: float | None = None,
) -> tuple[str, str]:
    """The kind and the action of a shared tail, by its cause and the
    stage's engine, input and the run's version (:mod:`.remedies`)."""
    facts = ctx.facts
    stage = facts.stage(stage_id)
    engine = stage.engine if stage else None
    reads = stage.reads if stage else None
    if reads is None:
        reads = "shuffle" if _reads_shuffle(ctx, stage_id) else None
    ratios = [t["ratio"] for t in tasks]
    span = _span(ratios)
    if cause == "data":
        head = f"{count} hold {_amounts(tasks)}"
        if reads == "input":
            hot_bytes = max(int(t["bytes"] or 0) for t in tasks)
            cap = facts.scan_cap(stage_id)
            found = remedies(
                "input_layout",
                facts,
                engine=engine,
                reads=reads,
                stage_id=stage_id,
                split=f"{max(1, cap // 4) >> 20}m",
                split_now=size(cap),
                splits_at_cap=hot_bytes >= 0.8 * cap,
            )
            why = (
                "the stage scans its input files, so the skew is their layout "
                f"(its largest split reads {size(hot_bytes)}): "
            )
            return "hotspot", head + "; " + why + remedy_text(
                found, "even out the input"
            )
        join = any("Join" in str(t.get("operator") or "") for t in tasks) or (
            _join_sides(ctx, stage_id) >= 2
        )
        problem = "skewed_join" if join else "skewed_aggregation"
        largest = max(int(t["bytes"] or 0) for t in tasks)
        found = remedies(
            problem,
            facts,
            engine=engine,
            reads=reads,
            stage_id=stage_id,
            k1=SPLIT_PIECES - 1,
            half=f"{max(1, largest // SPLIT_PIECES) >> 20}m",
            size=size(largest),
        )
        kind = "hotspot" if join else "skew_unsplittable"
        what = "join" if join else "aggregation"
        return kind, f"{head}: hot keys of the {what}: " + remedy_text(
            found, "spread the hot keys over more partitions"
        )
    if cause == "cold":
        return "cold_start", _cold_words(ctx, tasks, count, span, executors)
    sized = all((t["records"] or t["bytes"]) for t in tasks)
    head = f"{count} ran {span} the stage's median time on " + (
        "input of the same size" if sized else "input whose size Spark did not report"
    )
    slowed = _slow_cause(ctx, stage_id, cpu, gc_share)
    if slowed is not None:
        what = slowed
    elif sized:
        what = (
            "on the same input, the rows are no likely cause, and the log "
            "holds no CPU time to tell computing from waiting: a slow read "
            "(a remote or uncached block), the host, or a pause"
        )
    else:
        what = "look at what those partitions' rows hold or call"
    # One executor of several: its host may be the cause, which a copy
    # elsewhere escapes.
    stage_executors = ctx.tasks.filter(pl.col("stage_id") == stage_id)[
        "executor"
    ].n_unique()
    found = (
        remedies(
            "slow_host",
            facts,
            engine=engine,
            slow=duration(tasks[-1]["duration_ns"]),
        )
        if len(executors) == 1 and stage_executors > 1 and can_speculate(ctx.app)
        else []
    )
    if any(r not in NOTES for r in found):
        what += f"; they all ran on executor {executors[0]}: " + remedy_text(found, "")
    return "straggler_task", f"{head}: {what}"


def _churned(ctx: Context) -> bool:
    """Whether dynamic allocation released or added executors while the
    jobs ran (cold starts a setting can avoid)."""
    da = ctx.facts.dynamic_allocation
    return da.enabled and bool(da.released or da.added_late)


def _engines_python(ctx: Context, stage_id: int) -> bool:
    return ctx.facts.engine(stage_id) in ("pyspark_rdd", "pandas_udf", "python_udf")


def _cold_words(
    ctx: Context,
    tasks: list[dict[str, Any]],
    count: str,
    span: str,
    executors: list[str],
) -> str:
    """A cold start's action: what started, and what keeps executors warm
    where the run released them (dynamic allocation)."""
    facts = ctx.facts
    da = facts.dynamic_allocation
    stage_id = tasks[0]["stage_id"]
    python = ", their Python workers" if _engines_python(ctx, stage_id) else ""
    head = (
        f"{count} were the first tasks of executor(s) {_listed(executors)} and "
        f"ran {span} the stage's median time: the executors started up "
        f"(their JVM, deserializing the first task{python})"
    )
    if _churned(ctx):
        timeout = da.idle_timeout_ns or 60 * 10**9
        used = ctx.tasks.filter(pl.col("stage_id") == stage_id)["executor"]
        found = remedies(
            "cold_executors",
            facts,
            timeout=f"{max(120, 4 * timeout // 10**9)}s",
            timeout_now=duration(timeout),
            min_executors=max(1, used.n_unique()),
        )
        return (
            f"{head}; dynamic allocation released {da.released} executor(s) and "
            f"added {da.added_late} while the jobs ran: " + remedy_text(found, "")
        )
    return f"{head}: a one-off per executor, which a longer run amortizes"


def _span(ratios: list[float]) -> str:
    """``2.0x`` or ``2.0-9.5x``: the range of slow tasks' ratios."""
    low, high = min(ratios), max(ratios)
    return (
        f"{low:.1f}x" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f}x"
    )


def _amounts(tasks: list[dict[str, Any]]) -> str:
    """How much more the skewed tasks read than the stage's median task:
    their records (else bytes) against the median's."""
    first = tasks[0]
    if first["median_records"] and all(t["records"] for t in tasks):
        values = [int(t["records"]) for t in tasks]
        low, high = count(min(values)), count(max(values))
        median = count(first["median_records"])
        what = "records"
    else:
        values = [int(t["bytes"] or 0) for t in tasks]
        low, high = size(min(values)), size(max(values))
        median = size(first["median_bytes"] or 0)
        what = "of input"
    amount = low if low == high else f"{low} to {high}"
    return f"{amount} {what} each, against {median} for the stage's median task"
