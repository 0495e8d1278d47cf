"""Operator summary: CP by Spark stage, with its name and call site.

Spark names a stage after the user call that created it, ``<action> at
<file>:<line>`` (its call site's short form), and the tracer labels rows
``stage <id>: <name>``. ``name`` is the label without ``stage <id>:``;
``call_site`` is the part after the last `` at `` (null when there is none).
Rows with no operator (the driver timeline, idle slots) form one row with
null ``operator`` so that shares sum to 1.

Task facts (``tasks``, ``records``, ``bytes``, ``shuffle_write_bytes``,
``median_task_ns``) come from the trace, once per task attempt.
"""

from __future__ import annotations

import polars as pl

from sparktrail.pag.trace import Trace

from ._table import (
    WINDOW,
    n_path_windows,
    path_windows,
    task_facts,
    whole_run,
    with_paths,
)

__all__ = [
    "operator_from_partial",
    "operator_partial",
    "operator_summary",
    "stage_name",
]

_KEYS = ["operator", "stage_id"]


def stage_name(operator: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``(name, call_site)`` parsed from ``stage <id>: <name>`` labels.

    >>> df = pl.DataFrame({"op": ["stage 2: count at App.scala:12", "map"]})
    >>> name, site = stage_name(pl.col("op"))
    >>> df.select(name.alias("n"), site.alias("s")).rows()
    [('count at App.scala:12', 'App.scala:12'), ('map', None)]
    """
    name = pl.coalesce(operator.str.extract(r"^stage \d+: (.*)$", 1), operator)
    return name, name.str.extract(r"^.* at (.+)$", 1)


def _facts(tasks: pl.DataFrame) -> pl.DataFrame:
    # Lazy: only the columns aggregated are read from millions of tasks.
    return (
        tasks.lazy()
        .group_by(_KEYS)
        .agg(
            pl.col("job_id").first(ignore_nulls=True),
            pl.len().alias("tasks"),
            pl.col("records").sum(),
            pl.col("bytes").sum(),
            pl.col("shuffle_write_bytes").sum(),
            pl.col("duration_ns").median().alias("median_task_ns"),
        )
        .collect()
    )


def operator_partial(cp: pl.DataFrame) -> pl.DataFrame:
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
) -> pl.DataFrame:
    """CP by operator (Spark stage), whole run or per window with paths.

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

    Returns
    -------
    polars.DataFrame
        ``operator, stage_id, name, call_site, job_id, cp_share, cp_ns,
        time_ns, tasks, records, bytes, shuffle_write_bytes,
        median_task_ns``, largest share first.

    Examples
    --------
    >>> from sparktrail.pag import critical_participation
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"],
    ...     "operator": ["stage 0: count at A.scala:3"], "stage_id": [0],
    ...     "task_id": [0], "records": [10]})
    >>> s = operator_summary(critical_participation(t, 4), t)
    >>> s.select("stage_id", "call_site", "cp_share", "records").row(0)
    (0, 'A.scala:3', 1.0, 10)
    """
    return operator_from_partial(
        operator_partial(cp),
        path_windows(cp),
        task_facts(trace) if tasks is None else tasks,
        by_window=by_window,
    )


def operator_from_partial(
    partial: pl.DataFrame,
    windows: pl.DataFrame,
    tasks: pl.DataFrame,
    *,
    by_window: bool = False,
) -> pl.DataFrame:
    """The operator summary from :func:`operator_partial`, windows and tasks.

    ``tasks`` is :func:`~sparktrail.summaries.task_facts` of the trace.
    """
    per = with_paths(partial, windows)
    if not by_window:
        everything = partial.group_by(_KEYS).agg(pl.col("time_ns").sum())
        run = whole_run(
            per.drop("time_ns"), _KEYS, ["cp_share"], n_path_windows(windows)
        )
        per = everything.join(run, on=_KEYS, how="left", nulls_equal=True)
        per = per.with_columns(pl.col("cp_share", "cp_ns").fill_null(0.0))
    name, call_site = stage_name(pl.col("operator"))
    facts = _facts(tasks)
    out = per.join(facts, on=_KEYS, how="left", nulls_equal=True).with_columns(
        name.alias("name"), call_site.alias("call_site")
    )
    window = ["window_start_ns", "window_end_ns"] if by_window else []
    columns = [
        *window,
        *_KEYS,
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
