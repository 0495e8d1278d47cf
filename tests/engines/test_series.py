"""run_series: runs ordered by start time, and the run a regression began in.

Runs are built task by task as in test_comparison.py (a driver gap, then
each stage's tasks on two slots); each run's start is set on its context.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sparktrail.engines.comparison import UNATTRIBUTED
from sparktrail.engines.profiler import Profile
from sparktrail.engines.series import regression_start, run_series
from sparktrail.errors import InputError
from tests.engines.test_comparison import AGG, SCAN, run

DAY_NS = 86_400 * 10**9
T0 = 1_700_000_000 * 10**9


def at(p: Profile, day: int) -> Profile:
    """``p`` started ``day`` days after T0."""
    context = replace(p.summaries.context, start_ns=T0 + day * DAY_NS)
    return replace(p, summaries=replace(p.summaries, context=context))


def nightly(
    name: str, day: int, agg_ms: int, agg_records: int = 10, app: str = "etl"
) -> Profile:
    """A run: a steady 1 s scan, then an aggregation of 4 tasks of ``agg_ms``."""
    stages = [(SCAN, [(500, 100)] * 4), (AGG, [(agg_ms, agg_records)] * 4)]
    return at(run(stages, name=name, app=app), day)


def test_runs_are_ordered_by_start_and_the_regression_found():
    # GIVEN three runs handed over out of order; the aggregation takes 2 s,
    # then 4 s at the same input from the second run on
    runs = [
        nightly("c", 2, 2000),
        nightly("a", 0, 1000),
        nightly("b", 1, 2000),
    ]
    s = run_series(runs)
    # THEN they are in start order
    assert s.names == ["a", "b", "c"]
    rows = {r["operator"]: r for r in s.operators.iter_rows(named=True)}
    # AND the aggregation's critical seconds per run, regression from "b"
    assert rows[AGG]["critical_s"] == pytest.approx([2.0, 4.0, 4.0])
    assert rows[AGG]["records"] == [40, 40, 40]
    assert rows[AGG]["regression_from"] == "b"
    # AND the steady scan is not flagged; the unattributed row comes last
    assert rows[SCAN]["regression_from"] is None
    assert s.operators["operator"][0] == AGG
    assert s.operators["operator"][-1] == UNATTRIBUTED
    # AND each run's operators and rest add up to its wall time
    for i, wall in enumerate(s.runs["wall_s"]):
        assert sum(r["critical_s"][i] for r in rows.values()) == pytest.approx(wall)


def test_a_slow_run_that_does_not_stay_slow_is_not_a_regression():
    s = run_series(
        [nightly("a", 0, 1000), nightly("b", 1, 2000), nightly("c", 2, 1000)]
    )
    assert s.regressions().is_empty()


def test_the_rule_on_numbers():
    # median of the runs before, max(10%, 1 s), input under 10% growth
    assert regression_start([20, 20, 23, 23], [5, 5, 5, 5]) == 2  # +3 s > 2 s
    assert regression_start([20, 20, 21.5, 21.5], [5, 5, 5, 5]) is None  # < 10%
    assert regression_start([2, 2, 2.9, 2.9], [5, 5, 5, 5]) is None  # < 1 s
    assert regression_start([2, 2, 4, 4], [5, 5, 5.4, 5.4]) == 2  # +8% input
    assert regression_start([2, 2, 4, 4], [5, 5, 6, 6]) is None  # +20% input
    assert regression_start([2, 2, 4, 4], [None] * 4) == 2  # input unknown
    assert regression_start([2, 9, 2, 2, 2], [5] * 5) is None  # median, not mean


def test_several_applications_warn_and_one_run_is_refused():
    s = run_series([nightly("a", 0, 1000), nightly("b", 1, 1000, app="other")])
    assert any("several applications" in w for w in s.warnings)
    with pytest.raises(InputError, match="at least two runs"):
        run_series([nightly("a", 0, 1000)])
