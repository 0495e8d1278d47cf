"""A real Structured Streaming query traced live (issue 12, item 2).

A rate source (~2000 rows/s), a 1 s processing-time trigger and a
``groupBy(key).count()`` over 4 shuffle partitions into a memory sink run
for about 6 s under ``tracer.attach``; the followed trace's context must
hold the micro-batches, the jobs must name their query and batch, the
stateful tasks must carry their state rows, and the driver's time between
batches must be ``trigger_wait``, and every window of the query has a
critical path.
"""

from __future__ import annotations

import itertools
import time
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.pag.context import AppContext
from sparktrail.pag.trace import read_context, read_trace
from sparktrail.tracer import import_eventlog, listener

pytestmark = pytest.mark.integration

KEYS = ["start_ns", "src_worker", "src_seq", "dst_worker", "dst_seq", "activity"]
RUN_S = 6.0
#: Batches to wait for, at most this long: the first batch of a query
#: plans and compiles, which takes seconds on a busy machine.
BATCHES, PATIENCE_S = 4, 30.0


@pytest.fixture(scope="module")
def streamed(
    spark: Any, spark_eventlog_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Attach, run the streaming query for RUN_S seconds (and BATCHES
    batches), stop it, detach."""
    out = tmp_path_factory.mktemp("stream-live")
    handle = listener.attach(spark, out, flush_seconds=0.2)
    rows = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 2000)
        .load()
        .selectExpr("value % 10 AS key")
        .groupBy("key")
        .count()
    )
    query = (
        rows.writeStream.format("memory")
        .queryName("sparktrail_counts")
        .outputMode("complete")
        .trigger(processingTime="1 second")
        .start()
    )
    began = time.monotonic()
    try:
        while time.monotonic() - began < PATIENCE_S and (
            time.monotonic() - began < RUN_S or len(query.recentProgress) < BATCHES
        ):
            time.sleep(0.2)
    finally:
        query.stop()
    handle.detach()
    app = spark.sparkContext.applicationId
    return {
        "out": out,
        "handle": handle,
        "query_id": str(query.id),
        "spark_log": spark_eventlog_dir / f"{app}.inprogress",
    }


@pytest.fixture(scope="module")
def context(streamed: dict[str, Any]) -> AppContext:
    return read_context(streamed["out"])


def test_batches_have_rates_and_durations(
    streamed: dict[str, Any], context: AppContext
) -> None:
    batches = [b for b in context.batches if b.query_id == streamed["query_id"]]
    assert len(batches) >= 3
    assert [b.batch_id for b in batches] == sorted({b.batch_id for b in batches})
    later = batches[1:]  # the first batch has no previous trigger to rate against
    assert all(b.input_rows_per_second is not None for b in later)
    assert all(b.processed_rows_per_second is not None for b in later)
    assert sum(b.num_input_rows or 0 for b in batches) > 2000
    for b in batches:
        assert b.duration_ms is not None and b.duration_ms["triggerExecution"] > 0
        assert b.state_operators and b.sources and b.sink
    # Once 10 rows came in, the state holds the 10 keys.
    full = [b for b in batches if (b.num_input_rows or 0) >= 10]
    assert full and all(b.state_operators[0].num_rows_total == 10 for b in full)  # type: ignore[index]
    (query,) = [q for q in context.queries if q.query_id == streamed["query_id"]]
    assert query.start_ns is not None and query.end_ns is not None


def test_jobs_are_tagged_with_query_and_batch(
    streamed: dict[str, Any], context: AppContext
) -> None:
    tagged = [j for j in context.jobs if j.query_id == streamed["query_id"]]
    batch_ids = {b.batch_id for b in context.batches}
    ran = {j.batch_id for j in tagged}
    assert len(ran & batch_ids) >= 3
    # Only a batch that the stop cut short has jobs but no progress.
    assert ran - batch_ids <= {max(i for i in batch_ids if i is not None) + 1}
    assert all(j.run_id is not None for j in tagged)


def test_stateful_tasks_carry_state_rows(streamed: dict[str, Any]) -> None:
    trace = read_trace(streamed["out"])
    state = trace.filter(pl.col("state_rows").is_not_null())
    assert state.height > 0
    assert (state["activity"] == "processing").all()
    assert int(state["state_rows"].max()) > 0  # type: ignore[arg-type]
    assert (state["state_memory_bytes"] > 0).all()
    # Each batch's 4 partitions hold the 10 keys between them.
    per_stage = state.group_by("stage_id").agg(pl.col("state_rows").sum())
    assert (per_stage["state_rows"] == 10).any()


def test_state_rows_are_those_of_sparks_own_log(streamed: dict[str, Any]) -> None:
    """The listener drops tasks' accumulables but the state-store ones."""
    columns = ["task_id", "state_rows", "state_updated_rows", "state_memory_bytes"]
    ours = read_trace(streamed["out"]).drop_nulls("state_rows").select(columns)
    assert ours.height > 0
    deadline = time.monotonic() + 20  # Spark flushes its log at job ends
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = import_eventlog(streamed["spark_log"])
        theirs = theirs.filter(pl.col("task_id").is_in(ours["task_id"].to_list()))
        theirs = theirs.drop_nulls("state_rows").select(columns)
        if theirs.height >= ours.height or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert ours.sort("task_id").equals(theirs.sort("task_id"))


def test_driver_waits_between_batches(
    streamed: dict[str, Any], context: AppContext
) -> None:
    trace = read_trace(streamed["out"])
    idle = trace.filter(
        (pl.col("src_worker") == "driver")
        & (pl.col("dst_worker") == "driver")
        & pl.col("job_id").is_null()
    )
    batches = sorted(
        (b for b in context.batches if b.query_id == streamed["query_id"]),
        key=lambda b: b.timestamp_ns or 0,
    )
    gaps = waited = 0
    for before, after in itertools.pairwise(batches):
        lo, hi = before.trigger_end_ns, after.timestamp_ns
        assert lo is not None and hi is not None
        inside = idle.filter((pl.col("start_ns") >= lo) & (pl.col("end_ns") <= hi))
        assert set(inside["activity"]) <= {"trigger_wait"}
        waited += int((inside["end_ns"] - inside["start_ns"]).sum())
        gaps += max(0, hi - lo)
    # All of each gap between a trigger's end and the next trigger is a
    # trigger_wait
    # (no job runs then), and a 1 s trigger leaves some.
    assert waited == gaps > 0
    inside_triggers = idle.filter(pl.col("activity") == "driver")
    assert inside_triggers.height > 0  # planning, offsets, commits stay driver


def test_every_window_of_a_query_that_keeps_up_has_a_critical_path(
    streamed: dict[str, Any], context: AppContext
) -> None:
    # GIVEN the query's batches, each well within its 1 s trigger (issue 46:
    # 41 of 51 windows of such a query had no path, their CP 0)
    from sparktrail.engines.batch import summarize

    batches = [b for b in context.batches if b.query_id == streamed["query_id"]]
    first = min(b.timestamp_ns or 0 for b in batches)
    last = max(b.trigger_end_ns or 0 for b in batches)
    # WHEN the trace is profiled in 1 s windows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        windows = summarize(streamed["out"], 10**9).windows
    # THEN each window from the first trigger to the last has a path
    during = windows.filter(
        (pl.col("window_start_ns") >= first) & (pl.col("window_end_ns") <= last)
    )
    assert during.height >= 3
    assert during["has_paths"].all(), during.select("window_start_ns", "has_paths")


def test_followed_trace_is_the_raw_log(streamed: dict[str, Any]) -> None:
    """Rows written while the query ran (before the next batch said the
    driver had waited) are those of the whole log read at once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = import_eventlog(Path(streamed["handle"].log_dir))
    followed = read_trace(streamed["out"])
    assert followed.sort(KEYS).equals(whole.sort(KEYS))
