"""A task's pieces and their records on hand-made events
(tracer/task_pieces.py, DESIGN §5)."""

from __future__ import annotations

import polars as pl

from tests.tracer.spark_model_support import MS, app, build, task_events, whole_run


def test_tasks_tile_their_duration() -> None:
    trace, _ = build(app(task_events(0, 0, 20, 40, run=5)))
    task = trace.filter(
        (pl.col("task_id") == 0) & (pl.col("src_worker") == pl.col("dst_worker"))
    )
    pieces = dict(zip(task["activity"], task["end_ns"] - task["start_ns"], strict=True))
    # scheduler delay = 20 - 5 - 1 = 14; run 5 = fetch 1 + write 1.5 + processing 2.5
    assert pieces == {
        "scheduling": 14 * MS,
        "deserialization": MS,
        "shuffle_read": MS,
        "processing": 2_500_000,
        "shuffle_write": 1_500_000,
    }
    assert (task["start_ns"][1:] == task["end_ns"][:-1]).all()
    processing = task.filter(pl.col("activity") == "processing")
    assert processing.select("records", "bytes", "shuffle_write_bytes").row(0) == (
        3,
        15,
        7,
    )
    assert task.filter(pl.col("activity") != "processing")["records"].is_null().all()


def test_overrunning_metrics_are_scaled() -> None:
    trace, _ = build(app(task_events(0, 0, 20, 24, run=10)))
    task = trace.filter(
        (pl.col("task_id") == 0) & (pl.col("src_worker") == pl.col("dst_worker"))
    )
    assert (task["end_ns"] - task["start_ns"]).sum() == 4 * MS
    assert (task["end_ns"] >= task["start_ns"]).all()


def task_rows_of(trace: pl.DataFrame, tid: int) -> pl.DataFrame:
    return trace.filter(
        (pl.col("task_id") == tid) & (pl.col("src_worker") == pl.col("dst_worker"))
    )


def test_records_stay_when_processing_takes_no_time() -> None:
    # GIVEN a task whose run time is all GC, fetch wait and shuffle write
    # (run 5 ms = GC 3 + fetch 1 + write 1.5, floored: processing 0)
    events = task_events(0, 0, 20, 40, run=5)
    events[1]["Task Metrics"]["JVM GC Time"] = 3
    # WHEN it is built
    trace, _ = build(app(events))
    task = task_rows_of(trace, 0)
    # THEN its processing row stays, zero-length, between fetch wait and GC,
    # and carries its records and bytes
    assert task["activity"].to_list() == [
        "scheduling",
        "deserialization",
        "shuffle_read",
        "processing",
        "gc",
        "shuffle_write",
    ]
    processing = task.filter(pl.col("activity") == "processing")
    fetch_end = task.filter(pl.col("activity") == "shuffle_read")["end_ns"][0]
    assert processing.select("start_ns", "end_ns").row(0) == (fetch_end, fetch_end)
    assert processing.select("records", "bytes", "shuffle_write_bytes").row(0) == (
        3,
        15,
        7,
    )
    # AND the rows still chain on the slot, and the trace is a valid PAG
    assert (task["src_seq"][1:] == task["dst_seq"][:-1]).all()
    assert whole_run(trace)["cp"].sum() > 0


def test_records_stay_on_a_task_that_took_no_time() -> None:
    # GIVEN a task launched and finished at the same millisecond
    trace, _ = build(app(task_events(0, 0, 20, 20, run=0)))
    # WHEN built  THEN its one local row is a zero-length processing row
    # with its records
    task = task_rows_of(trace, 0)
    assert task.select("activity", "start_ns", "end_ns", "records").rows() == [
        ("processing", 20 * MS, 20 * MS, 3)
    ]
    assert whole_run(trace)["cp"].sum() > 0


def test_spills_sit_on_every_attempts_processing_row() -> None:
    # GIVEN a failed attempt and a successful one of partition 0, both
    # spilling, and a task that did not spill
    failed = task_events(0, 0, 20, 40, failed=True, reason="ExceptionFailure")
    ok = task_events(1, 0, 40, 60)
    for events, spilled in ((failed, 100), (ok, 200)):
        events[0]["Task Info"]["Index"] = events[1]["Task Info"]["Index"] = 0
        events[1]["Task Metrics"]["Memory Bytes Spilled"] = spilled * 4
        events[1]["Task Metrics"]["Disk Bytes Spilled"] = spilled
    clean = task_events(2, 0, 20, 40)
    clean[1]["Task Metrics"] |= {"Memory Bytes Spilled": 0, "Disk Bytes Spilled": 0}
    # WHEN built
    trace, _ = build(app(failed + ok + clean))
    processing = trace.filter(pl.col("activity") == "processing").sort("task_id")
    # THEN each attempt's processing row carries its own spills, the
    # failed one without records; no other row carries any
    cols = ["task_id", "records", "memory_bytes_spilled", "disk_bytes_spilled"]
    assert processing.select(cols).rows() == [
        (0, None, 400, 100),
        (1, 3, 800, 200),
        (2, 3, 0, 0),
    ]
    others = trace.filter(pl.col("activity") != "processing")
    assert others["disk_bytes_spilled"].is_null().all()
