"""Figure builders of sparktrail.dashboard.figures, on hand-built summaries."""

from __future__ import annotations

import html
import json

import plotly.graph_objects as go
import polars as pl
import pytest

from sparktrail.dashboard import figures
from sparktrail.engines import summarize
from sparktrail.pag.context import AppContext, ExecutorLife
from sparktrail.pag.trace import Trace, load_trace
from sparktrail.summaries import HINT_SCHEMA

S = 1_000_000_000


def activity_by_window() -> pl.DataFrame:
    # Two windows of 1 s: window 0 is 3/4 processing, window 1 all gc.
    return pl.DataFrame(
        {
            "window_start_ns": [0, 0, S],
            "window_end_ns": [S, S, 2 * S],
            "activity": ["processing", "gc", "gc"],
            "cp_share": [0.75, 0.25, 1.0],
            "cp_ns": [0.75e9, 0.25e9, 1e9],
            "time_ns": [S, S, S],
        }
    )


def cp_rows() -> pl.DataFrame:
    # One 10 ms window: slot 0 computes for 10 ms (all CP), slot 1 for 4 ms
    # then waits; a launch message from the driver to slot 1.
    ms = 1_000_000
    return pl.DataFrame(
        {
            "window_start_ns": [0, 0, 0, 0],
            "window_end_ns": [10 * ms] * 4,
            "src_worker": ["exec-1/0", "exec-1/1", "exec-1/1", "driver"],
            "dst_worker": ["exec-1/0", "exec-1/1", "exec-1/1", "exec-1/1"],
            "start_ns": [0, 0, 4 * ms, 0],
            "end_ns": [10 * ms, 4 * ms, 10 * ms, 0],
            "activity": ["processing", "processing", "waiting", "control"],
            "operator": ["stage 0: count at A.scala:3"] * 2 + [None, None],
            "stage_id": [0, 0, None, 0],
            "task_id": [1, 2, None, 2],
            "cp": [1.0, 0.0, 0.0, 0.0],
        }
    )


def test_activity_over_time_stacks_one_trace_per_activity() -> None:
    # GIVEN CP by activity in two windows
    # WHEN the figure is built
    fig = figures.activity_over_time(activity_by_window())
    # THEN one stacked bar trace per activity, largest total first, in the
    # activity's own colour, each bar as wide as its window (in ms)
    assert [t.name for t in fig.data] == ["gc", "processing"]
    assert fig.layout.barmode == "stack"
    assert fig.data[0].marker.color == figures.ACTIVITY_COLOURS["gc"]
    assert list(fig.data[0].y) == [0.25, 1.0]
    assert list(fig.data[0].width) == [1000.0, 1000.0]
    assert fig.layout.yaxis.title.text == "share of the critical path"
    assert fig.layout.xaxis.title.text == "window start (UTC)"


def test_straggler_bars_compare_cp_with_fair_share() -> None:
    straggler = pl.DataFrame(
        {
            "worker": ["exec-1/1", "exec-1/0"],
            "executor": ["1", "1"],
            "cp_share": [0.1, 0.9],
            "fair_share": [0.5, 0.5],
            "ratio": [0.2, 1.8],
        }
    )
    fig = figures.straggler_bars(straggler)
    assert [t.name for t in fig.data] == ["CP share", "fair share"]
    # largest CP first
    assert list(fig.data[0].x) == ["executor 1 · core 0", "executor 1 · core 1"]
    assert list(fig.data[0].y) == [0.9, 0.1]
    assert list(fig.data[1].y) == [0.5, 0.5]
    assert fig.layout.xaxis.title.text == "worker"


def test_straggler_bars_accept_the_executor_frame() -> None:
    executor = pl.DataFrame(
        {
            "executor_id": [None, "1"],
            "role": ["driver", "executor"],
            "cp_share": [0.3, 0.7],
            "fair_share": [0.5, 0.5],
            "ratio": [0.6, 1.4],
        }
    )
    fig = figures.straggler_bars(executor)
    assert list(fig.data[0].x) == ["1", "driver"]
    assert fig.layout.xaxis.title.text == "executor id"


def test_straggler_bars_past_the_top_draw_the_rest_as_one_mean_bar() -> None:
    # GIVEN 128 slots (32 executors of 4 cores), one of them far ahead
    workers = [f"exec-{e}/{c}" for e in range(1, 33) for c in range(4)]
    cp = [0.5] + [0.5 / 127] * 127
    straggler = pl.DataFrame(
        {
            "worker": workers,
            "cp_share": cp,
            "fair_share": [1 / 128] * 128,
            "ratio": [c * 128 for c in cp],
        }
    )
    fig = figures.straggler_bars(straggler)
    # THEN 30 bars one by one, the straggler first, then the other 98 as one
    labels = list(fig.data[0].x)
    assert len(labels) == 31
    assert labels[0] == "executor 1 · core 0"
    assert labels[-1] == "98 others (mean)"
    assert fig.data[0].y[-1] == pytest.approx(0.5 / 127)
    assert fig.data[1].y[-1] == pytest.approx(1 / 128)
    assert "the 30 largest, then the other 98" in fig.layout.title.text


def test_operator_bars_label_the_row_outside_any_stage() -> None:
    operator = pl.DataFrame(
        {
            "operator": [None, "stage 0: count at A.scala:3", "stage 1: x"],
            "cp_share": [0.2, 0.7, 0.1],
            "cp_ns": [2e8, 7e8, 1e8],
            "call_site": [None, "A.scala:3", None],
            "tasks": [None, 4, 2],
            "median_task_ns": [None, 1e6, 2e6],
        }
    )
    fig = figures.operator_bars(operator)
    assert len(fig.data) == 1
    # largest share on top, i.e. last in plotly's bottom-up order
    assert list(fig.data[0].y) == [
        "stage 1: x",
        figures.NO_STAGE,
        "stage 0: count at A.scala:3",
    ]
    assert list(fig.data[0].x) == [0.1, 0.2, 0.7]
    assert fig.layout.xaxis.title.text == "share of the critical path"


def test_the_row_outside_any_stage_is_named_by_its_largest_parts() -> None:
    # GIVEN the row outside any stage, 60% of the path: 45% waiting, 10%
    # driver code, 5% scheduling
    parts = [
        {"activity": "waiting", "cp_share": 0.45},
        {"activity": "driver", "cp_share": 0.10},
        {"activity": "scheduling", "cp_share": 0.05},
    ]
    operator = pl.DataFrame(
        {
            "operator": [None, "count at A.scala:3"],
            "cp_share": [0.6, 0.4],
            "cp_ns": [6e8, 4e8],
            "parts": [parts, None],
        }
    )
    fig = figures.operator_bars(operator)
    # THEN its bar says what it held, in words and shares (hover: whole)
    label = fig.data[0].customdata[-1][-1]
    assert label == (
        "(no stage: waiting for work 45%, driver code between jobs 10%, "
        "task scheduling 5%)"
    )


def test_communication_heatmap_sums_kinds_per_channel() -> None:
    communication = pl.DataFrame(
        {
            "src": ["executor 1", "executor 1", None, "driver"],
            "dst": ["executor 2", "executor 2", "executor 2", "executor 1"],
            "kind": ["shuffle", "data", "shuffle", "control"],
            "cp_share": [0.3, 0.1, 0.05, 0.0],
        }
    )
    fig = figures.communication_heatmap(communication)
    assert len(fig.data) == 1
    heat = fig.data[0]
    names = list(heat.x)
    assert names == ["driver", "executor 1", "executor 2", "unknown"]
    assert list(heat.y) == names
    row, col = names.index("executor 1"), names.index("executor 2")
    assert heat.z[row][col] == pytest.approx(0.4)
    assert heat.text[row][col] == "data, shuffle"
    assert heat.z[names.index("unknown")][col] == pytest.approx(0.05)
    assert heat.z[0][0] is None  # no driver -> driver channel
    assert fig.layout.xaxis.title.text == "receiver (dst)"
    assert fig.layout.yaxis.title.text == "sender (src)"


def test_critical_gantt_colours_bars_by_cp() -> None:
    # GIVEN the CP rows of one window
    fig = figures.critical_gantt(cp_rows())
    # THEN local activities are bars coloured by their CP, messages a line
    bars, messages = fig.data
    assert isinstance(bars, go.Bar) and isinstance(messages, go.Scatter)
    assert list(bars.marker.color) == [1.0, 0.0, 0.0]
    assert bars.marker.colorscale is not None
    assert list(bars.y) == [
        "executor 1 · core 0",
        "executor 1 · core 1",
        "executor 1 · core 1",
    ]
    assert list(bars.base) == [0.0, 0.0, 4.0]
    assert list(bars.x) == [10.0, 4.0, 6.0]
    assert list(bars.marker.opacity) == [1.0, 1.0, 0.3]  # waiting is faint
    hover = list(bars.customdata[0])[:4]
    assert hover == ["processing", "stage 0: count at A.scala:3", "0", "1"]
    assert list(messages.y) == ["driver", "executor 1 · core 1", None]
    assert fig.layout.xaxis.title.text == "ms since window start"
    # the driver is drawn on top (last category)
    assert list(fig.layout.yaxis.categoryarray)[-1] == "driver"


def test_critical_gantt_refuses_more_than_one_window() -> None:
    rows = pl.concat(
        [cp_rows(), cp_rows().with_columns(window_start_ns=pl.lit(7, dtype=pl.Int64))]
    )
    with pytest.raises(ValueError, match="one window, got 2"):
        figures.critical_gantt(rows)


def test_hint_cells_show_blank_nulls_and_the_rules_words() -> None:
    hints = pl.DataFrame(
        {
            "kind": ["hotspot", "driver_bound"],
            "severity": ["high", "low"],
            "stage_id": [3, None],
            "executor_id": ["2", None],
            "partition": [7, None],
            "cp_share": [0.4, 0.2],
            "predicted_saving_ns": [1.5e9, None],
            "saving_share": [0.12, None],
            "share_of": ["run", "run"],
            "occurrences": [1, 1],
            "evidence": [json.dumps({"records": 900, "median": 100}), "{}"],
            "action": ["salt the key", "move work into jobs"],
        },
        schema=HINT_SCHEMA,
    )
    rows = [figures.hint_cells(row) for row in hints.iter_rows(named=True)]
    assert len(rows[0]) == len(figures.HINT_COLUMNS)
    columns = list(figures.HINT_COLUMNS)
    cell = {c: [r[columns.index(c)] for r in rows] for c in columns}
    assert cell["saving"] == ["1.5 s (12% of the run)", ""]
    assert cell["stage_id"] == ["3", ""]
    assert cell["partition"] == ["7", ""]
    assert cell["action"] == ["salt the key", "move work into jobs"]
    # AND the raw evidence is not a cell (it is in --json)
    assert not any("records=" in c or "900" in c for r in rows for c in r)


@pytest.mark.parametrize(
    ("builder", "frame"),
    [
        (figures.activity_over_time, activity_by_window().clear()),
        (figures.critical_gantt, cp_rows().clear()),
    ],
)
def test_empty_frames_give_a_message_not_an_empty_plot(builder, frame) -> None:
    fig = builder(frame)
    assert len(fig.data) == 0
    assert fig.layout.annotations[0].text


def test_every_builder_accepts_real_summaries() -> None:
    # GIVEN summaries of a small trace: a driver launch, two tasks, one slow
    trace = pl.DataFrame(
        {
            "src_worker": ["driver", "driver", "exec-1/0", "exec-1/1", "exec-1/0"],
            "dst_worker": ["exec-1/0", "exec-1/1", "exec-1/0", "exec-1/1", "driver"],
            "start_ns": [0, 0, 0, 0, 40],
            "end_ns": [0, 0, 40, 10, 40],
            "activity": ["control", "control", "processing", "processing", "control"],
            "stage_id": [0, 0, 0, 0, 0],
            "task_id": [0, 1, 0, 1, 0],
        }
    )
    s = summarize(trace, 20)
    # WHEN every builder runs on its frame THEN each gives a figure with data
    built = [
        figures.activity_over_time(s.activity_by_window),
        figures.straggler_bars(s.straggler),
        figures.straggler_bars(s.executor),
        figures.operator_bars(s.operator),
    ]
    assert all(isinstance(f, go.Figure) and len(f.data) for f in built)
    # (its channels, zero-time control messages, hold none of the path: a
    # sentence, not a heatmap)
    heat = figures.communication_heatmap(s.communication)
    assert "held nothing back" in heat.layout.annotations[0].text


def test_the_heatmap_colour_bar_resolves_a_small_maximum() -> None:
    # GIVEN channels whose largest CP share is 1.54%
    communication = pl.DataFrame(
        {
            "src": ["executor 1", "executor 2"],
            "dst": ["executor 2", "executor 1"],
            "kind": ["shuffle", "shuffle"],
            "cp_share": [0.0154, 0.001],
        }
    )
    # WHEN the heatmap is drawn
    heat = figures.communication_heatmap(communication).data[0]
    # THEN the scale ends at that maximum and its ticks (every fifth of it)
    # read as distinct percentages
    assert heat.zmax == pytest.approx(0.0154)
    tickformat = heat.colorbar.tickformat
    ticks = [format(heat.zmax * i / 5, tickformat) for i in range(6)]
    assert len(set(ticks)) == 6, ticks
    assert ticks[-1] == "1.5%"


def test_a_negligible_channel_share_draws_no_heatmap() -> None:
    # GIVEN channels whose largest CP share is 0.005% (issue 46: a scale
    # saturated at that read as a hot channel)
    communication = pl.DataFrame(
        {
            "src": ["executor 1", "executor 2"],
            "dst": ["executor 2", "executor 1"],
            "kind": ["shuffle", "shuffle"],
            "cp_share": [0.00005, 0.00001],
        }
    )
    # WHEN it is drawn THEN no heatmap, a sentence with the largest share
    fig = figures.communication_heatmap(communication)
    assert len(fig.data) == 0
    assert "0.005%" in fig.layout.annotations[0].text


def test_timeline_hover_gives_start_end_and_duration_in_ms() -> None:
    # GIVEN a bar from 451 ms to 661 ms of its window
    ms = 1_000_000
    rows = cp_rows().with_columns(
        start_ns=pl.Series([451 * ms, 0, 4 * ms, 0]),
        end_ns=pl.Series([661 * ms, 4 * ms, 10 * ms, 0]),
        window_end_ns=pl.lit(1000 * ms),
    )
    # WHEN the timeline is drawn
    bars, messages = figures.critical_gantt(rows).data
    # THEN its hover says start → end (duration), each in ms
    hover = bars.hovertemplate
    assert "+" not in hover
    assert bars.customdata[0][4] == "451 ms → 661 ms (210 ms)"
    assert "%{customdata[4]}" in hover
    assert messages.customdata[0][4] == "0 ms → 0 ms (0 ms)"


def test_workers_are_shown_by_one_label_everywhere() -> None:
    # GIVEN worker names as the trace holds them
    # THEN one function shows them
    assert figures.worker_label("exec-3/1") == "executor 3 · core 1"
    assert figures.worker_label("exec-driver/1") == "driver · core 1"
    assert figures.worker_label("driver") == "driver"
    # AND the timeline rows, the straggler bars and the hints use it
    gantt = figures.critical_gantt(cp_rows())
    assert "exec-" not in " ".join(map(str, gantt.layout.yaxis.categoryarray))
    hints = pl.DataFrame(
        {
            "kind": ["straggler"],
            "severity": ["high"],
            "stage_id": [None],
            "executor_id": ["3"],
            "partition": [None],
            "cp_share": [0.4],
            "predicted_saving_ns": [1e9],
            "saving_share": [0.1],
            "share_of": ["run"],
            "occurrences": [1],
            "evidence": [json.dumps({"worker": "exec-3/1"})],
            "action": ["move work off exec-3/1 and exec-driver/2"],
        },
        schema=HINT_SCHEMA,
    )
    [cells] = [figures.hint_cells(row) for row in hints.iter_rows(named=True)]
    assert cells[-1] == "move work off executor 3 · core 1 and driver · core 2"


def test_every_chart_has_a_one_line_caption_in_glossary_words() -> None:
    # THEN each chart has one line saying what it shows and how to read it
    charts = {"activity", "straggler", "operator", "communication", "timeline"}
    assert charts | {"hints"} == set(figures.CAPTIONS)
    for caption in figures.CAPTIONS.values():
        assert "\n" not in caption and 40 < len(caption) < 260
    assert "fair share" in figures.CAPTIONS["straggler"]
    assert "(no stage: …)" in figures.CAPTIONS["operator"]
    assert "CP" in figures.CAPTIONS["timeline"]
    # AND every hints column has hover help
    assert set(figures.HINT_HELP) == set(figures.HINT_COLUMNS)


def test_the_report_has_captions_and_explained_hint_headings(tmp_path) -> None:
    from sparktrail.dashboard.report import write_report
    from sparktrail.engines.profiler import Profile, window_cp

    # GIVEN a report of a small trace with a hint
    trace = pl.DataFrame(
        {
            "src_worker": ["driver", "exec-1/0", "exec-2/0"],
            "dst_worker": ["driver", "exec-1/0", "exec-2/0"],
            "start_ns": [0, 10 * S, 10 * S],
            "end_ns": [10 * S, 120 * S, 120 * S],
            "activity": ["driver", "processing", "waiting"],
        }
    )
    # (a YARN application whose properties and executors are known, so that
    # its idle_capacity hint is checked: executor 2 idles 120 s, past a 30 s
    # idle timeout)
    executors = tuple(ExecutorLife(e, 1, added_ns=0) for e in ("1", "2"))
    props = {"spark.master": "yarn", "spark.shuffle.service.enabled": "true"}
    app = AppContext(master="yarn", properties=props, executors=executors)
    run = Trace(load_trace(trace).frame, app)
    s = summarize(run, 10 * S)
    cp = window_cp(trace, 10 * S, 20 * S)
    page = write_report(Profile(s, cp, "t"), tmp_path)
    page = page.read_text()
    # THEN every chart's caption is under it, and hint headings explain themselves
    assert not s.hints.is_empty()
    for chart, caption in figures.CAPTIONS.items():
        # (one executor: the communication chart is a note instead)
        assert (html.escape(caption) in page) == (chart != "communication")
    assert html.escape(figures.ONE_EXECUTOR_NOTE) in page
    for help_text in figures.HINT_HELP.values():
        assert f'title="{html.escape(help_text)}"' in page


def test_a_large_window_keeps_its_critical_bars_and_merges_the_rest() -> None:
    from sparktrail.synthetic import window_cp_rows

    # GIVEN a window of 100,000 activities on 64 slots, 0.2% of them critical
    rows = window_cp_rows(100_000, workers=64)
    drawn, merged = figures.timeline_rows(rows, 0, S)
    # THEN every critical activity has its own bar
    critical = rows.filter(pl.col("cp") > 0)
    assert 0 < len(critical) < figures.MAX_TIMELINE_BARS // 2
    assert critical["task_id"].is_in(drawn["task_id"].implode()).all()
    # AND every other activity is drawn or merged, none lost
    assert len(drawn) + int(merged["edges"].sum()) == len(rows)
    # AND the bars are bounded by pixels, not activities
    pixels = figures.MERGED_BAR_BUDGET // 64
    assert len(merged) <= 64 * pixels
    assert len(drawn) <= len(critical) + 64 * pixels
    # AND a worker's merged pixels do not overlap
    for _, one in merged.group_by("src_worker"):
        ordered = one.sort("start_ns")
        assert (ordered["start_ns"][1:] >= ordered["end_ns"][:-1]).all()
    # AND the figure says so in its title, with a grey merged trace
    fig = figures.critical_gantt(rows)
    assert "activities merged per pixel" in fig.layout.title.text
    assert [t.name for t in fig.data] == ["activities", "merged activities"]


def test_a_small_window_draws_every_activity() -> None:
    from sparktrail.synthetic import window_cp_rows

    rows = window_cp_rows(figures.MAX_TIMELINE_BARS, workers=8)
    drawn, merged = figures.timeline_rows(rows, 0, S)
    assert drawn.equals(rows) and merged.is_empty()
    assert "merged" not in figures.critical_gantt(rows).layout.title.text


def test_only_the_most_critical_go_when_too_many_are_critical() -> None:
    from sparktrail.synthetic import window_cp_rows

    rows = window_cp_rows(20_000, workers=8).with_columns(
        cp=pl.int_range(pl.len()).cast(pl.Float64) + 1.0
    )
    drawn, merged = figures.timeline_rows(rows, 0, S)
    kept = drawn.filter(pl.col("cp") >= 20_000 - figures.MAX_TIMELINE_BARS // 2 + 1)
    assert len(kept) == figures.MAX_TIMELINE_BARS // 2
    assert len(drawn) + int(merged["edges"].sum()) == len(rows)
    assert float(merged["cp"].max()) < 20_000 - figures.MAX_TIMELINE_BARS // 2 + 1
