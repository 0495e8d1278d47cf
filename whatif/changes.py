"""The one change a what-if replay applies (DESIGN §9).

Each change is a frozen dataclass; its fields are checked when it is made
(a count below 1 is refused with an :class:`~sparktrail.errors.InputError`
naming the value). Whether the stage, partition, task or driver gap it
names exists is checked by :meth:`~sparktrail.whatif.replay.Replay.run`,
against the trace.

Examples
--------
>>> SplitPartition(stage_id=3, partition=7, k=2)
SplitPartition(stage_id=3, partition=7, k=2, slowdown=1.0)
>>> Executors(0)
Traceback (most recent call last):
...
sparktrail.errors.InputError: Executors: count must be at least 1, not 0
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktrail.errors import InputError

__all__ = [
    "Change",
    "DropDriverGap",
    "DropDriverGaps",
    "Executors",
    "SpeculateTask",
    "SplitPartition",
    "StagePartitions",
    "TaskTimes",
    "Together",
]


def _at_least(change: object, name: str, value: int, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        kind = type(change).__name__
        raise InputError(f"{kind}: {name} must be at least {low}, not {value!r}")


@dataclass(frozen=True)
class SplitPartition:
    """Split partition ``partition`` of stage ``stage_id`` into ``k`` tasks.

    Each piece takes ``slowdown / k`` of the task's duration (its records
    would be split the same way; they are not part of the time model) and
    keeps its launch lags; every attempt of the partition is split.
    ``slowdown`` (at least 1) is how much slower the pieces run beside each
    other than the whole ran, alone:
    :func:`~sparktrail.whatif.contention.split_slowdown` measures it on a
    trace.
    """

    stage_id: int
    partition: int
    k: int
    slowdown: float = 1.0

    def __post_init__(self) -> None:
        _at_least(self, "k", self.k, 1)
        if not isinstance(self.slowdown, int | float) or not self.slowdown >= 1:
            raise InputError(
                f"SplitPartition: slowdown must be a number of at least 1, "
                f"not {self.slowdown!r}"
            )


@dataclass(frozen=True)
class SpeculateTask:
    """A speculative copy of task ``task_id`` at its stage's median duration.

    The task then ends at ``min(own end, launch + delay + median)``.
    ``delay_ns`` is when the copy starts after the task's launch; ``None``
    takes Spark's threshold: ``spark.speculation.multiplier`` (default 1.5)
    times the median, at least 100 ms. The copy is assumed to find a free
    slot (its own slot use is not replayed).
    """

    task_id: int
    delay_ns: int | None = None

    def __post_init__(self) -> None:
        if self.delay_ns is not None:
            _at_least(self, "delay_ns", self.delay_ns, 0)


@dataclass(frozen=True)
class Executors:
    """Run with ``count`` executors, each with the traced cores per executor."""

    count: int

    def __post_init__(self) -> None:
        _at_least(self, "count", self.count, 1)


@dataclass(frozen=True)
class StagePartitions:
    """Run stage ``stage_id`` as ``n`` equal tasks.

    The stage's task time, less each task's own fixed overhead (its
    scheduling + deserialization time), is divided into ``n`` equal parts;
    each new task takes one part plus the stage's median overhead. With
    ``overhead_ns``, that is every task's fixed overhead instead: the time
    a task of the stage takes however little it reads (a Python UDF's
    per-task start, measured as the stage's floor), which merged tasks pay
    once each.
    """

    stage_id: int
    n: int
    overhead_ns: int | None = None

    def __post_init__(self) -> None:
        _at_least(self, "n", self.n, 1)
        if self.overhead_ns is not None:
            _at_least(self, "overhead_ns", self.overhead_ns, 0)


@dataclass(frozen=True)
class DropDriverGap:
    """Remove the ``driver`` interval of the driver timeline starting at
    ``start_ns`` (user code between jobs)."""

    start_ns: int


@dataclass(frozen=True)
class DropDriverGaps:
    """Remove every ``driver`` interval between the end of job
    ``after_job`` and the start of job ``before_job``."""

    after_job: int
    before_job: int


@dataclass(frozen=True)
class TaskTimes:
    """Run each of ``task_ids`` in the matching ``durations_ns`` (launch lags
    kept): a fix of those tasks' own work, such as the slow tasks of a
    stage at its median time, or its first tasks without a cold start."""

    task_ids: tuple[int, ...]
    durations_ns: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.task_ids) != len(self.durations_ns):
            raise InputError(
                f"TaskTimes: {len(self.task_ids)} task ids but "
                f"{len(self.durations_ns)} durations"
            )
        bad = [d for d in self.durations_ns if not isinstance(d, int) or d < 0]
        if bad:
            raise InputError(
                f"TaskTimes: a duration must be at least 0, not {bad[0]!r}"
            )


@dataclass(frozen=True)
class Together:
    """Several changes replayed at once (each stage re-divided, a task's
    time set, the executors scaled, ...); at most one
    :class:`SplitPartition` among them."""

    changes: tuple[Change, ...]

    def __post_init__(self) -> None:
        if any(isinstance(c, Together) for c in self.changes):
            raise InputError("Together: changes must not nest")


#: Any one change.
Change = (
    SplitPartition
    | SpeculateTask
    | Executors
    | StagePartitions
    | DropDriverGap
    | DropDriverGaps
    | TaskTimes
    | Together
)
