"""The online pipeline with a window per micro-batch (``--window batch``)."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sparktrail.cli.serve import live_loader
from sparktrail.engines.batch import (
    micro_batch_bounds,
    summarize_micro_batches,
    trigger_times,
)
from sparktrail.engines.engine_choice import MICRO_BATCHES
from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.store import WindowStore, store_dir
from sparktrail.errors import InputError
from sparktrail.pag import write_trace
from sparktrail.pag.context import AppContext
from sparktrail.pag.snapshot import SnapshotWarning
from sparktrail.pag.streams import StreamBatch
from sparktrail.pag.trace import Trace, load_trace
from sparktrail.synthetic import barrier_trace

MS = 1_000_000
LATENESS = 300 * MS
CHUNKS = 6
LAST = pl.max_horizontal("start_ns", "end_ns")


@pytest.fixture(scope="module")
def trace() -> pl.DataFrame:
    # A barrier trace stretched to ~5.6 s, so triggers in whole ms fit in it.
    frame = barrier_trace(1500, workers=8, seed=1)
    return frame.with_columns(
        pl.col("start_ns") * 1000,
        pl.col("end_ns") * 1000,
        pl.int_range(pl.len()).alias("task_id"),
    )


@pytest.fixture(scope="module")
def batches(trace: pl.DataFrame) -> tuple[StreamBatch, ...]:
    """Six triggers of 500-750 ms every 800 ms, from 400 ms after the start."""
    first = int(trace.select(pl.col("start_ns").min()).item())
    return tuple(
        StreamBatch(
            "q",
            batch_id=i,
            timestamp_ns=first + (400 + 800 * i) * MS,
            duration_ms={"triggerExecution": 500 + 50 * i},
        )
        for i in range(6)
    )


def chunked(
    directory: Path, trace: pl.DataFrame, batches: tuple[StreamBatch, ...]
) -> list[tuple[pl.DataFrame, Path, AppContext]]:
    """Chunks by the time rows become final; each file's context holds the
    batches whose progress was out by then (Spark posts it at batch end)."""
    top = int(trace.select(LAST.max()).item())
    bounds = [top * i // CHUNKS for i in range(CHUNKS + 1)]
    bounds[0] = -1
    return [
        (
            trace.filter(LAST.is_between(lo, hi, closed="right")),
            directory / f"part-{i:03d}.arrow",
            AppContext(batches=tuple(b for b in batches if ended(b, hi))),
        )
        for i, (lo, hi) in enumerate(itertools.pairwise(bounds))
    ]


def ended(batch: StreamBatch, at: int) -> bool:
    return batch.trigger_end_ns is not None and batch.trigger_end_ns <= at


def offline(trace: pl.DataFrame, batches: tuple[StreamBatch, ...]) -> pl.DataFrame:
    """``profile --window batch``'s CP by activity and window, in landing order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        whole = Trace(load_trace(trace).frame, AppContext(batches=batches))
        frame = summarize_micro_batches(whole).activity_by_window
    return frame.sort("window_start_ns", "activity")


def by_window(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames).sort("window_start_ns", "activity")


def assert_same_shares(got: pl.DataFrame, want: pl.DataFrame) -> None:
    keys = ["window_start_ns", "window_end_ns", "activity"]
    assert got.select(keys).equals(want.select(keys))
    np.testing.assert_allclose(
        got["cp_share"].to_numpy(), want["cp_share"].to_numpy(), atol=1e-9
    )


def run_live(
    directory: Path,
    trace: pl.DataFrame,
    batches: tuple[StreamBatch, ...],
    lateness_ns: int = LATENESS,
) -> tuple[OnlinePipeline, list]:  # type: ignore[type-arg]
    pipeline = OnlinePipeline(directory, MICRO_BATCHES, lateness_ns)
    closed = []
    for part, path, context in chunked(directory, trace, batches):
        write_trace(part, path, context)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SnapshotWarning)
            closed += pipeline.poll()
        # THEN nothing closes past the watermark
        watermark = pipeline.watermark_ns
        assert watermark is not None
        assert all(w.end_ns <= watermark for w in closed)
    return pipeline, closed


def test_windows_close_at_known_triggers_behind_the_watermark(
    tmp_path: Path, trace: pl.DataFrame, batches: tuple[StreamBatch, ...]
) -> None:
    # GIVEN chunks of a streaming trace landing with the progress known so far
    _, closed = run_live(tmp_path, trace, batches)
    # THEN every window that closed ends at a trigger's start or end
    boundaries = {b.timestamp_ns for b in batches} | {b.trigger_end_ns for b in batches}
    assert closed
    assert {w.end_ns for w in closed} <= boundaries
    # ... and the windows are contiguous from the first event
    first = int(trace.select(pl.col("start_ns").min()).item())
    assert closed[0].start_ns == first
    assert all(a.end_ns == b.start_ns for a, b in itertools.pairwise(closed))


def test_nothing_closes_before_the_first_micro_batch_is_known(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN a trace whose context has no micro-batch (yet)
    write_trace(trace, tmp_path / "part-000.arrow", AppContext())
    pipeline = OnlinePipeline(tmp_path, MICRO_BATCHES, LATENESS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        # THEN a poll closes nothing, whatever the watermark
        assert pipeline.poll() == []
        assert pipeline.buffered_rows == len(trace)
        # ... and the end of the trace closes it all as one window
        (last,) = pipeline.poll(final=True)
    assert last.end_ns == int(trace.select(LAST.max()).item()) + 1


def test_batch_windows_online_match_profile_window_batch(
    tmp_path: Path, trace: pl.DataFrame, batches: tuple[StreamBatch, ...]
) -> None:
    # GIVEN the chunks processed live, then the end of the trace
    pipeline, closed = run_live(tmp_path, trace, batches)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        closed += pipeline.poll(final=True)
    # THEN the windows are profile --window batch's
    whole = Trace(load_trace(trace).frame, AppContext(batches=batches))
    bounds = micro_batch_bounds(whole)
    assert [(w.start_ns, w.end_ns) for w in closed] == list(itertools.pairwise(bounds))
    # ... with the same CP by activity in each
    got = by_window([w.summaries.activity_by_window for w in closed])
    assert_same_shares(got, offline(trace, batches))
    # ... and the store gives each window back with its own length
    store = WindowStore(store_dir(tmp_path))
    back = store.read_window(closed[2].start_ns)
    assert back.end_ns == closed[2].end_ns
    assert store.window_end(closed[3].start_ns) == closed[3].end_ns
    assert back.summaries.activity.equals(closed[2].summaries.activity)


def test_a_restart_takes_the_boundaries_from_the_files_already_read(
    tmp_path: Path, trace: pl.DataFrame, batches: tuple[StreamBatch, ...]
) -> None:
    # GIVEN every chunk read by a pipeline that then stops, with a lateness
    # that kept the last three seconds (and their triggers) open
    late = 3000 * MS
    first, closed = run_live(tmp_path, trace, batches, late)
    del first
    # WHEN a new pipeline on the same directory closes the rest, no new file
    second = OnlinePipeline(tmp_path, MICRO_BATCHES, late)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        rest = second.poll(final=True)
    # THEN it cut the rest at the same triggers: the run is an unbroken one's
    assert len(rest) > 3
    got = by_window([w.summaries.activity_by_window for w in closed + rest])
    assert_same_shares(got, offline(trace, batches))


def test_a_store_of_fixed_windows_refuses_batch_windows_in_one_line(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    write_trace(trace.head(100), tmp_path / "part-000.arrow")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        OnlinePipeline(tmp_path, 50 * MS, LATENESS).poll(final=True)
    with pytest.raises(InputError, match="windows of 50000000 ns, not a window per"):
        OnlinePipeline(tmp_path, MICRO_BATCHES, LATENESS)


def test_the_live_loader_labels_batch_windows_with_their_own_ends(
    tmp_path: Path, trace: pl.DataFrame, batches: tuple[StreamBatch, ...]
) -> None:
    # GIVEN a store of batch windows written by an earlier run
    pipeline, closed = run_live(tmp_path, trace, batches)
    del pipeline
    # WHEN a dashboard loader opens it
    loader = live_loader(tmp_path, MICRO_BATCHES, LATENESS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        snapshot = loader.step()
    # THEN each window keeps its own length, read back from the store
    views = snapshot.windows[: len(closed)]
    assert [(v.start_ns, v.end_ns) for v in views] == [
        (w.start_ns, w.end_ns) for w in closed
    ]
    assert len({v.end_ns - v.start_ns for v in views}) > 1
    assert views[1].summaries.window_ns == closed[1].end_ns - closed[1].start_ns


def test_the_first_open_batch_window_has_a_length_once_its_end_is_known(
    tmp_path: Path, trace: pl.DataFrame, batches: tuple[StreamBatch, ...]
) -> None:
    # GIVEN a live run cut short of the trace's end
    pipeline, closed = run_live(tmp_path, trace, batches)
    # THEN the next window's length is known when a trigger follows it
    following = [t for t in trigger_times(batches) if t > closed[-1].end_ns]
    want = following[0] - closed[-1].end_ns if following else None
    assert pipeline.open_window_ns == want
    # ... and a pipeline that saw no micro-batch knows none
    empty = tmp_path / "none"
    write_trace(trace, empty / "part-000.arrow", AppContext())
    blind = OnlinePipeline(empty, MICRO_BATCHES, LATENESS)
    assert blind.poll() == []
    assert blind.buffered_rows > 0 and blind.open_window_ns is None
