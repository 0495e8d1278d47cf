"""Importer throughput: MB/s of Spark event-log JSON turned into an Arrow trace.

The input is the shared Spark 2.3.0 log with its jobs replicated (ids and
times shifted) to the size asked for, so every line is a real event shape.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from sparktrail.pag.trace import write_trace
from sparktrail.tracer import ImportStats, import_eventlog

SHARED_LOG = (
    Path(__file__).resolve().parents[2] / "shared" / "eventlogs" / "local-1532512550423"
)
_HEADER_EVENTS = {
    "SparkListenerLogStart",
    "SparkListenerExecutorAdded",
    "SparkListenerBlockManagerAdded",
    "SparkListenerEnvironmentUpdate",
    "SparkListenerApplicationStart",
}


def _shift(event: dict[str, Any], k: int, span_ms: int) -> dict[str, Any]:
    """A copy of ``event`` in replica ``k``: ids and times moved past replica k-1."""
    e: dict[str, Any] = orjson.loads(orjson.dumps(event))
    dt, dj, ds, dtask = k * span_ms, 2 * k, 2 * k, 8 * k
    name = e["Event"]
    if name == "SparkListenerJobStart":
        e["Job ID"] += dj
        e["Submission Time"] += dt
        e["Stage IDs"] = [s + ds for s in e["Stage IDs"]]
        for stage in e.get("Stage Infos", []):
            stage["Stage ID"] += ds
    elif name == "SparkListenerJobEnd":
        e["Job ID"] += dj
        e["Completion Time"] += dt
    elif name.startswith("SparkListenerStage"):
        info = e["Stage Info"]
        info["Stage ID"] += ds
        for field in ("Submission Time", "Completion Time"):
            if field in info:
                info[field] += dt
    elif name.startswith("SparkListenerTask"):
        e["Stage ID"] += ds
        info = e["Task Info"]
        info["Task ID"] += dtask
        info["Launch Time"] += dt
        if info.get("Finish Time"):
            info["Finish Time"] += dt
    return e


def replicated_log(path: Path, target_mb: float, source: Path = SHARED_LOG) -> int:
    """Write a log of about ``target_mb`` MB at ``path``; returns its task count."""
    events = [orjson.loads(line) for line in source.read_bytes().splitlines()]
    head = [e for e in events if e["Event"] in _HEADER_EVENTS]
    body = [
        e
        for e in events
        if e["Event"] not in _HEADER_EVENTS | {"SparkListenerApplicationEnd"}
    ]
    launches = [e["Task Info"]["Launch Time"] for e in body if "Task Info" in e]
    finishes = [e["Task Info"]["Finish Time"] for e in body if "Task Info" in e]
    first, span = min(launches), max(finishes) - min(launches) + 1
    tasks = 0
    with path.open("wb") as out:
        for e in head:
            out.write(orjson.dumps(e) + b"\n")
        k = 0
        while out.tell() < target_mb * 1e6:
            for e in body:
                out.write(orjson.dumps(_shift(e, k, span)) + b"\n")
            tasks += sum(e["Event"] == "SparkListenerTaskEnd" for e in body)
            k += 1
        end = {"Event": "SparkListenerApplicationEnd", "Timestamp": first + k * span}
        out.write(orjson.dumps(end) + b"\n")
    return tasks


def import_section(target_mb: float, repeat: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "eventlog"
        tasks = replicated_log(log, target_mb)
        size_mb = os.path.getsize(log) / 1e6
        times, rows = [], 0
        for i in range(repeat):
            start = time.perf_counter()
            stats = ImportStats()
            trace = import_eventlog(log, stats=stats, progress=False)
            write_trace(trace, Path(tmp) / f"trace-{i}.arrow")
            times.append(time.perf_counter() - start)
            rows = len(trace)
    median = statistics.median(times)
    return "\n".join(
        [
            f"Event log → Arrow trace file (import_eventlog + write_trace), "
            f"median of {repeat} runs, one core.",
            "",
            "| log size | tasks | trace rows | time | throughput |",
            "|---:|---:|---:|---:|---:|",
            f"| {size_mb:,.1f} MB | {tasks:,} | {rows:,} | {median:.2f} s "
            f"| {size_mb / median:,.1f} MB/s |",
        ]
    )
