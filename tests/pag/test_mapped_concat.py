"""A table spilled to a memory-mapped file (``mapped_concat``, DESIGN §10)."""

from __future__ import annotations

import sys

import numpy as np
import polars as pl
import pytest

from sparktrail.errors import InputError
from sparktrail.pag.trace import mapped_concat
from tests.mapped import file_backed


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
