"""A table spilled to a memory-mapped file (``mapped_concat``, DESIGN §10)."""

from __future__ import annotations

import sys

import numpy as np
import polars as pl
import pytest

from sparktrail.errors import InputError
from sparktrail.pag.trace import mapped_concat
from tests.mapped import array_file_backed, file_backed


def _parts() -> list[pl.DataFrame]:
    categorical = {"worker": pl.Categorical}
    return [
        pl.DataFrame(
            {"id": [1, 2, 3], "worker": ["exec-1/0", None, "exec-2/0"], "t": [5, 6, 7]},
            schema_overrides=categorical,
        ),
        # A later part brings names the first did not have, and lacks some.
        pl.DataFrame(
            {"id": [4, 5], "worker": ["exec-9/1", "exec-2/0"], "t": [8, None]},
            schema_overrides=categorical,
        ),
        pl.DataFrame(
            {"id": [6], "worker": [None], "t": [9]},
            schema_overrides=categorical,
        ),
    ]


@pytest.mark.parametrize(
    "values",
    [
        [["a", "a"], ["a"], ["a", "a"]],  # one value: kept once
        [["a", None], ["b"], ["a", "c"]],  # names across parts, a null
        [[None, None], [None], [None, None]],  # no value
    ],
)
def test_string_columns_read_back_as_written(values):
    parts = [
        pl.DataFrame(
            {"s": v, "n": range(len(v))}, schema={"s": pl.String, "n": pl.Int64}
        )
        for v in values
    ]
    mapped = mapped_concat(parts)
    assert mapped.schema == parts[0].schema
    assert mapped.equals(pl.concat(parts))
    assert mapped["s"].to_list() == [x for v in values for x in v]


def test_the_mapped_table_is_the_parts_concatenated_with_their_types():
    parts = _parts()
    mapped = mapped_concat(iter(parts))
    want = pl.concat(parts)
    assert mapped.schema == want.schema
    assert mapped.equals(want)
    # Each part stays a chunk of its own: nothing was copied into one.
    assert mapped["id"].n_chunks() == len(parts)
    assert (
        mapped["worker"].cast(pl.String).to_list()
        == want["worker"].cast(pl.String).to_list()
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_its_columns_point_into_a_file_not_the_heap():
    n = 100_000
    parts = [pl.DataFrame({"t": np.arange(k * n, (k + 1) * n)}) for k in range(3)]
    in_memory = pl.concat(parts)
    mapped = mapped_concat(parts)
    assert file_backed(mapped["t"])
    assert not file_backed(in_memory["t"])


def test_no_part_is_refused():
    with pytest.raises(InputError, match="at least one frame"):
        mapped_concat([])


def test_a_temporary_directory_that_cannot_be_written_is_named(monkeypatch, tmp_path):
    # GIVEN TMPDIR pointing at a path that is no directory
    import tempfile

    from sparktrail.errors import SparktrailError

    missing = tmp_path / "gone"
    monkeypatch.setattr(tempfile, "tempdir", str(missing))
    # THEN the error names the directory and what to do, not a traceback
    with pytest.raises(SparktrailError, match=r"gone.*TMPDIR"):
        mapped_concat([pl.DataFrame({"a": [1]})])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_mapped_array_keeps_what_was_written_after_its_pages_are_released():
    from sparktrail.pag.trace import mapped_array, release_mapped_pages

    array = mapped_array(3 * 2**20, np.int64)
    assert array_file_backed(array)
    assert not array.any()  # starts as zeros
    array[:: 2**16] = np.arange(48)
    release_mapped_pages()
    # The released pages went back to the file, not away.
    assert array[:: 2**16].tolist() == list(range(48))
    assert int(array.sum()) == sum(range(48))


def test_a_mapped_array_in_a_temporary_directory_that_cannot_be_written(
    monkeypatch, tmp_path
):
    import tempfile

    from sparktrail.errors import SparktrailError
    from sparktrail.pag.trace import mapped_array

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    with pytest.raises(SparktrailError, match=r"gone.*TMPDIR"):
        mapped_array(10, np.int32)
