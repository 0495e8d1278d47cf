"""Issue 13 in a real headless Chromium: picking by click, the whole run,
the hidden communication panel, and ``serve --report``'s title and counters.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.cli import main
from sparktrail.cli.serve import live_loader
from sparktrail.dashboard import figures
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import (
    StaticSource,
    UpdateThread,
    load_report,
)
from sparktrail.pag import write_trace
from tests.dashboard.browser_support import TIMELINE_TITLE, require_browser, wait_until
from tests.dashboard.serving import served

pytestmark = pytest.mark.integration

EVENTLOG = Path("/work/shared/eventlogs/local-1532512550423")
S = 1_000_000_000
WAIT = 30.0

require_browser(EVENTLOG)


def wait(driver: Any, condition: Any) -> Any:
    return wait_until(driver, condition, WAIT)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, UpdateThread]]:
    """The live app on the whole shared log (local mode: one executor)."""
    from sparktrail.tracer import import_eventlog

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_eventlog(EVENTLOG, progress=False)
    trace_dir = tmp_path / "trace"
    write_trace(trace, trace_dir / "part-000.arrow")
    thread = UpdateThread(live_loader(trace_dir, S, 0).step, interval=0.2)
    thread.start()
    assert thread.wait_for(lambda s: len(s.windows) > 5, WAIT)
    with served(create_app(thread)) as port:
        yield f"http://127.0.0.1:{port}/", thread
    thread.stop()


def picker_text(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, "window-picker").text)


def test_clicking_a_bar_of_cp_over_time_selects_its_window(
    live: tuple[str, UpdateThread], browser: Any
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    url, thread = live
    # GIVEN the page, following the latest window
    browser.get(url)
    latest = wait(browser, lambda d: d.execute_script(TIMELINE_TITLE))
    # WHEN the first bar of the over-time chart is clicked
    bars = wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#activity-summary .point path"),
    )
    first = min(bars, key=lambda b: b.location["x"])
    ActionChains(browser).move_to_element(first).click().perform()
    # THEN the picker selects that window and the timeline shows it
    window = thread.latest().windows[0]
    title = wait(
        browser,
        lambda d: (t := d.execute_script(TIMELINE_TITLE)) != latest and t,
    )
    assert window.label in title
    assert window.label in wait(browser, picker_text)


def test_the_whole_run_can_be_picked_and_one_executor_hides_communication(
    live: tuple[str, UpdateThread], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    url, _ = live
    # GIVEN the page on a local-mode run (one executor)
    browser.get(url)
    wait(browser, lambda d: d.execute_script(TIMELINE_TITLE))
    # THEN the communication panel is hidden, with a note saying why
    section = browser.find_element(By.ID, "communication-summary-section")
    wait(browser, lambda d: not section.is_displayed())
    note = browser.find_element(By.ID, "communication-note").text
    assert note == figures.ONE_EXECUTOR_NOTE
    # AND every other chart has its caption
    assert figures.CAPTIONS["straggler"] in browser.page_source
    # WHEN "whole run" is picked
    browser.find_element(By.ID, "window-picker").click()
    options = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "[role=option]"))
    labels = [o.text for o in options]
    assert labels[1].startswith("whole run"), labels[:3]
    latest = browser.execute_script(TIMELINE_TITLE)
    options[1].click()
    # THEN the timeline shows the run's most critical window, and the
    # worker chart the whole run's workers
    title = wait(
        browser,
        lambda d: (t := d.execute_script(TIMELINE_TITLE)) != latest and t,
    )
    assert "most critical of the run" in title
    assert wait(browser, picker_text).startswith("whole run")


def test_serve_report_titles_its_window_and_counts_its_windows(
    tmp_path: Path, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    # GIVEN `sparktrail profile` of the shared log (17 windows), served
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["profile", str(EVENTLOG), "-o", str(out)]) == 0
    snapshot = load_report(out)
    cp = pl.read_parquet(out / "summaries" / "critical_window.parquet")
    with served(create_app(StaticSource(snapshot))) as port:
        # WHEN the page opens
        browser.get(f"http://127.0.0.1:{port}/")
        title = wait(browser, lambda d: d.execute_script(TIMELINE_TITLE))
        counters = browser.find_element(By.ID, "counters").text
    # THEN the timeline names the window it draws, not the whole run
    from sparktrail.dashboard.live_view import closed_label

    start, end = int(cp["window_start_ns"][0]), int(cp["window_end_ns"][0])
    assert closed_label(start, end) in title
    assert "whole run" not in title
    # AND the counters count the report's windows
    assert "windows: 17 " in counters
