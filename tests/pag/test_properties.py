"""Property tests: the pag stage against the exact reference of DESIGN §4."""

from __future__ import annotations

import math
import warnings

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktrail.pag import SnapshotWarning, critical_participation, snapshot_stats
from tests.pag.reference import brute_force_counts, cp_table, snapshots
from tests.pag.strategies import traces

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
windows = st.integers(1, 20)
origins = st.one_of(st.none(), st.integers(-3, 6))


def run(trace, window_ns, origin_ns):
    """CP and stats of the code under test, with the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = critical_participation(trace, window_ns, origin_ns)
        stats = snapshot_stats(trace, window_ns, origin_ns)
    raised = [w for w in caught if issubclass(w.category, SnapshotWarning)]
    return table, stats, raised


def scaled(origin_ns, factor):
    return None if origin_ns is None else origin_ns * factor


@SETTINGS
@given(trace=traces(), window_ns=windows, origin_ns=origins)
def test_cp_equals_exact_reference(trace, window_ns, origin_ns):
    # GIVEN a random small acyclic trace and a window
    ref = snapshots(trace, window_ns, origin_ns)
    expected = cp_table(ref)
    # WHEN the code computes CP
    table, _, _ = run(trace, window_ns, origin_ns)
    # THEN it lists exactly the reference's pieces, with the same CP
    got = {
        (r["window_start_ns"], r["edge_index"]): r["cp"]
        for r in table.iter_rows(named=True)
    }
    assert got.keys() == expected.keys()
    for key, cp in expected.items():
        assert abs(got[key] - float(cp)) <= 1e-12, key


@SETTINGS
@given(trace=traces(big=True), window_ns=windows, origin_ns=origins)
def test_cp_equals_reference_at_nanosecond_scale(trace, window_ns, origin_ns):
    # GIVEN the same kind of trace with times in seconds and huge seq values
    # (their key tuples no longer pack into one int64)
    window_ns *= 10**9
    origin_ns = scaled(origin_ns, 10**9)
    ref = snapshots(trace, window_ns, origin_ns)
    # WHEN the code computes CP
    table, _, _ = run(trace, window_ns, origin_ns)
    # THEN it matches the reference
    got = {
        (r["window_start_ns"], r["edge_index"]): r["cp"]
        for r in table.iter_rows(named=True)
    }
    expected = cp_table(ref)
    assert got.keys() == expected.keys()
    for key, cp in expected.items():
        assert abs(got[key] - float(cp)) <= 1e-12, key


@SETTINGS
@given(
    trace=traces(max_workers=4, max_segments=4), window_ns=windows, origin_ns=origins
)
def test_path_counts_equal_brute_force(trace, window_ns, origin_ns):
    # GIVEN the reference snapshots of a tiny trace
    ref = snapshots(trace, window_ns, origin_ns)
    table, stats, _ = run(trace, window_ns, origin_ns)
    log10 = dict(zip(stats["window_start_ns"], stats["log10_paths"], strict=True))
    for window in ref:
        if len(window.pieces) > 25:
            continue
        # WHEN every start-to-end path is enumerated
        brute = brute_force_counts(window)
        if brute is None:
            continue
        n, counts = brute
        # THEN the DP counts (f * g) equal the enumeration
        assert n == window.n_paths
        assert counts == window.counts
        # AND the code's N and (derived) C agree with them
        if n == 0:
            assert log10[window.ts] is None
            continue
        assert 10 ** log10[window.ts] == pytest.approx(n, rel=1e-9)
        if window.total_cw != n * window_ns:
            continue  # clock noise: CP is normalised by sum C*w, not N*W
        rows = table.filter(pl.col("window_start_ns") == window.ts)
        cp = dict(zip(rows["edge_index"], rows["cp"], strict=True))
        for piece, c in zip(window.pieces, counts, strict=True):
            if piece.weight > 0 and piece.counted:
                derived = cp[piece.row] * n * window_ns / piece.weight
                assert derived == pytest.approx(c, rel=1e-9, abs=1e-9)


@SETTINGS
@given(trace=traces(), window_ns=windows, origin_ns=origins)
def test_cp_sums_to_one_or_is_zero_with_a_warning(trace, window_ns, origin_ns):
    # GIVEN a random trace and its reference path counts
    ref = {w.ts: w for w in snapshots(trace, window_ns, origin_ns)}
    # WHEN the code computes CP and stats
    table, stats, raised = run(trace, window_ns, origin_ns)
    sums = table.group_by("window_start_ns").agg(pl.col("cp").sum())
    sums = dict(zip(sums["window_start_ns"], sums["cp"], strict=True))
    assert sorted(sums) == sorted(ref)
    for window in ref.values():
        # THEN a window with paths has sum CP = 1, one without (or whose
        # paths carry no time) CP 0 everywhere
        expected = 1.0 if window.n_paths > 0 and window.total_cw > 0 else 0.0
        assert sums[window.ts] == pytest.approx(expected, abs=1e-12)
    # AND a SnapshotWarning exactly when some window is pathless
    pathless = sum(w.n_paths == 0 for w in ref.values())
    assert bool(raised) == (pathless > 0)
    assert stats["window_start_ns"].to_list() == sorted(ref)
    for row in stats.iter_rows(named=True):
        window = ref[row["window_start_ns"]]
        assert row["edges"] == len(window.pieces)
        assert row["vertices"] == len(window.vertices)
        if window.n_paths > 0:
            # AND stats give the reference's N and whether paths span it
            assert 10 ** row["log10_paths"] == pytest.approx(window.n_paths, rel=1e-9)
            assert (row["diagnostic"] is None) == (window.total_cw > 0)
            assert (row["path_start_ns"], row["path_end_ns"]) == (
                window.path_start,
                window.path_end,
            )
            assert row["spans_window"] == (
                window.total_cw
                == window.n_paths * (window.path_end - window.path_start)
            )
        else:
            # AND a pathless window has no N and a diagnostic
            assert row["log10_paths"] is None
            assert row["diagnostic"] is not None
            assert row["spans_window"] is False


@SETTINGS
@given(trace=traces(), window_ns=windows, origin_ns=origins)
def test_clipping_keeps_pieces_inside_their_window(trace, window_ns, origin_ns):
    # GIVEN a random trace
    # WHEN it is cut into windows
    table, _, _ = run(trace, window_ns, origin_ns)
    # THEN every piece lies in its closed window and is sorted by window, row
    assert (table["start_ns"] >= table["window_start_ns"]).all()
    assert (table["end_ns"] <= table["window_end_ns"]).all()
    assert (table["start_ns"] <= table["window_end_ns"]).all()
    assert (table["end_ns"] >= table["window_start_ns"]).all()
    keys = list(zip(table["window_start_ns"], table["edge_index"], strict=True))
    assert keys == sorted(keys)
    assert (table["window_end_ns"] - table["window_start_ns"] == window_ns).all()
    # AND waiting rows never carry CP
    assert (table.filter(pl.col("activity") == "waiting")["cp"] == 0.0).all()
    # AND each local activity's weights add up to its duration after the origin
    origin = origin_ns
    if origin is None:
        origin = (trace["start_ns"].min() // window_ns) * window_ns
    weights = table.group_by("edge_index").agg(pl.col("weight_ns").sum())
    weights = dict(zip(weights["edge_index"], weights["weight_ns"], strict=True))
    for i, row in enumerate(trace.iter_rows(named=True)):
        local = row["src_worker"] == row["dst_worker"]
        if local and row["end_ns"] > row["start_ns"]:
            clipped = max(0, row["end_ns"] - max(row["start_ns"], origin))
            assert weights.get(i, 0) == clipped, i
        elif i in weights:
            # an instant weighs its (non-negative) length in every window
            pieces = table.filter(pl.col("edge_index") == i)
            length = max(row["end_ns"] - row["start_ns"], 0)
            assert (pieces["weight_ns"] == length).all()


@SETTINGS
@given(trace=traces(), window_ns=windows)
def test_reading_rows_in_another_order_changes_no_cp(trace, window_ns):
    # GIVEN a trace and the same rows reversed (with an explicit origin)
    origin = (trace["start_ns"].min() // window_ns) * window_ns
    n = len(trace)
    flipped = trace.reverse()
    # WHEN CP is computed for both
    a, _, _ = run(trace, window_ns, origin)
    b, _, _ = run(flipped, window_ns, origin)
    # THEN every piece gets the same CP
    b = b.with_columns((n - 1 - pl.col("edge_index")).alias("edge_index"))
    a_map = dict(
        zip(
            zip(a["window_start_ns"], a["edge_index"], strict=True),
            a["cp"],
            strict=True,
        )
    )
    b_map = dict(
        zip(
            zip(b["window_start_ns"], b["edge_index"], strict=True),
            b["cp"],
            strict=True,
        )
    )
    assert a_map.keys() == b_map.keys()
    for key, value in a_map.items():
        assert math.isclose(value, b_map[key], abs_tol=1e-12)
