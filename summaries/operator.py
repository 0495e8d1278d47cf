"""Operator summary: CP by operator, a stable identity across jobs (DESIGN §8).

The tracer labels rows with the operator that ran them: the user's call
site and the stage's SQL plan node, ``<action> at <file>:<line> · <node>``
(:mod:`~sparktrail.tracer.sql_plans`); every run of the same code has the
same label. The summary has one row per operator; the stages that ran it
are its drill-down (``stages``: how many, ``stage_ids``: which, sorted;
``stage_id``: the first). ``by_stage=True`` gives the
per-(operator, stage) rows the hint rules read. ``name`` is the label
(without the ``stage <id>:`` prefix of older traces); ``call_site`` its
``<file>:<line>`` (null when there is none). Rows with no operator (the
driver timeline, idle slots) form one row with null ``operator`` so that
shares sum to 1.

Task facts (``tasks``, ``records``, ``bytes``, ``shuffle_write_bytes``,
``median_task_ns``) come from the trace, once per task attempt.
"""

from __future__ import annotations

import polars as pl

from sparktrail.pag.query_engine import SMALL_ROWS, collect, collect_all
from sparktrail.pag.sorted_groups import slices_medians
from sparktrail.pag.trace import (
    Trace,
    maps_in_place,
    slices_group_by,
    slices_query,
)

from .frames import OPERATOR
from .run_shares import WINDOW, Frame, path_windows, whole_run, with_paths
from .task_table import task_facts

__all__ = [
    "STAGE_PREFIX",
    "operator_from_partial",
    "operator_partial",
    "operator_summary",
    "operators_and_stages",
    "stage_label",
    "stage_name",
    "with_no_stage_parts",
]

_KEYS = ["operator", "stage_id"]


#: The ``stage <id>: `` prefix of an older trace's operator labels.
STAGE_PREFIX = r"^stage \d+: "


def stage_label(stage_id: int | None, label: str | None = None) -> str:
    """A stage in text, the one way every hint and page names it: its id
    and ``label`` (its call site or name, when known).

    >>> stage_label(3, "App.scala:12"), stage_label(3), stage_label(None)
    ('stage 3 (App.scala:12)', 'stage 3', 'a stage')
    """
    if stage_id is None:
        return "a stage"
    return f"stage {stage_id} ({label})" if label else f"stage {stage_id}"


def stage_name(operator: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``(name, call_site)`` parsed from operator labels.

    >>> df = pl.DataFrame({"op": ["count at App.scala:12 · Sort [k]",
    ...     "stage 2: count at App.scala:12", "map"]})
    >>> name, site = stage_name(pl.col("op"))
    >>> df.select(name.alias("n"), site.alias("s")).rows()
    [('count at App.scala:12 · Sort [k]', 'App.scala:12'), \
('count at App.scala:12', 'App.scala:12'), ('map', None)]
    """
    name = pl.coalesce(operator.str.extract(f"{STAGE_PREFIX}(.*)$", 1), operator)
    site = name.str.extract(r"^[^·]*? at ([^\s·]+:\d+)(?: ·|$)", 1)
    return name, site


def _facts(tasks: pl.DataFrame, keys: list[str]) -> pl.LazyFrame:
    """Per group of ``keys`` (of :data:`_KEYS`), the facts of its tasks."""
    by, labels = keys, []
    if keys == _KEYS and len(tasks) >= SMALL_ROWS and _operator_per_stage(tasks):
        # The same groups by the stage alone: polars' median over a group-by
        # of two keys took 360 MB beside 3.3·10^6 tasks, of one 90 MB.
        by, labels = ["stage_id"], [pl.col("operator").first()]
    # Lazy: only the columns aggregated are read from millions of tasks.
    sums = [
        pl.col("job_id").first(ignore_nulls=True),
        pl.len().alias("tasks"),
        pl.col("records").sum(),
        pl.col("bytes").sum(),
        pl.col("shuffle_write_bytes").sum(),
    ]
    median = pl.col("duration_ns").median().alias("median_task_ns")
    names = [f.meta.output_name() for f in [*sums, median]]
    if not maps_in_place(len(tasks)):
        query = tasks.lazy().group_by(by).agg(*labels, *sums, median)
        return query.select(*keys, *names)
    # A long run's tasks (DESIGN §10), a slice at a time: one query over
    # every task would spell out a label that is the same for every task
    # (kept once, :func:`~sparktrail.summaries.task_table.task_facts`) for
    # each of them, and keep it (~530 MB at 3.3·10^7 tasks, measured).
    # Sums over slices, and the median from the durations alone.
    whole = [
        *(pl.col(label.meta.output_name()).first() for label in labels),
        pl.col("job_id").first(ignore_nulls=True),
        *(
            pl.col(c).sum()
            for c in ("tasks", "records", "bytes", "shuffle_write_bytes")
        ),
    ]
    parts = slices_group_by(tasks, by, [*labels, *sums], whole)
    medians = slices_medians(tasks, by, [pl.col("duration_ns").alias("median_task_ns")])
    joined = parts.join(medians.lazy(), on=by, how="left", nulls_equal=True)
    return joined.select(*keys, *names)


def _operator_per_stage(tasks: pl.DataFrame) -> bool:
    """Whether every stage's tasks (those without a stage too) have one
    operator label (a null one counts as one)."""
    labels = pl.col("operator").n_unique()
    # A slice at a time: each slice's distinct pairs (see _facts).
    pairs = slices_query(
        tasks, lambda _, part: part.lazy().select("stage_id", "operator").unique()
    )
    query = pairs.group_by("stage_id").agg(labels).select(pl.col("operator").max())
    most = collect(query, len(tasks)).item()
    return most is None or most <= 1


def operator_partial(cp: Frame) -> Frame:
    """Per (window, operator) sums of a CP table: what the summary adds up.

    ``window_start_ns, window_end_ns, operator, stage_id, cp_share, cp_ns,
    time_ns``; partials of disjoint sets of windows concatenate into the
    partial of their union.
    """
    window_ns = pl.col("window_end_ns") - pl.col("window_start_ns")
    return cp.group_by(*WINDOW, *_KEYS).agg(
        pl.col("cp").sum().alias("cp_share"),
        (pl.col("cp") * window_ns).sum().cast(pl.Float64).alias("cp_ns"),
        pl.col("weight_ns").sum().alias("time_ns"),
    )


def operator_summary(
    cp: pl.DataFrame,
    trace: pl.DataFrame | Trace,
    *,
    by_window: bool = False,
    tasks: pl.DataFrame | None = None,
    by_stage: bool = False,
) -> pl.DataFrame:
    """CP by operator, whole run or per window with paths.

    Parameters
    ----------
    cp
        The CP table of :func:`~sparktrail.pag.critical_participation`.
    trace
        The trace it was computed from (for task counts and records).
    by_window
        One row per (window, operator), with the window bounds.
    tasks
        ``task_facts(trace)`` when the caller has it already.
    by_stage
        One row per (operator, stage) instead of per operator.

    Returns
    -------
    polars.DataFrame
        ``operator, stage_id, stages, stage_ids, name, call_site, job_id,
        cp_share, cp_ns, time_ns, tasks, records, bytes,
        shuffle_write_bytes, median_task_ns``, largest share first.

    Examples
    --------
    >>> from sparktrail.pag import critical_participation
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"],
    ...     "operator": ["stage 0: count at A.scala:3"], "stage_id": [0],
    ...     "task_id": [0], "records": [10]})
    >>> s = operator_summary(critical_participation(t, 4), t)
    >>> s.select("stage_id", "stages", "call_site", "cp_share", "records").row(0)
    (0, 1, 'A.scala:3', 1.0, 10)
    """
    return operator_from_partial(
        operator_partial(cp),
        path_windows(cp),
        task_facts(trace) if tasks is None else tasks,
        by_window=by_window,
        by_stage=by_stage,
    )


def operator_from_partial(
    partial: pl.DataFrame,
    windows: pl.DataFrame,
    tasks: pl.DataFrame,
    *,
    by_window: bool = False,
    by_stage: bool = False,
) -> pl.DataFrame:
    """The operator summary from :func:`operator_partial`, windows and tasks.

    ``tasks`` is :func:`~sparktrail.summaries.task_facts` of the trace;
    ``by_window`` and ``by_stage`` as for :func:`operator_summary`.
    """
    # One query, collected at the end: a dozen steps over a few rows each
    # cost a query each when eager.
    query = _operator_query(partial, windows, tasks, by_window, by_stage)
    return collect(query, len(tasks))


def operators_and_stages(
    partial: pl.DataFrame, windows: pl.DataFrame, tasks: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`operator_from_partial` whole-run, per operator and per stage.

    Both in one batch of queries, which share their sums of the partial.
    """
    operator, stages = collect_all(
        [
            _operator_query(partial, windows, tasks, False, False),
            _operator_query(partial, windows, tasks, False, True),
        ],
        len(tasks),
    )
    return operator, stages


def _operator_query(
    partial: pl.DataFrame,
    windows: pl.DataFrame,
    tasks: pl.DataFrame,
    by_window: bool,
    by_stage: bool,
) -> pl.LazyFrame:
    per = with_paths(partial.lazy(), windows.lazy())
    if not by_window:
        everything = partial.lazy().group_by(_KEYS).agg(pl.col("time_ns").sum())
        run = whole_run(per.drop("time_ns"), _KEYS, ["cp_share"], windows)
        per = everything.join(run, on=_KEYS, how="left", nulls_equal=True)
        per = per.with_columns(pl.col("cp_share", "cp_ns").fill_null(0.0))
    window = ["window_start_ns", "window_end_ns"] if by_window else []
    if by_stage:
        facts = _facts(tasks, _KEYS)
        out = per.join(facts, on=_KEYS, how="left", nulls_equal=True)
        ids = pl.concat_list(pl.col("stage_id")).list.drop_nulls()
        out = out.with_columns(stage_ids=ids, stages=ids.list.len().cast(pl.UInt32))
    else:
        out = _per_operator(per, tasks, window)
    name, call_site = stage_name(pl.col("operator"))
    out = out.with_columns(name.alias("name"), call_site.alias("call_site"))
    columns = [
        *window,
        *_KEYS,
        "stages",
        "stage_ids",
        "name",
        "call_site",
        "job_id",
        "cp_share",
        "cp_ns",
        "time_ns",
        "tasks",
        "records",
        "bytes",
        "shuffle_write_bytes",
        "median_task_ns",
    ]
    order = [*window, "cp_share", "stage_id"]
    descending = [False] * len(window) + [True, False]
    return out.select(columns).sort(order, descending=descending, nulls_last=True)


def _per_operator(
    per: pl.LazyFrame, tasks: pl.DataFrame, window: list[str]
) -> pl.LazyFrame:
    """Per-(operator, stage) CP rows summed per operator, with its task facts."""
    keys = [*window, "operator"]
    grouped = per.group_by(keys).agg(
        # Its first stage stands for them (not the most critical one: float
        # ties would pick different stages in different engines).
        pl.col("stage_id").min(),
        pl.col("stage_id").unique().drop_nulls().sort().alias("stage_ids"),
        pl.col("cp_share", "cp_ns", "time_ns").sum(),
    )
    facts = _facts(tasks, ["operator"]).drop("stage_id", strict=False)
    out = grouped.join(facts, on="operator", how="left", nulls_equal=True)
    return out.with_columns(stages=pl.col("stage_ids").list.len().cast(pl.UInt32))


#: The ``parts`` of the row outside any stage: each activity and its share.
PARTS = OPERATOR["parts"]


def with_no_stage_parts(operator: pl.DataFrame, stages: pl.DataFrame) -> pl.DataFrame:
    """``operator`` with ``parts`` on its row outside any stage (the driver's
    code, the scheduler's delay, idle waiting, start-up): each activity of
    that row and its share of the critical path, largest first, adding up
    to the row's ``cp_share``; null on every other row.

    ``stages`` is the run's ``stage_id, activity, cp`` partial
    (:func:`~sparktrail.summaries.partials.stage_partial`).

    >>> op = pl.DataFrame({"operator": ["a", None], "stage_id": [0, None],
    ...     "cp_share": [0.5, 0.5]})
    >>> st = pl.DataFrame({"stage_id": [0, None, None], "activity":
    ...     ["processing", "driver", "waiting"], "cp": [4.0, 1.0, 3.0]})
    >>> parts = with_no_stage_parts(op, st)["parts"].to_list()[1]
    >>> [(p["activity"], p["cp_share"]) for p in parts]
    [('waiting', 0.375), ('driver', 0.125)]
    """
    outside = (
        stages.filter(pl.col("stage_id").is_null())
        .group_by("activity")
        .agg(pl.col("cp").sum())
        .filter(pl.col("cp") > 0)
        .sort(["cp", "activity"], descending=[True, False])
    )
    none = pl.lit(None, dtype=PARTS).alias("parts")
    total = float(outside["cp"].sum() or 0.0)
    row = operator.filter(pl.col("operator").is_null())
    if total <= 0 or row.is_empty():
        return operator.with_columns(none)
    share = float(row["cp_share"].sum())
    parts = [
        {"activity": a, "cp_share": cp / total * share}
        for a, cp in outside.select("activity", "cp").iter_rows()
    ]
    filled = pl.Series("parts", [parts], dtype=PARTS)
    return operator.with_columns(
        pl.when(pl.col("operator").is_null())
        .then(filled.first())
        .otherwise(none)
        .alias("parts")
    )
