"""Fixtures shared by every test folder: one SparkSession for integration tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark_eventlog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory the shared SparkSession writes its plain event log to."""
    return tmp_path_factory.mktemp("spark-events")


@pytest.fixture(scope="session")
def spark(spark_eventlog_dir: Path) -> Iterator[Any]:
    """One local[2] SparkSession for all integration tests, event log enabled.

    The log is a single plain file ``<appId>.inprogress`` in
    :func:`spark_eventlog_dir` until the session stops; Spark flushes it at
    every job end, so a test can import it after its jobs finished.
    """
    pyspark_sql = pytest.importorskip("pyspark.sql")
    # Python workers must run this interpreter (with polars, numba), not
    # whatever "python3" is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("sparktrail-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", spark_eventlog_dir.as_uri())
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.eventLog.compress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def warm_kernel() -> None:
    """Compile (or load) the numba CP kernel once, before any test uses it."""
    import polars as pl

    from sparktrail.pag import critical_participation

    trace = pl.DataFrame(
        {
            "src_worker": ["a"],
            "dst_worker": ["a"],
            "start_ns": [0],
            "end_ns": [1],
            "activity": ["processing"],
        }
    )
    critical_participation(trace, 1)
