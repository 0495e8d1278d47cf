"""How much slower a split partition's pieces run than the whole did.

A skewed partition's task often runs alone at the end of its stage: the
other cores of its executor sit idle, and the JVM's own threads (GC, JIT,
a local driver's scheduler) and the processes beside it run there. Split,
its pieces run beside each other and beside the stage's other tasks, and
share those cores: on a 2-core local master the halves of a split hot
partition ran 20-27% off the CPU where the whole had run 10%
(BENCHMARKS.md, "What-if accuracy with a skewed join"). Spark states each
attempt's ``Executor CPU Time`` and ``Executor Run Time``; their ratio,
the task's *CPU share*, tells how much of a core a task got, alone and
beside others.

Model
-----
For task ``T`` on executor ``E``:

* ``r_T``, T's CPU share, and ``alone``, the fraction of T's time (launch
  to Spark's finish) in which no other task ran on ``E``;
* ``r_busy``: the CPU share of E's other tasks that ran beside another
  task on ``E`` for at least :data:`BESIDE_SHARE` of their time (their
  CPU time over their run time, summed);
* the slowdown of T's ``k`` pieces is ``1 + alone * (r_T / r_busy - 1)``,
  at least 1 and at most E's slots (a task alone had at most its
  executor's cores);
* but 1 when the pieces, at T's CPU share, leave one of E's cores to the
  JVM's threads (``k * r_T <= slots - 1``): they then run as the whole
  did. Only where they take the cores those threads had does the share
  of tasks that ran beside others tell their pace; elsewhere a low share
  beside others is time waiting on I/O or a device, which a split does
  not contend for.

Assumptions
-----------
* The pieces run on ``E``, beside its other tasks, for the time the whole
  ran alone; its time beside others already ran at ``r_busy``. (On a
  cluster a piece may land on another executor, whose shares are not
  read.)
* ``E``'s tasks beside others are a fair sample of how the pieces will
  run: their work may differ from T's (a first wave's tasks pay the JIT's
  warm-up), which this does not correct for.
* No slowdown (1.0, a core idle in the trace counts as wholly free) when
  the trace lacks Spark's CPU or run time (Spark before 2.1 stated no CPU
  time; a trace from another producer), when ``E`` has one slot, or when
  fewer than :data:`MIN_BUSY_TASKS` of its tasks ran beside another.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag.trace import TraceLike, collect_slices, load_trace
from sparktrail.pag.workers import SLOT_PREFIX

from .changes import SplitPartition

__all__ = [
    "BESIDE_SHARE",
    "MIN_BUSY_TASKS",
    "measured_split",
    "split_slowdown",
    "split_slowdowns",
    "time_beside_others",
]

#: Tasks of the executor that must have run beside another for their CPU
#: share to stand for the pieces'.
MIN_BUSY_TASKS = 2

#: The part of its time a task must have run beside another to count as
#: having shared the cores.
BESIDE_SHARE = 0.5

#: The trace columns the model reads (the tracer's extra columns).
_COLUMNS = ("executor_id", "executor_cpu_ns", "executor_run_ns")

_Array = np.ndarray[Any, Any]


def time_beside_others(launch: _Array, finish: _Array) -> _Array:
    """For each interval ``[launch[i], finish[i])``, the time in it during
    which at least one other interval is open.

    >>> time_beside_others(np.array([0, 5, 20]), np.array([10, 8, 30])).tolist()
    [3, 3, 0]
    """
    times = np.concatenate([launch, finish])
    delta = np.concatenate([np.ones(launch.size), -np.ones(finish.size)])
    order = np.argsort(times, kind="stable")
    times, delta = times[order], delta[order]
    open_after = np.cumsum(delta)
    # Between event j and j+1, open_after[j] intervals are open: the time
    # with two or more open, accumulated up to each event.
    crowded = (open_after[:-1] >= 2) * np.diff(times)
    upto = np.concatenate([[0], np.cumsum(crowded)])
    # ``upto`` is linear between events: interpolation reads it anywhere.
    within = np.interp(finish, times, upto) - np.interp(launch, times, upto)
    return np.asarray(np.rint(within), dtype=np.int64)


def split_slowdown(trace: TraceLike, task_id: int, k: int = 2) -> float:
    """How many times longer than ``1/k`` of task ``task_id`` each of its
    ``k`` pieces runs, split (the module's model).

    Parameters
    ----------
    trace
        The trace (validated unless it is a
        :class:`~sparktrail.pag.trace.Trace`).
    task_id
        The task whose partition is split.
    k
        Into how many pieces.

    Returns
    -------
    float
        At least 1.0; 1.0 where the model does not apply (see Assumptions).

    Raises
    ------
    InputError
        If the trace holds no task ``task_id``.

    Examples
    --------
    Task 0 ran alone at 90% CPU; tasks 1 and 2 ran side by side at 60%:

    >>> ms = 1_000_000
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-1/0", "exec-1/1"],
    ...     "dst_worker": ["exec-1/0", "exec-1/0", "exec-1/1"],
    ...     "start_ns": [0, 100 * ms, 100 * ms], "end_ns": [100 * ms, 200 * ms,
    ...     200 * ms], "activity": ["processing"] * 3, "task_id": [0, 1, 2],
    ...     "executor_id": ["1"] * 3, "executor_run_ns": [100 * ms] * 3,
    ...     "executor_cpu_ns": [90 * ms, 60 * ms, 60 * ms]})
    >>> split_slowdown(t, 0)
    1.5

    Its halves would leave a third core free:

    >>> t = t.with_columns(src_worker=pl.Series(["exec-1/0", "exec-1/1", "exec-1/2"]))
    >>> split_slowdown(t.with_columns(dst_worker="src_worker"), 0)
    1.0
    """
    return split_slowdowns(trace, [task_id], k)[task_id]


def split_slowdowns(
    trace: TraceLike, task_ids: Iterable[int], k: int = 2
) -> dict[int, float]:
    """:func:`split_slowdown` of each of ``task_ids``, reading each of their
    executors' tasks once (two passes over the trace per executor, one to
    find them).

    A trace without Spark's CPU times (from another producer) tells none:

    >>> t = pl.DataFrame({"src_worker": ["exec-1/0"] * 2,
    ...     "dst_worker": ["exec-1/0"] * 2, "start_ns": [0, 5], "end_ns": [5, 9],
    ...     "activity": ["processing"] * 2, "task_id": [3, 4]})
    >>> split_slowdowns(t, [4, 3, 4])
    {3: 1.0, 4: 1.0}
    """
    frame = load_trace(trace).frame
    wanted = sorted(set(task_ids))
    if any(c not in frame.columns for c in _COLUMNS):
        return dict.fromkeys(wanted, 1.0)
    executors = _executors_of(frame, wanted)
    out: dict[int, float] = {}
    for executor in dict.fromkeys(executors.values()):
        shares = _Shares.of(_tasks_of_executor(frame, executor))
        for task_id in wanted:
            if executors[task_id] == executor:
                out[task_id] = shares.slowdown(task_id, k)
    return out


@dataclass(frozen=True)
class _Shares:
    """One executor's tasks as the model reads them."""

    task_ids: _Array
    beside: _Array  # the part of each task's time beside another
    cpu: _Array  # Spark's CPU and run time (NaN: not stated)
    run: _Array
    measured: _Array
    slots: int

    @classmethod
    def of(cls, tasks: pl.DataFrame) -> _Shares:
        launch = tasks["launch_ns"].to_numpy()
        finish = tasks["finish_ns"].to_numpy()
        span = np.maximum(finish - launch, 1)
        cpu = tasks["cpu"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        run = tasks["run"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        return cls(
            tasks["task_id"].to_numpy(),
            time_beside_others(launch, finish) / span,
            cpu,
            run,
            np.isfinite(cpu) & np.isfinite(run) & (run > 0) & (cpu >= 0),
            int(tasks["slots"][0]) if tasks.height else 0,
        )

    def slowdown(self, task_id: int, k: int) -> float:
        me = self.task_ids == task_id
        busy = self.measured & ~me & (self.beside >= BESIDE_SHARE)
        if self.slots < 2 or not self.measured[me].any():
            return 1.0
        if busy.sum() < MIN_BUSY_TASKS:
            return 1.0
        r_busy = self.cpu[busy].sum() / self.run[busy].sum()
        if r_busy <= 0:
            return 1.0
        r_task = self.cpu[me][0] / self.run[me][0]
        if k * r_task <= self.slots - 1:
            return 1.0
        alone = 1.0 - float(self.beside[me][0])
        slowdown = np.clip(1.0 + alone * (r_task / r_busy - 1.0), 1.0, self.slots)
        # Three decimals: the CPU times are a noisy measure (BENCHMARKS.md).
        return round(float(slowdown), 3)


def measured_split(trace: TraceLike, change: SplitPartition) -> SplitPartition:
    """``change`` with the slowdown of its partition's longest attempt
    (:func:`split_slowdown`), what a hint's split predicts with;
    ``change`` itself when the trace has no such partition.

    >>> ms = 1_000_000
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0"], "dst_worker": ["exec-1/0"],
    ...     "start_ns": [0], "end_ns": [ms], "activity": ["processing"],
    ...     "stage_id": [0], "task_id": [4], "partition": [7]})
    >>> measured_split(t, SplitPartition(0, 7, 2))
    SplitPartition(stage_id=0, partition=7, k=2, slowdown=1.0)
    """
    frame = load_trace(trace).frame
    of_partition = (pl.col("stage_id") == change.stage_id) & (
        pl.col("partition") == change.partition
    )
    spans = _per_task(
        frame,
        part_of=of_partition & pl.col("task_id").is_not_null(),
        named=(pl.col("start_ns"), pl.col("end_ns")),
        aggs=(pl.col("start_ns").min(), pl.col("end_ns").max()),
    )
    if spans.is_empty():
        return change  # the replay names what the trace holds instead
    longest = spans.sort(pl.col("end_ns") - pl.col("start_ns"), "task_id").row(-1)[0]
    return replace(change, slowdown=split_slowdown(trace, int(longest), change.k))


def _executors_of(frame: pl.DataFrame, task_ids: list[int]) -> dict[int, str | None]:
    """The executor of each of ``task_ids`` (None: the trace names none)."""
    executor = pl.col("executor_id")
    found = _per_task(
        frame,
        part_of=pl.col("task_id").is_in(task_ids),
        named=(executor,),
        aggs=(executor.drop_nulls().first(),),
    )
    executors = dict(found.iter_rows())
    for task_id in task_ids:
        if task_id not in executors:
            raise InputError(f"task {task_id} is not in the trace")
    return executors


def _tasks_of_executor(frame: pl.DataFrame, executor: str | None) -> pl.DataFrame:
    """One row per task attempt of ``executor``: its launch and Spark's
    finish (its rows' extent, control edges included), CPU and run time,
    and the executor's slot count (every row)."""
    of_executor = pl.col("task_id").is_not_null() & (
        pl.col("executor_id").is_null()
        if executor is None
        else pl.col("executor_id") == executor
    )
    local = (pl.col("src_worker") == pl.col("dst_worker")) & pl.col(
        "src_worker"
    ).str.starts_with(SLOT_PREFIX)
    tasks = _per_task(
        frame,
        part_of=of_executor,
        named=(
            pl.col("start_ns").alias("launch_ns"),
            pl.col("end_ns").alias("finish_ns"),
            pl.col("executor_cpu_ns").alias("cpu"),
            pl.col("executor_run_ns").alias("run"),
        ),
        aggs=(
            pl.col("launch_ns").min(),
            pl.col("finish_ns").max(),
            pl.col("cpu").drop_nulls().first(),
            pl.col("run").drop_nulls().first(),
        ),
    )
    # Its slots apart: a list of slot names per task would cost millions of
    # lists on a long trace.
    names = collect_slices(
        frame,
        lambda _, part: (
            part.lazy().filter(of_executor & local).select("src_worker").unique()
        ),
    )
    slots = names["src_worker"].n_unique()
    return tasks.with_columns(pl.lit(slots).alias("slots"))


def _per_task(
    frame: pl.DataFrame,
    *,
    part_of: pl.Expr,
    named: tuple[pl.Expr, ...],
    aggs: tuple[pl.Expr, ...],
) -> pl.DataFrame:
    """``aggs`` of the ``named`` columns of each task's rows where
    ``part_of`` holds, a slice of the trace at a time: each slice's
    groups, then those of the slices' results, so ``aggs`` must give the
    same over partial results (a minimum, a maximum, a first value)."""
    found = collect_slices(
        frame,
        lambda _, part: (
            part.lazy()
            .filter(part_of)
            .select("task_id", *named)
            .group_by("task_id")
            .agg(*aggs)
        ),
    )
    return found.group_by("task_id").agg(*aggs)
