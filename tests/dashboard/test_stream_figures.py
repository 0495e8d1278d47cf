"""The Structured Streaming figure, from a real log's progress and by hand."""

from __future__ import annotations

import warnings

import polars as pl
import pytest

from sparktrail import summarize
from sparktrail.dashboard.live_view import ViewState, WindowView
from sparktrail.dashboard.page_content import stream_panel
from sparktrail.dashboard.stream_figures import batch_frame, stream_progress
from sparktrail.pag.context import AppContext
from sparktrail.pag.streams import StreamBatch, StreamSource
from sparktrail.pag.trace import Trace, load_trace
from tests.paths import KAFKA_STREAMING_LOG
from tests.summaries.builders import MS, balanced

KAFKA = KAFKA_STREAMING_LOG


def test_the_kafka_logs_batches_are_drawn_with_their_rates_and_phases() -> None:
    if not KAFKA.exists():
        pytest.skip(f"{KAFKA} is missing")
    from sparktrail.tracer import import_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = import_trace(KAFKA).context
    frame = batch_frame(app)
    # THEN one row per progress event, with Spark's own numbers
    assert len(frame) == len(app.batches) >= 8
    assert frame["trigger_ms"].is_not_null().all()
    assert (frame["addBatch_ms"] <= frame["trigger_ms"]).all()
    fig = stream_progress(app)
    names = {t.name.split(" ", 1)[1] for t in fig.data}
    assert {"input", "processed", "addBatch", "latestOffset"} <= names


def test_rates_phases_and_backlog_by_hand() -> None:
    app = AppContext(
        batches=tuple(
            StreamBatch(
                "q",
                batch_id=i,
                timestamp_ns=i * 10**9,
                input_rows_per_second=100.0,
                processed_rows_per_second=60.0,
                duration_ms={"triggerExecution": 1000, "addBatch": 600},
                sources=(StreamSource("kafka", backlog=10 * i),),
            )
            for i in range(4)
        )
    )
    fig = stream_progress(app)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["q processed"].y) == [60.0] * 4
    # the trigger's time not in a named phase is "other"
    assert list(by_name["q other"].y) == [400] * 4
    assert list(by_name["q backlog"].y) == [0, 10, 20, 30]


def test_no_batches_says_so_and_the_dashboard_hides_the_panel() -> None:
    fig = stream_progress(AppContext())
    assert "no Structured Streaming" in fig.layout.annotations[0].text
    s = summarize(balanced(), 100 * MS)
    view = WindowView.held(0, 100 * MS, "w", s, None)
    snapshot = ViewState(source="t", status="x", windows=(view,))
    assert stream_panel(snapshot) == (None, {"display": "none"})
    app = AppContext(batches=(StreamBatch("q", batch_id=0, timestamp_ns=0),))
    streamed = summarize(Trace(load_trace(balanced()).frame, app), 100 * MS)
    view = WindowView.held(0, 100 * MS, "w", streamed, None)
    figure, style = stream_panel(ViewState(source="t", status="x", windows=(view,)))
    assert figure is not None and style.get("display") != "none"
    assert isinstance(batch_frame(app), pl.DataFrame)


def test_a_click_on_a_batch_selects_the_window_its_trigger_started_in() -> None:
    from sparktrail.dashboard.window_picker import clicked_batch

    s = summarize(balanced(), 100 * MS)
    views = tuple(
        WindowView.held(k * 100 * MS, (k + 1) * 100 * MS, f"w{k}", s, None)
        for k in range(3)
    )
    live = ViewState(source="t", status="x", windows=views, live=True)
    # a batch whose trigger started 150 ms in: window 1
    app = AppContext(batches=(StreamBatch("q", batch_id=7, timestamp_ns=150 * MS),))
    fig = stream_progress(app)
    point = {"points": [{"customdata": list(fig.data[0].customdata[0])}]}
    assert point["points"][0]["customdata"] == [7, 150]  # ms
    assert clicked_batch(live, point) == views[1].key
    # a batch past the last closed window selects nothing yet
    late = {"points": [{"customdata": [8, 400.0]}]}
    assert clicked_batch(live, late) is None


def test_the_picked_window_is_shaded_on_the_streaming_panel() -> None:
    app = AppContext(
        batches=tuple(
            StreamBatch("q", batch_id=i, timestamp_ns=i * 100 * MS) for i in range(3)
        )
    )
    streamed = summarize(Trace(load_trace(balanced()).frame, app), 100 * MS)
    views = tuple(
        WindowView.held(k * 100 * MS, (k + 1) * 100 * MS, f"w{k}", streamed, None)
        for k in range(3)
    )
    snapshot = ViewState(source="t", status="x", windows=views)
    # WHEN window 1 is picked
    figure, _ = stream_panel(snapshot, views[1].key)
    # THEN one band covers its span, over all three rows
    assert figure is not None
    (band,) = figure.layout.shapes
    assert (band.x0, band.x1) == (
        "1970-01-01 00:00:00.100000",
        "1970-01-01 00:00:00.200000",
    )
    assert band.yref == "paper"
    # ... and the whole run shades nothing
    whole, _ = stream_panel(snapshot, "whole-run")
    assert whole is not None and not whole.layout.shapes
