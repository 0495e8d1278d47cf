"""Replay a trace's tasks on its slots and driver gaps (DESIGN §9).

A list scheduler in the spirit of sparklens' completion estimator, run over
the trace instead of per stage:

* The run is the driver timeline's sequence of *segments* (where jobs run)
  and *driver gaps* (driver rows of activity ``driver`` or ``startup``),
  one after the other.
* A task is the rows of one ``task_id`` on an ``exec-<id>/<slot>`` worker
  (but ``waiting``, which is no task's): it occupies a slot from its
  launch (first row) to its end (last row). A caller that has the trace's
  task facts (:func:`~sparktrail.summaries.task_facts`, the same per-task
  aggregates) passes them instead of the model grouping the rows again.
* Tasks are taken in traced launch order and each is put on the slot of
  the pool that frees first. A stage is *released* when its segment has
  started and every stage that had ended (in the trace) before its first
  launch has ended in the replay.
* Each task keeps two launch lags measured on the trace: ``lag_release``
  after its stage's release (the driver's pace of launching) and
  ``lag_slot`` after its slot frees (when it waited for a slot). It
  launches at ``max(release + lag_release, slot free + lag_slot)``.
* A segment ends its traced tail after its last task ends; a driver gap
  keeps its traced length.

The lags are measured by running the same scheduler with the traced
launches, so the unchanged replay reproduces the traced wall time (its
error, reported by :func:`~sparktrail.whatif.predict`, is 0 unless the
trace holds more concurrent tasks than slots). What a change does to the
wall time follows from the lags and the slot pool.

Assumptions
-----------
* The pool has one slot per core of every executor (cores from the trace's
  context, at least the slots seen in the trace); a change of executor
  count scales it. A task keeps one core busy: one that keeps more busy
  (a Python UDF's worker beside the JVM thread feeding it rows) is not
  seen, so a second slot of such a stage counts as a free core. Nor are
  the JVM's own threads (GC, JIT, a local driver's scheduler): a core
  idle in the trace counts as wholly free, though a task that ran beside
  it idle had it for those threads. A split partition is the change
  where this matters most (its task ran alone; its pieces do not): the
  change carries the pieces' slowdown, which
  :func:`~.contention.split_slowdown` reads from Spark's CPU times.
* A split partition (:class:`~.changes.SplitPartition`) adds no stage:
  AQE's skew join needs none. Salting its key instead, when the results
  must be merged by the real key, adds a small stage that the replay
  leaves out (``compare`` shows it as AFTER's own operator).
* Dependencies between stages are approximated by traced time order, as
  stated above; failed, killed and speculative attempts are replayed as
  traced.
* A task's own ``scheduling`` and ``deserialization`` time is its fixed
  overhead: re-divided tasks (:class:`~.changes.StagePartitions`) share
  the rest of the stage's task time and each pays the stage's median
  overhead once; the rest of a tiny task's time (its GC pauses, its
  setup inside ``processing``) counts as work.
* New and split tasks keep traced launch lags, measured on a run that may
  have been loaded; ``run(lags=False)`` replays without them (sparklens'
  model), the bound the lags' share of a prediction is read from.
* Records are not part of the time model.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag import trace as pag_trace
from sparktrail.pag.buckets import bucketed_rows
from sparktrail.pag.query_engine import collect_in_memory
from sparktrail.pag.trace import (
    Trace,
    TraceLike,
    collect_slices,
    load_trace,
    mapped_array,
    mapped_concat,
    maps_in_place,
    release_if_long,
    slices_group_by,
    trace_slices,
)
from sparktrail.pag.workers import SLOT_PREFIX, executor_of_name

from .changes import (
    Change,
    DropDriverGap,
    DropDriverGaps,
    Executors,
    SpeculateTask,
    SplitPartition,
    StagePartitions,
    TaskTimes,
    Together,
)
from .scheduler import launch_lags, list_schedule

__all__ = ["OVERHEAD_ACTIVITIES", "TASK_COLUMNS", "Outcome", "Replay", "int_median"]

_Array = np.ndarray[Any, Any]

#: What follows the executor id in a slot worker's name (its slot).
_GAP_ACTIVITIES = ("driver", "startup")
#: A task's activities that count as its fixed overhead (``overhead_ns``).
OVERHEAD_ACTIVITIES = ("scheduling", "deserialization")
#: What the model reads of a task (its facts, or its rows grouped).
TASK_COLUMNS = (
    "task_id",
    "worker",
    "stage_id",
    "partition",
    "job_id",
    "launch_ns",
    "end_ns",
    "overhead_ns",
    "duration_ns",
)
_MIN_SPECULATION_NS = 100_000_000
_DEFAULT_MULTIPLIER = 1.5


@dataclass(frozen=True)
class Outcome:
    """One replay: the run's wall time and each stage's (first launch to last
    end), in ns, with the slot count it ran on."""

    wall_ns: int
    stage_ns: dict[int, int]
    slots: int
    tasks: int


@dataclass(frozen=True, eq=False)
class Replay:
    """The task / slot / driver-gap model of a trace; make one with :meth:`of`.

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-1/0"],
    ...     "dst_worker": ["exec-1/0", "exec-1/0"], "start_ns": [0, 10],
    ...     "end_ns": [10, 30], "activity": ["processing"] * 2,
    ...     "stage_id": [0, 0], "task_id": [0, 1], "partition": [0, 1]})
    >>> r = Replay.of(t)
    >>> r.run().wall_ns, r.run(Executors(2)).wall_ns
    (30, 20)
    """

    #: One row per task in traced launch order, what a change needs of it:
    #: task_id, partition (Int32), overhead_ns (its scheduling and
    #: deserialization time), duration_ns, stage (dense index into
    #: :attr:`stages`, Int32), segment (Int32), lag_release, lag_slot.
    #: (Its worker, job and times went into the slot pool, the plan and
    #: the lags, its stage id is :attr:`stages`' of its index: 52 bytes a
    #: task, 72 with the stage id and 64-bit indices.)
    tasks: pl.DataFrame
    #: One row per stage (dense index order): stage_id, start_ns, end_ns.
    stages: pl.DataFrame
    #: The driver gaps in time order: start_ns, end_ns, activity.
    gaps: pl.DataFrame
    start_ns: int
    end_ns: int
    #: Slots of the traced run and executors they belong to.
    slots: int
    executors: int
    speculation_multiplier: float = _DEFAULT_MULTIPLIER
    _plan: _Plan = field(repr=False, default=None)  # type: ignore[assignment]

    @property
    def traced_wall_ns(self) -> int:
        """The trace's extent: last end minus first start."""
        return self.end_ns - self.start_ns

    @classmethod
    def of(
        cls,
        trace: TraceLike,
        tasks: pl.DataFrame | list[pl.DataFrame] | None = None,
    ) -> Replay:
        """Build the replay model of ``trace`` (O(tasks log tasks)).

        Parameters
        ----------
        trace
            The trace (validated unless it is a :class:`Trace`).
        tasks
            Its task facts (:func:`~sparktrail.summaries.task_facts`; the
            columns of :data:`TASK_COLUMNS`), when the caller has them: the
            same model, without grouping the trace rows again. A list
            holding them hands them over: the build takes them out of it,
            so they can go once their launch-order copy is made, not only
            when the caller drops them.

        Raises
        ------
        InputError
            If the trace has no rows.
        """
        trace = load_trace(trace)
        frame = trace.frame
        if frame.is_empty():
            raise InputError("a what-if replay needs a trace with rows")
        start, end = _span(frame)
        gaps = _gaps(frame)
        if isinstance(tasks, list):
            # Handed over: the facts go once their launch-order copy is made.
            source = _slot_tasks(tasks.pop())
        else:
            source = _task_rows(frame) if tasks is None else _slot_tasks(tasks)
        del tasks
        slots, executors = _capacity(trace, source)
        source = source.drop("worker").with_columns(pl.col("stage_id").fill_null(-1))
        # Each task's launch, end and stage as one array (a long run's in a
        # mapped file, DESIGN §10): what the launch order and the plan read
        # by row.
        launches = _contiguous(source, "launch_ns")
        stage_ids = _contiguous(source, "stage_id")
        in_id_order = source.select(pl.col("task_id").is_sorted()).item()
        ids = None if in_id_order else _contiguous(source, "task_id")
        order = _launch_order(launches, _contiguous(source, "end_ns"), ids)
        del ids
        # What needs no order (the stages' and segments' extents, the jobs'
        # spans) is read off the facts as they come: only what the model
        # keeps, and the launches, are gathered into launch order.
        stages = _stages(source, stage_ids, order)
        segment = _segments(gaps["start_ns"].to_numpy(), launches)
        plan = _Plan.make(
            source, pl.Series("segment", segment), stages, gaps, start, end
        )
        release_if_long(len(order))
        stage = _dense_stages(stage_ids, stages)
        del stage_ids
        # A column at a time, each gathered a slice of the order at a time
        # (a long run's into a mapped file of its own).
        kept = pl.DataFrame(
            [
                _gathered(source, "task_id", order),
                _gathered(
                    source.with_columns(pl.col("partition").cast(pl.Int32)),
                    "partition",
                    order,
                ),
                _gathered(source, "overhead_ns", order),
                _gathered(source, "duration_ns", order),
                pl.Series("stage", _gathered_array(stage, order)),
                pl.Series("segment", _gathered_array(segment, order)),
            ]
        )
        launch = _gathered_array(launches, order)
        del source, stage, segment, order, launches
        # A long run's arrays of a task each (DESIGN §10): its launches and
        # the model's columns were gathered into mapped files, and what the
        # traced replay writes goes to them too.
        free = _scratch(kept.height)
        stage_index = _int32(kept["stage"])
        release = plan.simulate(
            _int64(kept["duration_ns"]),
            stage_index,
            _int32(kept["segment"]),
            slots,
            frozenset(),
            fixed=launch,
            free_at=free,
        )[2]
        lag_release = _scratch(kept.height)
        lag_slot = _scratch(kept.height)
        launch_lags(
            launch, stage_index, free, release, stages.height, lag_release, lag_slot
        )
        del launch, free
        kept = kept.with_columns(
            pl.Series("lag_release", lag_release, pl.Int64),
            pl.Series("lag_slot", lag_slot, pl.Int64),
        )
        # A long trace's model (52 bytes a task) now waits for the hints'
        # replays in mapped files, every column of it (the gathers' files
        # and the lags' arrays): each run reads its pages and gives them
        # back (DESIGN §10).
        del lag_release, lag_slot
        multiplier = _multiplier(trace)
        return cls(kept, stages, gaps, start, end, slots, executors, multiplier, plan)

    # -- running --------------------------------------------------------------

    def run(self, change: Change | None = None, *, lags: bool = True) -> Outcome:
        """Replay the run, after ``change`` if one is given.

        ``lags=False`` replays it with every launch lag zeroed: each task
        launches as soon as its stage is released and a slot is free
        (sparklens' assumption), the driver gaps and segment tails kept.

        Raises
        ------
        InputError
            If the change names a stage, partition, task, job or driver gap
            the trace does not hold.
        """
        if change is None:
            traced = self._unchanged if lags else self._unchanged_no_lag
            return replace(traced, stage_ns=dict(traced.stage_ns))
        return self._run(change, lags)

    @cached_property
    def _unchanged(self) -> Outcome:
        """The run without a change, replayed once: every prediction
        compares with it (0.7 ms a replay on a window of 30,000 rows)."""
        return self._run(None, True)

    @cached_property
    def _unchanged_no_lag(self) -> Outcome:
        """The run without a change nor launch lags, replayed once."""
        return self._run(None, False)

    def _run(self, change: Change | None, lags: bool) -> Outcome:
        t = self.tasks
        lag_r = t["lag_release"].to_numpy()
        lag_s = t["lag_slot"].to_numpy()
        if not lags:
            # Zeroed pages the scheduler only reads: calloc'd, never resident
            # (``zeros_like`` wrote 2 x 26 MB at 3.3·10^6 tasks).
            lag_r = np.zeros(lag_r.shape, dtype=lag_r.dtype)
            lag_s = np.zeros(lag_s.shape, dtype=lag_s.dtype)
        run = _Arrays(
            _copied(t["duration_ns"].to_numpy()),
            lag_r,
            lag_s,
            t["stage"].to_numpy(),
            t["segment"].to_numpy(),
        )
        slots, drop = self.slots, frozenset[int]()
        structural = []
        for step in _steps(change):
            if isinstance(step, SpeculateTask):
                row = self._task_row(step.task_id)
                median, delay = self._speculation(row, step.delay_ns)
                run.dur[row] = min(int(run.dur[row]), delay + median)
            elif isinstance(step, TaskTimes):
                rows = self._task_rows(step.task_ids)
                run.dur[rows] = np.asarray(step.durations_ns, dtype=run.dur.dtype)
            elif isinstance(step, Executors):
                slots = max(1, round(self.slots * step.count / self.executors))
            elif isinstance(step, DropDriverGap):
                drop = drop | {self._gap_at(step.start_ns)}
            elif isinstance(step, DropDriverGaps):
                drop = drop | set(self._gaps_between(step.after_job, step.before_job))
            elif isinstance(step, SplitPartition | StagePartitions):
                structural.append(step)
            else:
                raise InputError(f"not a what-if change: {step!r}")
        splits = [c for c in structural if isinstance(c, SplitPartition)]
        if len(splits) > 1:
            raise InputError("a what-if replay splits one partition at a time")
        overhead = None
        for step in splits:
            overhead = self._split(step, run)
        for step in structural:
            if isinstance(step, StagePartitions):
                if overhead is None:
                    overhead = t["overhead_ns"].to_numpy()
                overhead = self._repartition(step, run, overhead)
        wall_end, spans, _ = self._plan.simulate(
            _int64(run.dur),
            _int32(run.stage),
            _int32(run.segment),
            slots,
            frozenset(drop),
            lags=(_int64(run.lag_r), _int64(run.lag_s)),
        )
        ids = self.stages["stage_id"].to_list()
        stage_ns = {ids[s]: e - b for s, (b, e) in spans.items()}
        release_if_long(t.height)  # a mapped model's pages this run read
        return Outcome(wall_end - self.start_ns, stage_ns, slots, len(run.dur))

    def _split(self, change: SplitPartition, run: _Arrays) -> _Array:
        """Split ``change``'s partition in ``run`` (the traced rows: the
        first structural step); the overheads, repeated alike."""
        rows = self._partition_rows(change.stage_id, change.partition)
        dur = run.dur
        if change.slowdown != 1:
            dur[rows] = np.rint(dur[rows] * change.slowdown)
        pieces = _pieces(dur[rows], np.full(rows.size, change.k))
        overhead = _repeated(self.tasks["overhead_ns"].to_numpy(), rows, change.k)
        run.dur, run.lag_r, run.lag_s, run.stage, run.segment = (
            _repeated(a, rows, change.k)
            for a in (dur, run.lag_r, run.lag_s, run.stage, run.segment)
        )
        # Each split row's k copies of its time become k pieces of it.
        for i, row in enumerate(rows.tolist()):
            at = row + i * (change.k - 1)
            run.dur[at : at + change.k] = pieces[i * change.k : (i + 1) * change.k]
        return overhead

    # -- what a change names --------------------------------------------------

    def stage_of_task(self, task_id: int) -> int:
        """The stage id of task ``task_id`` (InputError if there is none)."""
        stage = self.tasks["stage"][self._task_row(task_id)]
        return int(self.stages["stage_id"][stage])

    def _stage_index(self, stage_id: int) -> int:
        """The dense index of stage ``stage_id`` (InputError if none)."""
        self._check_stage(stage_id)
        ids = self.stages["stage_id"]
        return int(np.flatnonzero((ids == stage_id).to_numpy())[0])

    def _check_stage(self, stage_id: int) -> None:
        if stage_id not in self._plan.stage_ids:
            known = ", ".join(str(s) for s in sorted(self._plan.stage_ids)[:20])
            raise InputError(
                f"stage {stage_id} is not in the trace (its stages: {known or 'none'})"
            )

    def _partition_rows(self, stage_id: int, partition: int) -> np.ndarray[Any, Any]:
        stage = self._stage_index(stage_id)
        t = self.tasks
        mask = ((t["stage"] == stage) & (t["partition"] == partition)).to_numpy()
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            parts = (
                t.filter(pl.col("stage") == stage)["partition"].drop_nulls().to_list()
            )
            span = f"{min(parts)}-{max(parts)}" if parts else "none"
            raise InputError(
                f"stage {stage_id} has no partition {partition} "
                f"(its partitions: {span})"
            )
        return rows

    def _task_row(self, task_id: int) -> int:
        rows = np.flatnonzero((self.tasks["task_id"] == task_id).to_numpy())
        if rows.size == 0:
            raise InputError(f"task {task_id} is not in the trace")
        return int(rows[0])

    def _task_rows(self, task_ids: tuple[int, ...]) -> _Array:
        """The rows of ``task_ids``, in their order (InputError naming the
        first that is not in the trace)."""
        order = self._id_order
        ids = self.tasks["task_id"].to_numpy()
        wanted = np.asarray(task_ids, dtype=ids.dtype)
        at = np.searchsorted(ids[order], wanted)
        at = np.minimum(at, max(0, order.size - 1))
        rows = order[at] if order.size else np.zeros(0, dtype=np.int64)
        found = ids[rows] == wanted if order.size else np.zeros(len(wanted), bool)
        if not bool(np.all(found)):
            missing = int(wanted[np.flatnonzero(~found)[0]])
            raise InputError(f"task {missing} is not in the trace")
        return rows

    @cached_property
    def _id_order(self) -> _Array:
        return np.argsort(self.tasks["task_id"].to_numpy(), kind="stable")

    def _speculation(self, row: int, delay_ns: int | None) -> tuple[int, int]:
        s = self.tasks["stage"][row]
        # The one column filtered, not the frame: at 3.3·10^6 tasks the
        # frame's copy and a list of the durations took ~170 MB.
        durations = self.tasks["duration_ns"].filter(self.tasks["stage"] == s)
        median = int(_median(durations))
        if delay_ns is None:
            delay_ns = max(
                round(self.speculation_multiplier * median), _MIN_SPECULATION_NS
            )
        return median, delay_ns

    def _repartition(
        self, change: StagePartitions, run: _Arrays, overheads_all: _Array
    ) -> _Array:
        """Re-divide ``change``'s stage in ``run`` (its current rows: other
        structural steps may have moved them); the overheads after it."""
        stage_index = self._stage_index(change.stage_id)
        n = change.n
        dur = run.dur
        # The stage's rows as a mask, and only the first n as indices: at
        # 3.3·10^6 tasks of one stage each index array is 26 MB.
        in_stage = (run.stage == stage_index).astype(bool)
        rows = np.flatnonzero(in_stage)
        size, head = rows.size, rows[:n].copy()
        del rows
        if size == 0:
            raise InputError(f"stage {change.stage_id} has no task left to divide")
        overheads = overheads_all[in_stage]
        if change.overhead_ns is not None:
            overheads = np.full(overheads.size, change.overhead_ns, dtype=np.int64)
        # Each task's own overhead goes: merged tasks do not pay it again.
        if overheads.dtype == np.int64 and dur.dtype == np.int64:
            # In place (the same integers): a copy fewer of the stage's
            # durations, and the overheads' median partitions them.
            spent = dur[in_stage]
            spent -= overheads
            np.maximum(spent, 0, out=spent)
            work = int(spent.sum())
            del spent
            overhead = int(int_median(overheads, in_place=True))
        else:
            overhead = int(_median(pl.Series(overheads)))
            work = int(np.maximum(dur[in_stage] - overheads, 0).sum())
        del overheads
        new_dur = _pieces(np.array([work]), np.array([n])) + overhead
        # Task j keeps the launch lags of the stage's j-th traced task.
        rank = head[np.minimum(np.arange(n), size - 1)]
        keep = ~in_stage
        del in_stage
        # The new tasks take the place (and segment) of the stage's first.
        at = int(head[0])
        first = np.full(n, at)
        run.dur = _spliced(dur, keep, at, new_dur)
        run.lag_r = _spliced(run.lag_r, keep, at, run.lag_r[rank])
        run.lag_s = _spliced(run.lag_s, keep, at, run.lag_s[rank])
        run.stage = _spliced(run.stage, keep, at, run.stage[first])
        run.segment = _spliced(run.segment, keep, at, run.segment[first])
        return _spliced(overheads_all, keep, at, np.full(n, overhead))

    def _gap_at(self, start_ns: int) -> int:
        g = self.gaps
        rows = np.flatnonzero(
            ((g["start_ns"] == start_ns) & (g["activity"] == "driver")).to_numpy()
        )
        if rows.size == 0:
            raise InputError(
                f"no driver gap starts at {start_ns} ns "
                f"({(g['activity'] == 'driver').sum()} driver gaps in the trace)"
            )
        return int(rows[0])

    def _gaps_between(self, after_job: int, before_job: int) -> list[int]:
        jobs = self._plan.job_spans
        for job in (after_job, before_job):
            if job not in jobs:
                known = ", ".join(str(j) for j in sorted(jobs)[:20])
                raise InputError(
                    f"job {job} is not in the trace (its jobs: {known or 'none'})"
                )
        lo, hi = jobs[after_job][1], jobs[before_job][0]
        g = self.gaps
        mask = (g["activity"] == "driver") & (g["start_ns"] >= lo) & (g["end_ns"] <= hi)
        return np.flatnonzero(mask.to_numpy()).tolist()


@dataclass
class _Arrays:
    """One replay's per-task arrays, in launch order, as the changes leave
    them."""

    dur: _Array
    lag_r: _Array
    lag_s: _Array
    stage: _Array
    segment: _Array


def _steps(change: Change | None) -> tuple[Change, ...]:
    """The single changes of ``change`` (a :class:`~.changes.Together` holds
    several)."""
    if change is None:
        return ()
    if isinstance(change, Together):
        return change.changes
    return (change,)


# -- building the model ---------------------------------------------------------


def _span(frame: pl.DataFrame) -> tuple[int, int]:
    """The first start and the last time of a non-empty ``frame``.

    A slice at a time (:func:`~sparktrail.pag.trace.trace_slices`), so
    that a long trace's time columns do not stay resident; Series' own min
    and max, as a query costs ~0.4 ms on a window's rows.
    """
    spans = [
        (
            int(part["start_ns"].min()),  # type: ignore[arg-type]
            max(int(part[c].max()) for c in ("start_ns", "end_ns")),  # type: ignore[arg-type]
        )
        for _, part in trace_slices(frame)
    ]
    return min(a for a, _ in spans), max(b for _, b in spans)


def _gaps(frame: pl.DataFrame) -> pl.DataFrame:
    """The driver gaps of ``frame``, filtered a slice at a time (as
    :func:`_span`)."""
    gap = (
        (pl.col("src_worker") == "driver")
        & (pl.col("dst_worker") == "driver")
        & pl.col("activity").is_in(_GAP_ACTIVITIES)
        & (pl.col("end_ns") > pl.col("start_ns"))
    )
    columns = ("start_ns", "end_ns", "activity")
    return collect_slices(
        frame, lambda _, part: part.lazy().filter(gap).select(columns)
    ).sort("start_ns")


def _task_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per task of the slots (:data:`TASK_COLUMNS`), from its rows."""
    span = pl.col("end_ns") - pl.col("start_ns")
    overhead = pl.col("activity").is_in(OVERHEAD_ACTIVITIES)
    local = frame.lazy().filter(
        pl.col("task_id").is_not_null()
        & (pl.col("src_worker") == pl.col("dst_worker"))
        & (pl.col("activity") != "waiting")
        & pl.col("src_worker").str.starts_with(SLOT_PREFIX)
    )
    # One query (3.0 -> 2.1 ms on 30,000 rows), in memory at any size: the
    # filter reads only the columns aggregated, and the group-by into one
    # row per task peaked at twice the memory when streamed.
    return collect_in_memory(
        local.group_by("task_id")
        .agg(
            pl.col("src_worker").first().alias("worker"),
            pl.col("stage_id").first(ignore_nulls=True),
            pl.col("partition").first(ignore_nulls=True),
            pl.col("job_id").first(ignore_nulls=True),
            pl.col("start_ns").min().alias("launch_ns"),
            pl.col("end_ns").max(),
            pl.when(overhead).then(span).otherwise(0).sum().alias("overhead_ns"),
        )
        .with_columns((pl.col("end_ns") - pl.col("launch_ns")).alias("duration_ns"))
    )


def _slot_tasks(facts: pl.DataFrame) -> pl.DataFrame:
    """The tasks of the slots among task ``facts`` (:data:`TASK_COLUMNS`)."""
    try:
        tasks = facts.select(TASK_COLUMNS)
    except pl.exceptions.ColumnNotFoundError as err:
        raise InputError(f"task facts without {TASK_COLUMNS}: {err}") from err
    # Of the distinct workers, not of every task's (a categorical's names
    # would be spelled out for each task: 16 bytes a task).
    workers = tasks["worker"].unique().to_list()
    slots = [w for w in workers if w is not None and w.startswith(SLOT_PREFIX)]
    # Usually every task is: a filter would copy millions of tasks' columns
    # for nothing (the launch-order gather copies them once anyway).
    everyone = len(slots) == len(workers)
    return tasks if everyone else tasks.filter(pl.col("worker").is_in(slots))


def _launch_order(launch: _Array, end: _Array, ids: _Array | None) -> _Array:
    """The rows in traced launch order: by launch, then end, then task id
    (``ids`` None: the rows are in id order already).

    A long run's rows are first placed by a range of launches, a counting
    sort a slice at a time (:func:`~sparktrail.pag.buckets.bucketed_rows`,
    into a mapped file), then each range sorted in its place: a sort of
    every row held its keys and order in the heap (24 bytes a task). The
    ranges are cut at launches of a sample, so that each holds about a
    quarter of a slice (more where many tasks launched at one instant).

    >>> _launch_order(np.array([5, 1, 5]), np.array([9, 2, 7]), None).tolist()
    [1, 2, 0]
    """
    n = len(launch)
    keys = [end, launch] if ids is None else [ids, end, launch]
    if not maps_in_place(n):
        # Sorted in numpy: polars' sort by three keys took twice as long on
        # 10,000 tasks (0.94 against 0.58 ms). No key is null: the trace's
        # times are not, and a task has an id.
        return np.lexsort(keys)
    step = pag_trace.SLICE_ROWS
    n_ranges = 4 * -(-n // step)
    sample = np.sort(launch[:: max(1, n // (64 * n_ranges))])
    cuts = sample[(np.arange(1, n_ranges) * len(sample)) // n_ranges]
    rows, starts = bucketed_rows(
        (
            np.searchsorted(cuts, launch[at : at + step], side="right")
            for at in range(0, n, step)
        ),
        n,
        n_ranges,
    )
    for first, last in itertools.pairwise(starts.tolist()):
        part = rows[first:last]
        # (The rows of a range come in row order: the sort is stable.)
        part[:] = part[np.lexsort([k[part] for k in keys])]
        release_if_long(n)
    return rows


def _stages(tasks: pl.DataFrame, stage_ids: _Array, order: _Array) -> pl.DataFrame:
    """``stage, stage_id, start_ns, end_ns``: one row per stage of ``tasks``
    (``stage_id`` not null, as ``stage_ids`` holds them), its dense index
    ``stage`` in the order of its first task in launch ``order``."""
    firsts: dict[int, int] = {}
    for at in range(0, len(order), pag_trace.SLICE_ROWS):
        seen = stage_ids[order[at : at + pag_trace.SLICE_ROWS]]
        distinct, where = np.unique(seen, return_index=True)
        for stage_id, place in zip(distinct.tolist(), where.tolist(), strict=True):
            firsts.setdefault(stage_id, at + place)
    first = pl.DataFrame(
        {"stage_id": list(firsts), "first": list(firsts.values())},
        schema={"stage_id": tasks.schema["stage_id"], "first": pl.Int64},
    )
    extents = slices_group_by(
        tasks.select("stage_id", "launch_ns", "end_ns"),
        ["stage_id"],
        [pl.col("launch_ns").min(), pl.col("end_ns").max()],
        [pl.col("launch_ns").min().alias("start_ns"), pl.col("end_ns").max()],
    )
    return (
        extents.join(first.lazy(), on="stage_id")
        .sort("first")
        .with_row_index("stage")
        .with_columns(pl.col("stage").cast(pl.Int64))
        .drop("first")
        .collect()
    )


def _segments(gap_starts: _Array, launch: _Array) -> _Array:
    """Each task's segment (int32): how many driver gaps start before its
    launch."""
    return _by_slice(
        launch, lambda part: np.searchsorted(gap_starts, part, side="left"), np.int32
    )


def _dense_stages(stage_ids: _Array, stages: pl.DataFrame) -> _Array:
    """Each task's dense stage index (int32, :func:`_stages`)."""
    by_id = stages.sort("stage_id")
    ids, index = by_id["stage_id"].to_numpy(), by_id["stage"].to_numpy()
    return _by_slice(
        stage_ids, lambda part: index[np.searchsorted(ids, part)], np.int32
    )


def _capacity(trace: Trace, tasks: pl.DataFrame) -> tuple[int, int]:
    """Slots and executors of the traced run (DESIGN §5's slot workers)."""
    # The executor of each distinct slot worker, in Python: a few dozen names.
    slots: dict[str, int] = {}
    for worker in tasks["worker"].unique().drop_nulls().to_list():
        executor = executor_of_name(worker) or worker
        slots[executor] = slots.get(executor, 0) + 1
    context = trace.context
    for life in context.executors:
        if life.executor_id == "driver" and not context.is_local:
            continue
        slots[life.executor_id] = max(slots.get(life.executor_id, 0), life.cores or 0)
    slots = {e: n for e, n in slots.items() if n > 0}
    if not slots:
        return 1, 1
    return sum(slots.values()), len(slots)


def _multiplier(trace: Trace) -> float:
    value = trace.context.setting("spark.speculation.multiplier")
    try:
        return float(value) if value is not None else _DEFAULT_MULTIPLIER
    except ValueError:
        return _DEFAULT_MULTIPLIER


def _gathered(frame: pl.DataFrame, name: str, order: _Array) -> pl.Series:
    """Column ``name`` of ``frame`` in ``order``: one without nulls through
    numpy (:func:`_gathered_array`); else polars' gather, the mapped pages
    it read released, a long run's then written to a mapped file of its
    own (:func:`~sparktrail.pag.trace.mapped_concat`)."""
    dtype = frame.schema[name]
    if not frame.select(pl.col(name).null_count()).item():
        values = _gathered_array(_contiguous(frame, name), order)
        return pl.Series(name, values, dtype)
    out = frame[name].gather(order)
    release_if_long(len(order))
    if maps_in_place(len(order)):
        out = mapped_concat([out.to_frame()]).to_series()
    return out


def _gathered_array(values: _Array, order: _Array) -> _Array:
    """``values`` in ``order``, into an array of their type."""
    return _by_slice(order, lambda part: values[part], values.dtype)


def _by_slice(
    values: _Array, step: Callable[[_Array], _Array], dtype: np.typing.DTypeLike
) -> _Array:
    """``step`` of ``values`` a slice at a time, into an array of ``dtype``
    (a long run's in a mapped file, its pages released after each slice)."""
    out = _scratch(len(values), dtype)
    for at in range(0, len(values), pag_trace.SLICE_ROWS):
        part = values[at : at + pag_trace.SLICE_ROWS]
        out[at : at + len(part)] = step(part)
        release_if_long(len(values))
    return out


def _contiguous(frame: pl.DataFrame, name: str) -> _Array:
    """Column ``name`` of ``frame`` (no nulls) as one contiguous array of
    its type: a long run's copied a slice at a time into a mapped file,
    where ``to_numpy`` of its chunks would copy them into the heap, and of
    a column kept as one value (:func:`~sparktrail.summaries.task_table.task_facts`)
    spell it out for every task, in the frame, for good."""
    if not maps_in_place(frame.height):
        return np.ascontiguousarray(frame[name].to_numpy())
    column = frame.select(name)
    out = _scratch(frame.height, column.head(1).to_series().to_numpy().dtype)
    for at, part in trace_slices(column):
        out[at : at + len(part)] = part.to_series().to_numpy()
    return out


def _copied(values: _Array) -> _Array:
    """A copy of ``values`` to change (a long run's in a mapped file)."""
    out = _scratch(len(values), values.dtype)
    out[:] = values
    return out


def _repeated(values: _Array, rows: _Array, k: int) -> _Array:
    """``values`` with each of ``rows`` (ascending) repeated ``k`` times:
    ``np.repeat`` of a few rows, without an array of repeats a task long
    (a long run's into a mapped file).

    >>> _repeated(np.array([1, 2, 3]), np.array([0, 2]), 2).tolist()
    [1, 1, 2, 3, 3]
    """
    out = _scratch(len(values) + len(rows) * (k - 1), values.dtype)
    taken = placed = 0
    for row in rows.tolist():
        out[placed : placed + row - taken] = values[taken:row]
        placed += row - taken
        out[placed : placed + k] = values[row]
        placed, taken = placed + k, row + 1
    out[placed:] = values[taken:]
    return out


def _spliced(values: _Array, keep: _Array, at: int, new: _Array) -> _Array:
    """``np.insert(values[keep], at, new)`` where every row before ``at`` is
    kept, written a slice at a time (a long run's into a mapped file).

    >>> keep = np.array([True, False, False, True])
    >>> _spliced(np.array([1, 2, 3, 4]), keep, 1, np.array([7, 8, 9])).tolist()
    [1, 7, 8, 9, 4]
    """
    out = _scratch(int(keep.sum()) + len(new), values.dtype)
    out[:at] = values[:at]
    out[at : at + len(new)] = new
    filled = at + len(new)
    for start in range(at, len(values), pag_trace.SLICE_ROWS):
        stop = start + pag_trace.SLICE_ROWS
        part = values[start:stop][keep[start:stop]]
        out[filled : filled + len(part)] = part
        filled += len(part)
    return out


def _scratch(n: int, dtype: np.typing.DTypeLike = np.int64) -> _Array:
    """An array of ``n`` items of ``dtype`` for a step to write: a long
    run's in a mapped file (:func:`~sparktrail.pag.trace.mapped_array`)."""
    return mapped_array(n, dtype) if maps_in_place(n) else np.empty(n, dtype)


def _int64(values: pl.Series | _Array) -> _Array:
    """A contiguous int64 array (what the compiled scheduler takes)."""
    array = values.to_numpy() if isinstance(values, pl.Series) else values
    return np.ascontiguousarray(array, dtype=np.int64)


def _int32(values: pl.Series | _Array) -> _Array:
    """A contiguous int32 array: the scheduler's stage and segment indices
    (half the bytes of a time)."""
    array = values.to_numpy() if isinstance(values, pl.Series) else values
    return np.ascontiguousarray(array, dtype=np.int32)


def _median(values: pl.Series) -> int | float:
    """``statistics.median(values.to_list())``, without the list when the
    values are integers (a list of 3.3·10^6 ints is ~120 MB): the middle
    value, or the mean of the middle two.

    >>> _median(pl.Series([5, 1, 4])), _median(pl.Series([5, 1, 4, 2]))
    (4, 3.0)
    """
    if not values.dtype.is_integer() or values.null_count():
        median: int | float = statistics.median(values.to_list())
        return median
    return int_median(values.to_numpy())


def int_median(array: _Array, *, in_place: bool = False) -> int | float:
    """The median of the integers of ``array`` (:func:`_median`), which
    ``in_place`` partitions rather than a copy of it.

    >>> a = np.array([5, 1, 4, 2])
    >>> int_median(a, in_place=True), sorted(a.tolist())
    (3.0, [1, 2, 4, 5])
    """
    n = array.size
    if n == 0:
        raise statistics.StatisticsError("no median for empty data")
    half = n // 2
    kth = half if n % 2 else (half - 1, half)
    if in_place:
        array.partition(kth)
    else:
        array = np.partition(array, kth)
    if n % 2:
        return int(array[half])
    return (int(array[half - 1]) + int(array[half])) / 2


def _pieces(total: _Array, k: _Array) -> _Array:
    """``total[i]`` split into ``k[i]`` integer pieces that sum to it.

    >>> _pieces(np.array([10, 7]), np.array([3, 1])).tolist()
    [3, 3, 4, 7]
    """
    owner = np.repeat(np.arange(total.size), k)
    first = np.repeat(np.cumsum(k) - k, k)
    j = np.arange(owner.size) - first
    kk, tt = k[owner], total[owner]
    return np.asarray((tt * (j + 1)) // kk - (tt * j) // kk, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class _Plan:
    """The fixed structure the scheduler walks: segments, stage order."""

    start_ns: int
    #: Per segment: traced length, traced tail after its last task (None:
    #: no task), and the driver gap after it (0 for the last).
    seg_len: _Array
    seg_tail: _Array
    seg_has_tail: _Array
    gap_len: _Array
    #: Stages by traced end, and per stage how many of them ended by its start.
    by_end: _Array
    ended_before: _Array
    stage_ids: frozenset[int]
    job_spans: dict[int, tuple[int, int]]

    @classmethod
    def make(
        cls,
        tasks: pl.DataFrame,
        segment: pl.Series,
        stages: pl.DataFrame,
        gaps: pl.DataFrame,
        start: int,
        end: int,
    ) -> _Plan:
        """The plan of ``tasks`` (in any order: ``end_ns``, ``job_id``,
        ``launch_ns``), ``segment`` the segment of each, ``stages`` as
        :func:`_stages` gives them."""
        g_start = gaps["start_ns"].to_list()
        g_end = gaps["end_ns"].to_list()
        seg_from = [start, *g_end]
        seg_to = [*g_start, end]
        seg_len = [b - a for a, b in zip(seg_from, seg_to, strict=True)]
        last = dict(
            tasks.select("end_ns", segment)
            .group_by("segment")
            .agg(pl.col("end_ns").max())
            .iter_rows()
        )
        has_tail = [k in last for k in range(len(seg_len))]
        seg_tail = [
            seg_to[k] - last[k] if k in last else 0 for k in range(len(seg_len))
        ]
        gap_len = [b - a for a, b in zip(g_start, g_end, strict=True)] + [0]
        ends = stages["end_ns"].to_numpy()
        by_end = np.argsort(ends, kind="stable")
        ended_before = np.searchsorted(
            ends[by_end], stages["start_ns"].to_numpy(), side="right"
        )
        jobs = collect_in_memory(
            tasks.lazy()
            .select("job_id", "launch_ns", "end_ns")
            .drop_nulls("job_id")
            .group_by("job_id")
            .agg(pl.col("launch_ns").min(), pl.col("end_ns").max())
        )
        job_spans = {j: (a, b) for j, a, b in jobs.iter_rows()}
        return cls(
            start,
            _int64(np.array(seg_len)),
            _int64(np.array(seg_tail)),
            np.array(has_tail, dtype=np.bool_),
            _int64(np.array(gap_len)),
            _int64(by_end),
            _int64(ended_before),
            frozenset(stages["stage_id"].to_list()),
            job_spans,
        )

    def simulate(
        self,
        dur: _Array,
        stage: _Array,
        segment: _Array,
        slots: int,
        drop: frozenset[int],
        lags: tuple[_Array, _Array] | None = None,
        fixed: _Array | None = None,
        free_at: _Array | None = None,
    ) -> tuple[int, dict[int, tuple[int, int]], _Array]:
        """Run the list scheduler (:func:`~.scheduler.list_schedule`).

        Returns the run's end, each started stage's (start, end) by dense
        index, and each stage's release. With ``fixed`` the launches are
        those given (the traced ones) and ``free_at`` receives the time
        each task's slot freed (what :func:`~.scheduler.launch_lags` reads).
        """
        n_stages = self.ended_before.size
        empty = np.empty(0, dtype=np.int64)
        lag_release, lag_slot = lags if lags is not None else (empty, empty)
        s_start = np.zeros(n_stages, dtype=np.int64)
        s_end = np.zeros(n_stages, dtype=np.int64)
        started = np.zeros(n_stages, dtype=np.bool_)
        release = np.zeros(n_stages, dtype=np.int64)
        dropped = np.zeros(self.seg_len.size, dtype=np.bool_)
        dropped[sorted(drop)] = True
        end = list_schedule(
            dur,
            lag_release,
            lag_slot,
            stage,
            segment,
            fixed if fixed is not None else empty,
            slots,
            self.start_ns,
            self.seg_len,
            self.seg_tail,
            self.seg_has_tail,
            self.gap_len,
            dropped,
            self.by_end,
            self.ended_before,
            s_start,
            s_end,
            started,
            # Written only with fixed launches: else none (26 MB at 3.3·10^6
            # tasks, which the heap could hand over resident).
            free_at
            if free_at is not None
            else (np.empty(dur.size, dtype=np.int64) if fixed is not None else empty),
            release,
        )
        spans = {
            int(s): (int(s_start[s]), int(s_end[s])) for s in np.flatnonzero(started)
        }
        return int(end), spans, release
