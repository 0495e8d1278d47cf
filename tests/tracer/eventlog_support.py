"""Helpers shared by the tracer tests that read logs Spark is writing."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import polars as pl

from sparktrail.tracer import ImportStats, import_eventlog


def wait_for(path: Path, needle: bytes, timeout: float = 20.0) -> None:
    """Spark flushes its own event log at each job end, from its listener thread."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_bytes():
            return
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} never appeared in {path}")


def import_quietly(path: Path) -> tuple[pl.DataFrame, ImportStats]:
    """Import a log, failing on any warning or skipped line."""
    stats = ImportStats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = import_eventlog(path, stats=stats)
    assert stats.skipped_lines == 0
    return trace, stats
