"""Summaries compared to 1e-9: the check shared by the engine and batch tests."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import polars as pl
from polars.testing import assert_frame_equal

from sparktrail.engines.store import SUMMARY_FRAMES
from sparktrail.summaries import Summaries

TOL = 1e-9
#: Compared as frames; the hints are compared on their own (rounded evidence).
FRAMES = tuple(name for name in SUMMARY_FRAMES if name != "hints")


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in an order that float noise cannot change: by its
    non-float columns (its float columns break no ties)."""
    keys = [c for c, t in frame.schema.items() if not t.is_float()]
    return frame.sort(keys, nulls_last=True) if keys else frame


def _same_numbers(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        # Evidence is rounded to 6 decimals: two numbers equal to 1e-9 may
        # round to neighbours (0.1078525 to 0.107852 or 0.107853).
        return math.isclose(a, b, rel_tol=0.0, abs_tol=2e-6)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_numbers(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same_numbers, a, b))
    return bool(a == b)


NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _same_text(a: Any, b: Any) -> bool:
    """Equal texts, but for numbers one unit apart in their last printed
    digit: a share of exactly 37.5% prints as 37% or 38% with float noise.

    >>> _same_text("is 37% of it", "is 38% of it"), _same_text("1.5 s", "1.7 s")
    (True, False)
    """
    if not isinstance(a, str) or not isinstance(b, str):
        return bool(a == b)
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return False
    for x, y in zip(NUMBER.findall(a), NUMBER.findall(b), strict=True):
        unit = 10.0 ** -len(x.partition(".")[2])
        if x != y and abs(float(x) - float(y)) > unit * 1.0001:
            return False
    return True


def assert_same_summaries(spark_side: Summaries, polars_side: Summaries) -> None:
    """Equal frames (floats to 1e-9, rows compared after sorting), and hints
    with the same kinds, targets and actions (evidence is rounded JSON)."""
    assert spark_side.window_ns == polars_side.window_ns
    assert spark_side.origin_ns == polars_side.origin_ns
    for name in FRAMES:
        got, want = getattr(spark_side, name), getattr(polars_side, name)
        assert got.columns == want.columns, name
        assert_frame_equal(
            _sorted(got), _sorted(want), check_exact=False, rel_tol=TOL, abs_tol=TOL
        )
    got, want = spark_side.hints, polars_side.hints
    floats = ("evidence", "cp_share", "predicted_saving_ns", "saving_share")
    got_rows, want_rows = got.drop(floats).rows(), want.drop(floats).rows()
    assert len(got_rows) == len(want_rows), (got_rows, want_rows)
    for g, w in zip(got_rows, want_rows, strict=True):
        assert all(map(_same_text, g, w)), (g, w)
    assert_frame_equal(
        got.select(floats[1:]), want.select(floats[1:]), rel_tol=TOL, abs_tol=TOL
    )
    for a, b in zip(got["evidence"], want["evidence"], strict=True):
        assert _same_numbers(json.loads(a), json.loads(b)), (a, b)
