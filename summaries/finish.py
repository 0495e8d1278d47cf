"""The finish every engine shares: whole-run summaries and hints from partials.

The batch, online and Spark engines (:mod:`sparktrail.engines`) compute
:class:`~sparktrail.summaries.partials.Partials` in their own way and
finish them here, so every engine runs the same summary transforms.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import polars as pl

from sparktrail.pag.memory import trim_heap
from sparktrail.pag.snapshot import SnapshotWarning
from sparktrail.pag.trace import (
    Trace,
    load_trace,
    release_if_long,
    release_mapped_pages,
)
from sparktrail.whatif import Replay

from .activity import activity_from_partial
from .communication import communication_from_partial
from .hints import Context, ranked_hints, rule_hints, task_shares
from .operator import operators_and_stages, with_no_stage_parts
from .partials import Partials
from .result import HintOptions, Summaries
from .run_shares import n_path_windows
from .stage_stats import executor_stats, stage_stats
from .straggler import executor_from_partial, straggler_from_partial
from .task_table import task_facts

__all__ = ["summaries_from_cp", "summaries_from_partials", "warn_pathless"]


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


def _give_back() -> None:
    """Between the finish's steps: the trace's pages each pass over it left
    resident (DESIGN §10), and what the step's numpy and numba arrays left
    freed in the C heap."""
    release_mapped_pages()
    trim_heap()


def summaries_from_cp(
    cp: pl.DataFrame,
    trace: pl.DataFrame | Trace,
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
    *,
    facts: pl.DataFrame | None = None,
    replay: Replay | None = None,
    span: int = 1,
) -> Summaries:
    """Every summary and hint from a CP table already computed.

    The part of :func:`summarize` after the CP kernel, shared by the engines
    that compute CP elsewhere (:mod:`~sparktrail.engines.spark`),
    so that every engine runs the same summary transforms.

    Parameters
    ----------
    cp
        The CP table of :func:`~sparktrail.pag.critical_participation` of
        ``trace`` (or an equal one: same rows, sorted by window then
        ``edge_index``).
    trace
        The trace (validated unless it is a
        :class:`~sparktrail.pag.trace.Trace`).
    window_ns, origin_ns, options
        As for :func:`summarize`.
    facts, replay
        As for :func:`summaries_from_partials`.
    span
        How many windows of the run ``cp`` (one window) stands for: a plain
        stretch (:meth:`~sparktrail.summaries.partials.Partials.of`).

    Returns
    -------
    Summaries
        What :func:`summarize` returns.

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
    >>> from sparktrail.pag import critical_participation
    >>> from sparktrail.pag.trace import load_trace
    >>> trace = load_trace(t)
    >>> s = summaries_from_cp(critical_participation(trace, 4), trace, 4)
    >>> s.activity["cp_share"].to_list()
    [1.0]
    """
    return summaries_from_partials(
        Partials.of(cp.drop("start_ns", "end_ns", strict=False), span),
        trace,
        window_ns,
        origin_ns,
        options,
        facts=facts,
        replay=replay,
    )


def summaries_from_partials(
    partials: Partials,
    trace: pl.DataFrame | Trace,
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
    *,
    facts: pl.DataFrame | None = None,
    replay: Replay | None = None,
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
        The trace (validated here unless it is a
        :class:`~sparktrail.pag.trace.Trace`, once for every summary).
    window_ns, origin_ns, options
        As for :func:`summarize` (``origin_ns`` None: the first window's
        start).
    facts
        The trace's task facts (:func:`~sparktrail.summaries.task_facts`),
        when the caller has them already.
    replay
        The trace's what-if replay model (``Replay.of`` of the trace and its
        task facts), when the caller built it already; else it is built if
        a hint needs it.

    Returns
    -------
    Summaries
        What :func:`summarize` returns.
    """
    valid = load_trace(trace)
    windows = partials.windows
    if origin_ns is None:
        first = windows["window_start_ns"].min() if len(windows) else 0
        origin_ns = int(first)  # type: ignore[arg-type]
    n = n_path_windows(windows)
    activity = activity_from_partial(partials.activity, windows)
    executor = executor_from_partial(partials.workers, windows)
    # One frame of task facts with their CP shares, shared by the operator
    # summary and the hints (millions of rows in a long trace).
    facts = task_facts(valid) if facts is None else facts
    tasks = task_shares(facts, partials.tasks, n)
    # The per-task CP partial is in ``tasks`` now: it goes (~66 MB at
    # 3.3·10^6 tasks) unless the caller keeps ``partials``; no rule reads it.
    partials = replace(partials, tasks=partials.tasks.clear())
    # The hint rules look stages up: they read the per-stage drill-down.
    operator, stages = operators_and_stages(partials.operators, windows, tasks)
    operator = with_no_stage_parts(operator, partials.stages)
    communication = communication_from_partial(partials.channels, windows, valid)
    release_if_long(len(tasks))
    # The tables read every fact of every task: built before the hints,
    # whose ranking goes on without most of them.
    stage_table = stage_stats(tasks, partials.stages, n)
    release_if_long(len(tasks))
    executor_table = executor_stats(tasks, executor, valid.context)
    _give_back()
    context = Context(
        partials,
        valid.frame,
        activity,
        executor,
        stages,
        communication,
        n,
        options or HintOptions(),
        tasks,
        valid.context,
        built_replay=replay,
    )
    found = rule_hints(context)
    # The ranking builds the what-if replay and replays each hint's change:
    # with only the replay's columns of the facts, the rest and the rules'
    # caches gone first (~2.3 GB at 3.3·10^7 tasks).
    ranking = context.for_ranking()
    del context, facts, tasks
    _give_back()
    hints = ranked_hints(ranking, found)
    del ranking  # the replay's frame: ~1.4 GB at 3.3·10^7 tasks
    _give_back()
    return Summaries(
        activity=activity,
        activity_by_window=activity_from_partial(
            partials.activity, windows, by_window=True
        ),
        straggler=straggler_from_partial(partials.workers, windows),
        executor=executor,
        operator=operator,
        communication=communication,
        hints=hints,
        windows=windows,
        window_ns=window_ns,
        origin_ns=origin_ns,
        context=valid.context,
        stages=stage_table,
        executors=executor_table,
    ).check()  # the summaries leave their stage here: checked once
