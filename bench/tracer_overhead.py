"""Overhead of the live bridge on a Spark job of >= 20,000 tasks.

Command (about 3-5 minutes on 2 cores)::

    .venv/bin/python bench/tracer_overhead.py --tasks 20000 --repeat 3

One fresh ``local[2]`` SparkSession runs the same JVM-only job (``spark.range``
with one partition per task, summed: no Python workers, so task time is JVM
time) alternately without and with the live bridge attached (ABAB...,
``--repeat`` each, after one unmeasured warm-up run). Reported, as Markdown:

* median job wall time with and without, and their ratio (target <= 1.02);
* events dropped by Spark's listener bus: the ``numDroppedEvents`` counter of
  every queue (read through py4j), and the driver log scanned for Spark's
  "Dropping event" / "Dropped N events" messages (the session runs in a child
  process whose stderr goes to a file for that);
* TaskEnd events our listener received against the job's task count, and the
  tasks in the Arrow trace after ``detach``;
* the event rate the listener kept up with, and its serialization cost per
  event on the listener-bus thread (the bound on the rate it could take).

Spark's own event log is off in both modes, so only the bridge differs.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DROP_PATTERN = re.compile(r"Dropping event from queue|Dropped \d+ events from")


def child(
    tasks: int, repeat: int, flush_seconds: float, follow: bool = True
) -> dict[str, Any]:
    """Run the measurements in this process; return them as a dict."""
    from pyspark.sql import SparkSession

    from sparktrail.pag.trace import read_trace
    from sparktrail.tracer import live

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("sparktrail-overhead")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.eventLog.enabled", "false")
        .config("spark.driver.memory", "4g")
        # The status store keeps up to 100,000 tasks by default; 20,000-task
        # runs then slow the whole session down run after run (measured:
        # 15 s -> 33 s without the bridge), which no A/B ratio survives.
        .config("spark.ui.retainedJobs", "10")
        .config("spark.ui.retainedStages", "10")
        .config("spark.ui.retainedTasks", "1000")
        .config("spark.sql.ui.retainedExecutions", "10")
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("WARN")
    status = sc.statusTracker()

    def job(tag: str) -> tuple[float, int]:
        """One run of the job; returns (seconds, tasks in its stages)."""
        sc.setJobGroup(tag, tag)
        t0 = time.perf_counter()
        spark.range(0, tasks, 1, tasks).selectExpr("sum(id)").collect()
        seconds = time.perf_counter() - t0
        # AQE runs the map stage as its own job, and the result job lists it
        # again as skipped: count each stage once, by tasks it completed.
        stages = {
            stage
            for job_id in status.getJobIdsForGroup(tag)
            for stage in (getattr(status.getJobInfo(job_id), "stageIds", None) or [])
        }
        n = 0
        for stage in stages:
            info = status.getStageInfo(stage)
            n += info.numCompletedTasks if info else 0
        return seconds, n

    job("warmup")
    runs: list[dict[str, Any]] = []
    out_root = Path(tempfile.mkdtemp(prefix="sparktrail-overhead-"))
    for rep in range(repeat):
        for mode in ("off", "on"):
            tag = f"{mode}-{rep}"
            dropped_before = sum(live.dropped_events(spark).values())
            row: dict[str, Any] = {"mode": mode, "rep": rep}
            if mode == "on":
                out = out_root / tag
                t0 = time.perf_counter()
                handle = live.attach(
                    spark, out, flush_seconds=flush_seconds, follow=follow
                )
                row["attach_s"] = time.perf_counter() - t0
                seconds, n = job(tag)
                before = handle.stats()
                t0 = time.perf_counter()
                final = handle.detach()
                row["detach_s"] = time.perf_counter() - t0
                trace = read_trace(out)
                row.update(
                    task_ends=final.task_ends,
                    events=final.events_received,
                    events_seen=final.events_seen,
                    buffered_at_job_end=before.lines_buffered,
                    trace_tasks=trace["task_id"].drop_nulls().n_unique(),
                    trace_rows=trace.height,
                    trace_files=final.trace_files,
                    serialize_ns=int(handle._listener.serializeNanos()),
                )
            else:
                seconds, n = job(tag)
            sc._jsc.sc().listenerBus().waitUntilEmpty(60_000)
            row.update(seconds=seconds, tasks=n)
            row["dropped"] = sum(live.dropped_events(spark).values()) - dropped_before
            runs.append(row)
            print(json.dumps(row), flush=True)
    result = {
        "runs": runs,
        "dropped_total": live.dropped_events(spark),
        "spark": spark.version,
    }
    spark.stop()
    return result


def report(result: dict[str, Any], log_hits: list[str]) -> str:
    """The Markdown tables."""
    runs = result["runs"]
    off = [r["seconds"] for r in runs if r["mode"] == "off"]
    on = [r for r in runs if r["mode"] == "on"]
    on_s = [r["seconds"] for r in on]
    ratio = statistics.median(on_s) / statistics.median(off)
    lines = [
        f"Spark {result['spark']}, local[2], job: spark.range(0, N, 1, N)"
        f".selectExpr('sum(id)').collect(), {runs[0]['tasks']} tasks per run",
        "",
        "| mode | run | job s | tasks | dropped (bus) | TaskEnd received "
        "| tasks in trace | trace rows | detach s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['mode']} | {r['rep']} | {r['seconds']:.2f} | {r['tasks']} "
            f"| {r['dropped']} | {r.get('task_ends', '-')} "
            f"| {r.get('trace_tasks', '-')} | {r.get('trace_rows', '-')} "
            f"| {r.get('detach_s', float('nan')):.2f} |"
        )
    events = sum(r["events"] for r in on)
    ser = sum(r["serialize_ns"] for r in on)
    rate = statistics.median(r["events"] / r["seconds"] for r in on)
    lines += [
        "",
        "| figure | value |",
        "|---|---|",
        f"| median job s, without bridge | {statistics.median(off):.2f} |",
        f"| median job s, with bridge | {statistics.median(on_s):.2f} |",
        f"| ratio of medians with / without (target <= 1.02) | {ratio:.3f} |",
        f"| ratio of means with / without | "
        f"{statistics.mean(on_s) / statistics.mean(off):.3f} |",
        "| per-pair ratios (run i on / run i off) | "
        + ", ".join(f"{a / b:.3f}" for a, b in zip(on_s, off, strict=True))
        + " |",
        f"| events dropped, all queues, whole session | "
        f"{sum(result['dropped_total'].values())} {result['dropped_total']} |",
        f"| 'Dropping event'/'Dropped N events' in driver log | {len(log_hits)} |",
        f"| TaskEnd received / tasks, with bridge | "
        f"{sum(r['task_ends'] for r in on)} / {sum(r['tasks'] for r in on)} |",
        f"| events/s the listener took (median over runs) | {rate:,.0f} |",
        f"| serialization on the bus thread, us/event | {ser / events / 1e3:.1f} |",
        f"| -> bound on events/s one bus thread can serialize | "
        f"{events / ser * 1e9:,.0f} |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark in a child process and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flush-seconds", type=float, default=1.0)
    parser.add_argument(
        "--no-follow",
        action="store_true",
        help="JVM listener only, no Arrow follower (to split the overhead)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = child(args.tasks, args.repeat, args.flush_seconds, not args.no_follow)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    with tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) as log:
        command = [sys.executable, __file__, "--child", *(argv or sys.argv[1:])]
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True)
    driver_log = Path(log.name).read_text(errors="replace")
    if proc.returncode != 0:
        sys.stderr.write(driver_log[-5000:])
        return proc.returncode
    result_line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(result_line.removeprefix("RESULT "))
    hits = [x for x in driver_log.splitlines() if DROP_PATTERN.search(x)]
    print(report(result, hits))
    print(f"\ndriver log: {log.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
