"""What-if replay: the predicted wall time after one change (DESIGN §9).

:class:`~sparktrail.whatif.replay.Replay` replays a trace's tasks on its
slots and driver gaps; :func:`predict` compares the run after one change
(:mod:`~sparktrail.whatif.changes`) with the unchanged replay, and
:func:`executor_table` tabulates the run over executor counts, like
sparklens' estimator. The hint rules call :func:`predict` to put a
predicted saving on each hint.

Examples
--------
>>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-1/1"],
...     "dst_worker": ["exec-1/0", "exec-1/1"], "start_ns": [0, 0],
...     "end_ns": [10, 40], "activity": ["processing"] * 2,
...     "stage_id": [0, 0], "task_id": [0, 1], "partition": [0, 1]})
>>> p = predict(t, SplitPartition(stage_id=0, partition=1, k=2))
>>> p.replayed_wall_ns, p.predicted_wall_ns, p.saving_ns, p.replay_error
(40, 30, 10, 0.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag.trace import TraceLike

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
from .replay import Outcome, Replay

__all__ = [
    "FACTORS",
    "Change",
    "DropDriverGap",
    "DropDriverGaps",
    "Executors",
    "Outcome",
    "Prediction",
    "Replay",
    "SpeculateTask",
    "SplitPartition",
    "StagePartitions",
    "TaskTimes",
    "Together",
    "executor_table",
    "predict",
]

#: Executor counts of :func:`executor_table`, as fractions of today's.
FACTORS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0)


@dataclass(frozen=True)
class Prediction:
    """The run (and the changed stage, if any) before and after a change, ns.

    ``saving_ns`` is replayed minus predicted wall time; ``replay_error``
    is the unchanged replay's wall over the traced wall, minus 1.
    """

    traced_wall_ns: int
    replayed_wall_ns: int
    predicted_wall_ns: int
    saving_ns: int
    stage_id: int | None
    stage_before_ns: int | None
    stage_after_ns: int | None
    replay_error: float


def _replay(trace: TraceLike | Replay) -> Replay:
    return trace if isinstance(trace, Replay) else Replay.of(trace)


def _error(replay: Replay, wall_ns: int) -> float:
    traced = replay.traced_wall_ns
    return wall_ns / traced - 1.0 if traced > 0 else 0.0


def predict(
    trace: TraceLike | Replay, change: Change, *, lags: bool = True
) -> Prediction:
    """Predict the run's wall time (and its stage's) after ``change``.

    Parameters
    ----------
    trace
        A trace (or a :class:`Replay` already built, to ask many changes).
    change
        One of :mod:`~sparktrail.whatif.changes`.
    lags
        ``False``: the same replay with every launch lag zeroed, before and
        after the change (sparklens' model: a task launches as soon as a
        slot frees); its ``replay_error`` is then the no-lag replay's.

    Raises
    ------
    InputError
        If the change names a stage, partition, task, job or driver gap the
        trace does not hold.
    """
    replay = _replay(trace)
    before = replay.run(lags=lags)
    after = replay.run(change, lags=lags)
    stage = _stage_of(replay, change)
    return Prediction(
        traced_wall_ns=replay.traced_wall_ns,
        replayed_wall_ns=before.wall_ns,
        predicted_wall_ns=after.wall_ns,
        saving_ns=before.wall_ns - after.wall_ns,
        stage_id=stage,
        stage_before_ns=None if stage is None else before.stage_ns.get(stage),
        stage_after_ns=None if stage is None else after.stage_ns.get(stage),
        replay_error=_error(replay, before.wall_ns),
    )


def _stage_of(replay: Replay, change: Change) -> int | None:
    if isinstance(change, SplitPartition | StagePartitions):
        return change.stage_id
    if isinstance(change, SpeculateTask):
        return replay.stage_of_task(change.task_id)
    return None


def executor_table(
    trace: TraceLike | Replay, factors: Sequence[float] = FACTORS
) -> pl.DataFrame:
    """The predicted wall time at each executor count ``factor`` x today's.

    Returns
    -------
    polars.DataFrame
        ``factor, executors, slots, wall_ns, saving_ns`` (saving against the
        unchanged replay; negative: slower), one row per factor.

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-2/0"],
    ...     "dst_worker": ["exec-1/0", "exec-2/0"], "start_ns": [0, 0],
    ...     "end_ns": [10, 10], "activity": ["processing"] * 2,
    ...     "stage_id": [0, 0], "task_id": [0, 1], "partition": [0, 1]})
    >>> executor_table(t, (0.5, 1))["wall_ns"].to_list()
    [20, 10]
    """
    replay = _replay(trace)
    base = replay.run().wall_ns
    rows = []
    for factor in factors:
        if not factor > 0:
            raise InputError(f"an executor factor must be positive, not {factor!r}")
        count = max(1, round(factor * replay.executors))
        outcome = replay.run(Executors(count))
        rows.append((float(factor), count, outcome.slots, outcome.wall_ns))
    table = pl.DataFrame(
        rows,
        schema={
            "factor": pl.Float64,
            "executors": pl.Int64,
            "slots": pl.Int64,
            "wall_ns": pl.Int64,
        },
        orient="row",
    )
    return table.with_columns((base - pl.col("wall_ns")).alias("saving_ns"))
