"""The split partition's slowdown (whatif/contention.py): read from Spark's
CPU and run times of the executor's tasks, 1.0 where they cannot tell."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from sparktrail.errors import InputError
from sparktrail.whatif import SplitPartition, predict
from sparktrail.whatif.contention import (
    split_slowdown,
    split_slowdowns,
    time_beside_others,
)

MS = 1_000_000


def _brute_beside(launch: list[int], finish: list[int]) -> list[int]:
    out = []
    for i, (a, b) in enumerate(zip(launch, finish, strict=True)):
        out.append(
            sum(
                1
                for t in range(a, b)
                if any(launch[j] <= t < finish[j] for j in range(len(launch)) if j != i)
            )
        )
    return out


def test_time_beside_others_matches_a_count_at_every_instant() -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(1, 8))
        launch = rng.integers(0, 50, n)
        finish = launch + rng.integers(0, 30, n)
        got = time_beside_others(launch, finish).tolist()
        assert got == _brute_beside(launch.tolist(), finish.tolist())


def _trace(
    tasks: list[tuple[str, int, int, int, int | None]], executor: str = "1"
) -> pl.DataFrame:
    """Tasks ``(slot, id, launch_ms, end_ms, cpu_ms)`` of one executor, each
    with Spark's run time its whole span and stage 0, partition = id."""
    return pl.DataFrame(
        {
            "src_worker": [f"exec-{executor}/{s}" for s, *_ in tasks],
            "dst_worker": [f"exec-{executor}/{s}" for s, *_ in tasks],
            "start_ns": [a * MS for _, _, a, _, _ in tasks],
            "end_ns": [b * MS for _, _, _, b, _ in tasks],
            "activity": ["processing"] * len(tasks),
            "stage_id": [0] * len(tasks),
            "task_id": [t for _, t, *_ in tasks],
            "partition": [t for _, t, *_ in tasks],
            "executor_id": [executor] * len(tasks),
            "executor_run_ns": [(b - a) * MS for _, _, a, b, _ in tasks],
            "executor_cpu_ns": [None if c is None else c * MS for *_, c in tasks],
        },
        schema_overrides={"executor_cpu_ns": pl.Int64},
    )


#: A first wave of two tasks side by side at 60% CPU, then task 2 alone at
#: 90% on a 2-slot executor (a hot partition's task).
SKEWED = [("0", 0, 0, 100, 60), ("1", 1, 0, 100, 60), ("0", 2, 100, 1100, 900)]


def test_a_task_that_ran_alone_is_slowed_by_the_share_of_tasks_beside_others() -> None:
    assert split_slowdown(_trace(SKEWED), 2) == pytest.approx(1.5)


def test_its_time_beside_others_is_not_slowed_again() -> None:
    # Task 3 runs beside task 2 for the first half of task 2's time.
    beside = [*SKEWED, ("1", 3, 100, 600, 300)]
    assert split_slowdown(_trace(beside), 2) == pytest.approx(1.25)


@pytest.mark.parametrize(
    ("tasks", "why"),
    [
        ([(s, t, a, b, None) for s, t, a, b, _ in SKEWED], "no CPU times"),
        ([("0", t, a, b, c) for _, t, a, b, c in SKEWED], "one slot"),
        ([SKEWED[0], SKEWED[2]], "no task beside another"),
        ([*SKEWED[:2], ("0", 2, 100, 1100, 200)], "it waited more than they"),
    ],
)
def test_no_slowdown_where_the_times_cannot_tell(
    tasks: list[tuple[str, int, int, int, int | None]], why: str
) -> None:
    assert split_slowdown(_trace(tasks), 2) == 1.0, why


def test_no_slowdown_when_the_pieces_leave_a_core_to_the_jvm() -> None:
    wide = [*SKEWED, ("2", 3, 0, 100, 60)]
    assert split_slowdown(_trace(wide), 2, k=2) == 1.0
    assert split_slowdown(_trace(wide), 2, k=3) == pytest.approx(1.5)


def test_a_trace_without_the_tracer_columns_has_no_slowdown() -> None:
    assert split_slowdown(_trace(SKEWED).drop("executor_cpu_ns"), 2) == 1.0


def test_an_unknown_task_is_named() -> None:
    with pytest.raises(InputError, match="task 9 is not in the trace"):
        split_slowdown(_trace(SKEWED), 9)


def test_the_replay_runs_the_pieces_slowed() -> None:
    trace = _trace(SKEWED)
    plain = predict(trace, SplitPartition(0, 2, 2))
    slowed = predict(trace, SplitPartition(0, 2, 2, slowdown=1.5))
    # 1000 ms alone -> two pieces of 500 ms, or 750 ms each slowed.
    assert plain.predicted_wall_ns == 600 * MS
    assert slowed.predicted_wall_ns == 850 * MS


@pytest.mark.parametrize("bad", [0.5, -1, float("nan"), "2"])
def test_a_slowdown_below_one_is_refused(bad: object) -> None:
    with pytest.raises(InputError, match="slowdown must be a number of at least 1"):
        SplitPartition(0, 2, 2, slowdown=bad)  # type: ignore[arg-type]


def test_many_tasks_read_at_once_give_each_its_own_slowdown() -> None:
    # GIVEN the skewed executor "1" and, beside it, an executor "2" without
    # CPU times (task ids 10..12)
    other = _trace([(s, t + 10, a, b, None) for s, t, a, b, _ in SKEWED], "2")
    trace = pl.concat([_trace(SKEWED), other])
    # WHEN their slowdowns are read together  THEN each is the one read alone
    together = split_slowdowns(trace, [2, 0, 12])
    assert together == {t: split_slowdown(trace, t) for t in (0, 2, 12)}
    assert together == {0: 1.0, 2: pytest.approx(1.5), 12: 1.0}
    with pytest.raises(InputError, match="task 99 is not in the trace"):
        split_slowdowns(trace, [2, 99])
