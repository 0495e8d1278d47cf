"""The dashboard with 10,000 windows in a real headless Chromium.

A functional check, not a timing one: the page loads and draws every
graph, the picker finds an old window by its time, and picking it shows
that window, each within a generous wait.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import StaticSource, ViewState
from sparktrail.dashboard.over_time_chart import MAX_BARS
from sparktrail.dashboard.window_picker import PICKER_WINDOWS
from tests.dashboard.browser_support import (
    GRAPH_DATA,
    TIMELINE_TITLE,
    require_browser,
    wait_until,
)
from tests.dashboard.serving import served

pytestmark = pytest.mark.integration

WAIT = 60.0

require_browser()

ACTIVITY = """
const gd = document.querySelector('#activity-summary .js-plotly-plot');
return gd && gd.data && gd.data.length
  ? {bars: Math.max(...gd.data.map(t => t.x.length)),
     shapes: (gd.layout.shapes || []).length,
     shaded: gd.layout.shapes && gd.layout.shapes.length
       ? gd.layout.shapes[0].x0 : null}
  : null;
"""


@pytest.fixture
def url(many_windows: ViewState) -> Iterator[str]:
    with served(create_app(StaticSource(many_windows))) as port:
        yield f"http://127.0.0.1:{port}/"


def wait(driver: Any, condition: Any) -> Any:
    return wait_until(driver, condition, WAIT)


def test_ten_thousand_windows_load_and_an_old_one_is_found_and_shown(
    url: str, browser: Any, many_windows: ViewState
) -> None:
    from selenium.webdriver.common.by import By

    windows = many_windows.windows
    # GIVEN the page on 10,000 windows
    browser.get(url)
    # THEN every graph is drawn, the over-time chart in at most MAX_BARS bars
    ids = ["activity-summary", "straggler-summary", "critical-timeline"]
    wait(browser, lambda d: all(n > 0 for n in d.execute_script(GRAPH_DATA, ids)))
    chart = wait(browser, lambda d: d.execute_script(ACTIVITY))
    assert 0 < chart["bars"] <= MAX_BARS
    latest = wait(browser, lambda d: d.execute_script(TIMELINE_TITLE))
    assert windows[-1].label in latest
    # AND the picker lists follow-latest and the newest windows only
    browser.find_element(By.ID, "window-picker").click()
    listed = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "[role=option]"))
    assert 1 < len(listed) <= 2 + PICKER_WINDOWS
    assert windows[5].label not in [o.text for o in listed]

    # WHEN the start time of an old window is typed into the picker
    old = windows[5]
    search = wait(
        browser, lambda d: d.find_element(By.CSS_SELECTOR, "input[type=search]")
    )
    search.send_keys(old.label[:12])
    # THEN it is offered, and picking it shows it
    option = wait(
        browser,
        lambda d: next(
            (
                o
                for o in d.find_elements(By.CSS_SELECTOR, "[role=option]")
                if o.text == old.label
            ),
            False,
        ),
    )
    option.click()
    title = wait(
        browser,
        lambda d: (t := d.execute_script(TIMELINE_TITLE)) != latest and t,
    )
    assert old.label in title
    # AND the over-time chart keeps its bars, its shading moved to that window
    moved = wait(
        browser,
        lambda d: (
            (c := d.execute_script(ACTIVITY)) and c["shaded"] != chart["shaded"] and c
        ),
    )
    assert moved["bars"] == chart["bars"] and moved["shapes"] == 1
