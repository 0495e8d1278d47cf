"""The frame bundle: a window's summary frames in one file (the online store)."""

from __future__ import annotations

import polars as pl
import pytest

from sparktrail.engines import summarize
from sparktrail.errors import InputError
from sparktrail.summaries import Summaries
from sparktrail.summaries.bundle import read_bundle, write_bundle
from sparktrail.summaries.frames import SUMMARY_FRAMES
from sparktrail.summaries.result import BUNDLE_FILE, load_frame, saved_window
from tests.summaries.builders import MS, shuffle_join
from tests.summaries.test_result import assert_equal


@pytest.fixture(scope="module")
def summaries() -> Summaries:
    return summarize(shuffle_join(), 5 * MS)


def test_a_fast_save_is_one_bundle_beside_the_cp_rows_and_loads_equal(
    summaries, tmp_path
):
    # GIVEN summaries with hints, messages and shuffles, and some CP rows
    assert not summaries.hints.is_empty() and not summaries.communication.is_empty()
    cp = pl.DataFrame({"cp": [0.5, 0.25]})
    # WHEN they are saved the online store's way
    folder = summaries.save(tmp_path / "w", fast=True, beside={"cp.parquet": cp})
    # THEN the folder holds the bundle and the CP rows only
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [BUNDLE_FILE, "cp.parquet"]
    )
    # ... and every frame, dtype, the window length and origin come back
    assert_equal(Summaries.load(folder), summaries)
    assert saved_window(folder) == (summaries.window_ns, summaries.origin_ns)
    assert pl.read_parquet(folder / "cp.parquet").equals(cp)
    for name in SUMMARY_FRAMES:  # ... each frame alone, too
        assert load_frame(folder, name).equals(getattr(summaries, name)), name


def test_a_parquet_save_over_a_bundle_replaces_it(summaries, tmp_path):
    # GIVEN a folder saved fast, then saved again as Parquet files with
    # other hints (no hints at all)
    summaries.save(tmp_path, fast=True)
    other = summaries.__class__(**{**vars(summaries), "hints": summaries.hints.clear()})
    other.save(tmp_path)
    # WHEN it is loaded
    back = Summaries.load(tmp_path)
    # THEN the Parquet files are read, not the stale bundle
    assert not (tmp_path / BUNDLE_FILE).exists()
    assert back.hints.is_empty() and load_frame(tmp_path, "hints").is_empty()


def test_a_bundle_keeps_frame_order_metadata_and_reads_only_what_is_asked(tmp_path):
    # GIVEN three frames, one empty, and metadata
    frames = {
        "b": pl.DataFrame({"x": [1, 2], "s": ["a", None]}),
        "a": pl.DataFrame(schema={"y": pl.Float64}),
        "c": pl.DataFrame({"l": [[1, 2], []]}),
    }
    write_bundle(tmp_path / "f", frames, {"k": "v"})
    # WHEN it is read whole and in part
    whole, meta = read_bundle(tmp_path / "f")
    part, _ = read_bundle(tmp_path / "f", ["c"])
    # THEN the frames come back in order, equal, with their dtypes
    assert list(whole) == ["b", "a", "c"] and meta == {"k": "v"}
    for name, frame in frames.items():
        assert whole[name].equals(frame) and whole[name].schema == frame.schema
    assert list(part) == ["c"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # cut short (a torn copy)
        lambda data: b"PAR1" + data[4:],  # not an Arrow stream at all
        lambda data: b"",
    ],
)
def test_a_damaged_bundle_is_refused_naming_the_file(summaries, tmp_path, damage):
    # GIVEN a fast-saved folder whose bundle was damaged
    summaries.save(tmp_path, fast=True)
    path = tmp_path / BUNDLE_FILE
    path.write_bytes(damage(path.read_bytes()))
    # WHEN it is loaded
    with pytest.raises(InputError) as caught:
        Summaries.load(tmp_path)
    # THEN the error names the file
    assert str(path) in str(caught.value)


def test_a_bundle_without_a_required_frame_is_refused_naming_it(summaries, tmp_path):
    # GIVEN a bundle written without the hints frame
    frames = {n: f for n, f in summaries.frames().items() if n != "hints"}
    write_bundle(tmp_path / BUNDLE_FILE, frames)
    # WHEN it is loaded, or the hints alone
    with pytest.raises(InputError, match="holds no 'hints' frame"):
        Summaries.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="holds no 'hints' frame"):
        load_frame(tmp_path, "hints")


def test_a_bundle_without_window_metadata_takes_the_windows_from_the_frame(
    summaries, tmp_path
):
    # GIVEN a bundle of every frame but no metadata
    write_bundle(tmp_path / BUNDLE_FILE, summaries.frames())
    # WHEN it is loaded, and its window asked alone
    back = Summaries.load(tmp_path)
    # THEN the window length and origin are those of the windows frame
    assert_equal(back, summaries)
    assert saved_window(tmp_path) == (summaries.window_ns, summaries.origin_ns)
