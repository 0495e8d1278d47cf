"""Shares of every summary sum to 1 on random small traces (hypothesis)."""

from __future__ import annotations

import warnings

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings

from sparktrail.engines import summarize
from sparktrail.pag import SnapshotWarning
from tests.pag.strategies import traces


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_shares_sum_to_one_when_a_path_exists(trace):
    # GIVEN a random small trace  WHEN summarized in windows of 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        s = summarize(trace, 3)
    paths = int(s.windows["has_paths"].sum())
    expected = 1.0 if paths else 0.0
    # THEN activity, straggler, executor and operator shares sum to 1
    # (0 without paths), fair shares too, and per window with paths
    for frame in (s.activity, s.straggler, s.executor, s.operator):
        assert frame["cp_share"].sum() == pytest.approx(expected)
    assert s.straggler["fair_share"].sum() == pytest.approx(expected)
    per = s.activity_by_window.group_by("window_start_ns").agg(pl.col("cp_share").sum())
    assert len(per) == paths
    assert per["cp_share"].to_list() == pytest.approx([1.0] * paths)
    # AND every hint has its kind, severity and a JSON evidence object
    assert s.hints["severity"].is_in(["high", "medium", "low", "info"]).all()
