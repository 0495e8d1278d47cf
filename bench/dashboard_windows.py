"""The live dashboard over a store of many windows (10,000 by default).

Command (the store is built once, about 2 minutes, then reused)::

    .venv/bin/python bench/dashboard_windows.py --windows 10000 --repeats 3 \\
        --store /tmp/sparktrail-10k

The store: the online pipeline closes 15 windows (1 s each) of a synthetic
trace in the shape of ``bench/online_latency.py`` (16 workers, 200 ms
rounds, 240 CP rows per window); they are replicated, every time column
shifted, with :meth:`WindowStore.write_window` until the store holds
``--windows`` windows, and the checkpoint moved past them.

Measured, median of ``--repeats``:

* **snapshot build (cold)**: a fresh process runs ``LiveLoader.step()``
  on the store (what ``sparktrail serve TRACE_DIR`` does first): wall
  time, and the process's RSS growth.
* **step closing a window**: a new trace file moves the watermark one
  window on; ``LiveLoader.step()`` with the whole store behind it. And a
  step that finds nothing new (the update loop's usual 0.1 s poll).
* **page layout**: bytes of ``GET /_dash-layout`` (built per page load).
* **callbacks**: every Dash callback of the app over its real route
  (``POST /_dash-update-component``, Flask's test client): wall time and
  response bytes, for each of its inputs changing: the page's tick
  (``refresh``, new snapshot), a draw after new windows, the pick of the
  latest and of an old window, and (when the app has it) a search typed
  into the window picker.
* **browser**: in headless Chromium, page load → every graph drawn, and
  picking another window in the window picker → its timeline drawn
  (skipped with ``--no-browser``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import multiprocessing as mp
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import psutil
from online_latency import _rounds

from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import LATEST, LiveLoader, UpdateThread, WindowView
from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.store import (
    SUMMARY_FRAMES,
    StoredWindow,
)
from sparktrail.pag.trace import write_trace

S = 1_000_000_000
WINDOW_NS = S
LATENESS_NS = 2 * S
ROUND_NS = 200_000_000
T0 = 1_700_000_000 * S
SEED_WINDOWS = 15
TIME_COLUMNS = ("window_start_ns", "window_end_ns", "start_ns", "end_ns")
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
BROWSER_WAIT = 180.0


# -- the store ------------------------------------------------------------------


def _shift(frame: pl.DataFrame, by: int) -> pl.DataFrame:
    columns = [c for c in TIME_COLUMNS if c in frame.columns]
    return frame.with_columns(pl.col(c) + by for c in columns)


def _replica(seed: StoredWindow, start_ns: int) -> StoredWindow:
    by = start_ns - seed.start_ns
    summaries = seed.summaries
    frames = {n: _shift(getattr(summaries, n), by) for n in SUMMARY_FRAMES}
    return StoredWindow(
        start_ns=start_ns,
        end_ns=seed.end_ns + by,
        cp=_shift(seed.cp, by),
        summaries=dataclasses.replace(
            summaries, **frames, origin_ns=summaries.origin_ns + by
        ),
    )


def build_store(trace_dir: Path, windows: int) -> None:
    """A trace directory whose store holds ``windows`` closed windows."""
    rng = np.random.default_rng(0)
    rounds = SEED_WINDOWS * S // ROUND_NS
    write_trace(_rounds(rng, T0, ROUND_NS, 0, rounds), trace_dir / "part-000000.arrow")
    pipeline = OnlinePipeline(trace_dir, WINDOW_NS, LATENESS_NS)
    seeds = pipeline.poll(final=True)
    assert len(seeds) == SEED_WINDOWS, len(seeds)
    store = pipeline.store
    start = seeds[-1].start_ns + WINDOW_NS
    for i in range(windows - len(seeds)):
        store.write_window(_replica(seeds[i % len(seeds)], start + i * WINDOW_NS))
    # As if the trace had run on: every replica is closed, the watermark past it.
    end = start + (windows - len(seeds)) * WINDOW_NS
    checkpoint = pipeline.checkpoint()
    checkpoint.update(closed_until_ns=end, last_event_ns=end + LATENESS_NS)
    store.write_checkpoint(checkpoint)


def ready_store(folder: Path | None, windows: int) -> Path:
    """The trace directory of a store of ``windows`` windows (built if needed)."""
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="sparktrail-windows-"))
    trace_dir = folder / "trace"
    marker = folder / "windows.json"
    if marker.is_file() and json.loads(marker.read_text()) == windows:
        return trace_dir
    shutil.rmtree(trace_dir, ignore_errors=True)
    started = time.perf_counter()
    build_store(trace_dir, windows)
    marker.write_text(json.dumps(windows))
    took = time.perf_counter() - started
    print(f"built a store of {windows:,} windows in {took:.0f} s: {trace_dir}")
    return trace_dir


# -- measurements ---------------------------------------------------------------


def _cold_build(trace_dir: str, out: Any) -> None:
    process = psutil.Process()
    before = process.memory_info().rss
    started = time.perf_counter()
    snapshot = live_loader(trace_dir, WINDOW_NS, LATENESS_NS).step()
    took = time.perf_counter() - started
    grown = process.memory_info().rss - before
    out.put((took, grown, len(snapshot.windows)))


def cold_build(trace_dir: Path) -> tuple[float, float, int]:
    """Seconds and RSS growth (bytes) of a first step, in a fresh process."""
    spawn = mp.get_context("spawn")
    out = spawn.Queue()
    job = spawn.Process(target=_cold_build, args=(str(trace_dir), out))
    job.start()
    result: tuple[float, float, int] = out.get(timeout=900)
    job.join()
    return result


def step_closing_a_window(loader: LiveLoader, trace_dir: Path, repeats: int) -> float:
    """Median seconds of a ``step`` that closes one more window."""
    snapshot = loader.step()
    end = snapshot.windows[-1].end_ns
    rng = np.random.default_rng(1)
    per_window = WINDOW_NS // ROUND_NS
    first_round = (end - T0) // ROUND_NS
    # rows up to end + lateness + 1 window: the window starting at `end` closes
    done = first_round + per_window * 3
    write_trace(
        _rounds(rng, T0, ROUND_NS, first_round, done),
        trace_dir / f"part-{first_round:06d}.arrow",
    )
    loader.step()
    times = []
    for _ in range(repeats):
        count = len(loader.step().windows)
        write_trace(
            _rounds(rng, T0, ROUND_NS, done, done + per_window),
            trace_dir / f"part-{done:06d}.arrow",
        )
        done += per_window
        started = time.perf_counter()
        snapshot = loader.step()
        times.append(time.perf_counter() - started)
        assert len(snapshot.windows) == count + 1, (count, len(snapshot.windows))
    return statistics.median(times)


def _values(key: str, search: str | None) -> dict[str, Any]:
    """Values the page would send for each input and state."""
    return {
        "refresh.n_intervals": 1,
        "shown-version.data": -1,
        "drawn-windows.data": -1,
        "window-picker.value": key,
        "window-picker.search_value": search,
    }


def call(
    client: Any, app: Any, output: str, changed: str, key: str, search: str | None
) -> tuple[float, int]:
    """Seconds and response bytes of one callback over Dash's route."""
    spec = app.callback_map[output]
    values = _values(key, search)

    def items(deps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [d | {"value": values.get(f"{d['id']}.{d['property']}")} for d in deps]

    outputs = [
        {"id": o.split(".")[0], "property": o.split(".")[1]}
        for o in output.strip(".").split("...")
    ]
    body = {
        "output": output,
        "outputs": outputs if len(outputs) > 1 else outputs[0],
        "inputs": items(spec["inputs"]),
        "state": items(spec["state"]),
        "changedPropIds": [changed],
    }
    started = time.perf_counter()
    response = client.post("/_dash-update-component", json=body)
    took = time.perf_counter() - started
    assert response.status_code in (200, 204), response.status_code
    return took, len(response.data)


def callbacks(
    app: Any, old: WindowView, repeats: int
) -> Iterator[tuple[str, float, int]]:
    """(case, median seconds, bytes) for every callback of the page.

    A picker value changes to the latest and to ``old``; a search types
    the start of ``old``'s label.
    """
    client = app.server.test_client()
    for output, spec in app.callback_map.items():
        names = [d["id"] + "." + d["property"] for d in spec["inputs"]]
        for changed in names:
            cases = [(LATEST, None, "")]
            if changed == "window-picker.value":
                cases.append((old.key, None, " (old window)"))
            if changed == "window-picker.search_value":
                cases = [(LATEST, old.label[:12], " (a time typed)")]
            for key, search, note in cases:
                runs = [
                    call(client, app, output, changed, key, search)
                    for _ in range(repeats)
                ]
                label = f"{_short(output)} ← {changed}{note}"
                yield label, statistics.median(t for t, _ in runs), runs[-1][1]


def _short(output: str) -> str:
    names = [o.split(".")[0] for o in output.strip(".").split("...")]
    return names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1}"


# -- browser --------------------------------------------------------------------


GRAPH_DATA = """
return arguments[0].map(id => {
  const gd = document.querySelector('#' + id + ' .js-plotly-plot');
  return gd && gd.data ? gd.data.length : -1;
});
"""
TIMELINE_TITLE = """
const gd = document.querySelector('#critical-timeline .js-plotly-plot');
return gd && gd.layout && gd.layout.title ? gd.layout.title.text : null;
"""


@contextmanager
def served(thread: UpdateThread) -> Iterator[str]:
    """The app on 127.0.0.1 (a free port), in a thread; yields its URL."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, create_app(thread).server, threaded=True)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium driven by selenium."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    profile = tempfile.mkdtemp(prefix="sparktrail-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(BROWSER_WAIT)
    driver.set_script_timeout(BROWSER_WAIT)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _until(driver: Any, condition: Callable[[Any], Any]) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, BROWSER_WAIT, poll_frequency=0.05).until(condition)


def page_load(driver: Any, url: str) -> float:
    """Seconds from navigation to every graph drawn with data."""
    # the graphs these windows fill (their hints table may be empty)
    busy = ["activity-summary", "straggler-summary", "operator-summary"]
    busy.append("critical-timeline")
    driver.get("about:blank")
    started = time.perf_counter()
    driver.get(url)
    _until(driver, lambda d: all(n > 0 for n in d.execute_script(GRAPH_DATA, busy)))
    return time.perf_counter() - started


def pick_window(driver: Any, position: int) -> float:
    """Seconds from opening the picker to the picked window's timeline."""
    from selenium.webdriver.common.by import By

    shown = _until(driver, lambda d: d.execute_script(TIMELINE_TITLE))
    started = time.perf_counter()
    driver.find_element(By.ID, "window-picker").click()
    options = _until(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[role=option]")
    )
    label = options[position].text
    options[position].click()
    title = _until(
        driver, lambda d: (t := d.execute_script(TIMELINE_TITLE)) != shown and t
    )
    assert label in title, (label, title)
    return time.perf_counter() - started


def browser(thread: UpdateThread, repeats: int) -> tuple[float, float]:
    """Median page load and window pick seconds in headless Chromium."""
    loads, picks = [], []
    with served(thread) as url, chromium() as driver:
        for i in range(repeats):
            loads.append(page_load(driver, url))
            picks.append(pick_window(driver, 3 + i))
    return statistics.median(loads), statistics.median(picks)


# -- main -------------------------------------------------------------------------


def report(name: str, value: str) -> None:
    """One row of the table, printed at once."""
    print(f"  {name:<52}  {value}", flush=True)


def idle_step(loader: LiveLoader, repeats: int) -> float:
    """Median seconds of a ``step`` that finds nothing new."""
    loader.step()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        loader.step()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    """Build or reuse the store, measure, print one table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--store", type=Path, help="reuse/build the store here")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args(argv)
    source = ready_store(args.store, args.windows)
    work = Path(tempfile.mkdtemp(prefix="sparktrail-windows-run-"))
    trace_dir = work / "trace"
    thread: UpdateThread | None = None
    try:
        # Steps append trace files and windows: work on a copy of the store.
        shutil.copytree(source, trace_dir)
        print(f"{args.windows:,} windows, median of {args.repeats}:", flush=True)
        builds = [cold_build(trace_dir) for _ in range(args.repeats)]
        report("windows in the store", f"{builds[0][2]:,}")
        took = statistics.median(b[0] for b in builds)
        grown = statistics.median(b[1] for b in builds)
        report("snapshot build, cold (LiveLoader.step)", f"{took:.2f} s")
        report("  RSS growth of that process", f"{grown / 2**20:.0f} MiB")
        loader = live_loader(trace_dir, WINDOW_NS, LATENESS_NS)
        step = step_closing_a_window(loader, trace_dir, args.repeats)
        report("step closing one window", f"{step * 1e3:.0f} ms")
        idle = idle_step(loader, args.repeats)
        report("step finding nothing new", f"{idle * 1e3:.0f} ms")
        thread = UpdateThread(loader.step, source=str(trace_dir))
        thread.step_once()
        snapshot = thread.latest()
        old = snapshot.windows[len(snapshot.windows) // 2]
        app = create_app(thread)
        layout = app.server.test_client().get("/_dash-layout")
        report("page layout (GET /_dash-layout)", f"{len(layout.data):,} B")
        for label, seconds, size in callbacks(app, old, args.repeats):
            report(f"callback {label}", f"{seconds * 1e3:.0f} ms, {size:,} B")
        if not args.no_browser:
            thread.start()
            load, pick = browser(thread, args.repeats)
            report("browser: page load → figures", f"{load:.2f} s")
            report("browser: pick a window → its timeline", f"{pick:.2f} s")
    finally:
        if thread is not None:
            thread.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
