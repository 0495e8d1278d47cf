"""An executor's slowdown: its median task time over the others', per stage,
pooled over the stages where each side ran a task."""

from __future__ import annotations

import statistics

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktrail.pag import trace
from sparktrail.summaries.hints import slowdowns as module
from sparktrail.summaries.hints.slowdowns import slowdowns as _slowdowns


def reference(
    tasks: pl.DataFrame, min_tasks: int, hosts: dict[str, str] | None = None
) -> dict[str, float]:
    """The rule's definition, task by task in Python."""
    # Failed attempts say nothing of speed; of the others, each executor's
    # first wave (launched before its first end) carries its start-up, and
    # so do the tasks of its first stage that mostly ran before running.
    ok = [r for r in tasks.to_dicts() if r["status"] in (None, "success")]
    first_end: dict[str, int] = {}
    first: dict[str, dict] = {}
    for r in ok:
        ex = r["executor"]
        first_end[ex] = min(first_end.get(ex, r["end_ns"]), r["end_ns"])
        key = (r["launch_ns"], r["stage_id"])
        if ex not in first or key < (first[ex]["launch_ns"], first[ex]["stage_id"]):
            first[ex] = r
    done = [
        r
        for r in ok
        if r["launch_ns"] >= first_end[r["executor"]]
        and not (
            r["stage_id"] == first[r["executor"]]["stage_id"]
            and r.get("overhead_ns", 0) >= 0.5 * r["duration_ns"]
        )
    ]

    def host(ex: str) -> str:
        return (hosts or {}).get(ex) or f"?{ex}"

    ratios: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for stage in {r["stage_id"] for r in done}:
        in_stage = [r for r in done if r["stage_id"] == stage]
        for ex in {r["executor"] for r in in_stage}:
            own = [r["duration_ns"] for r in in_stage if r["executor"] == ex]
            others = [
                r["duration_ns"]
                for r in in_stage
                if r["executor"] != ex
                and (hosts is None or host(r["executor"]) == host(ex))
            ]
            if not others:
                continue
            median = statistics.median(others)
            if median > 0:
                ratios.setdefault(ex, []).append(statistics.median(own) / median)
                seen = counts.setdefault(ex, [0, 0])
                seen[0] += len(own)
                seen[1] += len(others)
    return {
        ex: sorted(r)[len(r) // 2]
        for ex, r in ratios.items()
        if min(counts[ex]) >= min_tasks
    }


task = st.tuples(
    st.sampled_from(["1", "2", "3"]),  # executor
    st.integers(0, 2),  # stage
    st.sampled_from([None, "success", "failed"]),
    st.integers(0, 50),  # launch
    st.integers(0, 40),  # duration
    st.integers(0, 40),  # overhead (scheduling, deserialization)
)
#: Hosts of the executors: none known, "1" and "2" sharing one, or each its own.
HOSTS = st.sampled_from([None, {"1": "a", "2": "a", "3": "b"}, {"1": "a", "3": "b"}])


@given(st.lists(task, min_size=1, max_size=60), st.integers(1, 4), HOSTS)
@settings(max_examples=200, deadline=None)
def test_slowdowns_follow_their_definition(rows, min_tasks, hosts):
    # GIVEN task facts of a few executors and stages
    tasks = pl.DataFrame(
        [
            {
                "executor": ex,
                "stage_id": stage,
                "status": status,
                "launch_ns": launch,
                "end_ns": launch + duration,
                "duration_ns": duration,
                "overhead_ns": min(overhead, duration),
            }
            for ex, stage, status, launch, duration, overhead in rows
        ]
    )
    # THEN each executor's slowdown is the median of its per-stage ratios
    # (against its own host's executors when hosts are given)
    want = reference(tasks, min_tasks, hosts)
    # (names as strings, or as the task facts hold them: categorical codes)
    coded = tasks.with_columns(pl.col("executor").cast(pl.Categorical))
    # and so are a long run's, its tasks read 7 at a time and its medians
    # taken from sorted keys in mapped files
    for frame in (tasks, coded):
        for got in (
            _slowdowns(frame, min_tasks, hosts),
            _sliced(frame, min_tasks, hosts),
        ):
            assert got.keys() == want.keys()
            for ex, value in want.items():
                assert abs(got[ex] - value) <= 1e-12 * max(1.0, abs(value))


def _sliced(
    tasks: pl.DataFrame, min_tasks: int, hosts: dict[str, str] | None
) -> dict[str, float]:
    """The long run's slowdowns, slices of 7 tasks."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trace, "SLICE_ROWS", 7)
        got = module._sorted_slowdowns(tasks, min_tasks, hosts)
    assert got is not None  # every task has its times: nothing to fall back on
    return got


@pytest.mark.parametrize("longest", [40, 10**9])
def test_slowdowns_of_many_tasks_follow_their_definition(longest):
    # GIVEN 600 settled, failed or unknown attempts of three executors over
    # three stages, one executor slower (hypothesis's small cases rarely
    # leave a stage with warm tasks on both sides), their times with many
    # ties or hardly any (two middle values of an even count then differ)
    rng = np.random.default_rng(7)
    n = 600
    executor = rng.choice(["1", "2", "3"], n)
    duration = rng.integers(1, longest, n) * np.where(executor == "3", 2, 1)
    launch = rng.integers(0, 500 * (longest // 40), n)
    tasks = pl.DataFrame(
        {
            "executor": executor,
            "stage_id": rng.integers(0, 3, n),
            "status": rng.choice(np.array([None, "success", "failed"]), n),
            "launch_ns": launch,
            "end_ns": launch + duration,
            "duration_ns": duration,
            "overhead_ns": rng.integers(0, longest, n).clip(max=duration),
        }
    )
    for hosts in (None, {"1": "a", "2": "a", "3": "a"}):
        want = reference(tasks, 5, hosts)
        assert want.get("3", 0) > 1.5  # the slow one is found
        # THEN the rule's slowdowns are the definition's, names as strings
        # or as categorical codes
        for frame in (
            tasks,
            tasks.with_columns(pl.col("executor").cast(pl.Categorical)),
        ):
            assert _slowdowns(frame, 5, hosts) == pytest.approx(want, rel=1e-12)
            assert _sliced(frame, 5, hosts) == pytest.approx(want, rel=1e-12)
