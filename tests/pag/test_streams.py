"""The context's Structured Streaming records survive a trace file (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sparktrail.pag.context import AppContext, ContextError, JobSpan
from sparktrail.pag.streams import (
    StateOperator,
    StreamBatch,
    StreamQuery,
    StreamSink,
    StreamSource,
)
from sparktrail.pag.trace import read_context, write_trace

BATCH = StreamBatch(
    query_id="q",
    run_id="r",
    batch_id=3,
    timestamp_ns=1_000_000_000,
    num_input_rows=2000,
    input_rows_per_second=1999.5,
    processed_rows_per_second=None,  # a field the log did not state
    duration_ms={"triggerExecution": 420, "addBatch": 300},
    sources=(
        StreamSource("RateStreamV2", "10", "2010", None, 2000, 1999.5, 4000.0, None),
        StreamSource("KafkaV2", None, '{"t":{"0":5}}', '{"t":{"0":9}}', backlog=4),
    ),
    state_operators=(
        StateOperator("stateStoreSave", 10, 4, 9000, {"numShufflePartitions": 4}),
        StateOperator(custom_metrics={"ratio": 0.5}),
    ),
    sink=StreamSink("MemorySink", 10),
)
CONTEXT = AppContext(
    app_id="app-1",
    jobs=(JobSpan(0, 1, 2, "q", "r", 3), JobSpan(1, 3, 4)),
    queries=(StreamQuery("q", "r", "counts", 5, 6, "boom", 2), StreamQuery("0")),
    batches=(BATCH, StreamBatch("0")),
)


def test_context_json_round_trip() -> None:
    assert AppContext.from_json(CONTEXT.to_json()) == CONTEXT


def test_context_round_trip_through_a_trace_file(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "src_worker": ["driver"],
            "dst_worker": ["driver"],
            "start_ns": [0],
            "end_ns": [1],
            "activity": ["waiting"],
        }
    )
    path = write_trace(frame, tmp_path / "t.arrow", CONTEXT)
    assert read_context(path) == CONTEXT


def test_old_contexts_load_without_streams() -> None:
    # A context written before streaming: jobs without tags, no queries key.
    old = json.dumps({"app_id": "a", "jobs": [{"job_id": 0, "start_ns": 1}]})
    context = AppContext.from_json(old)
    assert context.queries == () and context.batches == ()
    assert context.jobs == (JobSpan(0, 1),) and context.jobs[0].batch_id is None


def test_missing_collections_stay_missing() -> None:
    raw = json.loads(CONTEXT.to_json())
    raw["batches"] = [{"query_id": "q", "sources": None, "state_operators": []}]
    (batch,) = AppContext.from_json(json.dumps(raw)).batches
    assert batch.sources is None and batch.state_operators == ()


@pytest.mark.parametrize(
    "bad",
    [
        {"batches": [{"query_id": "q", "batch_id": "3"}]},
        {"batches": [{"run_id": "r"}]},
        {"queries": [{"query_id": "q", "start_ns": 1.5}]},
        {"batches": [{"query_id": "q", "sources": {"x": 1}}]},
    ],
)
def test_bad_stream_fields_are_context_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ContextError, match="bad field"):
        AppContext.from_json(json.dumps(bad))
