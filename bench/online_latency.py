"""Latency from a window's end (event time) to its summaries being served.

Command (about 1.5 minutes on 2 cores)::

    .venv/bin/python bench/online_latency.py --rates 1000 10000 --duration 30

Per rate R (trace rows per second), a fresh temporary TRACE_DIR gets:

* **Producer** (a child process, as the Spark tracer is): 16 workers run
  rounds in real time, event times being the wall clock (``time.time_ns()``).
  Per round each worker runs one local activity of random length, sends a
  message to the next worker and waits (a ``waiting`` row) for the round's
  barrier: the shape of :func:`bench/synthetic.barrier_trace`, 3 rows per
  worker and round, rounds of ``3 * 16 / R`` seconds (48 ms at 1,000 rows/s,
  4.8 ms at 10,000). Every 100–250 ms (uniformly random) it writes the
  rounds completed since the last file as one file with
  :func:`sparktrail.pag.trace.write_trace` (atomic rename), for ``--duration``
  seconds, and logs when each file landed and its latest event.
* **Consumer**: what ``sparktrail serve TRACE_DIR`` runs, with its defaults
  (``--window 1s --lateness 2s``): a
  :class:`~sparktrail.dashboard.live_view.LiveLoader` stepped by an
  :class:`~sparktrail.dashboard.live_view.UpdateThread` at its default interval,
  and the Dash app of :func:`~sparktrail.dashboard.app.create_app`, queried
  over its real callback route (``POST /_dash-update-component``, Flask's
  test client, no socket) the way the page does: the ``refresh`` callback on
  every tick of the page's 250 ms ``dcc.Interval`` and, when it reports a new
  snapshot version, the ``draw`` callback that builds every figure.

For each closed window ``[ts, te)``:

* **published** = wall time the snapshot holding the window was published;
* **served** = wall time the ``draw`` callback returned the figures of a
  snapshot that holds it (the page's HTTP path; browser rendering excluded);
* latency beyond lateness = served − te − lateness (target ≤ 1 s), and the
  raw window end → served time.

Where the time goes (medians over windows), splitting served − (te + lateness):

* **file cadence**: from te + lateness (when an event that pushes the
  watermark past te can first happen) to the landing of the first file
  holding such an event;
* **poll wait**: from then to the start of the loader step that closed the
  window (the UpdateThread sleeps ``interval`` between steps);
* **step**: that step's wall time (read new files, CP + summaries of the
  windows it closes, store write, snapshot);
* **serve**: publish → the ``draw`` response (the page's 250 ms tick, then the
  figures).

The served latency depends on the tab's phase: windows end on whole
seconds and the page ticks every second, so one tab sees every window at the
same offset. Besides the measured tab, the report spreads it over ``PHASES``
tab phases (first tick after the publish, plus the measured median draw).

Consumer CPU = CPU seconds of the consumer process (update thread and
polars' pool) minus the thread time of the Dash callbacks, shown apart, over
the wall time from the producer's start to the consumer's stop, as a share of
one core. The producer's own process is not included.

``--interval`` and ``--tick`` try other values of the two knobs, e.g.
``--interval 0.1 --tick 0.25``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import multiprocessing as mp
import re
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import LATEST, LiveLoader, UpdateThread
from sparktrail.dashboard.page_content import GRAPHS
from sparktrail.pag.memory import retain_freed_memory
from sparktrail.pag.trace import write_trace
from sparktrail.synthetic import ACTIVITY_CYCLE

WINDOW_NS = 1_000_000_000  # sparktrail serve --window default
LATENESS_NS = 2_000_000_000  # sparktrail serve --lateness default
PAGE_TICK_S = 0.25  # dcc.Interval(interval=250) in dashboard/page_layout.py
WORKERS = 16
FLUSH_S = (0.10, 0.25)
OPERATORS = ("Scan parquet", "HashAggregate", "Exchange", "SortMergeJoin")
TARGET_S = 1.0
PHASES = 10  # tab phases the served latency is spread over
#: The interval ``sparktrail serve`` steps its loader at (UpdateThread's default).
DEFAULT_INTERVAL: float = inspect.signature(UpdateThread).parameters["interval"].default


# -- producer (child process) -------------------------------------------------


def _rounds(
    rng: np.random.Generator, t0: int, round_ns: int, first: int, stop: int
) -> pl.DataFrame:
    """Rows of rounds ``[first, stop)``: local work, a message, a wait each."""
    rounds = stop - first
    w = np.arange(WORKERS)
    r = np.repeat(np.arange(first, stop), WORKERS)
    start = t0 + r * round_ns
    barrier = start + round_ns
    length = rng.integers(round_ns // 5, round_ns * 19 // 20, size=rounds * WORKERS)
    local_end = start + length
    names = np.array([f"exec-{i // 4}/{i % 4}" for i in range(WORKERS)])
    src = np.tile(names, rounds)
    dst = names[(np.tile(w, rounds) + 1) % WORKERS]
    activity = np.array(ACTIVITY_CYCLE)[rng.integers(0, len(ACTIVITY_CYCLE), r.size)]
    stage = 1 + (start - t0) // 5_000_000_000  # a new stage every 5 s
    operator = np.array(OPERATORS)[(stage - 1) % len(OPERATORS)]
    task = r * WORKERS + np.tile(w, rounds)
    common = {"operator": operator, "stage_id": stage}
    local = pl.DataFrame(
        {"src_worker": src, "dst_worker": src, "start_ns": start, "end_ns": local_end}
        | {"activity": activity, "task_id": task}
        | common
    )
    message = pl.DataFrame(
        {"src_worker": src, "dst_worker": dst, "start_ns": local_end}
        | {"end_ns": barrier, "activity": np.where(r % 3 == 0, "data", "control")}
        | common
    ).with_columns(pl.lit(None, dtype=pl.Int64).alias("task_id"))
    waiting = local.with_columns(
        pl.col("end_ns").alias("start_ns"),
        pl.Series("end_ns", barrier),
        pl.lit("waiting").alias("activity"),
    )
    return pl.concat([local, message, waiting], how="diagonal_relaxed")


def produce(
    trace_dir: str, rate: float, duration: float, log_path: str, seed: int
) -> None:
    """Write trace files in real time for ``duration`` s; log them as JSON."""
    rng = np.random.default_rng(seed)
    round_ns = round(3 * WORKERS / rate * 1e9)
    t0 = time.time_ns()
    end = t0 + round(duration * 1e9)
    done, files = 0, []
    cpu0 = time.process_time()
    while True:
        time.sleep(rng.uniform(*FLUSH_S))
        now = time.time_ns()
        upto = (min(now, end) - t0) // round_ns
        if upto > done:
            frame = _rounds(rng, t0, round_ns, done, upto)
            write_trace(frame, Path(trace_dir) / f"part-{len(files):06d}.arrow")
            landed = time.time_ns()
            files.append((landed, frame.height, int(frame["end_ns"].max())))
            done = upto
        if now >= end:
            break
    log = {"t0": t0, "end": end, "files": files, "cpu_s": time.process_time() - cpu0}
    Path(log_path).write_text(json.dumps(log), encoding="utf-8")


# -- consumer -----------------------------------------------------------------


@dataclass
class Step:
    """One loader step: wall-clock start and end (ns), windows it published."""

    start: int
    end: int
    windows: list[int]


class TimedUpdateThread(UpdateThread):
    """The serve command's update loop, recording when each window is published."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.steps: list[Step] = []
        self.order: list[int] = []  # window starts, in the snapshot's order

    def step_once(self) -> None:
        """One step as in :class:`UpdateThread`, timed."""
        start = time.time_ns()
        super().step_once()
        end = time.time_ns()  # the snapshot is published: latest() returns it
        windows = self.latest().windows
        new = [w.start_ns for w in windows[len(self.order) :]]
        self.order.extend(new)
        self.steps.append(Step(start, end, new))


def _ids(outputs: list[tuple[str, str]]) -> str:
    """Dash's id of a multi-output callback: ``..a.x...b.y..``."""
    return ".." + "...".join(f"{i}.{p}" for i, p in outputs) + ".."


REFRESH_OUT = [
    ("status", "children"),
    ("counters", "children"),
    ("shown-version", "data"),
    ("drawn-windows", "data"),
]
DRAW_OUT = [(key, "figure") for key in GRAPHS]
COUNT = re.compile(r"windows: (\d+)")


class Page(threading.Thread):
    """The dashboard page as a browser drives it, over Dash's callback route.

    Every ``tick`` seconds it calls ``refresh``; when that reports new
    windows (``drawn-windows``) it calls ``draw`` (window picker on
    "latest") and records, for the windows that snapshot held, when the
    figures came back.
    """

    def __init__(self, app: Any, tick: float = PAGE_TICK_S) -> None:
        super().__init__(name="page", daemon=True)
        self.app = app
        self.tick = tick
        self.served: dict[int, int] = {}  # windows shown -> first time (ns)
        self.cpu_s = 0.0
        self.draws: list[float] = []
        self.ticks: list[int] = []  # wall-clock ns of each refresh
        self._halt = threading.Event()

    def _post(self, client: Any, outputs: list[tuple[str, str]], **body: Any) -> Any:
        payload = {
            "output": _ids(outputs),
            "outputs": [{"id": i, "property": p} for i, p in outputs],
            **body,
        }
        response = client.post("/_dash-update-component", json=payload)
        if response.status_code == 204:  # PreventUpdate: same version
            return None
        if response.status_code != 200:
            raise RuntimeError(f"dash callback: HTTP {response.status_code}")
        return response.get_json()["response"]

    def run(self) -> None:
        """Tick until :meth:`stop`."""
        client = self.app.server.test_client()
        shown, drawn, ticks, count = -1, -1, 0, 0
        cpu0 = time.thread_time()
        next_tick = time.monotonic() + self.tick
        while not self._halt.wait(max(0.0, next_tick - time.monotonic())):
            next_tick = max(next_tick + self.tick, time.monotonic())
            ticks += 1
            self.ticks.append(time.time_ns())
            out = self._post(
                client,
                REFRESH_OUT,
                inputs=[{"id": "refresh", "property": "n_intervals", "value": ticks}],
                state=[
                    {"id": "shown-version", "property": "data", "value": shown},
                    {"id": "drawn-windows", "property": "data", "value": drawn},
                ],
                changedPropIds=["refresh.n_intervals"],
            )
            if out is None:
                continue
            shown = out["shown-version"]["data"]
            if "drawn-windows" not in out:  # no_update: same windows, no redraw
                continue
            drawn = out["drawn-windows"]["data"]
            found = COUNT.search(out["counters"]["children"])
            new_count = int(found.group(1)) if found else 0
            t = time.time_ns()
            self._post(
                client,
                DRAW_OUT,
                inputs=[
                    {"id": "window-picker", "property": "value", "value": LATEST},
                    {"id": "drawn-windows", "property": "data", "value": drawn},
                ],
                changedPropIds=["drawn-windows.data"],
            )
            now = time.time_ns()
            self.draws.append((now - t) / 1e9)
            for n in range(count + 1, new_count + 1):
                self.served[n] = now
            count = max(count, new_count)
        self.cpu_s = time.thread_time() - cpu0

    def stop(self) -> None:
        """End the loop and wait for it."""
        self._halt.set()
        self.join(30)


# -- one rate -----------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start_consumer(
    trace_dir: Path, interval: float, tick: float
) -> tuple[LiveLoader, TimedUpdateThread, Page]:
    """The live loader of ``trace_dir``, its update thread stepping every
    ``interval`` s and a page polling the app every ``tick`` s, started."""
    loader = live_loader(trace_dir, WINDOW_NS, LATENESS_NS)
    thread = TimedUpdateThread(loader.step, interval, source=str(trace_dir))
    page = Page(create_app(thread), tick)
    thread.start()
    page.start()
    return loader, thread, page


def run_producer(
    trace_dir: Path, rate: float, duration: float, log_path: Path, seed: int
) -> None:
    """Run :func:`produce` in a spawned process and wait for it to stop."""
    producer = mp.get_context("spawn").Process(
        target=produce,
        args=(str(trace_dir), rate, duration, str(log_path), seed),
    )
    producer.start()
    producer.join(duration + 60)
    if producer.is_alive():
        producer.kill()
        raise RuntimeError("producer did not stop")


def run_rate(
    rate: float, duration: float, seed: int, interval: float, tick: float
) -> dict[str, Any]:
    """Produce at ``rate`` rows/s for ``duration`` s and measure the consumer."""
    root = Path(tempfile.mkdtemp(prefix="sparktrail-latency-"))
    trace_dir, log_path = root / "trace", root / "producer.json"
    trace_dir.mkdir()
    try:
        _, thread, page = start_consumer(trace_dir, interval, tick)
        wall0, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
        run_producer(trace_dir, rate, duration, log_path, seed)
        time.sleep(2 * tick + 1.0)  # the last closable windows get served
        thread.stop()
        page.stop()
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - wall0
        log = json.loads(log_path.read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    result = analyse(log, thread, page)
    result.update(
        rate=rate,
        interval=interval,
        tick=tick,
        cpu_share=(cpu - page.cpu_s) / wall,
        page_cpu_share=page.cpu_s / wall,
    )
    return result


def _phase_served(published: int, draw_ns: int, tick_ns: int, phase_ns: int) -> int:
    """When a tab whose ticks fall ``phase_ns`` after each multiple of
    ``tick_ns`` (epoch) serves a window published at ``published``."""
    n = -(-(published - phase_ns) // tick_ns)
    return n * tick_ns + phase_ns + draw_ns


def analyse(
    log: dict[str, Any], thread: TimedUpdateThread, page: Page
) -> dict[str, Any]:
    """Per-window latencies (seconds) and their split."""
    files = log["files"]
    landed = np.array([f[0] for f in files])
    max_event = np.maximum.accumulate(np.array([f[2] for f in files]))
    step_of = {w: s for s in thread.steps for w in s.windows}
    tick_ns = round(page.tick * 1e9)
    draw_ns = round(statistics.median(page.draws) * 1e9) if page.draws else 0
    phases = [tick_ns * k // PHASES for k in range(PHASES)]
    keys = ("tab", "phases", "raw", "published", "cadence", "wait", "step", "serve")
    rows: dict[str, list[float]] = {k: [] for k in keys}
    for index, ts in enumerate(thread.order):
        served = page.served.get(index + 1)
        if served is None:
            continue
        te = ts + WINDOW_NS
        due = te + LATENESS_NS
        step = step_of[ts]
        first_file = min(int(np.searchsorted(max_event, due)), len(landed) - 1)
        file_at = int(landed[first_file])
        rows["tab"].append((served - due) / 1e9)
        rows["phases"] += [
            (_phase_served(step.end, draw_ns, tick_ns, p) - due) / 1e9 for p in phases
        ]
        rows["raw"].append((served - te) / 1e9)
        rows["published"].append((step.end - due) / 1e9)
        rows["cadence"].append((file_at - due) / 1e9)
        rows["wait"].append((step.start - file_at) / 1e9)
        rows["step"].append((step.end - step.start) / 1e9)
        rows["serve"].append((served - step.end) / 1e9)
    closing = [(s.end - s.start) / 1e9 for s in thread.steps if s.windows]
    idle = [(s.end - s.start) / 1e9 for s in thread.steps if not s.windows]
    span = (log["end"] - log["t0"]) / 1e9
    tab_phase = statistics.median(t % tick_ns for t in page.ticks) / 1e9
    return {
        "rows_per_s": sum(f[1] for f in files) / span,
        "files": len(files),
        "windows": len(rows["tab"]),
        "rows": rows,
        "producer_cpu_share": log["cpu_s"] / span,
        "step_closing": statistics.median(closing) if closing else math.nan,
        "step_idle": statistics.median(idle) if idle else math.nan,
        "per_window": statistics.median(
            (s.end - s.start) / 1e9 / len(s.windows) for s in thread.steps if s.windows
        )
        if closing
        else math.nan,
        "draw": draw_ns / 1e9,
        "tab_phase": tab_phase,
    }


# -- report -------------------------------------------------------------------


def _stats(values: list[float]) -> str:
    return (
        f"{statistics.median(values):.2f} / {_pct(values, 0.9):.2f} / "
        f"{max(values):.2f} s"
    )


def report(results: list[dict[str, Any]]) -> str:
    """The Markdown tables of every rate."""
    lines = [
        "| rows/s target | rows/s produced | windows closed | served, beyond "
        "lateness, over tab phases: median / p90 / max | same, the measured tab "
        "| published, beyond lateness: median / p90 / max | window end → served "
        "(tab, median) | consumer CPU (of 1 core) | Dash callbacks CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows = r["rows"]
        if not rows["tab"]:
            lines.append(f"| {r['rate']:,.0f} | {r['rows_per_s']:,.0f} | 0 | — |")
            continue
        lines.append(
            f"| {r['rate']:,.0f} | {r['rows_per_s']:,.0f} | {r['windows']} "
            f"| {_stats(rows['phases'])} | {_stats(rows['tab'])} "
            f"(phase {r['tab_phase']:.2f} s) | {_stats(rows['published'])} "
            f"| {statistics.median(rows['raw']):.2f} s "
            f"| {r['cpu_share']:.0%} | {r['page_cpu_share']:.0%} |"
        )
    lines += [
        "",
        "Where the time beyond lateness goes (measured tab; median (p90) over "
        "windows):",
        "",
        "| rows/s target | file cadence | poll wait | step | serve (tick wait + "
        "draw) | step closing ≥ 1 window | idle step | step per window closed "
        "| draw callback |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows = r["rows"]
        if not rows["tab"]:
            continue
        cells = [
            f"{statistics.median(rows[k]):.2f} ({_pct(rows[k], 0.9):.2f}) s"
            for k in ("cadence", "wait", "step", "serve")
        ]
        lines.append(
            f"| {r['rate']:,.0f} | {' | '.join(cells)} | {r['step_closing']:.3f} s "
            f"| {r['step_idle']:.3f} s | {r['per_window']:.3f} s | {r['draw']:.3f} s |"
        )
    if results:
        r = results[0]
        lines += [
            "",
            f"UpdateThread interval {r['interval']:g} s, page tick {r['tick']:g} s, "
            f"files every {FLUSH_S[0]:g}–{FLUSH_S[1]:g} s, window "
            f"{WINDOW_NS / 1e9:g} s, lateness {LATENESS_NS / 1e9:g} s; target ≤ "
            f"{TARGET_S:g} s beyond lateness. Tab phases: {PHASES} tabs ticking "
            "evenly spread over the tick, each serving a window at its first tick "
            "after the publish plus the measured median draw time.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every rate and print the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[1000, 10000])
    parser.add_argument("--duration", type=float, default=30.0, help="s per rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        help=f"UpdateThread interval, s (default: serve's, {DEFAULT_INTERVAL:g})",
    )
    parser.add_argument(
        "--tick",
        type=float,
        default=PAGE_TICK_S,
        help=f"page refresh tick, s (default: the app's, {PAGE_TICK_S:g})",
    )
    parser.add_argument("--json", type=Path, help="also write raw per-window data")
    args = parser.parse_args(argv)
    retain_freed_memory()  # as the sparktrail CLI does
    results = []
    for rate in args.rates:
        print(f"rate {rate:,.0f} rows/s for {args.duration:g} s…", file=sys.stderr)
        results.append(
            run_rate(rate, args.duration, args.seed, args.interval, args.tick)
        )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
