"""The online pipeline's ceiling: a rate sweep, a sustained run, an overload.

Commands (issue 15, item 2 and "bad input")::

    # the sweep: the ceiling is the highest rate whose published-beyond-
    # lateness median stays <= 1 s (and every lower rate's too)
    PYTHONPATH=. .venv/bin/python bench/online_ceiling.py \\
        --rates 100000 150000 200000 250000 300000 --duration 20
    # one sustained rate
    PYTHONPATH=. .venv/bin/python bench/online_ceiling.py --rates 300000 --duration 60
    # overload: 1.5 x the ceiling for 3 minutes, peak RSS and the lag shown
    PYTHONPATH=. .venv/bin/python bench/online_ceiling.py --rates 300000 \\
        --duration 180 --drain 600

Each rate runs the producer and consumer of ``bench/online_latency.py``
(:func:`~bench.online_latency.produce`, the ``LiveLoader`` stepped by the
serve command's update loop, the page over Dash's callback route), and
besides its latencies records, once a second, the consumer's resident set
size (``/proc/self/status`` ``VmRSS``), the rows the pipeline buffers and
the lag the page shows (:attr:`~sparktrail.dashboard.live_view.ViewState.
lag_ns`). After the producer stops, the consumer runs until it has read
every row and closed every window the last event allows (at most
``--drain`` s): a pipeline slower than its producer falls behind but must
not drop rows, so ``rows read`` must equal ``rows produced``.

One process per run (``--rates`` runs in this process one after the
other; the peak RSS is of the whole process, so measure memory with one
rate per process).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.online_latency import (
    DEFAULT_INTERVAL,
    LATENESS_NS,
    PAGE_TICK_S,
    TARGET_S,
    WINDOW_NS,
    TimedUpdateThread,
    analyse,
    run_producer,
    start_consumer,
)
from sparktrail.dashboard.live_view import LiveLoader
from sparktrail.pag.memory import retain_freed_memory


def _rss_mb() -> float:
    """This process's resident set size now, in MB."""
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rows_read(loader: LiveLoader) -> int:
    pipeline = loader._pipeline
    if pipeline is None:
        return 0
    # An older sparktrail (bench/versions.sh) has no rows_read property.
    return int(getattr(pipeline, "rows_read", pipeline._next_row))


class Sampler(threading.Thread):
    """Once a second: RSS, buffered rows, the snapshot's lag."""

    def __init__(self, loader: LiveLoader, thread: TimedUpdateThread) -> None:
        super().__init__(name="sampler", daemon=True)
        self.loader, self.thread = loader, thread
        self.samples: list[tuple[float, float, int, float | None]] = []
        self._halt = threading.Event()
        self._t0 = time.monotonic()

    def run(self) -> None:
        """Sample until :meth:`stop`."""
        while not self._halt.wait(1.0):
            pipeline = self.loader._pipeline
            buffered = 0 if pipeline is None else pipeline.buffered_rows
            lag = getattr(self.thread.latest(), "lag_ns", None)
            self.samples.append(
                (
                    time.monotonic() - self._t0,
                    _rss_mb(),
                    buffered,
                    None if lag is None else lag / 1e9,
                )
            )

    def stop(self) -> None:
        """End the loop and wait for it."""
        self._halt.set()
        self.join(5)


def _caught_up(loader: LiveLoader, produced: int, last_event: int) -> bool:
    pipeline = loader._pipeline
    if pipeline is None or _rows_read(loader) < produced:
        return False
    closed = pipeline.closed_until_ns or 0
    due = (last_event - LATENESS_NS) // WINDOW_NS * WINDOW_NS
    return closed >= due


def run(rate: float, duration: float, drain: float, seed: int) -> dict[str, Any]:
    """Produce at ``rate`` for ``duration`` s; consume until caught up."""
    root = Path(tempfile.mkdtemp(prefix="sparktrail-ceiling-"))
    trace_dir, log_path = root / "trace", root / "producer.json"
    trace_dir.mkdir()
    try:
        loader, thread, page = start_consumer(trace_dir, DEFAULT_INTERVAL, PAGE_TICK_S)
        sampler = Sampler(loader, thread)
        sampler.start()
        run_producer(trace_dir, rate, duration, log_path, seed)
        stopped = time.monotonic()
        log = json.loads(log_path.read_text(encoding="utf-8"))
        produced = sum(f[1] for f in log["files"])
        last_event = max(f[2] for f in log["files"])
        while time.monotonic() - stopped < drain and not _caught_up(
            loader, produced, last_event
        ):
            time.sleep(0.2)
        drained = time.monotonic() - stopped
        time.sleep(2 * PAGE_TICK_S + 1.0)  # the page serves the last windows
        thread.stop()
        page.stop()
        sampler.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = analyse(log, thread, page)
    pipeline = loader._pipeline
    assert pipeline is not None
    closing = [s for s in thread.steps if s.windows]
    lags = [s[3] for s in sampler.samples if s[3] is not None]
    result.update(
        rate=rate,
        duration=duration,
        produced=produced,
        read=_rows_read(loader),
        late_rows=pipeline.late_rows,
        drain_s=drained,
        max_windows_per_step=max((len(s.windows) for s in closing), default=0),
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        rss_mb=[s[1] for s in sampler.samples],
        max_buffered=max((s[2] for s in sampler.samples), default=0),
        lag_s=lags,
    )
    return result


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(results: list[dict[str, Any]]) -> str:
    """One Markdown row per rate, then the ceiling."""
    lines = [
        "| rows/s | windows | published beyond lateness, median (p90, max) "
        "| step per window closed | most windows in a step | page lag shown, "
        "median (max) | rows produced / read (late) | drain after stop "
        "| RSS: at 1/3, 2/3, end of run; peak |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ceiling = None
    for r in results:
        published = r["rows"]["published"]
        rss = r["rss_mb"] or [float("nan")]
        thirds = [rss[min(len(rss) - 1, len(rss) * k // 3)] for k in (1, 2, 3)]
        med, p90, top = _median(published), _pct(published, 0.9), _max(published)
        lines.append(
            f"| {r['rate']:,.0f} | {r['windows']} | {med:.2f} ({p90:.2f}, {top:.2f}) s "
            f"| {r['per_window']:.3f} s | {r['max_windows_per_step']} "
            f"| {_median(r['lag_s']):.1f} ({_max(r['lag_s']):.1f}) s "
            f"| {r['produced']:,} / {r['read']:,} ({r['late_rows']}) "
            f"| {r['drain_s']:.1f} s "
            f"| {thirds[0]:.0f}, {thirds[1]:.0f}, {thirds[2]:.0f}; "
            f"{r['peak_rss_mb']:.0f} MB |"
        )
    for r in sorted(results, key=lambda r: r["rate"]):
        if not r["rows"]["published"] or _median(r["rows"]["published"]) > TARGET_S:
            break
        ceiling = r["rate"]
    lines.append("")
    lines.append(
        "Ceiling (highest rate whose published-beyond-lateness median, and every "
        f"lower rate's, is <= {TARGET_S:g} s): "
        + (f"{ceiling:,.0f} rows/s" if ceiling is not None else "below the rates run")
    )
    return "\n".join(lines)


def _max(values: list[float]) -> float:
    return max(values, default=float("nan"))


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    """Run every rate; print the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", required=True)
    parser.add_argument("--duration", type=float, default=20.0, help="s per rate")
    parser.add_argument(
        "--drain", type=float, default=120.0, help="s to wait for the consumer"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the raw results")
    args = parser.parse_args(argv)
    retain_freed_memory()  # as the sparktrail CLI does
    results = []
    for rate in args.rates:
        print(f"rate {rate:,.0f} rows/s for {args.duration:g} s…", file=sys.stderr)
        results.append(run(rate, args.duration, args.drain, args.seed))
    if args.json is not None:
        args.json.write_text(json.dumps(results), encoding="utf-8")
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
