"""The fleet page of ``sparktrail history`` (issue 28 item 3) in a real
headless Chromium: one row per application, sorted by a clicked heading,
each application's name a link to its report."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from sparktrail.fleet import scan
from tests.dashboard.browser_support import require_browser, wait_until
from tests.paths import EVENTLOGS

pytestmark = pytest.mark.integration

EVENTS = EVENTLOGS / "public" / "spark" / "spark-events"
LOGS = [
    EVENTS / "app-20161115172038-0000",
    EVENTS / "application_1538416563558_0014",
    EVENTS / "local-1422981759269",
    EVENTS / "application_1578436911597_0052",
]
WAIT = 30.0

require_browser(*LOGS)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("fleet") / "spark-events"
    logs.mkdir()
    for log in LOGS:
        shutil.copyfile(log, logs / log.name)
    # a log cut in its first event (a file with no event at all is skipped)
    (logs / "broken-1").write_bytes(b'{"Event":"SparkListenerLogStart","Spark Ver\n')
    out = logs.parent / "out"
    scan(logs, out, jobs=2)
    return out


def _column(driver: Any, index: int) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "#applications tbody tr")
    return [r.find_elements(By.TAG_NAME, "td")[index].text for r in rows]


def test_fleet_page_sorts_and_links_each_report(fleet: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    # GIVEN the page of five logs, one of them broken
    browser.get((fleet / "index.html").as_uri())
    headings = browser.find_elements(By.CSS_SELECTOR, "#applications th")
    names = [" ".join((h.get_attribute("textContent") or "").split()) for h in headings]
    assert len(_column(browser, 0)) == len(LOGS) + 1
    wall = names.index("wall time (s)")
    # WHEN the wall-time heading is clicked THEN the longest run comes first,
    # the broken log (no wall time) last
    headings[wall].click()
    shown = _column(browser, wall)
    values = [float(t.replace(",", "")) for t in shown if t]
    assert values == sorted(values, reverse=True) and len(values) == len(LOGS)
    assert shown[-1] == ""
    # AND a second click reverses it
    headings[wall].click()
    again = [float(t.replace(",", "")) for t in _column(browser, wall) if t]
    assert again == sorted(again)
    # WHEN an application's name is clicked THEN its report opens
    link = browser.find_element(By.CSS_SELECTOR, "#applications tbody a")
    link.click()
    wait_until(browser, lambda d: d.find_elements(By.ID, "overview"), WAIT)
    assert "sparktrail" in browser.title
