"""The result of :func:`~sparktrail.engines.summarize`: frames and options."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

__all__ = ["HintOptions", "Summaries"]


@dataclass(frozen=True)
class HintOptions:
    """Thresholds of the rebalancing hints (DESIGN §6 starting points).

    Shares are fractions of the whole run's critical path (CP summed over the
    windows with paths, divided by their number); factors are ratios.

    Examples
    --------
    >>> HintOptions().skew_factor
    5.0
    >>> HintOptions(target_stage_seconds=30).target_stage_seconds
    30
    """

    #: straggler_executor: CP >= factor x fair share, and >= min share.
    straggler_factor: float = 2.0
    straggler_min_share: float = 0.10
    #: A task "has high CP" when its share of the critical path in the
    #: windows it ran in is at least this.
    task_min_share: float = 0.25
    #: Stages with fewer tasks have no meaningful median.
    min_stage_tasks: int = 3
    #: straggler_task: duration >= factor x stage median (records are not).
    straggler_task_factor: float = 5.0
    #: hotspot: records or bytes >= factor x stage median (AQE's
    #: spark.sql.adaptive.skewJoin.skewedPartitionFactor).
    skew_factor: float = 5.0
    #: parallelism: stages with at least this share of the critical path.
    parallelism_min_share: float = 0.30
    #: parallelism target stage time in seconds (overrides the share).
    target_stage_seconds: float | None = None
    #: scheduling_bound: scheduling + deserialization share, and the task
    #: time Spark's tuning guide aims for (tasks shorter than it are "short").
    scheduling_min_share: float = 0.30
    target_task_ms: float = 100.0
    #: shuffle_bound: shuffle_read share of the critical path.
    shuffle_min_share: float = 0.20
    #: driver_bound: `driver` activity share of the critical path.
    driver_min_share: float = 0.20
    #: idle_capacity: share of executor slot time spent waiting.
    idle_min_share: float = 0.50
    #: straggler_executor: a GC share of task time worth naming.
    gc_high_share: float = 0.10


@dataclass(frozen=True)
class Summaries:
    """Every summary of one trace, for one window length.

    Attributes
    ----------
    activity, activity_by_window
        CP by activity type, whole run and per window with paths.
    straggler, executor
        CP by worker (timeline) and by executor, each with its fair share.
    operator
        CP by operator (Spark stage) with its name and call site.
    communication
        CP by ``src -> dst`` channel at executor level (see ``note``).
    hints
        Rebalancing hints: ``kind, severity, stage_id, executor_id,
        partition, cp_share, evidence`` (JSON object) ``, action``.
    windows
        One row per window: ``window_start_ns, window_end_ns, edges,
        cp_total, has_paths, active_workers, active_executors``.
    window_ns, origin_ns
        The window length and the start of window 0.
    """

    activity: pl.DataFrame
    activity_by_window: pl.DataFrame
    straggler: pl.DataFrame
    executor: pl.DataFrame
    operator: pl.DataFrame
    communication: pl.DataFrame
    hints: pl.DataFrame
    windows: pl.DataFrame
    window_ns: int
    origin_ns: int
