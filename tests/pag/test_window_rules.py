"""The windowing rules have one owner (``pag.windows``) that every path agrees with.

On random traces and windows (integer and integral-float lengths), the
numba snapshot builder, the polars owner, each window computed from its
own rows (as the online, report and Spark paths do) and the Spark engine
list the same windows, put the same trace rows in them, clip them alike
and give the same CP.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from sparktrail.pag import critical_participation
from sparktrail.pag.chunk_cp import chunk_cp, trace_extent
from sparktrail.pag.participation import check_window
from sparktrail.pag.snapshot import SnapshotWarning, build_snapshots
from sparktrail.pag.trace import validate_trace
from sparktrail.pag.windows import (
    clip,
    coarse_range,
    listed_windows,
    pieces,
    to_trace_rows,
    touching,
)
from tests.pag.strategies import traces

TOL = 1e-9

#: Window lengths as ints or as integral floats (``4.0``), which every
#: engine accepts as ``check_window`` does.
windows = st.integers(1, 5).flatmap(lambda w: st.sampled_from((w, float(w))))


def origin_of(trace: pl.DataFrame, offset: int) -> int:
    return int(trace["start_ns"].min()) + offset  # type: ignore[arg-type]


def snapshot_pairs(trace: pl.DataFrame, window: int, origin: int) -> pl.DataFrame:
    """(window, trace_row, start_ns, end_ns) of every piece of the numba path."""
    snaps = build_snapshots(trace, window, origin)
    per_window = np.diff(snaps.piece_offsets)
    return pl.DataFrame(
        {
            "window": np.repeat(snaps.windows, per_window),
            "trace_row": snaps.row,
            "start_ns": snaps.start_ns,
            "end_ns": snaps.end_ns,
        }
    )


def owner_pairs(trace: pl.DataFrame, window: int, origin: int) -> pl.DataFrame:
    """The same from the polars owner: its pieces, each clipped to its window."""
    cut = pieces(trace, window, origin)
    clipped = [
        clip(group.drop("window"), origin + k * window, origin + (k + 1) * window)
        .select("trace_row", "start_ns", "end_ns")
        .with_columns(pl.lit(k, pl.Int64).alias("window"))
        for (k,), group in cut.group_by("window", maintain_order=True)
    ]
    schema = {"window": pl.Int64, "trace_row": pl.Int64}
    if not clipped:
        return pl.DataFrame(schema={**schema, "start_ns": pl.Int64, "end_ns": pl.Int64})
    return pl.concat(clipped).select("window", "trace_row", "start_ns", "end_ns")


def per_window_cp(trace: pl.DataFrame, window: int, origin: int) -> pl.DataFrame:
    """CP window by window from each one's own rows (the online/report path)."""
    extent = trace_extent(trace)
    parts = []
    for ts in listed_windows(trace, window, origin_ns=origin):
        cp, rows = chunk_cp(trace, window, origin, ts, ts + window, extent)
        parts.append(to_trace_rows(cp, rows))
    return pl.concat(parts) if parts else critical_participation(trace.clear(), window)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), window_ns=windows, offset=st.integers(-2, 1))
def test_the_snapshot_builder_follows_the_window_rules(
    trace: pl.DataFrame, window_ns: int | float, offset: int
) -> None:
    # GIVEN a random trace, a window length (int or integral float), an origin
    trace = validate_trace(trace)
    window, _ = check_window(window_ns, None)
    origin = origin_of(trace, offset)
    # WHEN the numba snapshot path and the polars owner cut it into windows
    snapshot = snapshot_pairs(trace, window, origin)
    owner = owner_pairs(trace, window, origin)
    # THEN they list the same windows
    listed = listed_windows(trace, window, origin_ns=origin)
    starts = sorted({origin + int(k) * window for k in snapshot["window"]})
    assert listed == starts
    # AND put the same trace rows in them, in the same order, clipped alike
    assert_frame_equal(snapshot, owner, check_dtypes=False)
    # AND touches() picks exactly a window's rows
    for ts in listed:
        k = (ts - origin) // window
        rows = touching(trace.with_row_index("trace_row"), ts, ts + window)
        want = owner.filter(pl.col("window") == k)["trace_row"]
        assert rows["trace_row"].cast(pl.Int64).to_list() == want.to_list()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace=traces(),
    window_ns=st.integers(1, 5),
    offset=st.integers(-2, 1),
    k=st.integers(-1, 12),
    before=st.integers(0, 6),
    after=st.integers(0, 6),
    more=st.integers(0, 2),
)
def test_listed_windows_between_bounds_are_those_of_the_whole_listing(
    trace: pl.DataFrame,
    window_ns: int,
    offset: int,
    k: int,
    before: int,
    after: int,
    more: int,
) -> None:
    # GIVEN a random trace, and bounds around window k (often exactly one
    # window: the online pipeline's case, which has a shortcut)
    trace = validate_trace(trace)
    origin = origin_of(trace, offset)
    lo = origin + k * window_ns - before
    hi = origin + (k + 1 + more) * window_ns + after
    # WHEN the windows between them are listed
    listed = listed_windows(trace, window_ns, lo, hi, origin_ns=origin)
    # THEN they are the whole trace's listed windows that lie between them
    whole = listed_windows(trace, window_ns, origin_ns=origin)
    assert listed == [t for t in whole if lo <= t and t + window_ns <= hi]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), window_ns=windows, offset=st.integers(-2, 1))
def test_the_coarse_range_holds_the_exact_one(
    trace: pl.DataFrame, window_ns: int | float, offset: int
) -> None:
    # GIVEN a random trace, window and origin
    trace = validate_trace(trace)
    window, _ = check_window(window_ns, None)
    origin = origin_of(trace, offset)
    # WHEN its pieces are taken
    cut = pieces(trace, window, origin).with_columns(*coarse_range(window, origin))
    # THEN each lies within the row's coarse range (what Spark explodes)
    assert cut.filter(
        (pl.col("window") < pl.col("lo")) | (pl.col("window") > pl.col("hi"))
    ).is_empty()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), window_ns=windows, offset=st.integers(-2, 1))
def test_windows_computed_from_their_own_rows_get_the_whole_trace_cp(
    trace: pl.DataFrame, window_ns: int | float, offset: int
) -> None:
    # GIVEN a random trace, window and origin
    trace = validate_trace(trace)
    origin = origin_of(trace, offset)
    # WHEN CP is computed over the whole trace, and window by window
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        whole = critical_participation(trace, window_ns, origin)
    window, _ = check_window(window_ns, None)
    each = per_window_cp(trace, window, origin)
    # THEN the tables agree row for row
    assert_frame_equal(each, whole, check_exact=False, rel_tol=TOL, abs_tol=TOL)


@pytest.mark.integration
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(trace=traces(), window_ns=windows, offset=st.integers(-2, 1))
def test_the_spark_engine_follows_the_window_rules(
    spark: Any, trace: pl.DataFrame, window_ns: int | float, offset: int
) -> None:
    # GIVEN a random trace, a window length (int or integral float), an origin
    from sparktrail.engines.spark import cp_spark

    trace = validate_trace(trace)
    origin = origin_of(trace, offset)
    # WHEN the Spark engine and the polars path compute its CP
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        got = cp_spark(trace, window_ns, origin, spark=spark)
    window, _ = check_window(window_ns, None)
    want = per_window_cp(trace, window, origin)
    # THEN they have the same windows, rows, clipped times and CP
    assert_frame_equal(got, want, check_exact=False, rel_tol=TOL, abs_tol=TOL)
    listed = listed_windows(trace, window, origin_ns=origin)
    assert got["window_start_ns"].unique().sort().to_list() == listed


@given(
    ranges=st.lists(
        st.tuples(
            # near each other (counted over the span) or far apart (listed)
            st.one_of(st.integers(-50, 200), st.integers(-50, 10**6)),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_covered_is_the_union_of_the_ranges(ranges: list[tuple[int, int]]) -> None:
    """GIVEN ranges [a, a + d], dense or far apart WHEN covered THEN the
    integers of their union, sorted (listed_windows' count over the span
    against a set of every range's members)."""
    from sparktrail.pag.windows import _covered

    a = pl.Series([lo for lo, _ in ranges])
    b = pl.Series([lo + d for lo, d in ranges])
    union = sorted({k for lo, d in ranges for k in range(lo, lo + d + 1)})
    assert _covered(a, b).tolist() == union
