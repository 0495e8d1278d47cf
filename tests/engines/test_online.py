"""The online pipeline: windows close behind the watermark, survive restarts."""

from __future__ import annotations

import itertools
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sparktrail.engines.online import ClosedWindow, OnlinePipeline, TraceFileWarning
from sparktrail.engines.store import (
    CP_FILE,
    PARQUET_CP_FILE,
    WINDOW_FILES,
    WINDOW_FRAMES,
    StoredWindow,
    WindowStore,
    store_dir,
)
from sparktrail.pag import critical_participation, write_trace
from sparktrail.pag.snapshot import SnapshotWarning
from sparktrail.pag.windows import clip, listed_windows, touching
from sparktrail.summaries.result import BUNDLE_FILE
from sparktrail.synthetic import barrier_trace

WINDOW = 200_000  # ns; a barrier round lasts up to ~100 us
LATENESS = 150_000
CHUNKS = 6


@pytest.fixture(scope="module")
def trace() -> pl.DataFrame:
    # Task ids make every local row a task, as the tracer's rows are.
    frame = barrier_trace(3000, workers=8, seed=1)
    return frame.with_columns(pl.int_range(pl.len()).alias("task_id"))


def chunks(trace: pl.DataFrame, n: int = CHUNKS) -> list[pl.DataFrame]:
    """Rows split by the time they become final (their last event), in order."""
    last = pl.max_horizontal("start_ns", "end_ns")
    top = int(trace.select(last.max()).item())
    bounds = [top * i // n for i in range(n + 1)]
    bounds[0] = -1
    return [
        trace.filter((last > lo) & (last <= hi))
        for lo, hi in itertools.pairwise(bounds)
    ]


def land(directory: Path, part: pl.DataFrame, i: int) -> None:
    write_trace(part, directory / f"part-{i:03d}.arrow")


def union_cp(windows: list) -> pl.DataFrame:  # type: ignore[type-arg]
    return pl.concat([w.cp for w in windows]).sort("window_start_ns", "edge_index")


def whole_cp(trace: pl.DataFrame, starts: list[int]) -> pl.DataFrame:
    """CP of the whole trace, rows renumbered in the order the chunks landed."""
    ordered = pl.concat(chunks(trace))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        cp = critical_participation(ordered, WINDOW)
    return cp.filter(pl.col("window_start_ns").is_in(starts)).sort(
        "window_start_ns", "edge_index"
    )


def assert_same_cp(got: pl.DataFrame, want: pl.DataFrame) -> None:
    keys = ["window_start_ns", "edge_index", "start_ns", "end_ns", "weight_ns"]
    assert got.select(keys).equals(want.select(keys))
    np.testing.assert_allclose(got["cp"].to_numpy(), want["cp"].to_numpy(), atol=1e-12)


def test_windows_close_only_after_the_watermark_passes(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN a pipeline on an empty directory
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    assert pipeline.poll() == []
    for i, part in enumerate(chunks(trace)):
        # WHEN a chunk lands
        land(tmp_path, part, i)
        closed = pipeline.poll()
        # THEN every window it closes ends at or before the watermark, and
        # the window holding the watermark stays open
        watermark = pipeline.watermark_ns
        assert watermark is not None
        assert all(w.end_ns <= watermark for w in closed)
        assert pipeline.closed_until_ns is not None
        assert pipeline.closed_until_ns > watermark - WINDOW
    # ... and a second poll with nothing new closes nothing
    assert pipeline.poll() == []


def test_closed_windows_have_the_cp_of_the_whole_trace(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN chunks landing one by one
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    closed = []
    for i, part in enumerate(chunks(trace)):
        land(tmp_path, part, i)
        closed += pipeline.poll()
    # WHEN the trace is complete
    closed += pipeline.poll(final=True)
    # THEN every window closed once, with the CP the whole trace gives it
    starts = [w.start_ns for w in closed]
    assert starts == sorted(set(starts))
    want = whole_cp(trace, starts)
    assert sorted(want["window_start_ns"].unique().to_list()) == starts
    assert_same_cp(union_cp(closed), want)
    assert pipeline.late_rows == 0
    # ... the buffer was trimmed as windows closed
    assert pipeline.buffered_rows < len(trace) / 4


def closed_store(
    directory: Path, trace: pl.DataFrame
) -> tuple[list[ClosedWindow], WindowStore]:
    """``trace`` landed in ``directory`` as one file and closed to its end."""
    land(directory, trace, 0)
    closed = OnlinePipeline(directory, WINDOW, LATENESS).poll(final=True)
    return closed, WindowStore(store_dir(directory))


def frame_of(window: StoredWindow, name: str) -> pl.DataFrame:
    """The frame ``name`` (of ``WINDOW_FRAMES``) of a window held in memory."""
    return window.cp if name == "cp" else getattr(window.summaries, name)


def test_a_closed_window_is_in_the_store_with_its_summaries(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN a whole trace in one file, closed up to its end
    closed, store = closed_store(tmp_path, trace)
    # WHEN the store is read back
    assert store.window_starts() == [w.start_ns for w in closed]
    back = store.read_window(closed[3].start_ns, WINDOW)
    # THEN it holds the same frames
    assert back.cp.equals(closed[3].cp)
    assert back.summaries.activity.equals(closed[3].summaries.activity)
    folder = store.windows_dir / str(closed[3].start_ns)
    assert sorted(p.name for p in folder.iterdir()) == sorted(WINDOW_FILES)
    for name in WINDOW_FRAMES:  # ... and each frame reads alone, the same
        whole = frame_of(back, name)
        assert store.read_frame(back.start_ns, name).equals(whole), name
    # ... each window's activity shares sum to 1 (every window has paths)
    assert back.summaries.activity["cp_share"].sum() == pytest.approx(1.0)


def test_a_window_stored_by_an_older_sparktrail_still_reads(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN a store whose window was written the old way: a Parquet file per
    # summary frame and for the CP rows, no bundle
    closed, store = closed_store(tmp_path, trace)
    start = closed[3].start_ns
    folder = store.windows_dir / str(start)
    (folder / BUNDLE_FILE).unlink()
    (folder / CP_FILE).unlink()
    closed[3].summaries.save(folder, beside={PARQUET_CP_FILE: closed[3].cp})
    assert sorted(p.name for p in folder.glob("cp.*")) == [PARQUET_CP_FILE]
    # WHEN it is read whole and frame by frame
    back = store.read_window(start)
    # THEN every frame is the one closed, and so are its length and origin
    assert back.end_ns == closed[3].end_ns
    for name in WINDOW_FRAMES:
        want = frame_of(closed[3], name)
        got, alone = frame_of(back, name), store.read_frame(start, name)
        assert got.equals(want) and alone.equals(want), name


def test_a_restart_resumes_without_losing_or_repeating_a_window(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN half of the chunks processed by a first pipeline
    parts = chunks(trace)
    first = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    closed = []
    for i, part in enumerate(parts[:3]):
        land(tmp_path, part, i)
        closed += first.poll()
    del first
    # WHEN a new pipeline on the same directory processes the rest
    second = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    assert second.buffered_rows > 0  # rows of open windows were re-read
    for i, part in enumerate(parts[3:], start=3):
        land(tmp_path, part, i)
        closed += second.poll()
    closed += second.poll(final=True)
    # THEN every window closed exactly once, with the whole trace's CP
    starts = [w.start_ns for w in closed]
    assert starts == sorted(set(starts))
    assert_same_cp(union_cp(closed), whole_cp(trace, starts))
    assert second.late_rows == 0


def test_windows_written_after_the_last_checkpoint_are_not_repeated(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN a crash after windows were written but before their checkpoint
    parts = chunks(trace)
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    land(tmp_path, parts[0], 0)
    early = pipeline.poll()
    checkpoint = store_dir(tmp_path) / "checkpoint.json"
    stale = checkpoint.read_text()
    land(tmp_path, parts[1], 1)
    lost = pipeline.poll()
    assert lost
    checkpoint.write_text(stale)
    # WHEN a new pipeline resumes and the trace completes
    resumed = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    rest = []
    for i, part in enumerate(parts[2:], start=2):
        land(tmp_path, part, i)
        rest += resumed.poll()
    rest += resumed.poll(final=True)
    # THEN no window is closed twice and none is missing
    starts = [w.start_ns for w in early + lost + rest]
    assert starts == sorted(set(starts))
    assert_same_cp(union_cp(early + lost + rest), whole_cp(trace, starts))
    assert resumed.late_rows == 0


def test_a_corrupt_file_is_skipped_with_a_warning_and_counted(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN a file that is not Arrow among good ones
    parts = chunks(trace)
    land(tmp_path, parts[0], 0)
    (tmp_path / "part-000b.arrow").write_bytes(b"not arrow at all")
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    # WHEN the pipeline polls
    with pytest.warns(TraceFileWarning, match="part-000b.arrow"):
        closed = pipeline.poll()
    # THEN it goes on, and counts the file once
    assert closed
    assert pipeline.corrupt_files == 1
    land(tmp_path, parts[1], 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceFileWarning)
        assert pipeline.poll()
    # ... also after a restart, which does not warn again
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceFileWarning)
        restarted = OnlinePipeline(tmp_path, WINDOW, LATENESS)
        restarted.poll()
    assert restarted.corrupt_files == 1


def test_the_checkpoint_written_is_the_pipelines_state_after_each_poll(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN files landing one by one (and a corrupt one among them)
    parts = chunks(trace)
    written = store_dir(tmp_path) / "checkpoint.json"
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    (tmp_path / "part-000b.arrow").write_bytes(b"not arrow at all")
    for i, part in enumerate(parts[:3]):
        land(tmp_path, part, i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceFileWarning)
            pipeline.poll()
        # THEN the checkpoint on disk is the pipeline's, as json writes it
        assert written.read_text() == json.dumps(pipeline.checkpoint())
    # WHEN a consumed file changes and a new pipeline resumes (it drops that
    # file's entry and reads it again as new)
    land(tmp_path, parts[0].head(len(parts[0]) // 2), 0)
    resumed = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    assert "part-000.arrow" not in resumed.checkpoint()["files"]
    for i, part in enumerate(parts[3:], start=3):
        land(tmp_path, part, i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceFileWarning)
            resumed.poll()
        # THEN its checkpoints hold the file's new entry, never the old one
        assert written.read_text() == json.dumps(resumed.checkpoint())
    files = json.loads(written.read_text())["files"]
    assert files["part-000.arrow"]["rows"] == len(parts[0]) // 2
    assert list(files) == list(resumed.checkpoint()["files"])


def test_a_window_with_a_cycle_is_skipped_with_a_warning_and_counted(
    tmp_path: Path,
) -> None:
    # GIVEN three windows of 10 ns, the second holding two messages a -> b
    # and b -> a at the same time and seq (a cycle of the PAG)
    rows = [
        ("a", "a", 0, 10, "processing", 0, 1),
        ("b", "b", 0, 10, "processing", 0, 1),
        ("a", "a", 10, 20, "processing", 1, 2),
        ("b", "b", 10, 20, "processing", 1, 2),
        ("a", "b", 15, 15, "control", 3, 3),
        ("b", "a", 15, 15, "control", 3, 3),
        ("a", "a", 20, 30, "processing", 4, 5),
        ("b", "b", 20, 30, "processing", 4, 5),
    ]
    columns = ["src_worker", "dst_worker", "start_ns", "end_ns", "activity"]
    frame = pl.DataFrame(rows, schema=[*columns, "src_seq", "dst_seq"], orient="row")
    land(tmp_path, frame, 0)
    pipeline = OnlinePipeline(tmp_path, 10, 5)
    # WHEN the pipeline closes them
    with pytest.warns(TraceFileWarning, match="skipped window at 10: .*cycle"):
        closed = pipeline.poll(final=True)
    # THEN the other two are closed, and the skipped one counted
    assert [w.start_ns for w in closed] == [0, 20]
    assert pipeline.failed_windows == 1
    assert OnlinePipeline(tmp_path, 10, 5).failed_windows == 1  # checkpointed


def test_hidden_files_and_the_store_are_not_read(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN a temporary (hidden) trace file next to a real one
    land(tmp_path, chunks(trace)[0], 0)
    shutil.copy(tmp_path / "part-000.arrow", tmp_path / ".part-001.arrow.9.tmp.arrow")
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    # WHEN it polls twice (the second time the store exists)
    pipeline.poll()
    pipeline.poll()
    # THEN only the real file was consumed
    files = json.loads((store_dir(tmp_path) / "checkpoint.json").read_text())["files"]
    assert list(files) == ["part-000.arrow"]


def test_rows_arriving_after_their_window_closed_are_counted_late(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN windows closed over the first chunks
    parts = chunks(trace)
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    land(tmp_path, pl.concat(parts[1:3]), 1)
    pipeline.poll()
    # WHEN the first chunk lands afterwards
    land(tmp_path, parts[0], 0)
    pipeline.poll()
    # THEN its rows are counted late
    assert pipeline.late_rows == len(parts[0])


def test_the_buffer_holds_exactly_the_rows_of_the_open_windows(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN chunks landing one by one, shuffled within each (rows of a file
    # need not be in time order), and one landing late
    parts = [
        p.sample(fraction=1.0, shuffle=True, seed=i)
        for i, p in enumerate(chunks(trace))
    ]
    order = [1, 2, 0, *range(3, len(parts))]
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS)
    landed = []
    for i in order:
        land(tmp_path, parts[i], i)
        landed.append(parts[i])
        pipeline.poll()
        # THEN after each poll it holds every landed row that ends at or
        # after the closed windows' end, and no other
        until = pipeline.closed_until_ns
        ends = pl.concat(landed).select(pl.max_horizontal("start_ns", "end_ns"))
        want = len(ends) if until is None else int((ends.to_series() >= until).sum())
        assert pipeline.buffered_rows == want


def test_a_missing_directory_is_waited_for(tmp_path: Path) -> None:
    pipeline = OnlinePipeline(tmp_path / "not-yet", WINDOW, LATENESS)
    assert pipeline.poll() == []
    assert pipeline.watermark_ns is None
    assert not (tmp_path / "not-yet").exists()


def test_a_store_of_another_window_length_is_refused(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    land(tmp_path, chunks(trace)[0], 0)
    OnlinePipeline(tmp_path, WINDOW, LATENESS).poll()
    with pytest.raises(ValueError, match="windows of 200000 ns"):
        OnlinePipeline(tmp_path, 2 * WINDOW, LATENESS)


@pytest.mark.parametrize(("window", "lateness"), [(0, 1), (1, -1)])
def test_bad_lengths_are_refused(tmp_path: Path, window: int, lateness: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        OnlinePipeline(tmp_path, window, lateness)


def test_clipping_keeps_a_window_and_opens_no_other() -> None:
    # GIVEN a 30 ns activity, a message inside [10, 20] and one crossing it
    rows = pl.DataFrame(
        {
            "src_worker": ["a", "a", "b"],
            "dst_worker": ["a", "b", "a"],
            "start_ns": [0, 12, 15],
            "end_ns": [30, 14, 25],
            "activity": ["processing", "data", "control"],
            "src_seq": [0, 0, 0],
            "dst_seq": [0, 0, 0],
        }
    )
    # WHEN the rows of window [10, 20) are cut out and clipped
    near = clip(touching(rows, 10, 20), 10, 20)
    # THEN the crossing message is gone and the activity spans the window
    assert near.select("start_ns", "end_ns").rows() == [(10, 20), (12, 14)]
    assert near["src_seq"].to_list() == [-1, 0]
    assert near["dst_seq"].to_list() == [1, 0]
    assert listed_windows(near, 10, 0, 100) == [10]


def test_a_pipeline_behind_reads_a_bounded_part_of_the_backlog_per_poll(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    # GIVEN every chunk landed before the pipeline polls (it fell behind),
    # and a poll that reads at most one chunk's rows
    parts = chunks(trace)
    for i, part in enumerate(parts):
        land(tmp_path, part, i)
    pipeline = OnlinePipeline(tmp_path, WINDOW, LATENESS, max_poll_rows=1)
    # WHEN it polls until nothing is left
    closed, reads = [], []
    for _ in range(len(parts)):
        closed += pipeline.poll()
        reads.append(pipeline.rows_read)
    closed += pipeline.poll(final=True)
    # THEN each poll read one more chunk (the rest waited on disk) and
    # closed windows as it went, and every row was read once
    assert reads == list(itertools.accumulate(len(p) for p in parts))
    assert pipeline.rows_read == len(trace) and pipeline.late_rows == 0
    # AND the windows are those of a pipeline that read the backlog at once
    at_once = OnlinePipeline(tmp_path / "again", WINDOW, LATENESS)
    for i, part in enumerate(parts):
        land(tmp_path / "again", part, i)
    everything = at_once.poll(final=True)
    assert [w.start_ns for w in closed] == [w.start_ns for w in everything]
    assert_same_cp(union_cp(closed), union_cp(everything))
    for got, want in zip(closed, everything, strict=True):
        assert got.summaries.activity.equals(want.summaries.activity)


def test_max_poll_rows_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_poll_rows must be > 0, got 0"):
        OnlinePipeline(tmp_path, WINDOW, LATENESS, max_poll_rows=0)
