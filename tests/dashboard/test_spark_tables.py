"""The stage and executor tables' builders (no browser)."""

from __future__ import annotations

import html
import re

import polars as pl

from sparktrail import summarize
from sparktrail.dashboard import spark_tables
from sparktrail.dashboard.live_view import ViewState, WindowView
from sparktrail.dashboard.page_content import TABLES, WHOLE_RUN_TABLES, table_data
from sparktrail.dashboard.whole_run import whole_run_view
from sparktrail.summaries.stage_stats import EXECUTOR_STATS, STAGE_STATS
from tests.summaries.builders import MS, Trace, balanced


def two_stages() -> pl.DataFrame:
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 30)], stage=0, records=3)
    t.task("exec-1/1", 0, [("processing", 10)], stage=0, records=1)
    t.message("exec-1/0", "exec-2/0", 30)
    t.task("exec-2/0", 30, [("processing", 5)], stage=1, name="save at B:2")
    return t.frame()


def test_every_frame_column_has_a_heading_help_and_unit() -> None:
    assert set(spark_tables.STAGE_COLUMNS) == set(STAGE_STATS) - {"job_id"}
    assert set(spark_tables.EXECUTOR_COLUMNS) == set(EXECUTOR_STATS)
    every = [*spark_tables.STAGE_COLUMNS.values()]
    for column in [*every, *spark_tables.EXECUTOR_COLUMNS.values()]:
        assert column.help and column.unit in {
            "text",
            "count",
            "duration",
            "bytes",
            "share",
            "ratio",
        }


def test_records_keep_numbers_in_the_shown_units() -> None:
    s = summarize(two_stages(), 40 * MS)
    records = spark_tables.table_records(s.stages, spark_tables.STAGE_COLUMNS)
    first = records[0]
    assert first["stage_id"] == 0
    assert first["operator"] == "count at App.scala:10"  # no "stage 0:" twice
    assert first["wall_ns"] == 0.03 and first["max_task_ns"] == 0.03
    assert 0 < first["cp_share"] <= 100 and isinstance(first["cp_share"], float)
    assert first["skew"] == 1.5


def test_html_table_sorts_by_number_and_explains_each_heading() -> None:
    s = summarize(two_stages(), 40 * MS)
    page = spark_tables.html_table(s.stages, spark_tables.STAGE_COLUMNS, "stages-table")
    assert page.startswith('<table id="stages-table" class="sortable">')
    titles = re.findall(r'<th title="([^"]+)">', page)
    assert titles == [html.escape(c.help) for c in spark_tables.STAGE_COLUMNS.values()]
    assert '<td data-sort="0.03">0.030</td>' in page
    # text cells carry no sort number (sorted by their text)
    assert "<td>count at App.scala:10</td>" in page


def test_html_table_says_when_rows_are_cut() -> None:
    frame = pl.DataFrame({"stage_id": list(range(5)), "cp_share": [0.1] * 5})
    page = spark_tables.html_table(frame, spark_tables.STAGE_COLUMNS, "t", top=2)
    assert page.count("<tr>") == 3 and "The first 2 of 5 rows." in page


def test_table_data_of_a_window_and_of_the_live_whole_run() -> None:
    s = summarize(two_stages(), 40 * MS)
    view = WindowView.held(0, 40 * MS, "w0", s, None)
    snap = ViewState(
        source="t",
        status="live",
        live=True,
        windows=(view,),
        activity_by_window=s.activity_by_window,
    )
    (stage_rows, stage_note), (executor_rows, _) = table_data(snap, view.key)
    assert stage_note == "" and [r["stage_id"] for r in stage_rows] == [0, 1]
    assert {r["executor_id"] for r in executor_rows} == {"1", "2"}
    # the live whole run has no tables, and says where they come from
    whole = whole_run_view(snap)
    assert whole is not None
    notes = [note for _, note in table_data(snap, whole.key)]
    assert notes == [WHOLE_RUN_TABLES] * len(TABLES)


def test_no_hint_is_a_short_sentence_at_the_top_of_the_page() -> None:
    from sparktrail.dashboard.figures import NO_HINT
    from sparktrail.dashboard.page_content import hints_panel

    s = summarize(balanced(), 100 * MS)
    assert s.hints.filter(pl.col("severity") != "info").is_empty()
    view = WindowView.held(0, 100 * MS, "w0", s, None)
    snap = ViewState(
        source="t",
        status="live",
        live=True,
        windows=(view,),
        activity_by_window=s.activity_by_window,
    )
    # (a picked window's hints are said to be that window's)
    note, sentence = hints_panel(snap, view.key)
    assert note.children.startswith("Window ")
    assert sentence.children == NO_HINT
