"""Stage and executor tables: the Spark UI's and sparklens' facts, with CP.

Two small tables a Spark engineer already knows how to read, each with the
column the Spark UI lacks: the share of the run's critical path.

* :func:`stage_stats`, one row per stage: its wall time (first launch to
  last task finish), task attempts and failures, median and longest task,
  skew (longest over median), records, bytes, shuffle write, spill, GC
  share of the tasks' run time, and ``cp_share``.
* :func:`executor_stats`, one row per executor: host and cores (from the
  application's context), task attempts and failures, task time, GC share,
  records, bytes, shuffle write, spill, and the executor summary's
  ``cp_share``, ``fair_share`` and ``ratio``.

Assumptions
-----------
* ``tasks`` is one row per task attempt with its CP shares
  (:func:`~sparktrail.summaries.hints.task_shares` of
  :func:`~sparktrail.summaries.task_facts`): every attempt counts,
  failed, killed and still running ones included (one launched at the
  log's last event too, with no time), as in the Spark UI's task counts.
* Task times are Spark's (DESIGN §10): an attempt lasts from its launch to
  the finish Spark recorded (``finish_ns``), not to the end the PAG model
  clipped on its slot; the GC share is Spark's, ``JVM GC Time`` over
  ``Executor Run Time`` summed over the attempts that reported metrics
  (an attempt lost with its executor reports none and adds no run time).
* A number no attempt states is null, not 0: records when no attempt
  read any that counted, bytes and shuffle write when every attempt
  failed, was killed or still runs, spills when none reported a spill.
* A stage's CP share comes from the run's per-stage CP partial (all of its
  activities, scheduling gaps included), not from its tasks' CP alone.
* The driver timeline is not an executor: its CP is the ``driver`` row of
  the executor summary, which :func:`executor_stats` leaves out.
"""

from __future__ import annotations

import polars as pl

from sparktrail.pag.context import AppContext
from sparktrail.pag.query_engine import collect
from sparktrail.pag.sorted_groups import slices_medians
from sparktrail.pag.trace import slices_group_by

__all__ = ["EXECUTOR_STATS", "STAGE_STATS", "executor_stats", "stage_stats"]

#: Columns of :func:`stage_stats`.
STAGE_STATS: dict[str, pl.DataType] = {
    "stage_id": pl.Int64(),
    "operator": pl.String(),
    "job_id": pl.Int64(),
    "wall_ns": pl.Int64(),
    "tasks": pl.Int64(),
    "failed_tasks": pl.Int64(),
    "median_task_ns": pl.Float64(),
    "max_task_ns": pl.Int64(),
    "skew": pl.Float64(),
    "records": pl.Int64(),
    "bytes": pl.Int64(),
    "shuffle_write_bytes": pl.Int64(),
    "spilled_bytes": pl.Int64(),
    "gc_share": pl.Float64(),
    "cp_share": pl.Float64(),
}
#: Columns of :func:`executor_stats`.
EXECUTOR_STATS: dict[str, pl.DataType] = {
    "executor_id": pl.String(),
    "host": pl.String(),
    "cores": pl.Int64(),
    "tasks": pl.Int64(),
    "failed_tasks": pl.Int64(),
    "task_ns": pl.Int64(),
    "gc_share": pl.Float64(),
    "records": pl.Int64(),
    "bytes": pl.Int64(),
    "shuffle_write_bytes": pl.Int64(),
    "spilled_bytes": pl.Int64(),
    "cp_share": pl.Float64(),
    "fair_share": pl.Float64(),
    "ratio": pl.Float64(),
}

_FAILED = ("failed", "killed")
#: Attempts whose work Spark never reported as done: their bytes are
#: unknown, not 0.
_NO_RESULT = (*_FAILED, "running")
#: Spark's duration of an attempt (``TaskInfo.duration``: finish - launch),
#: before the PAG model clipped its end on its slot.
_SPARK_NS = pl.col("finish_ns") - pl.col("launch_ns")


def _work_partial() -> list[pl.Expr]:
    """What both tables sum over a group of task attempts, as sums and
    flags that add up over parts of the group (:func:`_work`)."""
    # Spark's GC share: JVM GC time over executor run time, both summed over
    # the attempts that reported metrics (an executor lost mid-task reports
    # none, and its time is no run time).
    measured = pl.col("executor_run_ns").is_not_null()
    spilled = pl.col("memory_bytes_spilled").fill_null(0) + pl.col(
        "disk_bytes_spilled"
    ).fill_null(0)
    return [
        pl.len().cast(pl.Int64).alias("tasks"),
        pl.col("status").is_in(_FAILED).sum().cast(pl.Int64).alias("failed_tasks"),
        pl.col("records").is_not_null().any().alias("_records_stated"),
        pl.col("records").sum(),
        # An attempt that never reported its work done (its bytes unknown).
        pl.col("status").is_in(_NO_RESULT).fill_null(False).any().alias("_open"),
        pl.col("bytes").sum(),
        pl.col("shuffle_write_bytes").sum(),
        (
            pl.col("memory_bytes_spilled").is_not_null()
            | pl.col("disk_bytes_spilled").is_not_null()
        )
        .any()
        .alias("_spill_stated"),
        spilled.sum().alias("spilled_bytes"),
        pl.col("executor_run_ns").sum().alias("_run_ns"),
        pl.col("jvm_gc_ns").filter(measured).sum().alias("_gc_ns"),
    ]


def _work() -> list[pl.Expr]:
    """The tables' work columns from the partial sums of
    :func:`_work_partial` of a group's parts."""
    # A number is unknown (null), not 0, when no attempt states it: records
    # when no attempt read any that counted, bytes when none finished well.
    finished = pl.col("_open").any().not_()
    run = pl.col("_run_ns").sum()
    return [
        pl.col("tasks", "failed_tasks").sum().cast(pl.Int64),
        pl.when(pl.col("_records_stated").any())
        .then(pl.col("records").sum())
        .cast(pl.Int64)
        .alias("records"),
        pl.when(finished).then(pl.col("bytes").sum()).cast(pl.Int64).alias("bytes"),
        pl.when(finished)
        .then(pl.col("shuffle_write_bytes").sum())
        .cast(pl.Int64)
        .alias("shuffle_write_bytes"),
        pl.when(pl.col("_spill_stated").any())
        .then(pl.col("spilled_bytes").sum())
        .cast(pl.Int64)
        .alias("spilled_bytes"),
        pl.when(run > 0)
        .then(pl.col("_gc_ns").sum() / run)
        .cast(pl.Float64)
        .alias("gc_share"),
    ]


def _per_group(
    tasks: pl.DataFrame,
    key: str,
    partial: list[pl.Expr],
    whole: list[pl.Expr],
) -> pl.LazyFrame:
    """``whole`` over each ``key`` group of ``tasks`` (``key`` not null),
    from the ``partial`` sums of a slice of the tasks at a time (DESIGN §10:
    a long trace's facts are mapped, and one query over every task would
    hold the pages of every column it reads); a window's tasks, one query."""
    return slices_group_by(
        tasks, [key], partial, whole, where=pl.col(key).is_not_null()
    )


def _with_optional(tasks: pl.DataFrame) -> pl.DataFrame:
    """``tasks`` with every column the tables read (null when absent).

    Facts without Spark's own times (frames built by hand) fall back on
    the model's: ``finish_ns`` on ``end_ns`` (or ``launch_ns`` plus
    ``duration_ns``), Spark's metrics on the rows' ``run_ns`` and ``gc_ns``.
    """
    if "launch_ns" not in tasks.columns:
        tasks = tasks.with_columns(pl.lit(0, dtype=pl.Int64).alias("launch_ns"))
    fallback = {
        "finish_ns": pl.col("end_ns")
        if "end_ns" in tasks.columns
        else pl.col("launch_ns") + pl.col("duration_ns"),
        "executor_run_ns": pl.col("run_ns"),
        "jvm_gc_ns": pl.col("gc_ns"),
    }
    tasks = tasks.with_columns(
        e.alias(c)
        for c, e in fallback.items()
        if c not in tasks.columns
        and all(r in tasks.columns for r in e.meta.root_names())
    )
    optional = {
        "status": pl.String,
        "records": pl.Int64,
        "bytes": pl.Int64,
        "shuffle_write_bytes": pl.Int64,
        "memory_bytes_spilled": pl.Int64,
        "disk_bytes_spilled": pl.Int64,
        "executor_run_ns": pl.Int64,
        "jvm_gc_ns": pl.Int64,
        "finish_ns": pl.Int64,
        "cp_share": pl.Float64,
        "operator": pl.String,
        "job_id": pl.Int64,
        "executor": pl.String,
    }
    return tasks.with_columns(
        pl.lit(None, dtype=t).alias(c)
        for c, t in optional.items()
        if c not in tasks.columns
    )


def stage_stats(
    tasks: pl.DataFrame, stage_cp: pl.DataFrame, n_windows: int
) -> pl.DataFrame:
    """One row per stage: wall time, tasks, task times, skew, work and CP.

    Parameters
    ----------
    tasks
        One row per task attempt: ``task_id, stage_id, operator, job_id,
        launch_ns, finish_ns, executor_run_ns, jvm_gc_ns, status`` and the
        work columns of :func:`~sparktrail.summaries.task_facts` (without
        Spark's ``finish_ns`` and metrics, the model's ``end_ns``,
        ``run_ns`` and ``gc_ns`` stand in).
    stage_cp
        ``stage_id, activity, cp``: CP summed per stage over the windows
        (:attr:`~sparktrail.summaries.partials.Partials.stages`).
    n_windows
        The windows with a path (what a CP sum is divided by).

    Returns
    -------
    polars.DataFrame
        The columns of :data:`STAGE_STATS`, largest ``cp_share`` first.
        ``skew`` is null when the median task took no time.

    Examples
    --------
    >>> tasks = pl.DataFrame({"task_id": [1, 2, 3], "stage_id": [0, 0, 0],
    ...     "launch_ns": [0, 0, 10], "end_ns": [10, 10, 50],
    ...     "duration_ns": [10, 10, 40], "run_ns": [10, 10, 40],
    ...     "gc_ns": [0, 0, 5], "records": [5, 5, 20]})
    >>> cp = pl.DataFrame({"stage_id": [0, None], "activity": ["processing",
    ...     "driver"], "cp": [1.5, 0.5]})
    >>> stage_stats(tasks, cp, 2).select("stage_id", "wall_ns", "tasks",
    ...     "skew", "records", "gc_share", "cp_share").row(0)
    (0, 50, 3, 4.0, 30, 0.0833..., 0.75)
    """
    # (A query, not ``tasks["stage_id"]``: that would spell a stage id
    # kept once, DESIGN §10, out for every task of the frame, for good.)
    staged = tasks.select(pl.col("stage_id").is_not_null().any()).item()
    if tasks.is_empty() or not staged:
        return pl.DataFrame(schema=STAGE_STATS)
    share = (
        stage_cp.lazy()
        .filter(pl.col("stage_id").is_not_null())
        .group_by("stage_id")
        .agg((pl.col("cp").sum() / max(1, n_windows)).alias("cp_share"))
    )
    tasks = _with_optional(tasks)
    facts = _per_group(
        tasks,
        "stage_id",
        [
            pl.col("operator").first(ignore_nulls=True),
            pl.col("job_id").first(ignore_nulls=True),
            pl.col("finish_ns").max(),
            pl.col("launch_ns").min(),
            _SPARK_NS.max().alias("max_task_ns"),
            *_work_partial(),
        ],
        [
            pl.col("operator").first(ignore_nulls=True),
            pl.col("job_id").first(ignore_nulls=True),
            (pl.col("finish_ns").max() - pl.col("launch_ns").min()).alias("wall_ns"),
            pl.col("max_task_ns").max(),
            *_work(),
        ],
    )
    # The median of each stage's task times: a long run's from sorted keys
    # in a mapped file, not a sum over parts (DESIGN §10).
    median = slices_medians(
        tasks,
        ["stage_id"],
        [_SPARK_NS.alias("median_task_ns")],
        where=pl.col("stage_id").is_not_null(),
    ).lazy()
    out = (
        facts.join(median, on="stage_id", how="left")
        .with_columns(
            pl.when(pl.col("median_task_ns") > 0)
            .then(pl.col("max_task_ns") / pl.col("median_task_ns"))
            .alias("skew")
        )
        .join(share, on="stage_id", how="left")
        .with_columns(pl.col("cp_share").fill_null(0.0))
    )
    return collect(_shaped(out, STAGE_STATS, "stage_id"), len(tasks))


def executor_stats(
    tasks: pl.DataFrame, executor: pl.DataFrame, app: AppContext | None = None
) -> pl.DataFrame:
    """One row per executor: host, cores, tasks, task time, work and CP.

    Parameters
    ----------
    tasks
        One row per task attempt (as for :func:`stage_stats`) with its
        ``executor``.
    executor
        The executor summary (``executor_id, role, cp_share, fair_share,
        ratio``); its ``driver`` role row (the driver timeline) is left out.
    app
        The application's context, for each executor's host and cores.

    Returns
    -------
    polars.DataFrame
        The columns of :data:`EXECUTOR_STATS`, largest ``cp_share`` first:
        every executor that ran a task or is in the executor summary or the
        context.

    Examples
    --------
    >>> tasks = pl.DataFrame({"task_id": [1, 2], "executor": ["1", "1"],
    ...     "duration_ns": [10, 30], "run_ns": [10, 30], "gc_ns": [0, 4],
    ...     "status": ["success", "failed"]})
    >>> summary = pl.DataFrame({"executor_id": ["1", None], "role":
    ...     ["executor", "driver"], "cp_share": [0.8, 0.2],
    ...     "fair_share": [0.5, 0.5], "ratio": [1.6, 0.4]})
    >>> executor_stats(tasks, summary).select("executor_id", "tasks",
    ...     "failed_tasks", "task_ns", "gc_share", "cp_share").rows()
    [('1', 2, 1, 40, 0.1, 0.8)]
    """
    # Grouped by the executor as it is (a categorical's codes), named after:
    # its names spelled out for every task were 16 bytes a task.
    per_task = (
        _per_group(
            _with_optional(tasks),
            "executor",
            [_SPARK_NS.sum().alias("task_ns"), *_work_partial()],
            [pl.col("task_ns").sum().cast(pl.Int64), *_work()],
        )
        .with_columns(pl.col("executor").cast(pl.String).alias("executor_id"))
        .drop("executor")
    )
    shares = (
        _with_optional(executor)
        .lazy()
        .select(
            pl.col(c) if c in executor.columns else pl.lit(None, dtype=t).alias(c)
            for c, t in {
                "executor_id": pl.String(),
                "role": pl.String(),
                "cp_share": pl.Float64(),
                "fair_share": pl.Float64(),
                "ratio": pl.Float64(),
            }.items()
        )
    )
    shares = shares.filter(
        (pl.col("role") != "driver") | pl.col("role").is_null()
    ).drop("role")
    lives = [(e.executor_id, e.host, e.cores) for e in (app.executors if app else ())]
    known = (
        pl.DataFrame(
            lives,
            schema={
                "executor_id": pl.String(),
                "host": pl.String(),
                "cores": pl.Int64(),
            },
            orient="row",
        )
        .lazy()
        .unique("executor_id", keep="last")
    )
    ids = (
        pl.concat(
            [
                per_task.select("executor_id"),
                shares.select("executor_id"),
                known.select("executor_id"),
            ]
        )
        .unique()
        .drop_nulls()
    )
    out = (
        ids.join(known, on="executor_id", how="left")
        .join(per_task, on="executor_id", how="left")
        .join(shares, on="executor_id", how="left")
        .with_columns(
            pl.col("tasks", "failed_tasks").fill_null(0),
            pl.col("task_ns").fill_null(0),
            pl.col("cp_share").fill_null(0.0),
        )
    )
    return collect(_shaped(out, EXECUTOR_STATS, "executor_id"), len(tasks))


def _shaped(
    frame: pl.LazyFrame, schema: dict[str, pl.DataType], key: str
) -> pl.LazyFrame:
    return frame.select(pl.col(c).cast(t) for c, t in schema.items()).sort(
        ["cp_share", key], descending=[True, False], nulls_last=True
    )
