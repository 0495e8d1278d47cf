"""Classes of wrong advice a blind review of logs nobody had tuned on found
(bench/advice/fresh2_verdicts.tsv, issue 42), each on a hand-made trace:

* a PySpark stage's CPU time is the JVM's, not the Python worker's: it
  tells no wait from work there;
* a PySpark RDD's shuffle records are pickled batches: its bytes tell a
  hot key;
* merging tiny tasks keeps a hot partition whole: the stage takes at least
  its longest task;
* slots busy with the fixed costs of tiny tasks are no call for more
  executors.

Times in ms.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from sparktrail.pag.context import AppContext, ExecutorLife, JobSpan, StageInfo
from tests.summaries.builders import MS, Trace, with_cpu_shares
from tests.summaries.test_capacity_hints import S, hints_of

PYSPARK_RDD = ("PythonRDD", "ShuffledRDD", "PairwiseRDD")


def _local(*stages: StageInfo) -> AppContext:
    return AppContext(master="local[4]", spark_version="3.5.0", stages=stages)


def _kinds(frame: pl.DataFrame, kind: str) -> list[dict[str, Any]]:
    return frame.filter(pl.col("kind") == kind).to_dicts()


def _slow_task_stage(records: int, nbytes: int) -> pl.DataFrame:
    """Stage 0 on 2 slots: eleven tasks of 100 ms and, last, one of 1 s
    reading ``records`` and ``nbytes`` (the others 100 records, 1,000 B)."""
    t = Trace()
    for i in range(5):
        t.task("exec-driver/0", 100 * i, [("processing", 100)])
    for i in range(6):
        t.task("exec-driver/1", 100 * i, [("processing", 100)])
    t.task("exec-driver/0", 500, [("processing", 1000)], records=records, nbytes=nbytes)
    return t.frame()


def test_a_python_stage_s_cpu_time_tells_no_wait() -> None:
    # GIVEN a slow task of a PySpark RDD stage whose Spark CPU time is ~0
    # (the work ran in the Python worker) on rows like the others'
    frame = with_cpu_shares(_slow_task_stage(100, 1000), pl.lit(0.01))
    found = hints_of(frame, _local(StageInfo(0, rdds=PYSPARK_RDD)), S)
    (row,) = _kinds(found, "straggler_task")
    # THEN it is not said to wait on a call or a lock
    assert "waited, not computed" not in row["action"]
    # AND the same task of a JVM stage is (its CPU time is its work)
    jvm = hints_of(frame, _local(StageInfo(0, rdds=("MapPartitionsRDD",))), S)
    (row,) = _kinds(jvm, "straggler_task")
    assert "waited, not computed" in row["action"]


def test_a_pyspark_rdd_hot_key_is_told_by_its_bytes() -> None:
    # GIVEN the slow task reads 2x the batches but 12x the bytes
    frame = _slow_task_stage(200, 12_000)
    found = hints_of(frame, _local(StageInfo(0, rdds=PYSPARK_RDD)), S)
    # THEN in a PySpark RDD stage it is a hot partition, not a slow one
    hot = _kinds(found, "hotspot") + _kinds(found, "skew_unsplittable")
    assert len(hot) == 1 and not _kinds(found, "straggler_task")
    # AND in a JVM stage, 2x the records is no hot key
    jvm = hints_of(frame, _local(StageInfo(0, rdds=("MapPartitionsRDD",))), S)
    assert not _kinds(jvm, "hotspot") and not _kinds(jvm, "skew_unsplittable")


def tiny_tasks(hot_ms: float | None) -> pl.DataFrame:
    """Stage 0: 64 tasks of 10 ms on 2 slots (320 ms each slot); with
    ``hot_ms``, the last task of slot 0 takes that long instead."""
    t = Trace()
    for slot in (0, 1):
        for i in range(32):
            ms = hot_ms if (hot_ms and slot == 0 and i == 31) else 10
            t.task(
                f"exec-driver/{slot}",
                10 * i,
                [("scheduling", 6), ("processing", ms - 6)],
                nbytes=100,
            )
    return t.frame()


def test_merging_tiny_tasks_keeps_a_hot_one_whole() -> None:
    # GIVEN 64 tiny tasks, one of which runs 1 s
    found = hints_of(tiny_tasks(1000), _local(), 2 * S)
    # THEN fewer partitions save nothing of the second the hot task holds:
    # no more than the stage beyond it
    for row in _kinds(found, "over_partitioned"):
        ev = json.loads(row["evidence"])
        assert ev["predicted_stage_time_ns"] >= 1000 * MS
        assert row["predicted_saving_ns"] <= 320 * MS


def test_slots_busy_launching_tiny_tasks_want_fewer_tasks_not_more_slots() -> None:
    # GIVEN a YARN application on 2 executors of 2 cores whose one job runs
    # 400 tasks of 10 ms, most of each launching it
    t = Trace()
    for i in range(400):
        e, core = 1 + i % 2, (i // 2) % 2
        t.task(
            f"exec-{e}/{core}",
            10 * (i // 4),
            [("scheduling", 7), ("processing", 3)],
            nbytes=100,
        )
    app = AppContext(
        master="yarn",
        spark_version="3.5.0",
        start_ns=0,
        end_ns=1 * S,
        executors=tuple(
            ExecutorLife(str(e), 2, host=f"h{e}", added_ns=0) for e in (1, 2)
        ),
        jobs=(JobSpan(0, start_ns=0, end_ns=1 * S),),
        stages=(StageInfo(0, declared_tasks=400, parents=(9,)),),
    )
    found = hints_of(t.frame(), app, S)
    # THEN over_partitioned names it, and capacity_bound stays silent
    assert _kinds(found, "over_partitioned")
    assert not _kinds(found, "capacity_bound")


def test_even_tiny_tasks_are_still_over_partitioned() -> None:
    # GIVEN the same 64 tiny tasks without the hot one  THEN fewer partitions
    found = hints_of(tiny_tasks(None), _local(), 2 * S)
    assert _kinds(found, "over_partitioned")
