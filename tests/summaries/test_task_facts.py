"""Task facts: trace columns without a value come out as constant null columns."""

from __future__ import annotations

import polars as pl
import pytest

from sparktrail.pag.trace import load_trace
from sparktrail.summaries import _table
from sparktrail.summaries._table import _task_chunk, task_facts
from sparktrail.synthetic import profile_trace
from tests.summaries.builders import shuffle_join


def _every_fact(trace: pl.DataFrame) -> pl.DataFrame:
    """The facts aggregated column by column (no constant columns)."""
    frame = load_trace(trace).frame
    frame = frame.with_columns(
        pl.lit(None, dtype=pl.Int64).alias(c)
        for c in (
            "shuffle_write_bytes",
            "memory_bytes_spilled",
            "disk_bytes_spilled",
            "state_rows",
            "state_memory_bytes",
        )
        if c not in frame.columns
    )
    if "status" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("status"))
    return _task_chunk(frame, ())


@pytest.mark.parametrize("chunk_rows", [10**7, 50])
def test_facts_of_a_trace_with_absent_columns_equal_the_full_aggregation(
    monkeypatch, chunk_rows
):
    monkeypatch.setattr(_table, "TASK_CHUNK_ROWS", chunk_rows)
    trace = profile_trace(900).with_columns(
        pl.when(pl.col("task_id") % 2 == 0).then(7).otherwise(None).alias("records")
    )
    got = task_facts(trace)
    want = _every_fact(trace)
    assert got.equals(want)
    assert got.schema == want.schema
    # Absent in the trace, so null for every task; records half stated.
    assert got["job_id"].null_count() == got.height == 288
    assert got["records"].null_count() == 144


def test_facts_of_a_spark_like_trace_are_unchanged(monkeypatch):
    monkeypatch.setattr(_table, "TASK_CHUNK_ROWS", 5)
    trace = shuffle_join()
    got = task_facts(trace)
    assert got.equals(_every_fact(trace))
    assert got["job_id"].null_count() < got.height
