"""The live demo teaches what README says it does (issue 46 item 3).

``make run`` runs :func:`sparktrail.cli.demo.run_lesson` (the moving
hotspot's join, round after round, beside the streaming join) traced
live. Its moving hot key must be the run's bottleneck on the live page: the
verdict names it, and the hints table shows a ``moving_hotspot`` hint,
medium or higher, with the partitions it moved through and when. README's
paragraph on ``make run`` names the same hint.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from sparktrail.cli import demo
from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import UpdateThread
from sparktrail.tracer import attach, detach
from tests.dashboard.browser_support import require_browser, wait_until
from tests.dashboard.serving import served
from tests.integration.shared_session import sql_conf

pytestmark = pytest.mark.integration

require_browser()

S = 1_000_000_000
README = Path(__file__).resolve().parents[2] / "README.md"
#: Long enough for ~20 rounds and a dozen moves of the hot key.
SECONDS = 45
WAIT = 90.0
#: What ``sparktrail demo`` sets (``demo._session``).
DEMO_SQL = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}
SCREENSHOT = Path("/tmp/sparktrail-demo-lesson.png")


def test_the_demos_moving_hot_key_is_the_runs_bottleneck_on_the_page(
    spark: Any, tmp_path: Path, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    # GIVEN the live demo's workload, traced live as `make run` traces it
    out = tmp_path / "live"
    with sql_conf(spark, DEMO_SQL):
        attach(spark, out)
        try:
            demo.run_lesson(spark, out, SECONDS, threading.Event())
        finally:
            detach(spark)
    # AND the live page on its trace, the run profiled in the background
    thread = UpdateThread(live_loader(out, S, 2 * S).step, interval=0.2)
    thread.start()
    try:
        assert thread.wait_for(lambda s: s.run is not None, WAIT)
        with served(create_app(thread)) as port:
            # WHEN the page opens
            browser.get(f"http://127.0.0.1:{port}/")
            # THEN the verdict names the join's moving hot partition
            verdict = wait_until(
                browser, lambda d: d.find_element(By.ID, "verdict").text, WAIT
            )
            assert verdict.startswith("The hot partition of "), verdict
            assert "moves from run to run" in verdict
            # AND the first hint is that moving hotspot, medium or higher,
            # with the partitions it moved through and when
            row = wait_until(
                browser,
                lambda d: d.find_elements(By.CSS_SELECTOR, "#hints tbody tr"),
                WAIT,
            )[0]
            severity, kind, saving, *_, said = [
                c.text for c in row.find_elements(By.TAG_NAME, "td")
            ]
            assert kind == "moving_hotspot"
            assert severity in ("high", "medium")
            assert "of the batch jobs' time" in saving
            assert "its hot partition moved" in said and "UTC" in said
            # AND no cell is cut: the row grows with its text
            for cell in row.find_elements(By.TAG_NAME, "td"):
                assert cell.size["height"] >= 0.9 * _scroll_height(browser, cell)
            browser.set_window_size(1400, 1600)
            assert browser.save_screenshot(str(SCREENSHOT))
    finally:
        thread.stop()
    # AND README's description of `make run` names what the page shows
    text = README.read_text()
    make_run = text[text.index("`make run` starts") :][:1500]
    assert "moving_hotspot" in make_run and "moves from run to run" in make_run


def _scroll_height(browser: Any, element: Any) -> float:
    return float(browser.execute_script("return arguments[0].scrollHeight", element))
