"""``sparktrail serve --compare BEFORE AFTER`` (issue 27) in a real headless
Chromium: the verdict first, then the waterfall, the settings diff and the
checked savings.

BEFORE and AFTER are profile folders of two runs built task by task
(tests/engines/test_comparison.py): AFTER runs the aggregation in half the
time with ``spark.sql.shuffle.partitions=8``, the setting BEFORE's
over-partitioned hint recommended. The command runs in its own process on
a free port of 127.0.0.1; a screenshot goes to SCREENSHOT.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.browser_support import require_browser, wait_until
from tests.engines.test_comparison import AGG, agg_runs, over_partitioned, with_hints

pytestmark = pytest.mark.integration

WAIT = 30.0
SCREENSHOT = Path("/tmp/sparktrail-compare.png")
VERDICT = (
    "1 s faster (2.6 s → 1.6 s): 1 s of it is agg at etl.py:76 · "
    "HashAggregate [k]; the over partitioned hint predicted 1.5 s, saved 1 s "
    "(effective)."
)
#: Script: the waterfall's trace type and bar labels, or null before it is drawn.
WATERFALL = """
const gd = document.querySelector('#waterfall .js-plotly-plot');
return gd && gd.data ? [gd.data[0].type, gd.data[0].x] : null;
"""

require_browser()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def compare_server(tmp_path: Path) -> Iterator[str]:
    """``sparktrail serve --compare BEFORE AFTER`` in a child process; its URL."""
    before, after = agg_runs(1000, 500, props={"spark.sql.shuffle.partitions": "8"})
    before = with_hints(before, over_partitioned(1.5))
    before.save(tmp_path / "before")
    after.save(tmp_path / "after")
    port = _free_port()
    args = [sys.executable, "-m", "sparktrail", "serve", "--compare"]
    args += [str(tmp_path / "before"), str(tmp_path / "after"), "--port", str(port)]
    child = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                with urllib.request.urlopen(url, timeout=1):
                    break
            except OSError:
                if child.poll() is not None or time.monotonic() > deadline:
                    said = child.stderr.read() if child.stderr else ""
                    raise AssertionError(
                        f"serve --compare did not start: {said}"
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        child.terminate()
        child.wait(timeout=10)


def test_serve_compare_leads_with_the_verdict(compare_server: str, browser: Any):
    from selenium.webdriver.common.by import By

    # WHEN the served comparison opens
    browser.get(compare_server)
    verdict = wait_until(browser, lambda d: d.find_elements(By.ID, "verdict"), WAIT)
    # THEN the verdict sentence comes first
    assert verdict[0].text == VERDICT
    # AND the waterfall is drawn: BEFORE, the aggregation, ..., AFTER
    kind, bars = wait_until(browser, lambda d: d.execute_script(WATERFALL), WAIT)
    assert kind == "waterfall"
    assert bars[0] == "BEFORE" and bars[-1] == "AFTER"
    assert any(bar.startswith("agg at etl.py:76") for bar in bars)
    # AND the settings diff and the checked savings are tables, in that order
    settings = browser.find_elements(By.CSS_SELECTOR, "#settings tbody tr")
    cells = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in settings]
    assert ["spark.sql.shuffle.partitions", "(unset)", "8"] in cells
    [hint] = browser.find_elements(By.CSS_SELECTOR, "#hints tbody tr")
    row = [td.text for td in hint.find_elements(By.TAG_NAME, "td")]
    assert row[:6] == [
        "over_partitioned",
        AGG,
        "spark.sql.shuffle.partitions=8",
        "1.5 s",
        "1 s",
        "effective",
    ]
    ids = [s.get_attribute("id") for s in browser.find_elements(By.TAG_NAME, "section")]
    assert ids[:3] == ["waterfall", "settings", "hints"]
    # AND the page is only the page: another path is 404
    try:
        urllib.request.urlopen(compare_server + "etc/passwd", timeout=5)
    except urllib.error.HTTPError as err:
        assert err.code == 404
    else:
        raise AssertionError("an unknown path was served")
    # the whole page in the screenshot, not only the first screen
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, int(height) + 120)
    browser.save_screenshot(str(SCREENSHOT))
