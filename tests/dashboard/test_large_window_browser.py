"""Issue 15: a window of 10^6 activities draws in a real headless Chromium,
its timeline bounded by pixels (critical bars kept, the rest merged)."""

from __future__ import annotations

from typing import Any

import pytest

from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import (
    StaticSource,
    ViewState,
    WindowView,
    closed_label,
)
from sparktrail.engines import summarize
from sparktrail.synthetic import barrier_trace, window_cp_rows
from tests.dashboard.browser_support import TIMELINE_TITLE, require_browser, wait_until
from tests.dashboard.serving import served

pytestmark = pytest.mark.integration

S = 1_000_000_000
WAIT = 60.0
EDGES = 1_000_000

require_browser()

#: How many bars and points the timeline's traces hold in the page.
DRAWN = """
const gd = document.querySelector('#critical-timeline .js-plotly-plot');
return gd && gd.calcdata ? gd.calcdata.map(c => [c[0].trace.name, c.length]) : null;
"""


def test_a_million_edge_window_draws_its_critical_bars_and_merges_the_rest(
    browser: Any,
) -> None:
    # GIVEN a window whose CP rows are 10^6 activities on 64 slots
    rows = window_cp_rows(EDGES, workers=64, window_ns=S)
    summaries = summarize(barrier_trace(600, workers=4), S)
    view = WindowView.held(0, S, closed_label(0, S), summaries, rows)
    snapshot = ViewState(
        source="synthetic",
        status="one window",
        windows=(view,),
        activity_by_window=summaries.activity_by_window,
        live=False,
    )
    with served(create_app(StaticSource(snapshot))) as port:
        # WHEN the page opens
        browser.get(f"http://127.0.0.1:{port}/")
        title = wait_until(
            browser,
            lambda d: (t := d.execute_script(TIMELINE_TITLE)) and "merged" in t and t,
            WAIT,
        )
        drawn = dict(browser.execute_script(DRAWN))
    # THEN the title says how many activities were merged
    assert "activities merged per pixel" in title
    # AND the page holds bars by the pixel, not by the activity: every
    # critical one, and a bounded number of merged ones
    critical = int((rows["cp"] > 0).sum())
    assert drawn["activities"] >= critical
    assert drawn["activities"] + drawn["merged activities"] < 30_000
