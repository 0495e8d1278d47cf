"""The rules both live engines share: the close rule, the checkpoint checks,
the buffer's drop rule, and the engine factory both commands use."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparktrail.engines.checkpoint import check_checkpoint
from sparktrail.engines.engine_choice import engine_for
from sparktrail.engines.online import CHECKPOINT_VERSION, OnlinePipeline
from sparktrail.engines.open_rows import OpenRows, Part
from sparktrail.engines.watermark import close_until, open_from
from sparktrail.errors import InputError
from sparktrail.pag.windows import window_ceil, window_floor

times = st.integers(-(10**12), 10**12)
lengths = st.integers(1, 10**9)


@given(t=times, w=lengths, origin=times)
def test_window_floor_and_ceil_are_the_boundaries_around_a_time(
    t: int, w: int, origin: int
) -> None:
    # GIVEN a time and windows of w from an origin
    # WHEN the boundaries at or before and at or after it are taken
    lo, hi = window_floor(t, w, origin), window_ceil(t, w, origin)
    # THEN both are boundaries, around t, at most one window apart
    assert (lo - origin) % w == 0 and (hi - origin) % w == 0
    assert lo <= t <= hi and hi - lo in ((0,) if t == lo else (w,))


@given(
    first=times, span=st.integers(0, 10**10), lateness=st.integers(0, 10**10), w=lengths
)
def test_a_final_close_covers_every_event_and_a_poll_keeps_the_lateness(
    first: int, span: int, lateness: int, w: int
) -> None:
    # GIVEN events from first to last and a lateness
    last = first + span
    start = open_from(None, first, w)
    # WHEN a poll and a final poll compute where they close
    polled = close_until(last, lateness, w, final=False)
    final = close_until(last, lateness, w, final=True)
    # THEN the first window holds the first event, the final close the last
    # one, and a poll closes nothing the watermark has not passed
    assert start <= first < start + w
    assert final >= last and polled <= last - lateness
    assert last - lateness - polled < w


def test_each_live_engine_refuses_the_others_checkpoint(tmp_path: Path) -> None:
    # GIVEN checkpoints of each engine, and one of other windows
    path = tmp_path / "checkpoint.json"
    spark = {"version": "spark-1", "window_ns": 5}
    # WHEN each engine checks them THEN it names the engine to use, or the window
    with pytest.raises(
        InputError, match=r"written by the spark engine.*--engine spark"
    ):
        check_checkpoint(spark, path, CHECKPOINT_VERSION, 5)
    with pytest.raises(
        InputError, match=r"written by the polars engine.*--engine polars"
    ):
        check_checkpoint({"version": 1, "window_ns": 5}, path, "spark-1", 5)
    with pytest.raises(InputError, match="unknown checkpoint version 7"):
        check_checkpoint({"version": 7, "window_ns": 5}, path, CHECKPOINT_VERSION, 5)
    with pytest.raises(InputError, match="holds windows of 4 ns, not windows of 5"):
        check_checkpoint({"version": 1, "window_ns": 4}, path, CHECKPOINT_VERSION, 5)
    check_checkpoint(spark, path, "spark-1", 5)  # its own: no error


def test_the_buffer_drops_a_file_once_its_rows_all_ended() -> None:
    # GIVEN two files' rows buffered: one ending at 9, one at 12..20
    def part(ends: list[int]) -> Part:
        rows = pl.DataFrame({"start_ns": [0] * len(ends), "end_ns": ends})
        return Part(rows, 0, min(ends), max(ends))

    buffer = OpenRows()
    buffer.add(part([5, 9]))
    buffer.add(part([12, 20]))
    # WHEN the windows are closed up to 10, then up to 15
    buffer.drop_closed(10)
    kept = len(buffer)
    buffer.drop_closed(15)
    # THEN the first file goes, then the row of the second that ended before 15
    assert kept == 2
    assert len(buffer) == 1


def test_the_engine_factory_checks_the_engine_and_window(tmp_path: Path) -> None:
    # GIVEN the names and windows the commands pass
    # WHEN the engine is chosen THEN a wrong one is refused naming the choice
    with pytest.raises(
        InputError, match="engine 'duckdb': expected one of polars, spark"
    ):
        engine_for("duckdb", 5)
    with pytest.raises(
        InputError, match="--window batch runs on the polars engine only"
    ):
        engine_for("spark", "batch")
    with pytest.raises(
        InputError, match="window 'x': expected a length in ns or 'batch'"
    ):
        engine_for("polars", "x")
    # AND the polars engine follows a directory with the online pipeline
    pipeline = engine_for("polars", 5).live(tmp_path, 0)
    assert isinstance(pipeline, OnlinePipeline) and pipeline.window_ns == 5
