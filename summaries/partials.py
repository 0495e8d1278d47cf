"""Partial sums of a CP table, from which every summary and hint is finished.

A summary is a sum over windows, and the CP of a window depends only on
that window's rows, so the summaries of a run need not hold its whole CP
table: :meth:`Partials.of` reduces the CP rows of some windows to small
per-window (or per-task, per-stage) sums, :meth:`Partials.combine` adds up
the partials of disjoint sets of windows, and
:func:`~sparktrail.engines.batch.summaries_from_partials` finishes the
summaries and hints from them. The batch pipeline computes the partials a
batch of windows at a time, and the Spark engine has Spark compute them, so
both finish with the same code.

Assumptions
-----------
* Every partial combined covers whole windows (all CP rows of each of its
  windows) and no window is in two partials.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

import numpy as np
import polars as pl

from sparktrail.pag import trace as trace_module
from sparktrail.pag.query_engine import collect_all
from sparktrail.pag.trace import mapped_array, mapped_concat, maps_in_place

from .activity import activity_partial
from .charge import charge
from .communication import channel_partial_of_sums
from .frames import SPAN
from .operator import operator_partial
from .run_shares import WINDOW, Frame, path_windows
from .straggler import worker_partial
from .task_table import task_id_range

__all__ = [
    "FINE_KEYS",
    "Partials",
    "TaskSums",
    "fine_sums",
    "partials_of_sums",
    "stage_partial",
    "window_stats",
    "window_stats_from",
]


def window_stats(cp: pl.DataFrame) -> pl.DataFrame:
    """Per-window stats of an enriched CP table.

    ``window_start_ns, window_end_ns, edges, cp_total, has_paths,
    active_workers, active_executors``: a worker is active in a window when
    it has a non-waiting edge of positive length charged to it there (see
    :mod:`~sparktrail.summaries.straggler`).

    >>> from sparktrail.pag import critical_participation
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-2/0"],
    ...     "dst_worker": ["exec-1/0", "exec-2/0"], "start_ns": [0, 0],
    ...     "end_ns": [4, 4], "activity": ["processing", "waiting"]})
    >>> w = window_stats(charge(critical_participation(t, 4)))
    >>> w.select("edges", "cp_total", "has_paths", "active_workers").row(0)
    (2, 1.0, True, 1)
    """
    return window_stats_from(path_windows(cp), worker_partial(cp))


def window_stats_from(totals: Frame, workers: Frame) -> Frame:
    """:func:`window_stats` from per-window totals and the worker partial.

    ``totals``: ``window_start_ns, window_end_ns, edges, cp_total``;
    ``workers``: :func:`~sparktrail.summaries.straggler.worker_partial` of
    the same windows, whose ``busy`` workers are the active ones.
    """
    active = (
        workers.filter("busy")
        .group_by("window_start_ns")
        .agg(
            pl.col("worker").n_unique().alias("active_workers"),
            pl.col("executor").drop_nulls().n_unique().alias("active_executors"),
        )
    )
    return (
        totals.with_columns(
            pl.col("edges").cast(pl.Int64),
            (pl.col("cp_total") > 0).alias("has_paths"),
            pl.lit(1, pl.Int64).alias(SPAN),
        )
        .join(active, on="window_start_ns", how="left")
        .with_columns(
            pl.col("active_workers", "active_executors").fill_null(0).cast(pl.Int64)
        )
        .sort("window_start_ns")
    )


def stage_partial(cp: Frame) -> Frame:
    """``stage_id, activity, cp``: CP summed per stage and activity."""
    return cp.group_by("stage_id", "activity").agg(pl.col("cp").sum())


#: What :func:`fine_sums` groups the CP rows by: every key of the partials
#: it determines (:func:`partials_of_sums`).
FINE_KEYS = (
    "window_start_ns",
    "window_end_ns",
    "worker",
    "is_local",
    "activity",
    "operator",
    "stage_id",
)


def fine_sums(cp: Frame, *more_keys: str) -> Frame:
    """An enriched CP table's sums per :data:`FINE_KEYS` (and ``more_keys``).

    ``executor`` (a function of ``worker``), ``cp``, ``cp_ns`` and
    ``weight_ns`` summed, and ``edges``, the rows summed. Most partials only
    add these up within coarser keys, so they follow from the fine sums
    (:func:`partials_of_sums`); the Spark engine computes the same sums in
    Spark.

    >>> from sparktrail.pag import critical_participation
    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "a"],
    ...     "start_ns": [0, 2], "end_ns": [2, 4], "activity": ["gc"] * 2})
    >>> fine_sums(charge(critical_participation(t, 4))).select("cp", "edges").row(0)
    (1.0, 2)
    """
    # In order of first appearance: the partials add the fine sums up again,
    # and floats added in hash order would differ in their last bits from
    # one run to the next.
    return cp.group_by(*FINE_KEYS, *more_keys, maintain_order=True).agg(
        pl.col("executor").first(),
        pl.col("cp").sum(),
        pl.col("cp_ns").sum(),
        pl.col("weight_ns").sum(),
        pl.len().cast(pl.Int64).alias("edges"),
    )


def partials_of_sums(fine: Frame) -> dict[str, Frame]:
    """The window, activity, operator, stage and worker partials of
    :func:`fine_sums`.

    The partial functions themselves, run on the fine sums: they only add
    up ``cp``, ``cp_ns`` and ``weight_ns`` within their keys (the sums
    differ from those over the rows in the last bits at most), and a fine
    group is busy (non-waiting, positive weight) exactly when one of its
    rows is, since weights are not negative. Edge counts are the sums of
    the fine groups' ``edges``.
    """
    workers = worker_partial(fine)
    totals = fine.group_by(*WINDOW).agg(
        pl.col("edges").sum(), pl.col("cp").sum().alias("cp_total")
    )
    return {
        "windows": window_stats_from(totals, workers),
        "activity": activity_partial(fine),
        "workers": workers,
        "operators": operator_partial(fine),
        "stages": stage_partial(fine),
    }


@dataclass(frozen=True)
class Partials:
    """The sums of some windows' CP rows that the summaries and hints need.

    Attributes
    ----------
    windows
        :func:`window_stats`.
    activity, workers, operators, channels
        :func:`~sparktrail.summaries.activity.activity_partial`,
        :func:`~sparktrail.summaries.straggler.worker_partial`,
        :func:`~sparktrail.summaries.operator.operator_partial`,
        :func:`~sparktrail.summaries.communication.channel_partial`.
    tasks
        ``task_id, cp, windows``: a task's CP summed over the windows with
        paths, and how many of those windows it has an edge in.
    stages
        ``stage_id, activity, cp``: CP summed per stage and activity.
    driver
        ``edge_index, cp``: CP summed per ``driver`` trace row, for the
        rows with CP > 0.
    """

    windows: pl.DataFrame
    activity: pl.DataFrame
    workers: pl.DataFrame
    operators: pl.DataFrame
    channels: pl.DataFrame
    tasks: pl.DataFrame
    stages: pl.DataFrame
    driver: pl.DataFrame

    @classmethod
    def of(cls, cp: pl.DataFrame, span: int = 1) -> Partials:
        """The partials of a CP table (enriched or not) of whole windows.

        ``span`` > 1: ``cp`` is one window that stands for ``span`` windows
        of equal CP (a merged stretch, :func:`~sparktrail.pag.windows.plain_stretches`);
        the sums over windows (tasks, stages, driver rows) count it that
        many times, and the windows frame says so in its ``span``.

        >>> from sparktrail.pag import critical_participation
        >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
        ...     "start_ns": [0], "end_ns": [8], "activity": ["processing"],
        ...     "task_id": [7]})
        >>> Partials.of(critical_participation(t, 4)).tasks.rows()
        [(7, 2.0, 2)]
        >>> Partials.of(critical_participation(t, 8), span=2).tasks.rows()
        [(7, 2.0, 2)]
        """
        cp = charge(cp)
        rows = cp.lazy()
        # Two batches of queries (polars runs each in parallel): the CP rows'
        # fine sums, the tasks and the driver rows, then every other partial
        # from the fine sums (about a hundred rows a window). One group-by
        # of the rows instead of six: Partials.of of a window of 30,000 rows
        # took 7.8 ms instead of 11.7 (one core).
        fine, tasks, driver = collect_all(
            [
                fine_sums(rows, "src_worker"),
                _task_partial(rows),
                rows.filter((pl.col("activity") == "driver") & (pl.col("cp") > 0))
                .group_by("edge_index")
                .agg(pl.col("cp").sum()),
            ],
            len(cp),
        )
        sums = fine.lazy()
        queries = {**partials_of_sums(sums), "channels": channel_partial_of_sums(sums)}
        done = dict(
            zip(queries, collect_all(list(queries.values()), len(fine)), strict=True)
        )
        done |= {"tasks": tasks, "driver": driver}
        if span != 1:
            done = _spanned(done, span)
        return cls(**{name: _own_strings(frame) for name, frame in done.items()})

    @classmethod
    def combine(cls, parts: list[Partials]) -> Partials:
        """The partials of the union of the (disjoint) windows of ``parts``."""
        if not parts:
            raise ValueError("combine needs at least one Partials")
        merged = {
            f.name: pl.concat(
                [getattr(p, f.name) for p in parts], how="vertical_relaxed"
            )
            for f in fields(cls)
        }
        merged["windows"] = merged["windows"].sort("window_start_ns")
        merged["tasks"] = (
            merged["tasks"].group_by("task_id").agg(pl.col("cp", "windows").sum())
        )
        merged["stages"] = (
            merged["stages"].group_by("stage_id", "activity").agg(pl.col("cp").sum())
        )
        merged["driver"] = (
            merged["driver"].group_by("edge_index").agg(pl.col("cp").sum())
        )
        return cls(**merged)


class TaskSums:
    """:attr:`Partials.tasks` of a long run's batches added up as they come,
    in memory-mapped arrays indexed by task id (DESIGN §10).

    :meth:`Partials.combine` concatenates every batch's task partials and
    groups them by task: 24 bytes a task, then as much again in the
    group-by (~1.6 GB at 3.3·10^7 tasks, measured). Here a task's sums sit
    at its id's place in a file (16 bytes an id), which each batch adds
    to; pages are released with a trace file's.

    Use :meth:`for_trace`; it gives None where the task ids are too sparse
    for arrays over their range, or the trace is a slice long or shorter
    (a window's tasks: combined in memory as they were).

    >>> sums = TaskSums(5, 8)
    >>> sums.add(pl.DataFrame({"task_id": [7, 5], "cp": [0.5, 1.0], "windows": [1, 1]}))
    >>> sums.add(pl.DataFrame({"task_id": [7], "cp": [0.25], "windows": [1]}))
    >>> sums.frame().rows()
    [(5, 1.0, 1), (7, 0.75, 2)]
    """

    def __init__(self, lo: int, hi: int) -> None:
        self.lo = lo
        self.cp = mapped_array(hi - lo + 1, np.float64)
        self.windows = mapped_array(hi - lo + 1, np.int64)

    @classmethod
    def for_trace(cls, frame: pl.DataFrame) -> TaskSums | None:
        """The sums for ``frame``'s task ids, when worth keeping in files."""
        if not maps_in_place(frame.height):
            return None
        ids = task_id_range(frame)
        # Ids spread over more than twice the rows: arrays over their
        # range would hold mostly holes.
        if ids is None or ids[1] - ids[0] + 1 > 2 * frame.height:
            return None
        return cls(*ids)

    def add(self, tasks: pl.DataFrame) -> None:
        """Add one batch's :attr:`Partials.tasks` (a task once in it)."""
        at = tasks["task_id"].to_numpy() - self.lo
        # A task is once in a batch's partial (grouped by task), so a
        # gathered add is the sum; floats added in the batches' order, as
        # the combine's group-by adds them.
        self.cp[at] += tasks["cp"].to_numpy()
        self.windows[at] += tasks["windows"].to_numpy()

    def frame(self) -> pl.DataFrame:
        """``task_id, cp, windows`` of the tasks with a window, by task id
        (in a mapped file when longer than a slice)."""
        step = trace_module.SLICE_ROWS

        def parts() -> Iterator[pl.DataFrame]:
            for at in range(0, len(self.cp), step):
                seen = np.flatnonzero(self.windows[at : at + step] > 0) + at
                yield pl.DataFrame(
                    {
                        "task_id": seen + self.lo,
                        "cp": self.cp[seen],
                        "windows": self.windows[seen],
                    },
                    schema={"task_id": pl.Int64, "cp": pl.Float64, "windows": pl.Int64},
                )
                trace_module.release_mapped_pages()

        if maps_in_place(len(self.cp)):
            return mapped_concat(parts())
        return pl.concat(list(parts()))


def _own_strings(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with string columns copied out of the CP table's buffers.

    Polars strings are views into shared buffers: a group-by's few names
    would otherwise keep a whole batch's string buffers alive (about 40 MB
    a batch of 10^6 rows, measured). The frames are small (a row per
    window and key), so the copy is cheap.
    """
    owned = frame.clone()  # the columns are shared, not copied
    for at, dtype in enumerate(frame.dtypes):
        if dtype == pl.String:
            # In place, without a query (a with_columns is one, ~0.1 ms).
            column = frame.to_series(at)
            owned.replace_column(
                at, pl.Series(column.name, column.to_list(), dtype=pl.String)
            )
    return owned


def _task_partial(cp: pl.LazyFrame) -> pl.LazyFrame:
    # A window has paths when its CP sums to more than 0 (CP is never
    # negative), over all its rows, not only the tasks'. Marked per row
    # with a window expression: a semi join on the window stats ran their
    # query again, 3.7 -> 1.3 ms on 30,000 rows.
    in_path_window = pl.col("cp").sum().over("window_start_ns") > 0
    return (
        cp.select("window_start_ns", "task_id", "cp")
        .filter(in_path_window & pl.col("task_id").is_not_null())
        .group_by("task_id")
        .agg(
            pl.col("cp").sum(),
            pl.col("window_start_ns").n_unique().cast(pl.Int64).alias("windows"),
        )
    )


def _spanned(partials: dict[str, pl.DataFrame], span: int) -> dict[str, pl.DataFrame]:
    """Partials of one window made those of ``span`` equal windows: what is
    summed over windows counts ``span`` times; per-window rows stay as
    they are, their window's ``span`` weighs them in whole-run sums."""
    times = pl.lit(span, pl.Int64)
    return partials | {
        "windows": partials["windows"].with_columns(times.alias(SPAN)),
        "tasks": partials["tasks"].with_columns(
            pl.col("cp") * span, (pl.col("windows") * times).cast(pl.Int64)
        ),
        "stages": partials["stages"].with_columns(pl.col("cp") * span),
        "driver": partials["driver"].with_columns(pl.col("cp") * span),
    }
