"""Slots, clipping, slot gaps and the driver timeline on hand-made events
(tracer/timelines.py, DESIGN §5)."""

from __future__ import annotations

import polars as pl
import pytest

from sparktrail.tracer.timelines import master_cores
from tests.tracer.spark_model_support import MS, app, build, task_events, whole_run


def test_master_cores() -> None:
    assert master_cores("local[3]") == 3
    assert master_cores("local[2,4]") == 2
    assert master_cores("local-cluster[2, 3, 1024]") == 3
    assert master_cores("yarn") is None


def test_overlapping_tasks_are_clipped_and_acyclic() -> None:
    # Two cores; task 2 launches at 50 while tasks 0 and 1 are "running" until
    # 52 and 60 (the driver logged their finish late): task 0 is clipped to 50.
    # Task 3 launches at 60 exactly when task 1 finishes (equal timestamps).
    events = app(
        task_events(0, 0, 20, 52)
        + task_events(1, 0, 20, 60)
        + task_events(2, 0, 50, 60)
        + task_events(3, 0, 60, 90, run=20)
    )
    trace, stats = build(events)
    assert stats.clipped_tasks == 1 and stats.clipped_ns == 2 * MS
    assert stats.slots == 2
    t0 = trace.filter(
        (pl.col("task_id") == 0) & (pl.col("src_worker") == pl.col("dst_worker"))
    )
    assert t0["end_ns"].max() == 50 * MS
    assert t0["clipped_ns"].unique().to_list() == [2 * MS]
    length = (t0["end_ns"] - t0["start_ns"]).sum()
    assert length + 2 * MS == 32 * MS
    completion = trace.filter(
        (pl.col("task_id") == 0) & (pl.col("dst_worker") == "driver")
    )
    assert completion.select("start_ns", "end_ns").row(0) == (50 * MS, 52 * MS)
    # zero-length scheduling rows join task 0 to task 2 and task 2 to task 3
    slot = trace.filter(pl.col("src_worker") == completion["src_worker"][0])
    gaps = slot.filter(pl.col("task_id").is_null())
    assert gaps.select("start_ns", "end_ns", "activity").rows() == [
        (50 * MS, 50 * MS, "scheduling"),
        (60 * MS, 60 * MS, "scheduling"),
    ]
    assert slot.filter(pl.col("task_id") == 3)["src_worker"][0] == slot["src_worker"][0]
    cp = whole_run(trace)
    assert cp["cp"].sum() == pytest.approx(1.0)


def test_slot_gaps_and_driver_labels() -> None:
    # one core: tasks 0 and 1 of the stage run back to back with a gap
    trace, _ = build(
        app(task_events(0, 0, 20, 40) + task_events(1, 0, 45, 70), "local[1]")
    )
    slot = trace.filter(
        (pl.col("src_worker") == "exec-driver/0") & pl.col("task_id").is_null()
    )
    assert slot.select("start_ns", "end_ns", "activity").rows() == [
        (40 * MS, 45 * MS, "scheduling")
    ]
    driver = trace.filter(
        (pl.col("src_worker") == "driver") & (pl.col("dst_worker") == "driver")
    )
    labels = [
        (s // MS, e // MS, a)
        for s, e, a in driver.select("start_ns", "end_ns", "activity").rows()
    ]
    assert labels == [
        (0, 10, "startup"),
        (10, 20, "scheduling"),
        (20, 40, "waiting"),
        (40, 45, "scheduling"),
        (45, 70, "waiting"),
        (70, 190, "scheduling"),
        (190, 200, "driver"),
    ]


def test_unknown_cores_grow_to_concurrency() -> None:
    events = app(
        task_events(0, 0, 20, 40, executor="7")
        + task_events(1, 0, 21, 41, executor="7")
        + task_events(2, 0, 22, 42, executor="7"),
        master="yarn",
    )
    trace, stats = build(events)
    assert stats.slots == 3 and stats.clipped_tasks == 0
    assert {w for w in trace["src_worker"] if w != "driver"} == {
        "exec-7/0",
        "exec-7/1",
        "exec-7/2",
    }
    whole_run(trace)
