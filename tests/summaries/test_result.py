"""Summaries.save / Summaries.load: the one owner of the summaries on disk."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from sparktrail.engines import summarize
from sparktrail.errors import InputError
from sparktrail.pag.context import AppContext, JobSpan
from sparktrail.pag.schemas import SchemaError
from sparktrail.summaries import Summaries
from sparktrail.summaries.frames import CP_SHARE, SUMMARY_FRAMES
from sparktrail.summaries.result import CONTEXT_FILE
from tests.summaries.builders import MS, shuffle_join


@pytest.fixture(scope="module")
def summaries() -> Summaries:
    return summarize(shuffle_join(), 5 * MS)


def assert_equal(a: Summaries, b: Summaries) -> None:
    for name in SUMMARY_FRAMES:
        assert getattr(a, name).equals(getattr(b, name)), name
    assert (a.window_ns, a.origin_ns) == (b.window_ns, b.origin_ns)
    assert a.context == b.context


def test_round_trip_is_equal(summaries, tmp_path):
    # GIVEN the summaries of a run with shuffles, messages and hints
    assert not summaries.communication.is_empty()
    # WHEN they are saved and loaded
    folder = summaries.save(tmp_path / "s")
    back = Summaries.load(folder)
    # THEN every frame, dtype and the window length and origin come back
    # (a trace without a context: no context.json)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{name}.parquet" for name in SUMMARY_FRAMES
    )
    assert_equal(back, summaries)


def test_a_folder_without_metadata_takes_the_windows_from_the_frame(
    summaries, tmp_path
):
    # GIVEN a folder written the old way: frames only, no window metadata
    for name in SUMMARY_FRAMES:
        getattr(summaries, name).write_parquet(tmp_path / f"{name}.parquet")
    # WHEN it is loaded
    back = Summaries.load(tmp_path)
    # THEN the window length and origin are those of the windows frame
    assert_equal(back, summaries)


def test_a_frame_with_a_wrong_dtype_is_refused_naming_table_and_column(
    summaries, tmp_path
):
    # GIVEN saved summaries whose activity shares were written as strings
    summaries.save(tmp_path)
    bad = summaries.activity.with_columns(pl.col(CP_SHARE).cast(pl.String))
    bad.write_parquet(tmp_path / "activity.parquet")
    # WHEN they are loaded
    with pytest.raises(SchemaError) as caught:
        Summaries.load(tmp_path)
    # THEN the error names the table, the column and both dtypes
    assert caught.value.table.endswith("activity")
    assert caught.value.column == CP_SHARE
    assert "activity: column 'cp_share' has dtype String, expected Float64" in str(
        caught.value
    )


def test_a_missing_file_is_refused_naming_it(summaries, tmp_path):
    # GIVEN saved summaries without their hints
    summaries.save(tmp_path)
    (tmp_path / "hints.parquet").unlink()
    # WHEN they are loaded
    with pytest.raises(FileNotFoundError) as caught:
        Summaries.load(tmp_path)
    # THEN the error names the missing file
    assert str(tmp_path / "hints.parquet") in str(caught.value)
    assert caught.value.filename == str(tmp_path / "hints.parquet")


def test_summaries_with_a_wrong_column_are_refused_when_built(summaries):
    # GIVEN summaries whose straggler frame lost a column
    broken = dataclasses.replace(summaries, straggler=summaries.straggler.drop("ratio"))
    # WHEN they are checked (as summaries_from_partials does)
    with pytest.raises(SchemaError, match="straggler: missing column 'ratio'"):
        broken.check()


def test_the_context_round_trips_and_an_old_folder_has_an_empty_one(
    summaries, tmp_path
):
    # GIVEN summaries with an application context, saved
    context = AppContext(app_id="app-1", master="yarn", jobs=(JobSpan(0, 1, 2),))
    folder = dataclasses.replace(summaries, context=context).save(tmp_path / "s")
    # THEN it is context.json beside the frames, and loads back equal
    assert (folder / CONTEXT_FILE).is_file()
    assert Summaries.load(folder).context == context
    # AND a folder from before the context (no context.json) loads empty
    (folder / CONTEXT_FILE).unlink()
    assert Summaries.load(folder).context == AppContext()
    # AND a damaged one is refused naming the file
    (folder / CONTEXT_FILE).write_text("[]")
    with pytest.raises(InputError, match=r"context\.json"):
        Summaries.load(folder)
    # AND saving an empty context over it leaves no stale file
    dataclasses.replace(summaries, context=AppContext()).save(folder)
    assert not (folder / CONTEXT_FILE).exists()


def test_hints_saved_without_share_of_load_with_it_read_from_their_kind(
    summaries, tmp_path
):
    # GIVEN a folder whose hints frame an older sparktrail wrote: no
    # share_of column, one idle_capacity hint (its saving: slot time)
    older = pl.DataFrame(
        {"kind": ["idle_capacity", "hotspot"], "severity": ["low", "high"]}
    ).join(summaries.hints.drop("kind", "severity", "share_of"), how="cross")
    older = older.select([c for c in summaries.hints.columns if c != "share_of"])
    folder = summaries.save(tmp_path / "s")
    older.write_parquet(folder / "hints.parquet")
    # WHEN it is loaded
    back = Summaries.load(folder)
    # THEN the hints have the column in its place, read from the kind
    assert back.hints.columns == summaries.hints.columns
    shares = dict(zip(back.hints["kind"], back.hints["share_of"], strict=False))
    assert shares == {"idle_capacity": "slot_time", "hotspot": "run"}
