"""The chunked trace generator writes the trace the one-shot generator makes."""

from __future__ import annotations

import pytest

from sparktrail.errors import InputError
from sparktrail.pag.trace import read_trace, validate_trace
from sparktrail.synthetic import profile_trace, write_profile_trace
from tests.summaries.compare import assert_same_summaries


@pytest.mark.parametrize("chunk_rows", [1, 16, 100, 5_000, 10**7])
@pytest.mark.parametrize(("n_rows", "workers"), [(10, 4), (1_000, 16), (9_999, 7)])
def test_chunks_read_back_as_the_whole_trace(tmp_path, n_rows, workers, chunk_rows):
    path = write_profile_trace(n_rows, tmp_path / "t.arrow", workers, chunk_rows)
    got = read_trace(path)
    want = validate_trace(profile_trace(n_rows, workers=workers))
    assert got.equals(want)
    assert got.height == want.height > 0


def test_chunked_profile_equals_the_whole(tmp_path):
    # The profile of the chunked file is that of the one-shot frame.
    from sparktrail.engines import summarize
    from sparktrail.synthetic import span_ns

    frame = profile_trace(3_000)
    path = write_profile_trace(3_000, tmp_path / "t.arrow", chunk_rows=320)
    window = span_ns(frame) // 7 + 1
    # To 1e-9: polars' threaded sums may add in another order run to run.
    assert_same_summaries(summarize(path, window), summarize(frame, window))


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_chunk_rows_must_be_a_positive_integer(tmp_path, bad):
    with pytest.raises(InputError, match=repr(bad)):
        write_profile_trace(100, tmp_path / "t.arrow", chunk_rows=bad)
