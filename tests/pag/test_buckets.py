"""Rows grouped by bucket by a counting sort (``pag.buckets``, DESIGN §10)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from sparktrail.pag import trace as trace_module
from sparktrail.pag.buckets import bucketed_rows
from tests.mapped import array_file_backed


def _by_sort(buckets: np.ndarray, n_buckets: int) -> tuple[list[int], list[int]]:
    """What a stable sort of the whole gives: the reference."""
    kept = np.flatnonzero(buckets >= 0)
    order = kept[np.argsort(buckets[kept], kind="stable")]
    bounds = np.searchsorted(np.sort(buckets[kept]), np.arange(n_buckets + 1))
    return order.tolist(), bounds.tolist()


def _pieces(buckets: np.ndarray, size: int) -> list[np.ndarray]:
    return [buckets[at : at + size] for at in range(0, len(buckets), size)]


@pytest.mark.parametrize("slice_rows", [1, 7, 64, 10**6])
@pytest.mark.parametrize("piece", [1, 5, 1000])
def test_rows_are_grouped_as_a_stable_sort_groups_them(monkeypatch, slice_rows, piece):
    # GIVEN rows in random buckets, some left out, in pieces and slices of
    # sizes that do not divide one another
    monkeypatch.setattr(trace_module, "SLICE_ROWS", slice_rows)
    rng = np.random.default_rng(slice_rows * 1000 + piece)
    buckets = rng.integers(-1, 9, size=500).astype(np.int32)
    # WHEN they are bucketed
    rows, bounds = bucketed_rows(_pieces(buckets, piece), len(buckets), 9)
    # THEN each bucket holds its rows in row order, as a stable sort does
    assert (rows.tolist(), bounds.tolist()) == _by_sort(buckets, 9)
    assert rows.dtype == np.uint32


def test_empty_buckets_and_no_rows():
    rows, bounds = bucketed_rows([], 0, 3)
    assert rows.tolist() == [] and bounds.tolist() == [0, 0, 0, 0]
    rows, bounds = bucketed_rows([np.array([-1, -1], np.int32)], 2, 2)
    assert rows.tolist() == [] and bounds.tolist() == [0, 0, 0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_long_table_s_rows_are_in_a_mapped_file(monkeypatch):
    monkeypatch.setattr(trace_module, "SLICE_ROWS", 100)
    buckets = np.arange(1000, dtype=np.int32) % 4
    rows, bounds = bucketed_rows(_pieces(buckets, 100), 1000, 4)
    assert array_file_backed(rows)
    assert (rows.tolist(), bounds.tolist()) == _by_sort(buckets, 4)
    # A short one's stay in memory.
    monkeypatch.setattr(trace_module, "SLICE_ROWS", 10**6)
    rows, _ = bucketed_rows(_pieces(buckets, 100), 1000, 4)
    assert not array_file_backed(rows)


@pytest.mark.parametrize(
    ("pieces", "n_rows", "message"),
    [
        ([np.array([0, 4])], 2, "bucket 4 is outside"),
        ([np.array([0, -2])], 2, "bucket -2 is outside"),
        ([np.array([0, 1])], 1, "more than n_rows=1"),
        ([np.array([0])], 2, "hold 1 rows, not n_rows=2"),
    ],
)
def test_bad_buckets_are_named(pieces, n_rows, message):
    with pytest.raises(ValueError, match=message):
        bucketed_rows(pieces, n_rows, 4)
