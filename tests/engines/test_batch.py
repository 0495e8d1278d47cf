"""``summarize`` batch by batch gives what one CP table of the whole trace gives.

The reference is :func:`summaries_from_cp` on the CP table of the whole
trace (:func:`critical_participation`), which is what ``summarize`` did
before it took the windows a batch at a time.
"""

from __future__ import annotations

import warnings

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktrail.engines import summarize
from sparktrail.engines.batch import window_chunks
from sparktrail.pag import critical_participation
from sparktrail.pag.snapshot import SnapshotWarning
from sparktrail.pag.trace import validate_trace
from sparktrail.summaries import Summaries, summaries_from_cp
from sparktrail.synthetic import profile_trace
from tests.pag.strategies import traces
from tests.paths import SHARED_LOG
from tests.summaries.compare import assert_same_summaries

LOG = SHARED_LOG
SECOND = 1_000_000_000


def whole(trace: pl.DataFrame, window_ns: int, origin_ns: int | None) -> Summaries:
    frame = validate_trace(trace)
    cp = critical_participation(frame, window_ns, origin_ns)
    return summaries_from_cp(cp, frame, window_ns, origin_ns)


def quietly(trace, window_ns, origin_ns=None, chunk_rows=1_000_000):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        batched = summarize(trace, window_ns, origin_ns, chunk_rows=chunk_rows)
        return batched, whole(trace, window_ns, origin_ns)


def with_tasks(trace: pl.DataFrame) -> pl.DataFrame:
    """Task and stage ids on local rows, and some fetch waits, so that the
    task, stage and shuffle partials have rows."""
    local = pl.col("src_worker") == pl.col("dst_worker")
    row = pl.int_range(pl.len())
    return trace.with_columns(
        pl.when(local & (pl.col("activity") == "gc"))
        .then(pl.lit("shuffle_read"))
        .otherwise(pl.col("activity"))
        .alias("activity"),
        pl.when(local).then(row // 3).alias("task_id"),
        pl.when(local).then(row // 3 % 2).alias("stage_id"),
    )


@settings(max_examples=150, deadline=None)
@given(
    trace=traces(),
    window_ns=st.integers(1, 4),
    origin=st.integers(-2, 1),
    chunk_rows=st.integers(1, 6),
)
def test_random_traces_give_the_same_summaries_in_any_batches(
    trace: pl.DataFrame, window_ns: int, origin: int, chunk_rows: int
) -> None:
    # GIVEN a random small trace (instants on window boundaries, clock
    # noise, rows spanning windows), any window, origin and batch size
    trace = with_tasks(trace)
    origin_ns = int(trace["start_ns"].min()) + origin  # type: ignore[arg-type]
    # WHEN it is summarized batch by batch and from one whole CP table
    batched, reference = quietly(trace, window_ns, origin_ns, chunk_rows)
    # THEN every summary and hint agrees
    assert_same_summaries(batched, reference)


@pytest.mark.parametrize("chunk_rows", [1, 700, 10**9])
def test_a_barrier_trace_gives_the_same_summaries_in_any_batches(
    chunk_rows: int,
) -> None:
    # GIVEN a barrier trace of tasks whose rows cross the windows
    trace = profile_trace(6_000, workers=8)
    window_ns = int(trace["end_ns"].max()) // 13 + 1  # type: ignore[operator]
    # WHEN summarized in batches of one window, a few windows, or all
    batched, reference = quietly(trace, window_ns, chunk_rows=chunk_rows)
    # THEN the summaries agree with those of the whole CP table
    assert len(window_chunks(trace, window_ns, 0, chunk_rows)) >= (
        13 if chunk_rows == 1 else 1
    )
    assert reference.operator["tasks"].sum() > 100
    assert_same_summaries(batched, reference)


@pytest.mark.skipif(not LOG.exists(), reason="shared event log not present")
def test_the_shared_event_log_gives_the_same_summaries_in_batches() -> None:
    # GIVEN a real Spark application's trace (driver intervals, shuffles)
    from sparktrail.tracer import import_eventlog

    # (a Spark shell's: its call sites renamed so that its gaps between jobs
    # are driver code, not think time, and a hint fires)
    trace = import_eventlog(LOG, progress=False).with_columns(
        pl.col("operator").str.replace_all("<console>", "App.scala")
    )
    # WHEN summarized in batches of about 10 rows (1 s windows)
    batched, reference = quietly(trace, SECOND, chunk_rows=10)
    # THEN it took several batches, and the summaries and hints agree
    assert len(window_chunks(trace, SECOND, 0, 10)) > 3
    assert not reference.hints.is_empty()
    assert_same_summaries(batched, reference)


def test_batches_cover_every_window_once_and_hold_the_rows_asked_for() -> None:
    # GIVEN rows starting in windows 0, 0, 1, 3 (the last one ends in 4)
    t = pl.DataFrame({"start_ns": [0, 3, 5, 13], "end_ns": [1, 4, 6, 18]})
    # WHEN cut into batches of 2 rows, 1 row, and all rows
    # THEN the batches tile [first window, last event's window] in order,
    # each with the rows asked for (a window is never split)
    assert window_chunks(t, 4, 0, 2) == [(0, 4), (4, 20)]
    assert window_chunks(t, 4, 0, 1) == [(0, 4), (4, 12), (12, 20)]
    assert window_chunks(t, 4, 0, 10) == [(0, 20)]
    # AND a row whose first event is on a boundary counts in the window
    # before it, which an instant there belongs to
    on_boundary = pl.DataFrame({"start_ns": [0, 8], "end_ns": [1, 8]})
    assert window_chunks(on_boundary, 4, 0, 1) == [(0, 4), (4, 12)]
    assert window_chunks(t.clear(), 4, 0, 10) == []


def test_progress_is_reported_after_each_batch() -> None:
    trace = profile_trace(2_000, workers=4)
    window_ns = int(trace["end_ns"].max()) // 7 + 1  # type: ignore[operator]
    seen: list[tuple[int, int]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        summarize(trace, window_ns, chunk_rows=500, progress=lambda *a: seen.append(a))
    total = seen[-1][1]
    assert total >= 3
    assert seen == [(i, total) for i in range(1, total + 1)]


def test_a_batch_size_must_be_a_positive_integer() -> None:
    t = pl.DataFrame(
        {
            "src_worker": ["a"],
            "dst_worker": ["a"],
            "start_ns": [0],
            "end_ns": [1],
            "activity": ["processing"],
        }
    )
    with pytest.raises(ValueError, match="chunk_rows must be a positive integer"):
        summarize(t, 1, chunk_rows=0)


@pytest.mark.parametrize("chunk_rows", [1, 50, 400])
def test_batch_candidates_hold_every_row_touching_their_batch(chunk_rows):
    from sparktrail.engines.batch import chunk_candidates
    from sparktrail.pag.windows import touches

    # A long row (its range reaches later batches) and an instant.
    trace = validate_trace(
        pl.concat(
            [
                profile_trace(1_200).select(
                    "src_worker", "dst_worker", "start_ns", "end_ns", "activity"
                ),
                pl.DataFrame(
                    {
                        "src_worker": ["exec-0/0", "exec-0/1"],
                        "dst_worker": ["exec-0/0", "exec-0/1"],
                        "start_ns": [0, 900_000],
                        "end_ns": [2_000_000, 900_000],
                        "activity": ["gc", "scheduling"],
                    }
                ),
            ]
        )
    )
    window = 100_000
    batches = window_chunks(trace, window, 0, chunk_rows)
    rows = chunk_candidates(trace, window, 0, batches)
    numbered = trace.with_row_index("r")
    assert len(batches) > 3
    for b, (ts, te) in enumerate(batches):
        need = set(numbered.filter(touches(ts, te))["r"].to_list())
        got = rows(b)
        assert need <= set(got.tolist())
        assert list(got) == sorted(got)
    # The long row lies in every batch that starts before it ends.
    reached = [b for b, (ts, _) in enumerate(batches) if ts < 2_000_000]
    assert len(reached) > 1
    assert all(trace.height - 2 in rows(b).tolist() for b in reached)
