"""What every hint rule reads: :class:`Context`, the run's summaries and task
facts, computed once.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag.chunk_cp import trace_extent
from sparktrail.pag.context import AppContext
from sparktrail.pag.query_engine import SMALL_ROWS, collect
from sparktrail.pag.sorted_groups import slices_medians
from sparktrail.pag.trace import (
    IDLE_ACTIVITIES,
    Trace,
    collect_slices,
    mapped_concat,
    maps_in_place,
    release_mapped_pages,
    slices_group_by,
)
from sparktrail.pag.workers import DRIVER, executor_of_column
from sparktrail.whatif.replay import TASK_COLUMNS, Replay

from ..operator import stage_name
from ..partials import Partials
from ..result import HintOptions
from ..run_shares import job_time_ns, run_share
from .facts import RunFacts, run_facts

__all__ = [
    "UNEVEN_RATIO",
    "Context",
    "task_shares",
]

#: A stage whose longest task runs this many times its median is uneven.
UNEVEN_RATIO = 2.0


def task_shares(
    facts: pl.DataFrame, task_cp: pl.DataFrame, n_windows: int
) -> pl.DataFrame:
    """Task facts with each task's CP shares.

    ``cp_share`` is the task's share of the whole run's critical path;
    ``running_cp_share`` its share in the windows it ran in, which is what
    "a task with high CP" means: a 2 s straggler is most of the critical
    path while it runs, however long the application was idle before.
    ``task_cp`` is :attr:`~sparktrail.summaries.partials.Partials.tasks`.

    >>> facts = pl.DataFrame({"task_id": [1, 2]})
    >>> cp = pl.DataFrame({"task_id": [1], "cp": [0.5], "windows": [1]})
    >>> task_shares(facts, cp, 2).rows()
    [(1, 0.25, 0.5), (2, 0.0, 0.0)]
    """
    facts = facts.drop("cp_share", "running_cp_share", strict=False)
    if maps_in_place(len(facts)):
        mapped = _mapped_shares(facts["task_id"], task_cp, n_windows)
        if mapped is not None:
            return facts.hstack(mapped)
    shares = _shares(task_cp, n_windows)
    # Only the share columns are gathered and stacked onto the facts: a join
    # would copy every column of millions of tasks.
    aligned = _scattered(facts["task_id"], shares)
    if aligned is None:
        aligned = (
            facts.select("task_id")
            .join(shares, on="task_id", how="left", maintain_order="left")
            .select(pl.col("cp_share", "running_cp_share").fill_null(0.0))
        )
    aligned = _chunked_like(aligned, facts["task_id"])
    if maps_in_place(len(aligned)):
        # Beside a long trace's mapped facts, in a mapped file of their own
        # (16 bytes a task), chunk for chunk.
        lengths = [len(chunk) for chunk in facts["task_id"].get_chunks()]
        starts = itertools.accumulate([0, *lengths[:-1]])
        aligned = mapped_concat(
            aligned.slice(at, n) for at, n in zip(starts, lengths, strict=True)
        )
    return facts.hstack(aligned)


def _shares(task_cp: pl.DataFrame, n_windows: int) -> pl.DataFrame:
    """``task_id, cp_share, running_cp_share`` of :func:`task_shares`."""
    return task_cp.select(
        "task_id",
        run_share(pl.col("cp"), n_windows).alias("cp_share"),
        (pl.col("cp") / pl.col("windows")).alias("running_cp_share"),
    )


class _NotAligned(Exception):
    """A chunk of task ids the shares cannot be scattered onto."""


def _mapped_shares(
    ids: pl.Series, task_cp: pl.DataFrame, n_windows: int
) -> pl.DataFrame | None:
    """:func:`task_shares`' share columns for a long run, a chunk of
    ``ids`` at a time, into a mapped file (DESIGN §10); None unless the
    chunks are increasing runs of ids, ``task_cp`` is sorted by task id (a
    long run's is: :class:`~sparktrail.summaries.partials.TaskSums`) and
    each of its tasks is in ``ids``.

    Each chunk's tasks are the run of ``task_cp`` between its first and
    last id: the shares of the whole run (24 bytes a task, and as much
    again aligned) are never in memory at once.
    """
    keys = task_cp["task_id"]
    if keys.null_count() or ids.null_count() or not keys.is_sorted():
        return None
    placed = 0

    def parts() -> Iterator[pl.DataFrame]:
        nonlocal placed
        last = None
        for chunk in ids.get_chunks():
            if len(chunk) == 0:
                continue
            lo, hi = int(chunk[0]), int(chunk[-1])
            if last is not None and lo <= last:
                raise _NotAligned
            last = hi
            a = int(keys.search_sorted(lo, side="left"))
            b = int(keys.search_sorted(hi, side="right"))
            part = _scattered(chunk, _shares(task_cp.slice(a, b - a), n_windows))
            if part is None:
                raise _NotAligned
            placed += b - a
            release_mapped_pages()
            yield part

    try:
        aligned = mapped_concat(parts())
    except _NotAligned:
        return None
    return aligned if placed == len(keys) else None


def _scattered(ids: pl.Series, shares: pl.DataFrame) -> pl.DataFrame | None:
    """``shares``' columns but ``task_id`` at the rows of ``ids`` with their
    task id (0.0 where none), as the left join of ``ids`` with ``shares``
    gives them; None unless ``ids`` is increasing, its ids span at most
    twice its length and each task id of ``shares`` is once in it.

    The join's hash table and its copies took ~160 MB at 3.3·10^6 tasks;
    here a task id's row is looked up in a table over the ids' span (4
    bytes an id: :func:`~sparktrail.summaries.task_table.task_facts`' ids
    are dense), and the shares written at the rows found.

    >>> ids = pl.Series("task_id", [1, 3, 4])
    >>> _scattered(ids, pl.DataFrame({"task_id": [4, 1], "x": [0.5, None]})).rows()
    [(0.0,), (0.0,), (0.5,)]
    >>> _scattered(ids, pl.DataFrame({"task_id": [2], "x": [0.5]})) is None
    True
    >>> _scattered(ids, pl.DataFrame({"task_id": [3, 3], "x": [0.5, 1.0]})) is None
    True
    >>> twice = pl.Series([1, 1])
    >>> _scattered(twice, pl.DataFrame({"task_id": [1], "x": [0.5]})) is None
    True
    """
    n, keys = len(ids), shares["task_id"]
    if n == 0 or n >= 2**32 or ids.null_count() or keys.null_count():
        return None
    # Ids twice in ``ids`` (the join matches each), a key outside them or
    # twice (the join adds rows): the join's answer, not a scatter's.
    if n > 1 and not bool((ids.slice(1) > ids.slice(0, n - 1)).all()):
        return None
    lo, hi = int(ids[0]), int(ids[-1])
    if hi - lo + 1 > 2 * n:
        return None
    out = _zeros_like(shares, n)
    if len(keys) == 0:
        return out
    if int(keys.min()) < lo or int(keys.max()) > hi:  # type: ignore[arg-type]
        return None
    row = pl.zeros(hi - lo + 1, dtype=pl.UInt32, eager=True).scatter(
        ids - lo, pl.int_range(n, dtype=pl.UInt32, eager=True)
    )
    at = row.gather(keys - lo)
    del row
    if not ids.gather(at).equals(keys, check_names=False):
        return None
    seen = pl.Series(np.zeros(n, dtype=bool)).scatter(at, True)
    if seen.sum() != len(keys):
        return None
    del seen
    return out.with_columns(
        out[c].scatter(at, shares[c].fill_null(0.0)) for c in out.columns
    )


def _zeros_like(shares: pl.DataFrame, n: int) -> pl.DataFrame:
    """``n`` rows of 0.0 in each column of ``shares`` but ``task_id``."""
    return pl.DataFrame(
        [
            pl.zeros(n, dtype=dtype, eager=True).alias(name)
            for name, dtype in shares.schema.items()
            if name != "task_id"
        ]
    )


def _chunked_like(frame: pl.DataFrame, like: pl.Series) -> pl.DataFrame:
    """``frame`` cut (without a copy) into chunks of the lengths of ``like``'s.

    Columns of different chunk lengths side by side make polars copy every
    column of the frame into one chunk at each filter: 500 MB at 3.3·10^6
    task facts, which a long trace's :func:`task_facts` gives in chunks.

    >>> like = pl.concat([pl.Series([1, 2]), pl.Series([3])], rechunk=False)
    >>> _chunked_like(pl.DataFrame({"a": [4, 5, 6]}), like)["a"].chunk_lengths()
    [2, 1]
    """
    if like.n_chunks() == 1:
        return frame
    parts, at = [], 0
    for chunk in like.get_chunks():
        parts.append(frame.slice(at, len(chunk)))
        at += len(chunk)
    return pl.concat(parts, rechunk=False)


def _settled_and_busy(names: list[str]) -> tuple[pl.Expr, pl.Expr]:
    """A stage's settled attempts (neither failed nor killed) and busy ones
    (settled, and read something) (:attr:`Context.stage_facts`)."""
    settled = (
        ~pl.col("status").is_in(["failed", "killed"]).fill_null(False)
        if "status" in names
        else pl.lit(True)
    )
    read = (pl.col("records").fill_null(0) > 0) | (pl.col("bytes").fill_null(0) > 0)
    return settled, settled & read


#: The columns whose median over a stage's busy attempts the rules read.
_BUSY_MEDIANS = {"duration_ns": "ns", "records": "records", "bytes": "bytes"}


def _busy_medians(names: list[str]) -> list[pl.Expr]:
    """``busy_tasks`` and the medians of a stage's busy attempts (of its
    settled ones where none is busy)."""
    settled, busy = _settled_and_busy(names)

    def median(column: str) -> pl.Expr:
        of_busy = pl.col(column).filter(busy).median()
        return pl.coalesce(of_busy, pl.col(column).filter(settled).median())

    return [
        pl.when(busy.any())
        .then(busy.sum())
        .otherwise(settled.sum())
        .alias("busy_tasks"),
        *(median(c).alias(f"median_busy_{n}") for c, n in _BUSY_MEDIANS.items()),
    ]


def _sliced_medians(tasks: pl.DataFrame) -> pl.DataFrame:
    """:func:`_busy_medians` and the stages' plain medians of a long run's
    tasks: counts summed over slices, medians from sorted keys in mapped
    files (:func:`~sparktrail.pag.sorted_groups.slices_medians`), where a
    median over a group-by held about 3.5 times its column."""
    settled, busy = _settled_and_busy(tasks.columns)
    staged = pl.col("stage_id").is_not_null()
    counts = slices_group_by(
        tasks,
        ["stage_id"],
        [busy.sum().alias("busy"), settled.sum().alias("settled")],
        [pl.col("busy", "settled").sum()],
        where=staged,
    ).collect()
    plain = [pl.col(c).alias(f"median_{n}") for c, n in _BUSY_MEDIANS.items()]
    of = [
        pl.when(mask).then(pl.col(c)).alias(f"{n} of {c}")
        for c in _BUSY_MEDIANS
        for mask, n in ((busy, "busy"), (settled, "settled"))
    ]
    medians = slices_medians(tasks, ["stage_id"], [*plain, *of], where=staged)
    return counts.join(medians, on="stage_id", how="left").select(
        "stage_id",
        *(p.meta.output_name() for p in plain),
        pl.when(pl.col("busy") > 0)
        .then(pl.col("busy"))
        .otherwise(pl.col("settled"))
        .cast(pl.UInt32)
        .alias("busy_tasks"),
        *(
            pl.coalesce(f"busy of {c}", f"settled of {c}").alias(f"median_busy_{n}")
            for c, n in _BUSY_MEDIANS.items()
        ),
    )


def _local_rows(frame: pl.DataFrame) -> pl.LazyFrame:
    """``src_worker, activity, start_ns, end_ns`` of the local rows of
    ``frame`` (the trace or a slice of it)."""
    return (
        frame.lazy()
        .select("src_worker", "dst_worker", "activity", "start_ns", "end_ns")
        .filter(pl.col("src_worker") == pl.col("dst_worker"))
        .drop("dst_worker")
    )


@dataclass(frozen=True)
class Context:
    """The inputs of the hint rules, computed once.

    ``partials`` are the run's CP sums (:class:`~sparktrail.summaries.
    partials.Partials`), ``trace`` the validated trace, the frames are the
    whole-run summaries (``operator`` one row per operator and stage: the
    rules look stages up), ``tasks`` has one row per task attempt: its facts
    (:func:`~sparktrail.summaries.task_table.task_facts`) and CP shares
    (:func:`task_shares`); ``app`` is what the application ran with
    (:class:`~sparktrail.pag.context.AppContext`, empty when unknown);
    ``built_replay``, when given, is ``Replay.of`` of the trace and its
    task facts, built by the caller (the online pipeline builds it while a
    window's CP is computed); ``replay_input``, when it holds a frame, is
    the task facts the replay is to be built from, handed over when it is
    (:meth:`for_ranking`).
    """

    partials: Partials
    trace: pl.DataFrame
    activity: pl.DataFrame
    executor: pl.DataFrame
    operator: pl.DataFrame
    communication: pl.DataFrame
    n_windows: int
    options: HintOptions
    tasks: pl.DataFrame
    app: AppContext = field(default_factory=AppContext)
    built_replay: Replay | None = None
    replay_input: list[pl.DataFrame] = field(default_factory=list)

    @cached_property
    def replay(self) -> Replay | None:
        """The what-if replay of the run (built once, when a hint asks;
        ``None`` when the trace cannot be replayed): :attr:`built_replay`
        when the caller built it already."""
        if self.built_replay is not None:
            return self.built_replay
        # The task facts are at hand: the model need not group the rows.
        # Handed over (the list), the input goes once the model has its
        # launch-order copy.
        tasks = self.replay_input if self.replay_input else self.tasks
        try:
            return Replay.of(Trace(self.trace, self.app), tasks)
        except (InputError, ValueError, KeyError) as err:
            warnings.warn(f"no what-if replay: {err}", stacklevel=2)
            return None

    def for_ranking(self) -> Context:
        """This context as the ranking of hints reads it
        (:func:`~.ranking.finish_hints`): no task rows of its own, the
        replay's columns of the facts
        (:data:`~sparktrail.whatif.replay.TASK_COLUMNS`) handed over to the
        replay's build (when no rule built it yet), and what the ranking
        reads of the facts (:attr:`stage_jobs`) computed here.

        The rules' caches and the other facts stay with ``self``, so that
        the replay's build and predictions need not sit beside them (at
        3.3·10^7 tasks the facts are ~2.3 GB), and the replay's input goes
        once it is built (~1.4 GB).
        """
        kept = self.tasks.select(c for c in TASK_COLUMNS if c in self.tasks.columns)
        built = "replay" in self.__dict__ or self.built_replay is not None
        ranking = replace(
            self, tasks=kept.clear(), replay_input=[] if built else [kept]
        )
        ranking.__dict__["stage_jobs"] = self.stage_jobs
        ranking.__dict__["facts"] = self.facts
        for cache in ("replay", "span_ns", "judged_ns"):
            if cache in self.__dict__:  # computed once (a failed replay warned)
                ranking.__dict__[cache] = self.__dict__[cache]
        return ranking

    @cached_property
    def facts(self) -> RunFacts:
        """The run's facts (:mod:`.facts`), computed once for every rule."""
        columns = [
            c for c in ("stage_id", "partition", "status") if c in self.tasks.columns
        ]
        tasks = self.tasks.select(columns) if "stage_id" in columns else None
        return run_facts(self.app, tasks, self.stage_labels.values())

    @cached_property
    def stage_jobs(self) -> pl.DataFrame:
        """``stage_id, job_id``: each job a stage's tasks ran in (both
        known), once: what ties a stage to a streaming query's batches."""
        return collect(
            self.tasks.lazy()
            .select("stage_id", "job_id")
            .drop_nulls()
            .unique(maintain_order=True),
            len(self.tasks),
        )

    @cached_property
    def stage_facts(self) -> pl.DataFrame:
        """One row per stage of :attr:`tasks`, computed once for every rule.

        ``stage_id, tasks, launch_ns`` (first launch), ``end_ns`` (last
        end), ``longest_ns`` (its longest task), ``workers`` (distinct), the
        sums of ``records, bytes,
        useful_ns, duration_ns`` and, when the facts have them, ``gc_ns,
        run_ns`` and ``gc_tasks`` (tasks with GC); the medians
        ``median_ns, median_records, median_bytes``, and the same over the
        stage's *busy* attempts (``busy_tasks``, ``median_busy_ns``, ...):
        those that neither failed nor were killed and read something, so
        that 356 empty partitions of 400 do not make a normal one look
        slow (every settled attempt where none read anything). The rules looked each
        stage up with a query of their own (a window of 30,000 rows ran
        five or more).
        """
        names = self.tasks.columns
        sums = ["records", "bytes", "useful_ns", "duration_ns"]
        sums += [c for c in ("gc_ns", "run_ns") if c in names]
        has_gc = "gc_ns" in names
        gc_tasks = [(pl.col("gc_ns") > 0).sum().alias("gc_tasks")] if has_gc else []
        staged = self.tasks.lazy().filter(pl.col("stage_id").is_not_null())
        medians = [
            pl.col("duration_ns").median().alias("median_ns"),
            pl.col("records").median().alias("median_records"),
            pl.col("bytes").median().alias("median_bytes"),
            *_busy_medians(names),
        ]
        if len(self.tasks) < SMALL_ROWS:
            # A window's tasks: one query is faster.
            return collect(
                staged.group_by("stage_id").agg(
                    pl.len().alias("tasks"),
                    pl.col("launch_ns").min(),
                    pl.col("end_ns").max(),
                    pl.col("duration_ns").max().alias("longest_ns"),
                    pl.col("worker").n_unique().alias("workers"),
                    pl.col(sums).sum(),
                    *gc_tasks,
                    *medians,
                ),
                len(self.tasks),
            )
        # Sums, extremes and distinct workers a slice of the tasks at a time,
        # then over the slices: one query over a long trace's mapped facts
        # held the pages of the eight columns it reads (~1.5 GB at 3.3·10^7
        # tasks, DESIGN §10).
        parts = collect_slices(
            self.tasks,
            lambda _, part: (
                part.lazy()
                .filter(pl.col("stage_id").is_not_null())
                .group_by("stage_id", maintain_order=True)
                .agg(
                    pl.len().alias("tasks"),
                    pl.col("launch_ns").min(),
                    pl.col("end_ns").max(),
                    pl.col("duration_ns").max().alias("longest_ns"),
                    pl.col("worker").unique().alias("workers"),
                    pl.col(sums).sum(),
                    *gc_tasks,
                )
            ),
        )
        facts = parts.group_by("stage_id", maintain_order=True).agg(
            pl.col("tasks").sum(),
            pl.col("launch_ns").min(),
            pl.col("end_ns").max(),
            pl.col("longest_ns").max(),
            pl.col("workers")
            .list.explode(keep_nulls=False, empty_as_null=False)
            .n_unique(),
            pl.col(sums).sum(),
            *([pl.col("gc_tasks").sum()] if has_gc else []),
        )
        of_stage = _sliced_medians(self.tasks)
        return facts.join(of_stage, on="stage_id", how="left", maintain_order="left")

    def stage_row(self, stage_id: int) -> dict[str, Any] | None:
        """:attr:`stage_facts` of one stage (None: it has no task)."""
        return self._stage_rows.get(stage_id)

    def uneven(self, stage_id: int) -> bool:
        """Whether the stage's longest task ran :data:`UNEVEN_RATIO` times
        its median (of three tasks or more): a tail of slow tasks holds it,
        so its work re-divided evenly is no model of a change to its task
        count (the task hints name the tail's cause)."""
        row = self.stage_row(stage_id)
        if row is None or row["tasks"] < 3 or not row["median_ns"]:
            return False
        return bool((row["longest_ns"] or 0) >= UNEVEN_RATIO * row["median_ns"])

    @cached_property
    def _stage_rows(self) -> dict[int, dict[str, Any]]:
        return {row["stage_id"]: row for row in self.stage_facts.iter_rows(named=True)}

    @cached_property
    def stage_labels(self) -> dict[int, str | None]:
        """Each stage's call site (else name), from its first task's operator.

        Every stage at once, in two queries: per stage, naming one in a
        hint took two queries each time.
        """
        first = collect(
            self.tasks.lazy()
            .select("stage_id", "operator")
            .drop_nulls("stage_id")
            .group_by("stage_id", maintain_order=True)
            .agg(pl.col("operator").first()),
            len(self.tasks),
        )
        name, site = stage_name(pl.col("operator"))
        labels = first.select("stage_id", pl.coalesce(site, name))
        return dict(labels.iter_rows())

    @cached_property
    def span_ns(self) -> tuple[int, int]:
        """The trace's first and last event (0, 0 without rows): the pag's
        rule (:func:`~sparktrail.pag.chunk_cp.trace_extent`)."""
        if self.trace.is_empty():
            return 0, 0
        return trace_extent(self.trace)

    @property
    def wall_ns(self) -> int:
        """The run's wall time: the trace's first start to its last end."""
        start, end = self.span_ns
        return end - start

    @cached_property
    def judged_ns(self) -> int:
        """What a finding's saving is weighed against: the run's wall time,
        or in an interactive session (a shell, a notebook) the time some job
        ran (:func:`~..run_shares.job_time_ns`): the rest is a person
        thinking, and the user waited for the jobs."""
        if self.facts.kind == "interactive":
            busy = job_time_ns(self.app)
            if busy:
                return busy
        return self.wall_ns

    def stage_cp(self, *activities: str) -> pl.DataFrame:
        """``stage_id, cp``: each stage's CP in ``activities``, largest first.

        Only stages with CP > 0; ties (to 1e-9, as sums in another order
        differ in their last bits) by stage id.
        """
        return (
            self.partials.stages.filter(
                pl.col("activity").is_in(activities) & pl.col("stage_id").is_not_null()
            )
            .group_by("stage_id")
            .agg(pl.col("cp").sum())
            .filter(pl.col("cp") > 0)
            .sort([pl.col("cp").round(9), "stage_id"], descending=[True, False])
        )

    def activity_share(self, *names: str) -> float:
        """Whole-run CP share of the given activity types."""
        return self._activity_sum("cp_share", names)

    def activity_cp_ns(self, *names: str) -> float:
        """Whole-run critical time (ns) of the given activity types."""
        return self._activity_sum("cp_ns", names)

    def _activity_sum(self, column: str, names: tuple[str, ...]) -> float:
        # In Python: the frame has a row per activity type, and a filter is
        # a query (~0.2 ms).
        pairs = zip(self.activity["activity"], self.activity[column], strict=True)
        return float(sum(value for name, value in pairs if name in names))

    def slot_rows(self, frame: pl.DataFrame) -> pl.LazyFrame:
        """Local rows of executor slots among ``frame`` (the trace or a slice
        of it, :func:`~sparktrail.pag.trace.collect_slices`), as a query.
        Columns ``src_worker, activity, start_ns, end_ns, executor``: the
        timelines of the ``exec-<id>/<slot>`` workers only.
        """
        return (
            _local_rows(frame)
            .with_columns(executor_of_column(frame, "src_worker").alias("executor"))
            .filter(pl.col("executor").is_not_null())
        )

    @cached_property
    def slot_busy(self) -> tuple[int, int]:
        """How many executor slots the trace has, and how long they were busy.

        The slot workers of :attr:`slot_time` and the sum of its
        ``positive_ns`` over the activities but ``waiting``, in one pass
        without the per-activity table (most windows only ask this).
        """
        length = pl.col("end_ns") - pl.col("start_ns")
        busy = ~pl.col("activity").is_in(IDLE_ACTIVITIES) & (length > 0)
        per_worker = collect_slices(
            self.trace,
            lambda _, frame: (
                _local_rows(frame)
                # A worker's executor is null for the driver's timeline only.
                .filter(pl.col("src_worker") != DRIVER)
                .group_by("src_worker")
                .agg(length.filter(busy).sum().alias("busy_ns"))
            ),
        )
        workers = per_worker["src_worker"].n_unique()
        return workers, int(per_worker["busy_ns"].sum() or 0)

    @cached_property
    def slot_time(self) -> pl.DataFrame:
        """Time of executor slots per (executor, slot, activity), computed once.

        ``executor, src_worker, activity, time_ns`` (every row's length) and
        ``positive_ns`` (rows of positive length only).
        """
        length = pl.col("end_ns") - pl.col("start_ns")
        sums = (
            length.sum().alias("time_ns"),
            length.filter(length > 0).sum().alias("positive_ns"),
        )
        # Local rows grouped by worker first: a worker's executor is then
        # parsed once per group, not once per trace row (2.1 against 3.0 ms
        # on 30,000 rows).
        per_worker = collect_slices(
            self.trace,
            lambda _, frame: (
                _local_rows(frame).group_by("src_worker", "activity").agg(*sums)
            ),
        )
        if per_worker.n_unique(["src_worker", "activity"]) < per_worker.height:
            # Slices' sums of a group, summed (exact: integers).
            per_worker = per_worker.group_by("src_worker", "activity").agg(
                pl.col("time_ns", "positive_ns").sum()
            )
        return (
            per_worker.with_columns(
                executor_of_column(per_worker, "src_worker").alias("executor")
            )
            .filter(pl.col("executor").is_not_null())
            .select("executor", "src_worker", "activity", "time_ns", "positive_ns")
        )

    def slots_per_executor(self) -> int:
        """Cores per executor: the most any executor has (``ExecutorAdded``,
        else the most task timelines any executor ran)."""
        cores = self.app.executor_cores()
        if not self.app.is_local:
            cores.pop("driver", None)
        if cores:
            return max(cores.values())
        slots = self.executor.filter(pl.col("role") == "executor")["slots"]
        return max(1, int(slots.max() or 1))  # type: ignore[arg-type]

    def slots_during(self, start_ns: int, end_ns: int) -> int:
        """Task slots the application had in ``[start_ns, end_ns)``: the
        cores of the executors alive then, averaged over the interval
        (rounded); without executor cores, the task timelines of the trace.
        """
        if end_ns > start_ns:
            core_ns = self.app.slot_ns(start_ns, end_ns)
            if core_ns:
                return max(1, round(core_ns / (end_ns - start_ns)))
        return self._timelines()

    def total_slots(self) -> int:
        """Task slots over the whole run (see :meth:`slots_during`)."""
        if self.trace.is_empty():
            return self._timelines()
        return self.slots_during(*self.span_ns)

    def _timelines(self) -> int:
        slots = self.executor.filter(pl.col("role") == "executor")["slots"]
        return max(1, int(slots.sum()))
