"""``summarize``: every summary and hint of a trace in one call."""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Callable

import numpy as np
import polars as pl

from sparktrail.pag.cp import _check_window, critical_participation
from sparktrail.pag.snapshot import SnapshotWarning, trace_origin
from sparktrail.pag.trace import read_trace, validate_trace
from sparktrail.pag.window_rows import (
    batch_cp,
    first_event,
    last_event,
    trace_extent,
)

from ._table import n_path_windows, task_facts
from .activity import activity_from_partial
from .communication import communication_from_partial
from .hints import Context, rebalancing_hints, task_shares
from .model import HintOptions, Summaries
from .operator import operator_from_partial
from .partials import Partials, window_stats
from .straggler import executor_from_partial, straggler_from_partial

__all__ = [
    "BATCH_ROWS",
    "Progress",
    "summaries_from_cp",
    "summaries_from_partials",
    "summarize",
    "warn_pathless",
    "window_batches",
    "window_stats",
]

#: Trace rows starting in one batch of windows.
BATCH_ROWS = 1_000_000
#: ``progress(batches_done, batches)`` after each batch.
Progress = Callable[[int, int], None]


def summarize(
    trace: pl.DataFrame | str | os.PathLike[str],
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
    *,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> Summaries:
    """Compute every summary and rebalancing hint of a trace.

    The windows are taken a batch at a time (about ``batch_rows`` trace
    rows each): a batch's CP is computed from the rows touching it
    (:func:`~sparktrail.pag.window_rows.batch_cp`) and reduced to
    :class:`~sparktrail.summaries.partials.Partials` before the next, so
    the whole CP table, as long as the trace, is never held at once. The
    result equals that of :func:`summaries_from_cp` on the whole CP table.

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
    batch_rows
        Trace rows (counted in the window they start in) per batch (> 0).
    progress
        Called as ``progress(done, batches)`` after each batch.

    Returns
    -------
    Summaries
        Whole-run summaries (per-window CP summed over the windows with
        paths, divided by their number, so shares sum to 1), activity per
        window, window stats and hints.

    Warns
    -----
    SnapshotWarning
        When windows have no path from start to end (their CP is 0).

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
    window, origin = _check_window(window_ns, origin_ns)
    if (
        not isinstance(batch_rows, int)
        or isinstance(batch_rows, bool)
        or batch_rows < 1
    ):
        raise ValueError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    frame = (
        validate_trace(trace) if isinstance(trace, pl.DataFrame) else read_trace(trace)
    )
    if origin is None:
        origin = trace_origin(frame, window)
    batches = window_batches(frame, window, origin, batch_rows)
    if batches:
        extent = trace_extent(frame)
    parts = []
    for done, (ts, te) in enumerate(batches, 1):
        cp, rows = batch_cp(frame, window, origin, ts, te, extent)
        # edge_index of the whole trace: the hints name driver rows by it.
        cp = cp.with_columns(
            rows["trace_row"].gather(cp["edge_index"]).alias("edge_index")
        )
        del rows
        parts.append(Partials.of(cp.drop("start_ns", "end_ns")))
        del cp
        if progress is not None:
            progress(done, len(batches))
    if parts:
        partials = Partials.combine(parts)
    else:
        partials = Partials.of(critical_participation(frame, window, origin))
    del parts
    warn_pathless(partials.windows, stacklevel=2)
    return summaries_from_partials(partials, frame, window, origin_ns, options)


def window_batches(
    trace: pl.DataFrame, window_ns: int, origin_ns: int, batch_rows: int
) -> list[tuple[int, int]]:
    """Runs of windows ``[ts, te)`` with about ``batch_rows`` rows each.

    A row counts in the earliest window holding its first event; the runs
    cover every window from the first row's to the one holding the last event,
    and a window with more rows than ``batch_rows`` is a run of its own.

    >>> t = pl.DataFrame({"start_ns": [0, 1, 5, 12], "end_ns": [1, 2, 6, 19]})
    >>> window_batches(t, 4, 0, 2)
    [(0, 4), (4, 20)]
    """
    if trace.is_empty():
        return []
    # An instant on a boundary lies in the window before it too (and a row
    # starting on one needs no earlier batch, but is harmless in it).
    k = ((first_event - origin_ns - 1) // window_ns).clip(lower_bound=0).alias("k")
    counts = trace.select(k).to_series().value_counts(sort=False).sort("k")
    windows = counts["k"].to_numpy()
    group = (np.cumsum(counts["count"].to_numpy()) - 1) // batch_rows
    firsts = windows[np.flatnonzero(np.diff(group, prepend=-1))]
    last = int(trace.select(last_event.max()).item())
    end = max(int(windows[-1]), (last - origin_ns) // window_ns) + 1
    bounds = [*(int(f) for f in firsts), end]
    return [
        (origin_ns + a * window_ns, origin_ns + b * window_ns)
        for a, b in itertools.pairwise(bounds)
    ]


def warn_pathless(windows: pl.DataFrame, *, stacklevel: int = 2) -> None:
    """Warn (:class:`SnapshotWarning`) when some of ``windows`` have no path.

    ``windows`` has ``window_start_ns, has_paths`` (:func:`window_stats`);
    ``stacklevel`` is that of the caller's caller, as for
    :func:`warnings.warn`.
    """
    empty = windows.filter(~pl.col("has_paths"))
    if len(empty):
        first = int(empty["window_start_ns"].min())  # type: ignore[arg-type]
        warnings.warn(
            f"{len(empty)} of {len(windows)} windows have no path from start to "
            f"end (first at window_start_ns={first}); their CP is 0",
            SnapshotWarning,
            stacklevel=stacklevel + 1,
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
    return summaries_from_partials(
        Partials.of(cp.drop("start_ns", "end_ns", strict=False)),
        trace,
        window_ns,
        origin_ns,
        options,
    )


def summaries_from_partials(
    partials: Partials,
    trace: pl.DataFrame,
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
) -> Summaries:
    """Every summary and hint from the run's :class:`Partials`.

    What :func:`summarize`, :func:`summaries_from_cp` and the Spark engine
    share: the partials come from one CP table, from batches of windows or
    from Spark, and are finished here with the trace's task facts.

    Parameters
    ----------
    partials
        The partials of every window of the run.
    trace
        The validated trace.
    window_ns, origin_ns, options
        As for :func:`summarize` (``origin_ns`` None: the first window's
        start).

    Returns
    -------
    Summaries
        What :func:`summarize` returns.
    """
    windows = partials.windows
    if origin_ns is None:
        first = windows["window_start_ns"].min() if len(windows) else 0
        origin_ns = int(first)  # type: ignore[arg-type]
    n = n_path_windows(windows)
    activity = activity_from_partial(partials.activity, windows)
    executor = executor_from_partial(partials.workers, windows)
    # One frame of task facts with their CP shares, shared by the operator
    # summary and the hints (millions of rows in a long trace).
    tasks = task_shares(task_facts(trace), partials.tasks, n)
    operator = operator_from_partial(partials.operators, windows, tasks)
    communication = communication_from_partial(partials.channels, windows, trace)
    context = Context(
        partials,
        trace,
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
        activity_by_window=activity_from_partial(
            partials.activity, windows, by_window=True
        ),
        straggler=straggler_from_partial(partials.workers, windows),
        executor=executor,
        operator=operator,
        communication=communication,
        hints=rebalancing_hints(context),
        windows=windows,
        window_ns=window_ns,
        origin_ns=origin_ns,
    )
