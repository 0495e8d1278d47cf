"""The live pipeline's ceiling on each engine: polars, Spark Structured Streaming.

Command (about 4 minutes on 2 cores)::

    PYTHONPATH=. .venv/bin/python bench/live_engines.py --engines polars spark \\
        --rates 10000 30000 --duration 20

Per engine and rate R (trace rows per second), a fresh temporary TRACE_DIR
gets the producer of ``bench/online_latency.py`` (a child process writing
the rounds of 16 workers in real time, a file every 100–250 ms) for
``--duration`` seconds, and the consumer is what ``sparktrail live
--engine ENGINE`` runs: ``poll()`` of the engine's pipeline
(:class:`~sparktrail.engines.online.OnlinePipeline` or
:class:`~sparktrail.engines.spark_live.SparkLivePipeline`), then a sleep of
``--interval`` seconds (``live --poll``'s default, 0.5 s), with ``live``'s
defaults of ``serve`` (``--window 1s --lateness 2s``). No dashboard: this
measures the pipeline alone. After the producer stops, polling goes on for
``window + lateness + 5`` s so the last closable windows close.

For each closed window ``[ts, te)``: **published beyond lateness** = the
end of the poll that stored it − (te + lateness) (event times are the wall
clock). Per poll that closed windows: its wall time, and that time per
window closed. **Behind at the end** = windows closable by the end of the
run (te + lateness before the last event) that were not closed. **Last
window published after the producer stopped**, and **rows closed per s**
= the rows of the closed windows over the time from the producer's start
to the last publish: what the engine sustains once it lags (a poll takes
every file landed since the last one, so its batches grow).

The engine keeps up with R when windows are published within about a
poll of their due time (te + lateness) all through the run; its latency
ceiling lies between the highest rate that keeps up and the next. An
engine that does not keep up still closes everything when its throughput
(rows closed per s) exceeds R. The load average of the machine is printed
with every row: other processes share its 2 cores.

The Spark engine runs on one local[2] session (``spark.sql.shuffle.partitions``
2, driver memory 2g) started before the first rate; one warm-up poll on a
small trace starts its Python workers and loads the numba kernel for both
engines before anything is timed. Each Spark poll is one ``AvailableNow``
run of the streaming query: its micro-batch decodes the new files, and a
close runs the CP job (``applyInArrow``) and four aggregation jobs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.online_latency import LATENESS_NS, WINDOW_NS, produce
from sparktrail.engines.online import OnlinePipeline
from sparktrail.pag.memory import retain_freed_memory
from sparktrail.pag.trace import write_trace
from sparktrail.synthetic import profile_trace

INTERVAL_S = 0.5  # sparktrail live --poll default


def _session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("sparktrail-bench-live")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _pipeline(engine: str, trace_dir: Path, spark: Any) -> Any:
    if engine == "polars":
        return OnlinePipeline(trace_dir, WINDOW_NS, LATENESS_NS)
    from sparktrail.engines.spark_live import SparkLivePipeline

    return SparkLivePipeline(trace_dir, WINDOW_NS, LATENESS_NS, spark=spark)


def warm_up(engine: str, spark: Any) -> None:
    """One poll on a small trace: Python workers started, kernel loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        write_trace(profile_trace(3000, workers=8), Path(tmp) / "part-0.arrow")
        _pipeline(engine, Path(tmp), spark).poll(final=True)


def run_rate(
    engine: str, rate: float, duration: float, seed: int, spark: Any
) -> dict[str, Any]:
    """Produce at ``rate`` rows/s for ``duration`` s; poll the engine meanwhile."""
    load0 = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(prefix="sparktrail-engines-"))
    trace_dir, log_path = root / "trace", root / "producer.json"
    trace_dir.mkdir()
    polls: list[Poll] = []
    try:
        pipeline = _pipeline(engine, trace_dir, spark)
        producer = mp.get_context("spawn").Process(
            target=produce, args=(str(trace_dir), rate, duration, str(log_path), seed)
        )
        producer.start()
        drain_until: float | None = None
        while drain_until is None or time.monotonic() < drain_until:
            start = time.time_ns()
            closed = pipeline.poll()
            polls.append((start, time.time_ns(), [w.start_ns for w in closed]))
            if drain_until is None and not producer.is_alive():
                drain_until = time.monotonic() + (WINDOW_NS + LATENESS_NS) / 1e9 + 5
            time.sleep(INTERVAL_S)
        producer.join(60)
        log = json.loads(log_path.read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = analyse(engine, rate, log, polls)
    result["load"] = (load0, os.getloadavg()[0])
    result["phase_s"] = dict(getattr(pipeline, "phase_s", {}))
    result["batches"] = getattr(pipeline, "batches", None)
    return result


Poll = tuple[int, int, list[int]]  # start, end (wall ns), windows closed


def analyse(
    engine: str, rate: float, log: dict[str, Any], polls: list[Poll]
) -> dict[str, Any]:
    """Latencies (s) per window and step times per poll."""
    published = []
    for _, end, starts in polls:
        published += [(end - (ts + WINDOW_NS + LATENESS_NS)) / 1e9 for ts in starts]
    closing = [(e - s) / 1e9 for s, e, w in polls if w]
    per_window = [(e - s) / 1e9 / len(w) for s, e, w in polls if w]
    last_event = max(f[2] for f in log["files"])
    closed = {ts for _, _, w in polls for ts in w}
    first = min(closed) if closed else log["t0"] // WINDOW_NS * WINDOW_NS
    closable = range(first, last_event - LATENESS_NS - WINDOW_NS + 1, WINDOW_NS)
    span = (log["end"] - log["t0"]) / 1e9
    done = max((e for _, e, w in polls if w), default=log["end"])
    return {
        "engine": engine,
        "rate": rate,
        "rows_per_s": sum(f[1] for f in log["files"]) / span,
        "windows": len(published),
        "published": published,
        "closing": closing,
        "per_window": per_window,
        "behind": sum(1 for ts in closable if ts not in closed),
        # Rows of the closed windows over the time to close them: what the
        # engine sustains when it lags (its batches grow to take it all).
        "rows_closed_per_s": sum(f[1] for f in log["files"])
        * len(closed)
        / max(1, len(closed) + sum(1 for ts in closable if ts not in closed))
        / ((done - log["t0"]) / 1e9),
        "last_after_end": (done - log["end"]) / 1e9,
        "polls": len(polls),
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(results: list[dict[str, Any]]) -> str:
    """One Markdown table, a row per engine and rate."""
    lines = [
        "| engine | rows/s target | rows/s produced | windows closed | published "
        "beyond lateness: median / p90 / max | poll closing ≥ 1 window, median "
        "(p90) | per window closed, median | behind at the end | last window "
        "published after the producer stopped | rows closed per s | load average "
        "(1 min) at start → end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        pub, closing = r["published"], r["closing"]
        if not pub:
            lines.append(
                f"| {r['engine']} | {r['rate']:,.0f} | {r['rows_per_s']:,.0f} | 0 "
                f"| — | — | — | {r['behind']} | — | — | — |"
            )
            continue
        lines.append(
            f"| {r['engine']} | {r['rate']:,.0f} | {r['rows_per_s']:,.0f} "
            f"| {r['windows']} | {statistics.median(pub):.2f} / {_pct(pub, 0.9):.2f} "
            f"/ {max(pub):.2f} s | {statistics.median(closing):.2f} "
            f"({_pct(closing, 0.9):.2f}) s "
            f"| {statistics.median(r['per_window']):.3f} s | {r['behind']} "
            f"| {r['last_after_end']:.1f} s | {r['rows_closed_per_s']:,.0f} "
            f"| load {r['load'][0]:.1f} → {r['load'][1]:.1f} |"
        )
    spark = [r for r in results if r["phase_s"]]
    if spark:
        lines += [
            "",
            "Where the Spark engine's time goes (wall seconds per poll that ran "
            "a micro-batch, mean over the run): the streaming query from start "
            "to end, and of it the decode job, the CP job, the four aggregation "
            "jobs and the driver's finish and store writes; overhead = the "
            "query's own (start, planning, offsets, commit).",
            "",
            "| rows/s target | micro-batches | query | decode | CP | sums | finish "
            "| overhead |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in spark:
            ph, n = r["phase_s"], max(1, r["batches"] or 1)
            parts = [ph.get(k, 0.0) / n for k in ("decode", "cp", "sums", "finish")]
            query = ph.get("stream", 0.0) / n
            lines.append(
                f"| {r['rate']:,.0f} | {r['batches']} | {query:.2f} | "
                + " | ".join(f"{v:.2f}" for v in parts)
                + f" | {query - sum(parts):.2f} |"
            )
    lines += [
        "",
        f"Window {WINDOW_NS / 1e9:g} s, lateness {LATENESS_NS / 1e9:g} s, a poll "
        f"every {INTERVAL_S:g} s after the last one ended; Spark on local[2].",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every engine at every rate and print the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--engines", nargs="+", choices=("polars", "spark"), default=["polars", "spark"]
    )
    parser.add_argument("--rates", type=float, nargs="+", default=[10000, 30000])
    parser.add_argument("--duration", type=float, default=20.0, help="s per rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the raw numbers")
    args = parser.parse_args(argv)
    retain_freed_memory()  # as the sparktrail CLI does
    spark = _session() if "spark" in args.engines else None
    results = []
    try:
        for engine in args.engines:
            warm_up(engine, spark)
            for rate in args.rates:
                print(
                    f"{engine}: {rate:,.0f} rows/s for {args.duration:g} s…",
                    file=sys.stderr,
                )
                results.append(run_rate(engine, rate, args.duration, args.seed, spark))
    finally:
        if spark is not None:
            spark.stop()
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
