"""Headless Chromium for the dashboard's browser tests (imported by name).

Under ``CI`` a missing browser is a failure (``.ci/run`` installs it); on
a developer machine the module is skipped.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)

#: Script: how many traces each graph (ids in ``arguments[0]``) holds, -1
#: before it is drawn.
GRAPH_DATA = """
return arguments[0].map(id => {
  const gd = document.querySelector('#' + id + ' .js-plotly-plot');
  return gd && gd.data ? gd.data.length : -1;
});
"""
#: Script: the critical timeline's title (the window it shows), or null.
TIMELINE_TITLE = """
const gd = document.querySelector('#critical-timeline .js-plotly-plot');
return gd && gd.layout && gd.layout.title ? gd.layout.title.text : null;
"""


def require_browser(*needed: Path) -> Any:
    """``selenium.webdriver``, or a module skip (a failure under CI)."""
    paths = (CHROMIUM, CHROMEDRIVER, *needed)
    missing = "needs selenium, " + ", ".join(str(p) for p in paths)
    if os.environ.get("CI"):
        # CI installs all of them (.ci/run): a skip there would hide a failure.
        webdriver = importlib.import_module("selenium.webdriver")
        assert all(p.exists() for p in paths), missing
        return webdriver
    webdriver = pytest.importorskip("selenium.webdriver")
    if not all(p.exists() for p in paths):
        pytest.skip(missing, allow_module_level=True)
    return webdriver


def chromium(profile_dir: Path, page_load_timeout: float) -> Any:
    """A headless Chromium driven by ChromeDriver; ``quit()`` it after use."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(page_load_timeout)
    return driver


def wait_until(driver: Any, condition: Any, timeout: float) -> Any:
    """Poll ``condition(driver)`` every 0.1 s until it is truthy or ``timeout``."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)
