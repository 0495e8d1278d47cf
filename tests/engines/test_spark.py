"""The Spark engine gives the same summaries as the polars engine (to 1e-9).

Every test runs on the shared local[2] session of ``tests/conftest.py``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from sparktrail.engines import summarize
from sparktrail.engines.spark import cp_spark, summarize_spark
from sparktrail.pag import critical_participation
from sparktrail.pag.snapshot import SnapshotWarning
from sparktrail.summaries import Summaries
from sparktrail.synthetic import profile_trace
from tests.pag.strategies import traces
from tests.paths import SHARED_LOG
from tests.summaries.compare import assert_same_summaries

pytestmark = pytest.mark.integration

EVENTLOG = SHARED_LOG
SECOND = 1_000_000_000
TOL = 1e-9


def both(trace: pl.DataFrame, window_ns: int, spark: Any) -> tuple[Summaries, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        return summarize_spark(trace, window_ns, spark=spark), summarize(
            trace, window_ns
        )


@pytest.mark.skipif(not EVENTLOG.exists(), reason="shared event log not present")
@pytest.mark.parametrize("window_ns", [SECOND, 20 * SECOND])
def test_the_shared_event_log_gives_the_same_summaries(
    spark: Any, window_ns: int
) -> None:
    # GIVEN the imported shared event log (a real Spark application)
    from sparktrail.tracer import import_eventlog

    trace = import_eventlog(EVENTLOG, progress=False)
    # WHEN both engines summarize it
    on_spark, on_polars = both(trace, window_ns, spark)
    # THEN every summary and hint agrees
    assert len(on_polars.windows) > 1
    assert_same_summaries(on_spark, on_polars)


def test_a_synthetic_barrier_trace_gives_the_same_cp_table(spark: Any) -> None:
    # GIVEN a barrier trace (tasks of one stage) whose rows cross windows
    trace = profile_trace(6_000, workers=8)
    window_ns = int(trace["end_ns"].max()) // 13 + 1  # type: ignore[operator]
    # WHEN both engines compute CP and the summaries
    got = cp_spark(trace, window_ns, spark=spark)
    want = critical_participation(trace, window_ns)
    on_spark, on_polars = both(trace, window_ns, spark)
    # THEN the CP tables have the same rows in the same order, CP to 1e-9
    assert_frame_equal(got, want, check_exact=False, rel_tol=TOL, abs_tol=TOL)
    assert got["cp"].sum() > 1
    assert_same_summaries(on_spark, on_polars)


def test_a_live_traced_straggler_gives_the_same_summaries(
    spark: Any, tmp_path: Path
) -> None:
    # GIVEN a live trace of a stage with one sleeping partition
    from sparktrail import read_trace, workloads
    from sparktrail.tracer import attach, detach

    workloads.warm_python_workers(spark)  # as the ground-truth tests do
    attach(spark, tmp_path / "trace")
    try:
        workloads.straggler_partition(spark)
    finally:
        detach(spark)
    trace = read_trace(tmp_path / "trace")
    # WHEN both engines summarize it (windows of 0.5 s)
    on_spark, on_polars = both(trace, SECOND // 2, spark)
    # THEN they agree, straggler hint included
    assert "straggler_task" in on_polars.hints["kind"].to_list()
    assert_same_summaries(on_spark, on_polars)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(trace=traces(), window_ns=st.integers(1, 4), origin=st.integers(-2, 1))
def test_random_traces_give_the_same_cp_and_summaries(
    spark: Any, trace: pl.DataFrame, window_ns: int, origin: int
) -> None:
    # GIVEN a random small trace (instants on window boundaries, clock
    # noise, equal timestamps), any window length and origin
    first = int(trace["start_ns"].min())  # type: ignore[arg-type]
    origin_ns = first + origin
    # WHEN both engines compute CP
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        got = cp_spark(trace, window_ns, origin_ns, spark=spark)
        want = critical_participation(trace, window_ns, origin_ns)
    # THEN the CP tables agree row for row, and so do the summaries
    assert_frame_equal(got, want, check_exact=False, rel_tol=TOL, abs_tol=TOL)
    on_spark, on_polars = both(trace, window_ns, spark)
    assert_same_summaries(on_spark, on_polars)


def test_a_trace_before_its_origin_has_no_windows_on_either_engine(
    spark: Any,
) -> None:
    # GIVEN a trace that ends before the origin asked for
    trace = profile_trace(300, workers=4)
    origin_ns = int(trace["end_ns"].max()) + 10  # type: ignore[arg-type]
    # WHEN both engines compute CP from there
    got = cp_spark(trace, 1_000, origin_ns, spark=spark)
    want = critical_participation(trace, 1_000, origin_ns)
    # THEN both have no rows, with the same schema
    assert got.is_empty()
    assert_frame_equal(got, want)


def test_a_window_must_be_a_positive_integer(spark: Any) -> None:
    trace = pl.DataFrame(
        {
            "src_worker": ["a"],
            "dst_worker": ["a"],
            "start_ns": [0],
            "end_ns": [1],
            "activity": ["processing"],
        }
    )
    with pytest.raises(ValueError, match="positive"):
        summarize_spark(trace, 0, spark=spark)


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(trace=traces(), window_ns=st.integers(1, 4), origin=st.integers(-2, 1))
def test_the_sql_window_range_is_the_pag_rules_coarse_range(
    spark: Any, trace: pl.DataFrame, window_ns: int, origin: int
) -> None:
    # GIVEN a random trace, window and origin
    from sparktrail.engines.spark import _coarse_sql
    from sparktrail.pag.windows import coarse_range

    origin_ns = int(trace["start_ns"].min()) + origin  # type: ignore[arg-type]
    # WHEN Spark SQL and the pag rules give each row its coarse window range
    lo, hi = _coarse_sql(window_ns, origin_ns)
    rows = spark.createDataFrame(
        trace.select("start_ns", "end_ns").rows(), "start_ns long, end_ns long"
    )
    got = rows.selectExpr(f"{lo} AS lo", f"{hi} AS hi").collect()
    want = trace.select(*coarse_range(window_ns, origin_ns)).rows()
    # THEN they agree row for row
    assert [(r["lo"], r["hi"]) for r in got] == want


def test_a_float_window_of_whole_ns_is_accepted(spark: Any) -> None:
    # GIVEN a window length given as an integral float (as summarize takes)
    trace = profile_trace(300, workers=4)
    window_ns = float(int(trace["end_ns"].max()) // 3 + 1)  # type: ignore[operator]
    # WHEN the Spark engine computes CP with it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        got = cp_spark(trace, window_ns, spark=spark)
        want = critical_participation(trace, int(window_ns))
    # THEN it is the CP of the same window as an int
    assert_frame_equal(got, want, check_exact=False, rel_tol=TOL, abs_tol=TOL)
