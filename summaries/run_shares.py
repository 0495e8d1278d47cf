"""Whole-run sums and shares of per-window summaries: the one owner of how
windows are weighed.

A whole-run share is a mean over the windows with a path; a window that
stands for a stretch of several (its :data:`~sparktrail.summaries.frames.SPAN`)
counts that many times (DESIGN §10).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, TypeVar

import polars as pl

from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS

from .frames import SPAN

__all__ = [
    "WINDOW",
    "Frame",
    "batch_job_time_ns",
    "job_time_ns",
    "n_path_windows",
    "path_windows",
    "run_share",
    "run_span",
    "whole_run",
    "window_span",
    "windows_extent",
    "with_paths",
]


#: A frame or a query: the partial sums run eagerly, or lazily so that
#: :meth:`~sparktrail.summaries.partials.Partials.of` collects them in one
#: batch (:func:`~sparktrail.pag.query_engine.collect_all`).
Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)
#: A CP sum: a number, or a polars expression of one.
_Share = TypeVar("_Share", float, pl.Expr)


WINDOW = ["window_start_ns", "window_end_ns"]


def path_windows(cp: Frame) -> Frame:
    """Windows of the CP table, with ``has_paths`` (their CP sums to > 0)."""
    return (
        cp.group_by("window_start_ns", "window_end_ns")
        .agg(pl.len().alias("edges"), pl.col("cp").sum().alias("cp_total"))
        .with_columns((pl.col("cp_total") > 0).alias("has_paths"))
        .sort("window_start_ns")
    )


def window_span(windows: pl.DataFrame | pl.LazyFrame) -> pl.Expr:
    """Each window's :data:`SPAN` (1 in a frame saved without it)."""
    names = windows.collect_schema().names()
    return pl.col(SPAN) if SPAN in names else pl.lit(1, pl.Int64)


def n_path_windows(windows: pl.DataFrame) -> int:
    """How many windows of the run ``windows`` (:func:`path_windows`) with a
    path stand for (at least 1, to divide by): a merged stretch counts as
    the windows it merged.

    >>> n_path_windows(pl.DataFrame({"has_paths": [True, False, True],
    ...     "span": [1, 1, 40]}))
    41
    """
    span = window_span(windows)
    return max(1, int(windows.select(span.filter("has_paths").sum()).item()))


def run_share(cp: _Share, n_windows: int) -> _Share:
    """A CP summed over the run's windows (a stretch's counted for each
    window it stands for) as a share of the whole run's critical path:
    its mean over the ``n_windows`` with a path (:func:`n_path_windows`).

    >>> run_share(1.5, 3), run_share(0.0, 0)
    (0.5, 0.0)
    """
    return cp / max(1, n_windows)


def windows_extent(windows: pl.DataFrame) -> tuple[int, int] | None:
    """The time the run's windows cover: the first one's start and the
    last one's end (``None`` without a window).

    >>> windows_extent(pl.DataFrame({"window_start_ns": [10, 0],
    ...     "window_end_ns": [20, 10]}))
    (0, 20)
    """
    if windows.is_empty():
        return None
    first = windows[WINDOW_START_NS].min()
    last = windows[WINDOW_END_NS].max()
    return int(first), int(last)  # type: ignore[arg-type]


def run_span(context: Any, windows: pl.DataFrame) -> tuple[int, int] | None:
    """The run's start and end, whose difference is its wall time on every
    page (the header, the verdict, the report's overview, the fleet row):
    the application's start and end as the log says them (``context``, an
    :class:`~sparktrail.pag.context.AppContext`); where it lacks one, the
    windows' first start or last end (``None``: neither is known).

    >>> from sparktrail.pag.context import AppContext
    >>> w = pl.DataFrame({"window_start_ns": [0, 10], "window_end_ns": [10, 20]})
    >>> run_span(AppContext(start_ns=2, end_ns=17), w), run_span(AppContext(), w)
    ((2, 17), (0, 20))
    """
    extent = windows_extent(windows)
    start, end = context.start_ns, context.end_ns
    if start is None:
        start = None if extent is None else extent[0]
    if end is None:
        end = None if extent is None else extent[1]
    if start is None or end is None:
        return None
    return start, max(start, end)


def with_paths(per_window: Frame, windows: Frame) -> Frame:
    """The rows of ``per_window`` in the windows that have a path."""
    starts = windows.filter("has_paths").select("window_start_ns")
    return per_window.join(starts, on="window_start_ns", how="semi")


def whole_run(
    per_window: Frame,
    keys: list[str],
    shares: list[str],
    windows: pl.DataFrame,
    counts: tuple[str, ...] = (),
) -> Frame:
    """Sum ``per_window`` over ``windows``; ``shares`` are a mean over the
    windows with a path (:func:`n_path_windows`).

    A row of a window that stands for several (its :data:`SPAN`) counts
    that many times in ``shares`` and ``counts`` (per-window numbers);
    every other non-key column except the window bounds is summed as it
    is (a total over the window's time, such as ``cp_ns``).
    """
    n_windows = n_path_windows(windows)
    skipped = {*keys, *shares, *counts, *WINDOW}
    summed = [c for c in per_window.collect_schema().names() if c not in skipped]
    spans = windows.select("window_start_ns", window_span(windows).alias(SPAN))
    weighted = per_window.join(
        spans.lazy() if isinstance(per_window, pl.LazyFrame) else spans,
        on="window_start_ns",
        how="left",
    ).with_columns(pl.col(SPAN).fill_null(1))
    return weighted.group_by(keys).agg(
        *[
            run_share((pl.col(c) * pl.col(SPAN)).sum(), n_windows).alias(c)
            for c in shares
        ],
        *[(pl.col(c) * pl.col(SPAN)).sum().alias(c) for c in counts],
        *[pl.col(c).sum() for c in summed],
    )


def batch_job_time_ns(context: Any) -> int | None:
    """How long the jobs of no streaming query ran (the union of their
    spans), in an application whose streaming query ran beside them (its
    jobs' span overlaps theirs): the run's end is then the query's stop,
    which a change to the other jobs does not move, so what it saves is
    their time. ``None`` in any other application.

    >>> from sparktrail.pag.context import AppContext, JobSpan
    >>> batch, stream = JobSpan(0, 0, 10), JobSpan(1, 5, 30, query_id="q")
    >>> batch_job_time_ns(AppContext(jobs=(batch, JobSpan(2, 20, 25), stream)))
    15
    >>> batch_job_time_ns(AppContext(jobs=(JobSpan(2, 40, 50), stream)))
    """

    def ended(j: Any) -> bool:
        return j.start_ns is not None and j.end_ns is not None

    batch = [j for j in context.jobs if j.query_id is None and ended(j)]
    streaming = [j for j in context.jobs if j.query_id and ended(j)]
    if not batch or not streaming:
        return None
    first = max(min(j.start_ns for j in batch), min(j.start_ns for j in streaming))
    last = min(max(j.end_ns for j in batch), max(j.end_ns for j in streaming))
    return job_time_ns(SimpleNamespace(jobs=batch)) if first < last else None


def job_time_ns(context: Any) -> int | None:
    """How long some job or SQL query was running: the union of the jobs'
    and the SQL executions' spans in an :class:`~sparktrail.pag.context.
    AppContext` (``None``: none with both times). In a shell or a notebook
    this, not the wall time, is what the user waited for (a query's driver
    work before and after its jobs, a write's commit, is waited for too).

    >>> from sparktrail.pag.context import AppContext, JobSpan, SqlExecution
    >>> job_time_ns(AppContext(jobs=(JobSpan(0, 0, 10), JobSpan(1, 5, 20),
    ...     JobSpan(2, 100, 110))))
    30
    >>> job_time_ns(AppContext(jobs=(JobSpan(0, 0, 10),),
    ...     sql=(SqlExecution(0, None, 0, 50, {}),)))
    50
    """
    spans = sorted(
        [
            (j.start_ns, j.end_ns)
            for j in context.jobs
            if j.start_ns is not None and j.end_ns is not None
        ]
        + [
            (q.start_ns, q.end_ns)
            for q in getattr(context, "sql", ())
            if q.start_ns is not None and q.end_ns is not None
        ]
    )
    if not spans:
        return None
    total, (start, end) = 0, spans[0]
    for a, b in spans[1:]:
        if a > end:
            total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    return int(total + end - start)
