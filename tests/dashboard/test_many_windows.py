"""The dashboard with many windows, without a browser.

With 10,000 windows the page must not ship 10,000 of anything per tick:
the picker lists the newest windows and finds older ones by search, the
over-time chart merges runs of windows, a pick patches the chart instead
of resending it, and the live loader reads a window's frames only when it
is shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import (
    LATEST,
    StaticSource,
    ViewState,
)
from sparktrail.dashboard.over_time_chart import MAX_BARS, coarsen_activity
from sparktrail.dashboard.page_content import GRAPHS, page_figures
from sparktrail.dashboard.whole_run import WHOLE_RUN
from sparktrail.dashboard.window_picker import PICKER_WINDOWS, picker_options
from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.store import WindowStore, store_dir
from sparktrail.pag import write_trace
from sparktrail.synthetic import barrier_trace

WINDOW_NS = 500_000


def test_windows_are_found_by_key(many_windows: ViewState) -> None:
    windows = many_windows.windows
    for view in windows[::997]:
        assert many_windows.window(view.key) is view
    for forged in (None, LATEST, "0", "../../etc", str(windows[0].start_ns + 1)):
        assert many_windows.window(forged) is windows[-1]


def test_the_picker_lists_the_newest_windows_and_finds_older_ones(
    many_windows: ViewState,
) -> None:
    windows = many_windows.windows
    # GIVEN 10,000 windows WHEN the picker opens without a search
    options = picker_options(many_windows)
    # THEN it lists follow-latest, the whole run and the newest windows,
    # newest first
    assert len(options) == 2 + PICKER_WINDOWS
    assert options[0]["value"] == LATEST
    assert options[1]["value"] == WHOLE_RUN
    assert options[2]["value"] == windows[-1].key
    assert options[-1]["value"] == windows[-PICKER_WINDOWS].key
    # WHEN the start time of an old window is typed
    old = windows[5]
    found = picker_options(many_windows, f" {old.label[:12]} ")
    # THEN that window is offered
    assert old.key in [o["value"] for o in found]
    assert len(found) < 5
    # AND a picked old window stays listed once the search is cleared
    kept = picker_options(many_windows, "", old.key)
    assert kept[-1] == {"label": old.label, "value": old.key}
    assert len(kept) == 3 + PICKER_WINDOWS
    # AND a search nothing matches offers follow-latest only
    assert picker_options(many_windows, "../../etc/passwd") == options[:1]


def test_the_over_time_chart_merges_runs_of_windows(many_windows: ViewState) -> None:
    rows = many_windows.activity_by_window
    # WHEN 10,000 windows are merged into bars
    bars = coarsen_activity(rows, MAX_BARS)
    # THEN there are at most MAX_BARS, the shares of each bar add up to 1,
    # and each activity keeps its critical time
    assert 0 < bars["window_start_ns"].n_unique() <= MAX_BARS
    assert bars.columns == rows.columns
    per_bar = bars.group_by("window_start_ns").agg(pl.col("cp_share").sum())
    assert per_bar["cp_share"].to_list() == pytest.approx([1.0] * len(per_bar))
    before = rows.group_by("activity").agg(pl.col("cp_ns").sum()).sort("activity")
    after = bars.group_by("activity").agg(pl.col("cp_ns").sum()).sort("activity")
    assert after["cp_ns"].to_list() == pytest.approx(before["cp_ns"].to_list())
    # AND the bars cover the windows' span without overlapping
    spans = bars.unique("window_start_ns").sort("window_start_ns")
    assert spans["window_start_ns"][0] == rows["window_start_ns"].min()
    assert spans["window_end_ns"][-1] == rows["window_end_ns"].max()
    assert (spans["window_start_ns"][1:] >= spans["window_end_ns"][:-1]).all()
    # AND the page's chart draws those bars
    chart = page_figures(many_windows, LATEST)["activity-summary"]
    assert 0 < max(len(trace.x) for trace in chart.data) <= MAX_BARS
    assert "windows per bar" in chart.layout.title.text


def test_few_windows_are_not_merged(many_windows: ViewState) -> None:
    rows = many_windows.activity_by_window.head(50)
    assert coarsen_activity(rows, MAX_BARS).equals(rows)


def post(
    client: Any,
    output: str,
    inputs: list[Any],
    state: tuple[Any, ...] = (),
    changed: int = 0,
) -> Any:
    """One callback over Dash's route (input ``changed`` changed).

    Returns the status, the JSON answer (or None) and its size in bytes.
    """
    names = output.strip(".").split("...") if output.startswith("..") else [output]
    outputs = [
        {"id": name.rpartition(".")[0], "property": name.rpartition(".")[2]}
        for name in names
    ]
    body = {
        "output": output,
        "outputs": outputs if len(outputs) > 1 else outputs[0],
        "inputs": [{"id": i, "property": p, "value": v} for i, p, v in inputs],
        "state": [{"id": i, "property": p, "value": v} for i, p, v in state],
        "changedPropIds": [f"{inputs[changed][0]}.{inputs[changed][1]}"],
    }
    response = client.post("/_dash-update-component", json=body)
    data = response.get_json() if response.status_code == 200 else None
    return response.status_code, data, len(response.data)


REFRESH = (
    "..status.children...counters.children...shown-version.data...drawn-windows.data.."
)
DRAW = ".." + "...".join(f"{key}.figure" for key in GRAPHS) + ".."


def test_callbacks_send_little_with_many_windows(many_windows: ViewState) -> None:
    # GIVEN the app on 10,000 windows, over its real callback route
    app = create_app(StaticSource(many_windows))
    client = app.server.test_client()
    # WHEN the page loads THEN its layout lists only the newest windows
    layout = client.get("/_dash-layout")
    assert layout.status_code == 200 and len(layout.data) < 100_000
    # WHEN a tick finds a new snapshot with the windows already drawn
    status, data, size = post(
        client,
        REFRESH,
        [("refresh", "n_intervals", 1)],
        (("shown-version", "data", 0), ("drawn-windows", "data", 1)),
    )
    # THEN it sends the status line, not the window list or the figures
    assert status == 200 and size < 2_000
    assert set(data["response"]) == {"status", "counters", "shown-version"}
    # WHEN the windows change THEN the picker gets the newest windows only
    status, data, size = post(
        client,
        "window-picker.options",
        [
            ("drawn-windows", "data", 2),
            ("window-picker", "search_value", None),
        ],
        (("window-picker", "value", LATEST),),
    )
    options = data["response"]["window-picker"]["options"]
    assert len(options) == 2 + PICKER_WINDOWS
    # WHEN the figures are drawn, then an old window is picked
    full = post(
        client,
        DRAW,
        [("window-picker", "value", LATEST), ("drawn-windows", "data", 1)],
        changed=1,
    )
    old = many_windows.windows[10].key
    picked = post(
        client,
        DRAW,
        [("window-picker", "value", old), ("drawn-windows", "data", 1)],
    )
    # THEN the pick moves the chart's shading with a patch, and the draw
    # stays small
    assert full[0] == picked[0] == 200
    assert full[2] < 1_000_000
    chart = picked[1]["response"]["activity-summary"]["figure"]
    assert "__dash_patch_update" in json.dumps(chart)
    assert picked[2] < full[2] / 2
    timeline = picked[1]["response"]["critical-timeline"]["figure"]
    assert many_windows.windows[10].label in timeline["layout"]["title"]["text"]


# -- the live loader ----------------------------------------------------------------


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A trace directory whose store holds its closed windows."""
    trace = barrier_trace(1500, workers=8, seed=2)
    trace_dir = tmp_path / "trace"
    write_trace(trace, trace_dir / "part-000.arrow")
    OnlinePipeline(trace_dir, WINDOW_NS, 2 * WINDOW_NS).poll()
    return trace_dir


def test_the_loader_reads_frames_only_when_a_window_is_shown(
    stored: Path, store_reads: list[int]
) -> None:
    read = store_reads
    # GIVEN a store of closed windows WHEN the loader starts on it
    snapshot = live_loader(stored, WINDOW_NS, 2 * WINDOW_NS, cached_windows=2).step()
    windows = snapshot.windows
    assert len(windows) > 3
    # THEN it reads no window's frames, only their over-time rows
    assert read == []
    store = WindowStore(store_dir(stored))
    expected = pl.concat(
        [
            store.read_window(w.start_ns, WINDOW_NS).summaries.activity_by_window
            for w in windows
        ],
        how="diagonal_relaxed",
    )
    read.clear()  # the reads of the expected rows just above
    assert snapshot.activity_by_window.equals(expected)
    # WHEN a window is shown twice THEN it is read once
    assert windows[0].summaries.straggler.height > 0
    assert windows[0].cp is not None
    assert read == [windows[0].start_ns]
    # AND beyond the cache's two windows, the least recently shown is read again
    for view in windows[1:3]:
        view.summaries  # noqa: B018
    windows[0].summaries  # noqa: B018
    assert read == [w.start_ns for w in (*windows[:3], windows[0])]


def test_steps_append_the_rows_a_restart_reads(tmp_path: Path) -> None:
    trace = barrier_trace(1500, workers=8, seed=2)
    cut = int(trace["end_ns"].quantile(0.5))  # type: ignore[arg-type]
    trace_dir = tmp_path / "trace"
    write_trace(trace.filter(pl.col("end_ns") <= cut), trace_dir / "part-000.arrow")
    # GIVEN a loader that closed the first windows
    loader = live_loader(trace_dir, WINDOW_NS, 2 * WINDOW_NS)
    first = loader.step()
    # WHEN the rest of the trace lands and the loader steps
    write_trace(trace.filter(pl.col("end_ns") > cut), trace_dir / "part-001.arrow")
    later = loader.step()
    assert len(later.windows) > len(first.windows) > 0
    # THEN its over-time rows are those a loader started now reads
    again = live_loader(trace_dir, WINDOW_NS, 2 * WINDOW_NS).step()
    assert [w.key for w in again.windows] == [w.key for w in later.windows]
    assert later.activity_by_window.equals(again.activity_by_window)
    # AND the newest windows' frames are in memory: they are the same objects
    assert later.windows[-1].summaries is later.windows[-1].summaries
