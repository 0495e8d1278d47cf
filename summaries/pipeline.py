"""``summarize``: every summary and hint of a trace in one call."""

from __future__ import annotations

import os

import polars as pl

from sparktrail.pag import critical_participation
from sparktrail.pag.trace import read_trace, validate_trace

from ._table import enrich, n_path_windows, path_windows, task_facts
from .activity import activity_summary
from .communication import communication_summary
from .hints import Context, rebalancing_hints
from .model import HintOptions, Summaries
from .operator import operator_summary
from .straggler import executor_summary, straggler_summary

__all__ = ["summaries_from_cp", "summarize", "window_stats"]


def window_stats(cp: pl.DataFrame) -> pl.DataFrame:
    """Per-window stats of an enriched CP table.

    ``window_start_ns, window_end_ns, edges, cp_total, has_paths,
    active_workers, active_executors``: a worker is active in a window when
    it has a non-waiting edge of positive length charged to it there (see
    :mod:`~sparktrail.summaries.straggler`).
    """
    active = (
        cp.lazy()
        .filter((pl.col("activity") != "waiting") & (pl.col("weight_ns") > 0))
        .group_by("window_start_ns")
        .agg(
            pl.col("worker").n_unique().alias("active_workers"),
            pl.col("executor").drop_nulls().n_unique().alias("active_executors"),
        )
        .collect()
    )
    return (
        path_windows(cp)
        .join(active, on="window_start_ns", how="left")
        .with_columns(pl.col("active_workers", "active_executors").fill_null(0))
        .sort("window_start_ns")
    )


def summarize(
    trace: pl.DataFrame | str | os.PathLike[str],
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
) -> Summaries:
    """Compute every summary and rebalancing hint of a trace.

    Parameters
    ----------
    trace
        A trace frame, or a path to a trace file or directory.
    window_ns
        Window length in nanoseconds (> 0).
    origin_ns
        Start of window 0 (default: the first ``start_ns`` floored to a
        multiple of ``window_ns``).
    options
        Hint thresholds (default :class:`HintOptions`).

    Returns
    -------
    Summaries
        Whole-run summaries (per-window CP summed over the windows with
        paths, divided by their number, so shares sum to 1), activity per
        window, window stats and hints.

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-1/0"],
    ...     "dst_worker": ["exec-1/0", "exec-1/0"], "start_ns": [0, 6],
    ...     "end_ns": [6, 8], "activity": ["processing", "gc"]})
    >>> s = summarize(t, 4)
    >>> s.activity.select("activity", "cp_share").rows()
    [('processing', 0.75), ('gc', 0.25)]
    >>> s.windows["has_paths"].to_list()
    [True, True]
    """
    frame = (
        validate_trace(trace) if isinstance(trace, pl.DataFrame) else read_trace(trace)
    )
    # Passed on without a local name: summaries_from_cp replaces the CP table
    # by its enriched copy, and a name here would keep both alive.
    return summaries_from_cp(
        critical_participation(frame, window_ns, origin_ns),
        frame,
        window_ns,
        origin_ns,
        options,
    )


def summaries_from_cp(
    cp: pl.DataFrame,
    trace: pl.DataFrame,
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
) -> Summaries:
    """Every summary and hint from a CP table already computed.

    The part of :func:`summarize` after the CP kernel, shared by the engines
    that compute CP elsewhere (:mod:`~sparktrail.summaries.spark_engine`),
    so that every engine runs the same summary transforms.

    Parameters
    ----------
    cp
        The CP table of :func:`~sparktrail.pag.critical_participation` of
        ``trace`` (or an equal one: same rows, sorted by window then
        ``edge_index``).
    trace
        The validated trace.
    window_ns, origin_ns, options
        As for :func:`summarize`.

    Returns
    -------
    Summaries
        What :func:`summarize` returns.

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
    >>> frame = validate_trace(t)
    >>> s = summaries_from_cp(critical_participation(frame, 4), frame, 4)
    >>> s.activity["cp_share"].to_list()
    [1.0]
    """
    frame = trace
    # The clipped edge times are not summarized; dropping them before the
    # enriched copy saves 16 bytes a row.
    cp = enrich(cp.drop("start_ns", "end_ns", strict=False), frame)
    if origin_ns is None:
        first = cp["window_start_ns"].min() if len(cp) else 0
        origin_ns = int(first)  # type: ignore[arg-type]
    n = n_path_windows(cp)
    activity = activity_summary(cp)
    executor = executor_summary(cp)
    tasks = task_facts(frame)  # shared by the operator summary and the hints
    operator = operator_summary(cp, frame, tasks=tasks)
    communication = communication_summary(cp, frame)
    context = Context(
        cp,
        frame,
        activity,
        executor,
        operator,
        communication,
        n,
        options or HintOptions(),
        tasks,
    )
    return Summaries(
        activity=activity,
        activity_by_window=activity_summary(cp, by_window=True),
        straggler=straggler_summary(cp),
        executor=executor,
        operator=operator,
        communication=communication,
        hints=rebalancing_hints(context),
        windows=window_stats(cp),
        window_ns=window_ns,
        origin_ns=origin_ns,
    )
