"""Records, bytes and spills of real logs reach the trace, none lost
(tracer/task_pieces.py: a processing row that takes no time stays)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import zstandard

from sparktrail.tracer import import_eventlog
from tests.paths import EVENTLOGS

RAPIDS = EVENTLOGS / "public" / "rapids"
#: Logs where tasks with no processing time took their records with them
#: (aqeshuffle stage 8: 13 of 13 records lost; rp_sql stage 3: 298,922 of
#: 20,000,000). aqeshuffle's stage 4 spills.
LOGS = [
    RAPIDS / "spark-events-qualification" / "aqeshuffle_eventlog.zstd",
    RAPIDS / "spark-events-profiling" / "rp_sql_eventlog.zstd",
]
SPILLS = ("Memory Bytes Spilled", "Disk Bytes Spilled")


def log_events(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
        text = reader.read().decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def succeeded(event: dict[str, Any]) -> bool:
    info = event["Task Info"]
    reason = (event.get("Task End Reason") or {}).get("Reason")
    failed = info.get("Failed") or info.get("Killed")
    return not failed and reason in (None, "Success", "Resubmitted")


def expected(path: Path) -> tuple[Counter[tuple[int, str]], Counter[tuple[int, str]]]:
    """Per (stage, column): records and bytes of each partition's first
    successful attempt (input plus shuffle read), and spills of every
    attempt, straight from the log's JSON."""
    work: Counter[tuple[int, str]] = Counter()
    spills: Counter[tuple[int, str]] = Counter()
    seen: set[tuple[int, int]] = set()
    ended: set[int] = set()
    for e in log_events(path):
        if e.get("Event") != "SparkListenerTaskEnd":
            continue
        stage, info = e["Stage ID"], e["Task Info"]
        metrics = e.get("Task Metrics") or {}
        if info["Task ID"] not in ended:  # a second end changes nothing
            ended.add(info["Task ID"])
            for key, column in zip(SPILLS, ("memory", "disk"), strict=True):
                spills[stage, column] += metrics.get(key, 0)
        partition = info.get("Partition ID", -1)
        key = (stage, info["Index"] if partition < 0 else partition)
        if not succeeded(e) or key in seen:
            continue
        seen.add(key)
        read = metrics.get("Shuffle Read Metrics") or {}
        source = metrics.get("Input Metrics") or {}
        work[stage, "records"] += source.get("Records Read", 0) + read.get(
            "Total Records Read", read.get("Records Read", 0)
        )
        work[stage, "bytes"] += (
            source.get("Bytes Read", 0)
            + read.get("Remote Bytes Read", 0)
            + read.get("Local Bytes Read", 0)
        )
    return work, spills


def traced(trace: pl.DataFrame, columns: dict[str, str]) -> Counter[tuple[int, str]]:
    sums = (
        trace.filter(pl.col("stage_id").is_not_null())
        .group_by("stage_id")
        .agg(pl.col(c).sum().alias(name) for name, c in columns.items())
    )
    return Counter(
        {
            (row["stage_id"], name): row[name]
            for row in sums.iter_rows(named=True)
            for name in columns
        }
    )


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_every_record_byte_and_spill_reaches_the_trace(log: Path) -> None:
    if not log.exists():
        pytest.skip(f"{log} not present")
    # GIVEN the log's own per-stage counts
    work, spills = expected(log)
    assert sum(work.values()) > 0
    # WHEN it is imported
    trace = import_eventlog(log)
    # THEN every stage's records and bytes (each partition counted once)
    # and spills (every attempt) sum to the log's
    got = traced(trace, {"records": "records", "bytes": "bytes"})
    assert +got == +work
    memory, disk = "memory_bytes_spilled", "disk_bytes_spilled"
    assert +traced(trace, {"memory": memory, "disk": disk}) == +spills
