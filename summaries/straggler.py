"""Straggler summary: CP by worker and by executor, against a fair share.

An edge is charged to a worker: a local activity to its own timeline, a
message to its receiver. A worker is *active* in a window when it has an
edge charged to it there that is not ``waiting`` and has positive length.

* A worker's fair share in a window is ``1 / n`` when it is active among
  ``n`` active workers (the driver timeline counts as one), else 0; its
  whole-run fair share is the mean over the windows with paths. Fair
  shares, like CP shares, sum to 1 over the workers.
* An executor's CP and fair share are those of its slots summed; the
  driver timeline is a row of its own (``role`` "driver", executor null).

``ratio = cp_share / fair_share``: 1 is balanced, 2 means the worker holds
the run back twice as much as its share (DESIGN §6 straggler trigger).
"""

from __future__ import annotations

import polars as pl

from sparktrail.pag.query_engine import collect
from sparktrail.pag.trace import IDLE_ACTIVITIES

from .run_shares import WINDOW, Frame, path_windows, whole_run

__all__ = [
    "executor_from_partial",
    "executor_summary",
    "straggler_from_partial",
    "straggler_summary",
    "worker_partial",
]


def worker_partial(cp: Frame) -> Frame:
    """Per (window, worker) sums of an enriched CP table.

    ``window_start_ns, window_end_ns, worker, executor, cp_share, cp_ns,
    busy_ns, busy`` (``busy``: the worker has an edge of positive length
    that is not ``waiting`` there); partials of disjoint sets of windows
    concatenate into the partial of their union.
    """
    busy = ~pl.col("activity").is_in(IDLE_ACTIVITIES) & (pl.col("weight_ns") > 0)
    return cp.group_by(*WINDOW, "worker").agg(
        pl.col("executor").first(),
        pl.col("cp").sum().alias("cp_share"),
        pl.col("cp_ns").sum(),
        pl.col("weight_ns").filter(busy & pl.col("is_local")).sum().alias("busy_ns"),
        busy.any().alias("busy"),
    )


def _per_window(partial: Frame, windows: Frame) -> Frame:
    paths = windows.select("window_start_ns", "has_paths")
    per = (
        partial.join(paths, on="window_start_ns", how="left")
        .with_columns((pl.col("busy") & pl.col("has_paths")).alias("active"))
        .drop("busy", "has_paths")
    )
    n_active = pl.col("active").sum().over("window_start_ns")
    return per.with_columns(
        pl.when(pl.col("active"))
        .then(1.0 / n_active)
        .otherwise(0.0)
        .alias("fair_share")
    )


def _finish(frame: Frame, key: str) -> Frame:
    ratio = pl.when(pl.col("fair_share") > 0).then(
        pl.col("cp_share") / pl.col("fair_share")
    )
    return frame.with_columns(ratio.alias("ratio")).sort(
        ["cp_share", key], descending=[True, False], nulls_last=True
    )


def straggler_summary(cp: pl.DataFrame, *, by_window: bool = False) -> pl.DataFrame:
    """CP by worker (timeline), with each worker's fair share.

    Parameters
    ----------
    cp
        An enriched CP table (:func:`~sparktrail.summaries.enrich`).
    by_window
        One row per (window, worker), with the window bounds.

    Returns
    -------
    polars.DataFrame
        ``worker, executor, cp_share, cp_ns, busy_ns, fair_share,
        windows_active, ratio``, largest share first.

    Examples
    --------
    >>> from sparktrail.pag import critical_participation
    >>> from sparktrail.summaries import enrich
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-1/1"],
    ...     "dst_worker": ["exec-1/0", "exec-1/1"], "start_ns": [0, 0],
    ...     "end_ns": [4, 1], "activity": ["processing", "processing"]})
    >>> s = straggler_summary(enrich(critical_participation(t, 4), t))
    >>> s.select("worker", "cp_share", "fair_share", "ratio").rows()
    [('exec-1/0', 1.0, 0.5, 2.0), ('exec-1/1', 0.0, 0.5, 0.0)]
    """
    return straggler_from_partial(
        worker_partial(cp), path_windows(cp), by_window=by_window
    )


def straggler_from_partial(
    partial: pl.DataFrame, windows: pl.DataFrame, *, by_window: bool = False
) -> pl.DataFrame:
    """The straggler summary from :func:`worker_partial` and the windows."""
    # One query, collected at the end (each eager step would be one).
    per = _per_window(partial.lazy(), windows.lazy())
    if by_window:
        by = collect(_finish(per.drop("active"), "worker"), len(partial))
        return by.sort("window_start_ns")
    per = per.with_columns(pl.col("active").cast(pl.Int64).alias("windows_active"))
    run = whole_run(
        per.drop("active", "executor"),
        ["worker"],
        ["cp_share", "fair_share"],
        windows,
        counts=("windows_active",),
    )
    names = per.group_by("worker").agg(pl.col("executor").first())
    run = run.join(names, on="worker")
    columns = ["worker", "executor", "cp_share", "cp_ns", "busy_ns", "fair_share"]
    return collect(
        _finish(run.select(*columns, "windows_active"), "worker"), len(partial)
    )


def executor_summary(cp: pl.DataFrame, *, by_window: bool = False) -> pl.DataFrame:
    """CP by executor (its slots summed), with its fair share.

    Returns
    -------
    polars.DataFrame
        ``executor_id, role, slots, cp_share, cp_ns, busy_ns, fair_share,
        ratio``; ``role`` is "driver" for the driver timeline (executor
        null), else "executor".

    Examples
    --------
    >>> from sparktrail.pag import critical_participation
    >>> from sparktrail.summaries import enrich
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-2/0"],
    ...     "dst_worker": ["exec-1/0", "exec-2/0"], "start_ns": [0, 0],
    ...     "end_ns": [4, 4], "activity": ["processing", "processing"]})
    >>> e = executor_summary(enrich(critical_participation(t, 4), t))
    >>> e.select("executor_id", "cp_share", "fair_share").rows()
    [('1', 0.5, 0.5), ('2', 0.5, 0.5)]
    """
    return executor_from_partial(
        worker_partial(cp), path_windows(cp), by_window=by_window
    )


def executor_from_partial(
    partial: pl.DataFrame, windows: pl.DataFrame, *, by_window: bool = False
) -> pl.DataFrame:
    """The executor summary from :func:`worker_partial` and the windows."""
    # One query, collected at the end (each eager step would be one).
    per = _per_window(partial.lazy(), windows.lazy())
    keys = ["executor_id", "role"]
    role = pl.when(pl.col("worker") == "driver").then(pl.lit("driver"))
    per = per.with_columns(
        pl.col("executor").alias("executor_id"),
        role.otherwise(pl.lit("executor")).alias("role"),
    )
    grouped = per.group_by(*WINDOW, *keys).agg(
        pl.col("worker").n_unique().alias("slots"),
        pl.col("cp_share", "cp_ns", "busy_ns", "fair_share").sum(),
    )
    if by_window:
        by = collect(_finish(grouped, "executor_id"), len(partial))
        return by.sort("window_start_ns")
    run = whole_run(grouped.drop("slots"), keys, ["cp_share", "fair_share"], windows)
    slots = per.group_by(keys).agg(pl.col("worker").n_unique().alias("slots"))
    run = run.join(slots, on=keys, nulls_equal=True)
    columns = [*keys, "slots", "cp_share", "cp_ns", "busy_ns", "fair_share"]
    return collect(_finish(run.select(columns), "executor_id"), len(partial))
