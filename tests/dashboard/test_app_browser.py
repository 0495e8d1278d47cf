"""The live dashboard in a real headless Chromium, on a real trace directory.

The shared event log is imported, split in two trace files by time, and
served by ``create_app`` over an ``UpdateThread`` running the online
pipeline; the second file lands while the page is open.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import UpdateThread, closed_label
from sparktrail.dashboard.page_content import GRAPHS
from sparktrail.pag import write_trace
from tests.dashboard.browser_support import (
    GRAPH_DATA,
    TIMELINE_TITLE,
    require_browser,
    wait_until,
)
from tests.dashboard.serving import served

pytestmark = pytest.mark.integration

EVENTLOG = Path("/work/shared/eventlogs/local-1532512550423")
S = 1_000_000_000
SCREENSHOT = Path("/tmp/sparktrail-dashboard.png")
WAIT = 20.0

require_browser(EVENTLOG)


@pytest.fixture(scope="module")
def halves() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The shared log's trace split at +13 s (after its first job), by row end."""
    from sparktrail.tracer import import_eventlog

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_eventlog(EVENTLOG, progress=False)
    last = pl.max_horizontal("start_ns", "end_ns")
    cut = int(trace["start_ns"].min()) + 13 * S  # type: ignore[arg-type]
    return trace.filter(last <= cut), trace.filter(last > cut)


@pytest.fixture
def live(
    tmp_path: Path, halves: tuple[pl.DataFrame, pl.DataFrame]
) -> Iterator[tuple[str, UpdateThread, Path]]:
    """The app on the first half of the trace: (url, update thread, trace dir)."""
    trace_dir = tmp_path / "trace"
    write_trace(halves[0], trace_dir / "part-000.arrow")
    thread = UpdateThread(live_loader(trace_dir, S, 2 * S).step, interval=0.2)
    thread.start()
    assert thread.wait_for(lambda s: len(s.windows) > 0, WAIT)
    with served(create_app(thread)) as port:
        yield f"http://127.0.0.1:{port}/", thread, trace_dir
    thread.stop()


HINT_TEXT = """
const panel = document.querySelector('#hints');
if (!panel) return '';
if (panel.querySelector('tbody tr')) return 'rows';
return panel.innerText;
"""


def wait(driver: Any, condition: Any) -> Any:
    return wait_until(driver, condition, WAIT)


def picker_labels(driver: Any) -> list[str]:
    """Open the window picker, read its options, close it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.find_element(By.ID, "window-picker").click()
    options = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[role=option]"))
    labels = [o.text for o in options]
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    return labels


def test_the_dashboard_shows_every_summary_follows_and_picks_windows(
    live: tuple[str, UpdateThread, Path],
    browser: Any,
    halves: tuple[pl.DataFrame, pl.DataFrame],
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    url, thread, trace_dir = live
    ids = list(GRAPHS)
    # GIVEN the page open on a trace whose first windows (driver time) closed
    browser.get(url)
    # THEN every graph is drawn; the summaries of the latest window have data
    wait(browser, lambda d: all(n >= 0 for n in d.execute_script(GRAPH_DATA, ids)))
    busy = ["activity-summary", "straggler-summary", "operator-summary"]
    wait(browser, lambda d: all(n > 0 for n in d.execute_script(GRAPH_DATA, busy)))
    # AND the hints say plainly that start-up gets none (it is no driver code)
    hint = wait(browser, lambda d: d.execute_script(HINT_TEXT))
    assert "No rebalancing hint" in hint
    assert "corrupt files skipped: 0" in browser.find_element(By.ID, "counters").text
    labels = picker_labels(browser)
    assert labels[0].startswith("latest")
    closed = len(thread.latest().windows)
    assert labels[1].startswith("whole run")
    assert len(labels) == closed + 2

    # WHEN the second half of the trace (tasks, messages) lands
    write_trace(halves[1], trace_dir / "part-001.arrow")
    # THEN the live view advances: more windows in the picker, and the
    # latest one, which has tasks and messages, fills every graph
    assert thread.wait_for(lambda s: len(s.windows) > closed, WAIT)
    wait(
        browser,
        lambda d: (
            f"windows: {len(thread.latest().windows)}"
            in d.find_element(By.ID, "counters").text
        ),
    )
    # (the picker renders the options that fit its menu, about a dozen, so
    # the newest window at its top is what shows that it advanced)
    newest = thread.latest().windows[-1]
    now = picker_labels(browser)
    assert now[2] == closed_label(newest.start_ns, newest.end_ns) != labels[2]
    # (its one hint, idle capacity, is info: a trace without its context
    # cannot say whether capacity could be given back, so the hints panel
    # holds its note instead of rows)
    # (the channels' share may be under 1%: a sentence, not a heatmap)
    charts = [i for i in ids if i != "communication-summary"]
    wait(browser, lambda d: all(n > 0 for n in d.execute_script(GRAPH_DATA, charts)))
    assert wait(browser, lambda d: d.execute_script(HINT_TEXT))
    browser.set_window_size(1400, 2700)
    shot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    shutil.copy(shot, SCREENSHOT)

    # WHEN an older window is picked
    latest_title = wait(browser, lambda d: d.execute_script(TIMELINE_TITLE))
    browser.find_element(By.ID, "window-picker").click()
    older = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "[role=option]"))
    picked = older[3].text
    older[3].click()
    # THEN the timeline shows that window
    title = wait(
        browser,
        lambda d: (t := d.execute_script(TIMELINE_TITLE)) != latest_title and t,
    )
    assert picked in title


@pytest.mark.filterwarnings("ignore::sparktrail.engines.online.TraceFileWarning")
def test_a_missing_trace_directory_is_reported_on_the_page(
    tmp_path: Path, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    # GIVEN the dashboard on a directory that does not exist yet
    missing = tmp_path / "nothing-here"
    thread = UpdateThread(live_loader(missing, S, 2 * S).step, interval=0.2)
    thread.start()
    thread.wait_for(lambda s: s.version > 0, WAIT)
    try:
        with served(create_app(thread)) as port:
            # WHEN the page opens
            browser.get(f"http://127.0.0.1:{port}/")
            # THEN it says so, and every graph shows the empty state
            status = wait(browser, lambda d: d.find_element(By.ID, "status").text)
            assert "does not exist yet" in status
            wait(
                browser,
                lambda d: all(
                    n == 0 for n in d.execute_script(GRAPH_DATA, list(GRAPHS))
                ),
            )
            # ... and once a trace appears, it waits for the first window
            missing.mkdir()
            (missing / "empty.arrow").write_bytes(b"broken")
            wait(
                browser,
                lambda d: (
                    "corrupt files skipped: 1" in d.find_element(By.ID, "counters").text
                ),
            )
    finally:
        thread.stop()
