"""A task's pieces and their records on hand-made events
(tracer/task_pieces.py, DESIGN §5)."""

from __future__ import annotations

import polars as pl

from tests.tracer.spark_model_support import MS, app, build, task_events


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
