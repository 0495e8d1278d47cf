"""Structured Streaming in the trace (issue 12, item 2), without Spark.

A hand-made micro-batch sequence checks the model's rules (context
records, job tags, state rows, trigger waits, and when a followed trace
may write the driver's rows); the real logs check the importer: a Spark
3.1 Kafka word count (local-1596020211915) and Spark 2.0's query events.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.pag.context import AppContext
from sparktrail.tracer import import_trace
from sparktrail.tracer.eventlog import EventLogWarning
from sparktrail.tracer.fields import INF
from sparktrail.tracer.spark_model import SparkModel
from tests.paths import EVENTLOGS, KAFKA_STREAMING_LOG
from tests.tracer.spark_model_support import MS

PUBLIC = EVENTLOGS / "public" / "spark"
KAFKA_LOG = KAFKA_STREAMING_LOG
LEGACY_LOGS = sorted((PUBLIC / "streaming").glob("query-event-logs-version-2.0.*"))
LISTENER = "org.apache.spark.sql.streaming.StreamingQueryListener$"


def iso(ms: int) -> str:
    seconds, rest = divmod(ms, 1000)
    return f"1970-01-01T00:00:{seconds:02d}.{rest:03d}Z"


def job(job_id: int, batch: int, start: int, end: int) -> list[dict[str, Any]]:
    """A micro-batch's job: one stateful task on stage ``job_id``."""
    props = {
        "sql.streaming.queryId": "q",
        "streaming.sql.batchId": str(batch),
        "spark.jobGroup.id": "run-1",
    }
    state = [
        {"ID": 1, "Name": "number of total state rows", "Update": "7", "Value": "7"},
        {"ID": 2, "Name": "memory used by state", "Update": "900", "Value": "900"},
        {"ID": 3, "Name": "duration", "Update": "3", "Value": "3"},
    ]
    info = {
        "Task ID": job_id,
        "Index": 0,
        "Attempt": 0,
        "Launch Time": start + 10,
        "Executor ID": "driver",
        "Host": "h",
    }
    return [
        {
            "Event": "SparkListenerJobStart",
            "Job ID": job_id,
            "Submission Time": start,
            "Stage IDs": [job_id],
            "Properties": props,
        },
        {"Event": "SparkListenerTaskStart", "Stage ID": job_id, "Task Info": info},
        {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": job_id,
            "Task Info": {
                **info,
                "Finish Time": end - 50,
                "Accumulables": state if batch else state[2:],
            },
            "Task End Reason": {"Reason": "Success"},
            "Task Metrics": {"Executor Run Time": end - start - 100},
        },
        {"Event": "SparkListenerJobEnd", "Job ID": job_id, "Completion Time": end},
    ]


def progress(batch: int, start: int, took: int) -> dict[str, Any]:
    return {
        "Event": LISTENER + "QueryProgressEvent",
        "progress": {
            "id": "q",
            "runId": "run-1",
            "name": "counts",
            "timestamp": iso(start),
            "batchId": batch,
            "durationMs": {"triggerExecution": took, "addBatch": took - 100},
            "stateOperators": [
                {"numRowsTotal": 7, "numRowsUpdated": 2, "memoryUsedBytes": 900}
            ],
            "sources": [
                {
                    "description": "KafkaV2[Subscribe[t]]",
                    "startOffset": None,
                    "endOffset": '{"t":{"0":40,"1":10}}',
                    "latestOffset": '{"t":{"0":45,"1":12}}',
                    "numInputRows": 50,
                    "inputRowsPerSecond": "NaN" if batch == 0 else 100.0,
                    "processedRowsPerSecond": 80.0,
                }
            ],
            "sink": {"description": "MemorySink", "numOutputRows": 7},
        },
    }


#: Trigger 0 runs [200, 700] ms with job 0 in [300, 650]; the query waits
#: [700, 1200]; trigger 1 runs [1200, 1600] with job 1 in [1300, 1550].
BEFORE = [
    {"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App ID": "a"},
    {
        "Event": "SparkListenerEnvironmentUpdate",
        "Spark Properties": {"spark.master": "local[2]"},
    },
    {
        "Event": LISTENER + "QueryStartedEvent",
        "id": "q",
        "runId": "run-1",
        "name": "counts",
        "timestamp": iso(100),
    },
    *job(0, 0, 300, 650),
    progress(0, 200, 500),
    *job(1, 1, 1300, 1550)[:2],
]
AFTER = [
    *job(1, 1, 1300, 1550)[2:],
    progress(1, 1200, 400),
    {
        "Event": LISTENER + "QueryTerminatedEvent",
        "id": "q",
        "runId": "run-1",
        "exception": None,
    },
    {"Event": "SparkListenerApplicationEnd", "Timestamp": 2000},
]


def fed(events: list[dict[str, Any]]) -> SparkModel:
    model = SparkModel()
    for event in events:
        model.feed(event)
    return model


def idle_driver(frame: pl.DataFrame) -> list[tuple[int, int, str]]:
    """The driver's rows while no job runs: (start ms, end ms, activity)."""
    rows = frame.filter(
        (pl.col("src_worker") == "driver")
        & (pl.col("dst_worker") == "driver")
        & pl.col("job_id").is_null()
    ).sort("start_ns")
    return [
        (s // MS, e // MS, a)
        for s, e, a in rows.select("start_ns", "end_ns", "activity").rows()
    ]


def test_trigger_wait_is_its_own_activity_and_trigger_work_stays_driver() -> None:
    # GIVEN two micro-batches of a query 500 ms apart
    model = fed(BEFORE + AFTER)
    # WHEN the trace is built
    frame = model.build(final=True)
    # THEN the wait for the next trigger is trigger_wait, driver time inside a
    # trigger (before and after its job) is driver, and so is the time
    # after the last trigger (no next one to wait for)
    assert idle_driver(frame) == [
        (0, 300, "startup"),
        (650, 700, "driver"),
        (700, 1200, "trigger_wait"),
        (1200, 1300, "driver"),
        (1550, 2000, "driver"),
    ]


def test_idle_triggers_after_the_last_batch_are_waits() -> None:
    # GIVEN a query whose triggers after batch 1 found no data (Spark 3.5+)
    idle = [
        {
            "Event": LISTENER + "QueryIdleEvent",
            "id": "q",
            "runId": "run-1",
            "timestamp": iso(at),
        }
        for at in (1800, 1900)
    ]
    model = fed(BEFORE + AFTER[:2] + idle + AFTER[2:])
    # THEN the driver waited up to the last idle trigger, then ran driver code
    assert idle_driver(model.build(final=True))[-3:] == [
        (1550, 1600, "driver"),
        (1600, 1900, "trigger_wait"),
        (1900, 2000, "driver"),
    ]
    assert model.context().queries[0].idle_triggers == 2


def test_context_holds_queries_batches_and_job_tags() -> None:
    context = fed(BEFORE + AFTER).context()
    (query,) = context.queries
    assert (query.query_id, query.run_id, query.name) == ("q", "run-1", "counts")
    # Spark stamps no termination: the latest time seen (trigger 1's end)
    assert query.start_ns == 100 * MS and query.end_ns == 1600 * MS
    assert [(j.job_id, j.query_id, j.run_id, j.batch_id) for j in context.jobs] == [
        (0, "q", "run-1", 0),
        (1, "q", "run-1", 1),
    ]
    first, second = context.batches
    assert first.input_rows_per_second is None  # "NaN": no previous trigger
    assert second.input_rows_per_second == 100.0
    assert second.num_input_rows == 50 and second.processed_rows_per_second == 80.0
    assert second.duration_ms == {"triggerExecution": 400, "addBatch": 300}
    assert second.trigger_end_ns == 1600 * MS
    (source,) = second.sources or ()
    assert source.backlog == 5 + 2  # behind latest, summed over partitions
    (state,) = second.state_operators or ()
    assert (state.num_rows_total, state.num_rows_updated) == (7, 2)
    assert AppContext.from_json(context.to_json()) == context


def test_stateful_tasks_carry_state_columns() -> None:
    frame = fed(BEFORE + AFTER).build(final=True)
    state = frame.filter(pl.col("task_id").is_not_null()).filter(
        pl.col("activity") == "processing"
    )
    assert state.sort("task_id").select(
        "task_id", "state_rows", "state_updated_rows", "state_memory_bytes"
    ).rows() == [(0, None, None, None), (1, 7, 0, 900)]
    others = frame.filter(pl.col("activity") != "processing")
    assert others["state_rows"].null_count() == others.height


def test_followed_rows_wait_for_the_next_progress() -> None:
    # GIVEN the events up to job 1's start: the next progress is not read
    early = fed(BEFORE).build(final=False, settled=True)
    gap = early.filter(
        (pl.col("src_worker") == "driver")
        & (pl.col("start_ns") == 650 * MS)
        & pl.col("job_id").is_null()
    )
    # THEN the gap since job 0 may still turn out to be a wait: not settled
    assert gap.select("end_ns", "activity", "settled_ns").rows() == [
        (1300 * MS, "driver", INF)
    ]
    # WHEN progress 1 arrives, the gap is cut, all of it settled by it
    late = fed(BEFORE + AFTER).build(final=True, settled=True)
    pieces = late.filter(
        (pl.col("src_worker") == "driver")
        & pl.col("start_ns").is_between(650 * MS, 1200 * MS)
        & pl.col("job_id").is_null()
    )
    assert set(pieces["settled_ns"]) == {1600 * MS}
    # AND rows settled before stay as they were
    settled = early.filter(pl.col("settled_ns") <= 1200 * MS).drop("settled_ns")
    assert settled.join(
        late.drop("settled_ns"), on=settled.columns, how="anti", nulls_equal=True
    ).is_empty()


def test_trigger_waits_of_the_kafka_log() -> None:
    # GIVEN a Spark 3.1 Kafka word count: 8 micro-batches, no trigger interval
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = import_trace(KAFKA_LOG)
    context = trace.context
    # THEN every batch is in the context, with its job
    assert [b.batch_id for b in context.batches] == list(range(8))
    assert [j.batch_id for j in context.jobs] == list(range(8))
    assert {j.query_id for j in context.jobs} == {context.queries[0].query_id}
    # AND the driver waits from each trigger's end to the next's start
    waits = [(s, e) for s, e, a in idle_driver(trace.frame) if a == "trigger_wait"]
    gaps = [
        (b.trigger_end_ns // MS, c.timestamp_ns // MS)  # type: ignore[operator]
        for b, c in zip(context.batches, context.batches[1:], strict=False)
    ]
    assert waits == gaps and gaps[0] == (1596020223124, 1596020223168)
    # AND the stateful tasks carry their state
    state = trace.frame.filter(pl.col("state_memory_bytes").is_not_null())
    assert state.height == 16 and set(state["state_rows"]) == {0, 1}
    # AND the fields this log lacks are named in one warning
    (warning,) = [w for w in caught if "Structured Streaming" in str(w.message)]
    assert issubclass(warning.category, EventLogWarning)
    assert "sources.latestOffset" in str(warning.message)
    assert all(
        s.latest_offset is None for b in context.batches for s in b.sources or ()
    )


@pytest.mark.parametrize("log", LEGACY_LOGS, ids=lambda p: p.name)
def test_spark_2_0_query_events(log: Path) -> None:
    # GIVEN a Spark 2.0 query-event log (progress JSON lacking most fields)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        context = import_trace(log).context
    # THEN its batches are there, the numbers it lacks null, not 0
    assert context.batches and context.queries
    for batch in context.batches:
        assert batch.run_id is None and batch.state_operators is None
        assert batch.sink is not None and batch.sink.num_output_rows is None
        assert batch.sources and batch.sources[0].description
    assert any(q.exception for q in context.queries)
    # AND one warning names the missing fields, each once
    (warning,) = [w for w in caught if "Structured Streaming" in str(w.message)]
    named = str(warning.message).split(" lack ")[1].split(" (")[0].split(", ")
    assert len(named) == len(set(named)) and {"runId", "stateOperators"} <= set(named)
    if log.name.endswith("2.0.2.txt"):
        (batch,) = context.batches
        assert batch.batch_id == 0 and batch.num_input_rows == 1
        assert batch.duration_ms and batch.duration_ms["triggerExecution"] == 1732
        assert batch.input_rows_per_second == pytest.approx(83.3333333)
    else:
        assert {"batchId", "durationMs", "inputRowsPerSecond"} <= set(named)
        assert all(
            b.batch_id is None and b.duration_ms is None for b in context.batches
        )
        assert all(b.num_input_rows is None for b in context.batches)


def test_a_window_inside_the_wait_for_a_trigger_has_a_critical_path() -> None:
    # GIVEN the two micro-batches, cut in 100 ms windows (issue 46: a query
    # that keeps up had no path in 41 of 51 windows, their CP 0)
    from sparktrail.pag import critical_participation

    frame = fed(BEFORE + AFTER).build(final=True)
    cp = critical_participation(frame, window_ns=100 * MS, origin_ns=0)
    # WHEN the windows the query spent waiting for its trigger are summed
    waits = cp.filter(
        (pl.col("window_start_ns") >= 700 * MS) & (pl.col("window_end_ns") <= 1200 * MS)
    )
    per_window = waits.group_by("window_start_ns").agg(pl.col("cp").sum())
    # THEN each has a path, and the wait lies on it in each
    assert len(per_window) == 5
    assert per_window["cp"].to_list() == pytest.approx([1.0] * 5)
    on_wait = waits.filter(pl.col("activity") == "trigger_wait")
    assert on_wait["window_start_ns"].n_unique() == 5 and (on_wait["cp"] > 0).all()
