"""Order statistics per group from one sorted array of packed keys."""

from __future__ import annotations

import statistics

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from sparktrail.pag import trace
from sparktrail.pag.sorted_groups import Packing, SortedGroups, packing, slices_medians
from sparktrail.pag.trace import mapped_array
from tests.mapped import array_file_backed

values_in_groups = st.lists(
    st.tuples(st.integers(0, 4), st.integers(-(10**12), 10**12)),
    min_size=1,
    max_size=80,
)


def _grouped(rows: list[tuple[int, int]], n_groups: int) -> SortedGroups:
    groups = np.array([g for g, _ in rows])
    values = np.array([v for _, v in rows])
    pack = packing(n_groups, int(values.min()), int(values.max()))
    assert pack is not None
    return SortedGroups.of(pack.keys(groups, values), pack, n_groups)


@given(values_in_groups)
@settings(max_examples=200, deadline=None)
def test_each_groups_median_and_kth_are_its_values(rows):
    # GIVEN values in five groups, some empty, negative and huge ones
    sorted_groups = _grouped(rows, 5)
    by_group = {g: sorted(v for h, v in rows if h == g) for g in range(5)}
    # THEN counts, medians and every k-th value are the group's own
    assert sorted_groups.counts().tolist() == [len(by_group[g]) for g in range(5)]
    medians = sorted_groups.medians()
    for g, values in by_group.items():
        if not values:
            assert np.isnan(medians[g])
            continue
        assert medians[g] == pytest.approx(statistics.median(values), rel=1e-15)
        ks = np.arange(len(values))
        assert sorted_groups.kth(np.full(len(ks), g), ks).tolist() == values


@given(values_in_groups, st.data())
@settings(max_examples=200, deadline=None)
def test_kth_without_a_part_is_the_kth_of_the_rest(rows, data):
    # GIVEN values in groups, and a part of each group's values (its own
    # executor's tasks in a stage) in a second sorted array of one packing
    in_part = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    whole = _grouped(rows, 5)
    part_rows = [r for r, inside in zip(rows, in_part, strict=True) if inside]
    part_keys = whole.packing.keys(
        np.array([g for g, _ in part_rows], dtype=np.int64),
        np.array([v for _, v in part_rows], dtype=np.int64),
    )
    part = SortedGroups.of(part_keys, whole.packing, 5)
    # THEN every k-th value of a group without its part is that of the rest
    for g in range(5):
        rest = sorted(
            v
            for (h, v), inside in zip(rows, in_part, strict=True)
            if h == g and not inside
        )
        if not rest:
            continue
        ks = np.arange(len(rest))
        got = whole.kth_without(np.full(len(ks), g), ks, part, np.full(len(ks), g))
        assert got.tolist() == rest
        with pytest.raises(IndexError, match="beyond"):
            whole.kth_without(np.array([g]), np.array([len(rest)]), part, np.array([g]))


def test_keys_in_a_mapped_file_are_sorted_in_place():
    # GIVEN a million values in 3 groups, packed into a mapped array
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 3, 1_000_000)
    values = rng.integers(0, 10**9, 1_000_000)
    pack = packing(3, 0, 10**9)
    assert pack is not None
    keys = mapped_array(len(values), np.uint64)
    keys[:] = pack.keys(groups, values)
    sorted_groups = SortedGroups.of(keys, pack, 3)
    # THEN the sorted keys are the mapped array itself, and the medians numpy's
    assert sorted_groups.keys is keys and array_file_backed(sorted_groups.keys)
    want = [np.median(values[groups == g]) for g in range(3)]
    assert sorted_groups.medians().tolist() == want


def test_values_that_do_not_fit_in_64_bits_have_no_packing():
    assert packing(2**20, 0, 2**44 - 1) == Packing(lo=0, bits=44)
    assert packing(2**20 + 1, 0, 2**44 - 1) is None
    with pytest.raises(ValueError, match=r"\[5, 4\]"):
        packing(1, 5, 4)


def test_keys_of_another_type_are_refused():
    with pytest.raises(TypeError, match="int64"):
        SortedGroups.of(np.array([1, 2]), Packing(lo=0, bits=4), 1)


frames = st.lists(
    st.tuples(
        st.sampled_from([None, 1, 2, 3]),  # stage (a null one is a group too)
        st.sampled_from(["a", "b"]),  # operator
        st.one_of(st.none(), st.integers(-50, 50)),  # duration
        st.integers(0, 3),  # records
    ),
    min_size=1,
    max_size=40,
)


@given(frames, st.booleans())
@settings(max_examples=150, deadline=None)
def test_a_long_frames_medians_are_one_group_bys(rows, filtered):
    # GIVEN a frame of groups of one or two keys, null keys and values, a
    # float value (taken in memory) and a filter, read 3 rows at a time
    frame = pl.DataFrame(
        rows, schema=["stage", "op", "d", "r"], orient="row"
    ).with_columns((pl.col("r") / 2).alias("f"))
    where = (pl.col("r") > 0) if filtered else None
    values = [pl.col("d"), (pl.col("d") * 2 + pl.col("r")).alias("e"), pl.col("f")]
    for keys in (["stage"], ["stage", "op"]):
        want = slices_medians(frame, keys, values, where)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(trace, "SLICE_ROWS", 3)
            got = slices_medians(frame, keys, values, where)
        # THEN the medians are those of one polars group-by
        assert_frame_equal(got, want, check_row_order=False)


def test_a_value_too_wide_to_pack_is_taken_in_memory():
    # GIVEN 8 groups of values 2**63 apart: 3 + 64 bits, no packing
    frame = pl.DataFrame({"k": list(range(8)) * 2, "v": [-(2**62), 2**62] * 8})
    assert packing(8, -(2**62), 2**62) is None
    # THEN a long frame's medians are polars' all the same
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trace, "SLICE_ROWS", 3)
        got = slices_medians(frame, ["k"], [pl.col("v")])
    want = frame.group_by("k").agg(pl.col("v").median())
    assert_frame_equal(got, want, check_row_order=False)
