"""An executor's slowdown: its median task time over the others', per stage."""

from __future__ import annotations

import statistics

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktrail.summaries.hints.executors import _slowdowns


def reference(tasks: pl.DataFrame, min_tasks: int) -> dict[str, float]:
    """The rule's definition, task by task in Python."""
    # Failed attempts say nothing of speed; of the others, each executor's
    # first wave (launched before its first end) carries its start-up.
    ok = [r for r in tasks.to_dicts() if r["status"] in (None, "success")]
    first_end: dict[str, int] = {}
    for r in ok:
        ex = r["executor"]
        first_end[ex] = min(first_end.get(ex, r["end_ns"]), r["end_ns"])
    done = [r for r in ok if r["launch_ns"] >= first_end[r["executor"]]]
    ratios: dict[str, list[float]] = {}
    for stage in {r["stage_id"] for r in done}:
        in_stage = [r for r in done if r["stage_id"] == stage]
        for ex in {r["executor"] for r in in_stage}:
            own = [r["duration_ns"] for r in in_stage if r["executor"] == ex]
            others = [r["duration_ns"] for r in in_stage if r["executor"] != ex]
            if len(own) < min_tasks or len(others) < min_tasks:
                continue
            median = statistics.median(others)
            if median > 0:
                ratios.setdefault(ex, []).append(statistics.median(own) / median)
    return {ex: sorted(r)[len(r) // 2] for ex, r in ratios.items()}


task = st.tuples(
    st.sampled_from(["1", "2", "3"]),  # executor
    st.integers(0, 2),  # stage
    st.sampled_from([None, "success", "failed"]),
    st.integers(0, 50),  # launch
    st.integers(0, 40),  # duration
)


@given(st.lists(task, min_size=1, max_size=60), st.integers(1, 4))
@settings(max_examples=150, deadline=None)
def test_slowdowns_follow_their_definition(rows, min_tasks):
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
            }
            for ex, stage, status, launch, duration in rows
        ]
    )
    # THEN each executor's slowdown is the median of its per-stage ratios
    got = _slowdowns(tasks, min_tasks)
    want = reference(tasks, min_tasks)
    assert got.keys() == want.keys()
    for ex, value in want.items():
        assert abs(got[ex] - value) <= 1e-12 * max(1.0, abs(value))
