"""The header and the verdict on the dashboard, in a real headless Chromium:
``serve --report`` of a profile of the shared log, and the live page."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from sparktrail.cli import main
from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import (
    StaticSource,
    UpdateThread,
    load_report,
)
from sparktrail.pag import write_trace
from tests.dashboard.browser_support import require_browser, wait_until
from tests.dashboard.serving import served

pytestmark = pytest.mark.integration

EVENTLOG = Path("/work/shared/eventlogs/local-1532512550423")
S = 1_000_000_000
WAIT = 60.0
HEADER = "Spark shell (local-1532512550423)"
#: The live page with its whole-run verdict, for a reader of the test run.
LIVE_SCREENSHOT = Path("/tmp/sparktrail-live-verdict.png")

require_browser(EVENTLOG)


def shown(driver: Any, element_id: str) -> Any:
    """The element once it is displayed with some text."""
    from selenium.webdriver.common.by import By

    def ready(d: Any) -> Any:
        element = d.find_element(By.ID, element_id)
        return element if element.is_displayed() and element.text else False

    return wait_until(driver, ready, WAIT)


def test_serve_report_shows_the_header_and_verdict_above_the_charts(
    tmp_path: Path, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    # GIVEN `serve --report` of a profile of the shared log
    out = tmp_path / "out"
    assert main(["profile", str(EVENTLOG), "-o", str(out)]) == 0
    with served(create_app(StaticSource(load_report(out)))) as port:
        # WHEN the page opens
        browser.get(f"http://127.0.0.1:{port}/")
        # THEN the header and the verdict are visible, above every chart
        header = shown(browser, "app-header")
        verdict = shown(browser, "verdict")
        for fact in (HEADER, "2.3.0", "local[*]", "local, 4 cores", "8 tasks"):
            assert fact in header.text
        assert verdict.text.startswith("Start-up took 75% of the run")
        chart = browser.find_element(By.ID, "activity-summary")
        assert header.location["y"] < verdict.location["y"] < chart.location["y"]


def test_the_live_page_shows_the_run_so_far_and_the_windows_verdict(
    tmp_path: Path, browser: Any
) -> None:
    from sparktrail.tracer import import_trace

    # GIVEN the live dashboard on the shared log's trace
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_trace(EVENTLOG, progress=False)
    trace_dir = tmp_path / "trace"
    write_trace(trace.frame, trace_dir / "part-000.arrow", trace.context)
    thread = UpdateThread(live_loader(trace_dir, S, 2 * S).step, interval=0.2)
    thread.start()
    try:
        # AND the run so far profiled in the background
        assert thread.wait_for(lambda s: s.run is not None, WAIT)
        with served(create_app(thread)) as port:
            # WHEN the page opens
            browser.get(f"http://127.0.0.1:{port}/")
            # THEN the header names the application and counts the run's
            # work; the verdict is the run's, as `profile` prints it; the
            # latest window is a smaller line under it
            header = shown(browser, "app-header").text
            assert HEADER in header and "2 jobs, 2 stages, 8 tasks" in header
            verdict = shown(browser, "verdict")
            assert verdict.text.startswith("Start-up took 75% of the run")
            line = shown(browser, "window-line")
            assert line.text.startswith("The application ended at ")
            assert ". Latest window (" in line.text
            assert verdict.location["y"] < line.location["y"]
            assert browser.save_screenshot(str(LIVE_SCREENSHOT))
    finally:
        thread.stop()
