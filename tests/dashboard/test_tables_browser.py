"""Issue 13's stage and executor tables in a real headless Chromium: the
report's plain tables and the dashboard's DataTables sort by a heading."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from sparktrail.cli import main
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import StaticSource, load_report
from tests.dashboard.browser_support import require_browser, wait_until
from tests.dashboard.serving import served
from tests.paths import KAFKA_STREAMING_LOG

pytestmark = pytest.mark.integration

#: A Structured Streaming run: 16 stages of one or two tasks, skews 1 to 1.1.
LOG = KAFKA_STREAMING_LOG
WAIT = 30.0

require_browser(LOG)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tables") / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["profile", str(LOG), "-o", str(out)]) == 0
    return out


def column(driver: Any, table: str, index: int) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    return [r.find_elements(By.TAG_NAME, "td")[index].text for r in rows]


def numbers(texts: list[str]) -> list[float]:
    return [float(t.rstrip("%").replace(",", "")) for t in texts if t]


def test_report_tables_sort_when_a_heading_is_clicked(
    profiled: Path, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    # GIVEN the report, its stage table listed by critical share
    browser.get((profiled / "report.html").as_uri())
    headings = browser.find_elements(By.CSS_SELECTOR, "#stages-table th")
    # The headings' text, not their rendering: a narrow column wraps a
    # heading over two lines, and the sorted one shows an arrow after it.
    names = [" ".join((h.get_attribute("textContent") or "").split()) for h in headings]
    assert {"critical share", "skew"} <= set(names), names
    share, skew = names.index("critical share"), names.index("skew")
    shares = numbers(column(browser, "stages-table", share))
    assert len(shares) == 16 and shares == sorted(shares, reverse=True)
    # AND every heading explains itself on hover
    assert all(h.get_attribute("title") for h in headings)
    before = numbers(column(browser, "stages-table", skew))
    assert before != sorted(before, reverse=True)  # the click has work to do
    # WHEN the skew heading is clicked, then clicked again
    browser.execute_script("arguments[0].scrollIntoView()", headings[skew])
    headings[skew].click()
    down = numbers(column(browser, "stages-table", skew))
    headings[skew].click()
    up = numbers(column(browser, "stages-table", skew))
    # THEN the rows are by skew, largest first, then smallest first
    assert down == sorted(before, reverse=True)
    assert up == sorted(before)
    # AND the executor table has the one local executor with its cores
    executors = browser.find_element(By.ID, "executors-table").text
    assert "driver" in executors


def test_dashboard_tables_sort_natively(profiled: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    snapshot = load_report(profiled)
    with served(create_app(StaticSource(snapshot))) as port:
        # GIVEN the served report, its stage table by critical share
        browser.get(f"http://127.0.0.1:{port}/")
        wait_until(
            browser,
            lambda d: d.find_elements(By.CSS_SELECTOR, "#stage-table td"),
            WAIT,
        )
        headers = browser.find_elements(By.CSS_SELECTOR, "#stage-table th")
        names = [h.text.strip() for h in headers]
        share = names.index("critical share")
        max_task = names.index("max task (s)")
        cells = browser.find_elements(
            By.CSS_SELECTOR, f"#stage-table td:nth-child({share + 1})"
        )
        shares = numbers([c.text for c in cells])
        assert shares and shares == sorted(shares, reverse=True)
        # WHEN the sort arrow of "max task" is clicked
        arrow = headers[max_task].find_element(By.CSS_SELECTOR, ".column-header--sort")
        arrow.click()

        def by_max_task(d: Any) -> list[float] | None:
            found = d.find_elements(
                By.CSS_SELECTOR, f"#stage-table td:nth-child({max_task + 1})"
            )
            values = numbers([c.text for c in found])
            ordered = values in (sorted(values), sorted(values, reverse=True))
            return values if ordered and len(values) > 1 else None

        # THEN the rows are ordered by the longest task
        values = wait_until(browser, by_max_task, WAIT)
        assert values[0] != values[-1]
        # AND the executor table lists the driver's executor with 4 cores
        text = browser.find_element(By.ID, "executor-table").text
        assert "driver" in text


def test_the_streaming_panel_shows_the_querys_batches(
    profiled: Path, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    snapshot = load_report(profiled)
    with served(create_app(StaticSource(snapshot))) as port:
        # GIVEN the served report of a Structured Streaming run
        browser.get(f"http://127.0.0.1:{port}/")
        # THEN its streaming panel is shown, with the query's rates drawn
        wait_until(
            browser,
            lambda d: [
                s
                for s in d.find_elements(By.ID, "stream-progress-section")
                if "none" not in (s.get_attribute("style") or "none")
            ],
            WAIT,
        )
        names = wait_until(
            browser,
            lambda d: d.execute_script(
                "const g = document.querySelector('#stream-progress .js-plotly-plot');"
                "return g && g.data && g.data.length ? g.data.map(t => t.name) : null;"
            ),
            WAIT,
        )
        assert any(name.endswith(" processed") for name in names)
        assert any(name.endswith(" addBatch") for name in names)
        # AND the hints come first, above the charts (issue 12: at the top)
        top = {
            key: browser.find_element(By.ID, f"{key}-section").location["y"]
            for key in ("hints", "activity-summary", "stream-progress")
        }
        assert top["hints"] < top["activity-summary"] < top["stream-progress"]
