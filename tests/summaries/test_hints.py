"""Each hint fires on a constructed trace, with its evidence, and not otherwise."""

from __future__ import annotations

import json
import warnings
from typing import Any

import polars as pl
import pytest

from sparktrail.engines import summarize
from sparktrail.summaries import HINT_SCHEMA, HintOptions
from tests.summaries.builders import (
    MS,
    Trace,
    balanced,
    shuffle_join,
    with_cpu_shares,
)

#: These runs last milliseconds: no floor on a hint's absolute saving, nor
#: on how far a straggler runs over its stage's median.
MS_RUN = HintOptions(min_saving_s=0.0, straggler_min_excess_ms=0.0)
#: On the balanced trace the stage already meets this target (100 ms).
MET = HintOptions(
    target_stage_seconds=0.1, min_saving_s=0.0, straggler_min_excess_ms=0.0
)


def hints(trace: pl.DataFrame, window_ms: float, options: HintOptions | None = None):
    return summarize(trace, int(window_ms * MS), options=options or MS_RUN).hints


def only(frame: pl.DataFrame, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    rows = frame.filter(pl.col("kind") == kind)
    assert len(rows) == 1, frame
    row = rows.row(0, named=True)
    return row, json.loads(row["evidence"])


def test_balanced_trace_gives_no_hint():
    # GIVEN two executors of two slots, each running one equal task
    trace = balanced()
    # WHEN hints are computed with a stage target it already meets
    frame = hints(trace, 100, MET)
    # THEN there is none, and the empty frame has the hint schema
    assert frame.is_empty()
    assert dict(frame.schema) == HINT_SCHEMA


def test_balanced_trace_without_a_target_gives_no_hint():
    # GIVEN the balanced trace: one stage is the whole critical path, but it
    # keeps every slot busy
    # WHEN hints are computed without a stage target
    frame = hints(balanced(), 100)
    # THEN there is no evidence that more slots would help: no hint
    assert frame.is_empty()


def test_parallelism_without_a_target_asks_for_the_idle_slots():
    # GIVEN 4 slots that run a short stage 0, then a critical stage 1 of
    # only 2 tasks (slots 2 and 3 idle meanwhile)
    t = Trace()
    for s in (0, 1, 2, 3):
        t.task(f"exec-1/{s}", 0, [("processing", 10)], stage=0, records=10)
    for s in (0, 1):
        t.task(f"exec-1/{s}", 10, [("processing", 90)], stage=1, records=1000)
    # WHEN hints are computed without a stage target
    frame = hints(t.frame(), 100)
    # THEN DS2 sizes the stage to every slot: pi = 4 slots and partitions
    row, ev = only(frame, "parallelism")
    assert row["stage_id"] == 1
    assert (ev["pi"], ev["partitions"], ev["slots_now"]) == (4, 4, 2)


def straggling_executor() -> pl.DataFrame:
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 80), ("gc", 20)], records=100)
    for e in (2, 3):
        t.task(f"exec-{e}/0", 0, [("processing", 90)], records=100)
    return t.frame()


def test_straggler_executor_fires_with_gc_evidence():
    # GIVEN exec 1 runs 100 ms (20 ms GC) while execs 2 and 3 run 90 ms
    # WHEN hints are computed over one 100 ms window
    frame = hints(straggling_executor(), 100, MET)
    # THEN exec 1 has all CP against a fair share of 1/3
    row, ev = only(frame, "straggler_executor")
    assert row["executor_id"] == "1"
    assert ev["ratio"] == pytest.approx(3.0)
    assert ev["fair_share"] == pytest.approx(1 / 3, abs=1e-6)
    assert ev["gc_share"] == pytest.approx(0.2)
    # AND at the others' speed (90 ms) it would end 10 ms sooner: 10% of
    # the run is a medium saving
    assert row["predicted_saving_ns"] == pytest.approx(10 * MS)
    assert row["saving_share"] == pytest.approx(0.1)
    assert row["severity"] == "medium"
    assert "spark.speculation=true" in row["action"]
    assert "spark.executor.memory" in row["action"]


def test_straggler_executor_needs_two_executors():
    # GIVEN the same imbalance among the slots of one executor
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 100)])
    t.task("exec-1/1", 0, [("processing", 90)])
    # WHEN hints are computed  THEN none is about executors
    assert "straggler_executor" not in hints(t.frame(), 100, MET)["kind"].to_list()


def skewed_stage(long_records: int) -> pl.DataFrame:
    # Each task waits 1 ms for shuffle blocks: the stage reads a shuffle (a
    # stage reading files is told about file layout, not keys).
    t = Trace()
    long = [("shuffle_read", 1), ("processing", 99)]
    t.task("exec-1/0", 0, long, records=long_records, nbytes=None)
    for s in (1, 2, 3):
        short = [("shuffle_read", 1), ("processing", 9)]
        t.task(f"exec-1/{s}", 0, short, records=100, nbytes=None)
    return t.frame()


def test_straggler_task_on_time_skew():
    # GIVEN a stage of 4 tasks, one taking 10x the median on equal records
    # WHEN hints are computed
    frame = hints(skewed_stage(100), 100)
    # THEN it is a straggler task, not a hotspot, with speculation values
    row, ev = only(frame, "straggler_task")
    assert "hotspot" not in frame["kind"].to_list()
    assert (row["stage_id"], row["partition"], row["executor_id"]) == (0, 0, "1")
    assert ev["duration_ratio"] == pytest.approx(10.0)
    assert ev["median_ns"] == 10 * MS
    assert ev["predicted_task_ns"] == pytest.approx(40 * MS)  # (3 + 1) x median
    assert row["severity"] == "high"
    assert "spark.speculation.quantile=0.75" in row["action"]
    assert "spark.speculation.multiplier=3" in row["action"]
    assert "App.scala:10" in row["action"]


def test_aggregation_skew_is_unsplittable_by_aqe():
    # GIVEN the long task also holds 10x the median records, in a job with
    # no other shuffle stage (an aggregation, not a join)
    # WHEN hints are computed
    frame = hints(skewed_stage(1000), 100)
    # THEN AQE cannot split it: salting or a two-step aggregation is the fix
    row, ev = only(frame, "skew_unsplittable")
    assert {"straggler_task", "hotspot"}.isdisjoint(frame["kind"].to_list())
    assert row["partition"] == 0
    assert ev["skew_ratio"] == pytest.approx(10.0)
    assert ev["predicted_stage_time_ns"] == pytest.approx(50 * MS)
    assert "AQE cannot split" in row["action"] and "salt" in row["action"]
    assert "100 ms -> 50 ms" in row["action"]
    # AND the replay of the split saves 40 ms: one half runs at once, the
    # other waits 10 ms for a free slot (the rule's estimate said 50 ms)
    assert row["predicted_saving_ns"] == pytest.approx(40 * MS)
    assert ev["estimated_saving_ns"] == pytest.approx(50 * MS)
    assert ev["replay_error"] == pytest.approx(0.0)
    assert row["severity"] == "high"


def skewed_join() -> pl.DataFrame:
    # Stages 0 and 1 write the two sides; stage 2 joins them, one key hot.
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 5)], stage=0, written=300, records=10)
    t.task("exec-1/1", 0, [("processing", 5)], stage=1, written=100, records=10)
    t.task("exec-1/0", 5, [("processing", 100)], stage=2, records=1000)
    for s in (1, 2, 3):
        t.task(f"exec-1/{s}", 5, [("processing", 10)], stage=2, records=100)
    return t.frame()


def on_spark(frame: pl.DataFrame, version: str, **properties: str) -> Any:
    """``frame`` as a trace of an application of Spark ``version`` on YARN."""
    from sparktrail.pag.context import AppContext
    from sparktrail.pag.trace import Trace as Traced
    from sparktrail.pag.trace import validate_trace

    app = AppContext(master="yarn", spark_version=version, properties=properties)
    return Traced(validate_trace(frame), app)


def test_join_skew_is_a_hotspot_with_aqe_settings():
    # GIVEN a join whose partition 2 holds 10x the median records, run by
    # Spark 3.1 (AQE off by default)
    frame = hints(on_spark(skewed_join(), "3.1.1"), 105)
    # THEN it is a hotspot, with AQE's skew-join settings
    row, _ = only(frame, "hotspot")
    assert (row["stage_id"], row["partition"]) == (2, 2)
    assert "spark.sql.adaptive.skewJoin.enabled=true" in row["action"]
    assert "skewedPartitionFactor=5" in row["action"]
    assert row["predicted_saving_ns"] == pytest.approx(40 * MS)
    # AND, its bytes far under AQE's 256MB threshold and 64MB pieces, the
    # sizes with which AQE would split it at all
    assert "skewedPartitionThresholdInBytes=1m" in row["action"]
    assert "advisoryPartitionSizeInBytes=1m" in row["action"]


def test_a_split_hot_task_waits_for_the_stages_next_longest():
    # GIVEN the join with one more task of 60 ms beside the hot one's 100
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 5)], stage=0, written=300, records=10)
    t.task("exec-1/1", 0, [("processing", 5)], stage=1, written=100, records=10)
    t.task("exec-1/0", 5, [("processing", 100)], stage=2, records=1000)
    for s, ms in ((1, 10), (2, 10), (3, 10), (4, 60)):
        t.task(f"exec-1/{s}", 5, [("processing", ms)], stage=2, records=100)
    # WHEN hints are computed
    _, ev = only(hints(t.frame(), 105), "hotspot")
    # THEN split in two halves of 50 ms, the stage still waits for the 60 ms
    # task: the longest of the others, not the hot task itself
    assert ev["stage_time_ns"] == 100 * MS
    assert ev["longest_other_ns"] == 60 * MS
    assert ev["predicted_stage_time_ns"] == pytest.approx(60 * MS)


def test_join_skew_halves_are_slowed_as_spark_cpu_times_show():
    # GIVEN the join on two slots: the hot task at 90% CPU, alone for 70 of
    # its 100 ms; the three others, beside it, at 60% (Spark's CPU times)
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 5)], stage=0, written=300, records=10)
    t.task("exec-1/1", 0, [("processing", 5)], stage=1, written=100, records=10)
    hot = t.task("exec-1/0", 5, [("processing", 100)], stage=2, records=1000)
    for start in (5, 15, 25):
        t.task("exec-1/1", start, [("processing", 10)], stage=2, records=100)
    share = pl.when(pl.col("task_id") == hot).then(0.9).otherwise(0.6)
    frame = with_cpu_shares(t.frame(), share)
    # WHEN hints are computed
    row, ev = only(hints(frame, 105), "hotspot")
    # THEN each half is predicted at 1 + 0.7 x (0.9 / 0.6 - 1) = 1.35 x
    # half the hot task, and the action says why
    assert ev["split_slowdown"] == pytest.approx(1.35)
    assert ev["predicted_stage_time_ns"] == pytest.approx(67.5 * MS)
    assert "each half at 1.35x half the task's time" in row["action"]


def test_aqe_is_told_no_sizes_for_a_partition_above_its_defaults():
    # GIVEN the hot partition reads 600 MB (over 256MB, halves over 64MB)
    frame = skewed_join().with_columns(
        pl.when(pl.col("records") == 1000)
        .then(600 << 20)
        .otherwise(pl.col("bytes"))
        .alias("bytes")
    )
    row, _ = only(hints(on_spark(frame, "3.1.1"), 105), "hotspot")
    # THEN the action turns AQE's skew join on with its default sizes
    assert "spark.sql.adaptive.skewJoin.enabled=true" in row["action"]
    assert "InBytes" not in row["action"]


def test_join_skew_with_aqe_on_says_why_aqe_left_it():
    # GIVEN the same join run with AQE's skew join on
    from sparktrail.pag.context import AppContext
    from sparktrail.pag.trace import Trace as Traced
    from sparktrail.pag.trace import validate_trace

    app = AppContext(
        master="yarn",
        spark_version="3.5.0",
        properties={
            "spark.sql.adaptive.enabled": "true",
            "spark.sql.adaptive.skewJoin.enabled": "true",
        },
    )
    traced = Traced(validate_trace(skewed_join()), app)
    frame = summarize(traced, 105 * MS).hints
    row, _ = only(frame, "hotspot")
    # THEN the action does not ask for what is on, but names the threshold
    assert "spark.sql.adaptive.skewJoin.enabled=true" not in row["action"]
    assert "skewedPartitionThresholdInBytes" in row["action"]


@pytest.mark.parametrize(
    ("version", "said"),
    [("1.6.3", "came with Spark 3.0"), (None, "the log states no Spark version")],
)
def test_join_skew_before_spark_3_or_of_no_known_version_names_no_aqe(
    version: str | None, said: str
) -> None:
    # GIVEN the skewed join run by Spark 1.6, or by a Spark the log does not
    # name
    frame = skewed_join()
    traced = on_spark(frame, version) if version else frame
    # WHEN hints are computed
    row, _ = only(hints(traced, 105), "hotspot")
    # THEN salting is the fix, AQE's settings (3.0 on) are not offered, and
    # the action says why
    assert "salt" in row["action"] and said in row["action"]
    assert "spark.sql.adaptive" not in row["action"]


def test_a_median_of_zero_is_no_measure_of_skew():
    # GIVEN a slow task with records where the others have none
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 100)], records=1000, nbytes=None)
    for s in (1, 2, 3):
        t.task(f"exec-1/{s}", 0, [("processing", 10)], records=0, nbytes=None)
    frame = hints(t.frame(), 100)
    # THEN no skew hint divides by the median of 0 (it is a slow task)
    assert {"hotspot", "skew_unsplittable"}.isdisjoint(frame["kind"].to_list())
    assert "inf" not in " ".join(
        frame["action"].to_list() + frame["evidence"].to_list()
    )


def test_parallelism_uses_true_rate_per_slot():
    # GIVEN two 100 ms tasks of 1000 records, 40 ms of each spent waiting for
    # the scheduler (useful time 60 ms: true rate 1000 / 0.06 s per slot)
    t = Trace()
    for s in (0, 1):
        t.task(f"exec-1/{s}", 0, [("scheduling", 40), ("processing", 60)], records=1000)
    # WHEN the target stage time is 30 ms
    frame = hints(
        t.frame(), 100, HintOptions(target_stage_seconds=0.03, min_saving_s=0.0)
    )
    # THEN pi = ceil((2000 / 0.03) / (2000 / 0.12)) = 4 slots and partitions
    row, ev = only(frame, "parallelism")
    assert row["stage_id"] == 0
    assert ev["true_rate_per_slot"] == pytest.approx(1000 / 0.06)
    assert ev["observed_rate"] == pytest.approx(2000 / 0.1)
    assert (ev["pi"], ev["partitions"], ev["slots_now"]) == (4, 4, 2)
    # AND it reads no shuffle: the split is a repartition before it
    assert "repartition(4)" in row["action"]
    assert "spark.sql.shuffle.partitions=4" not in row["action"]


def test_parallelism_silent_when_slots_suffice():
    # GIVEN the same stage and a target it can meet on its 2 slots
    t = Trace()
    for s in (0, 1):
        t.task(f"exec-1/{s}", 0, [("processing", 100)], records=1000)
    # WHEN hints are computed  THEN no parallelism hint
    frame = hints(t.frame(), 100, MET)
    assert "parallelism" not in frame["kind"].to_list()


def test_scheduling_bound_suggests_fewer_partitions():
    # GIVEN 10 tasks of 10 ms (6 ms scheduling, 2 ms deserialization) on 2 slots
    t = Trace()
    for i in range(5):
        for s in (0, 1):
            t.task(
                f"exec-1/{s}",
                10 * i,
                [("scheduling", 6), ("deserialization", 2), ("processing", 2)],
            )
    # WHEN hints are computed
    frame = hints(t.frame(), 50, MET)
    # THEN 80% of the path is overhead; 10 x 10 ms / 100 ms -> 2 partitions
    row, ev = only(frame, "scheduling_bound")
    assert ev["scheduling_share"] == pytest.approx(0.8)
    assert ev["median_task_ns"] == 10 * MS
    assert ev["suggested_partitions"] == 2
    assert "spark.sql.shuffle.partitions=2" in row["action"]
    assert row["severity"] == "high"


def test_shuffle_bound_names_channels_and_broadcast_side():
    # GIVEN a join whose reducer waits 30% of the path for shuffle blocks
    frame = hints(shuffle_join(), 10, MET)
    # WHEN/THEN a shuffle hint names stage 2, its top channel and small side
    row, ev = only(frame, "shuffle_bound")
    assert row["stage_id"] == 2
    assert ev["shuffle_read_share"] == pytest.approx(0.3)
    assert ev["top_channels"][0]["src"] == "executor 1"
    assert ev["top_channels"][0]["cp_share"] == pytest.approx(0.225)
    assert (ev["small_side_stage_id"], ev["small_side_bytes"]) == (1, 100)
    # AND the 100 B side is under the default 10 MB threshold already, so
    # the action says to broadcast it explicitly, not to raise the threshold
    assert "autoBroadcastJoinThreshold=" not in row["action"]
    assert "broadcast(df)" in row["action"]


def test_driver_bound_says_what_the_driver_did_between_jobs():
    # GIVEN job 0 (20 ms), 80 ms of driver code, then job 1 (20 ms)
    t = Trace()
    t.message("driver", "exec-1/0", 0)
    t.local("driver", 0, 20, "waiting", job_id=0)
    t.task("exec-1/0", 0, [("processing", 20)], job=0)
    t.message("exec-1/0", "driver", 20)
    t.local("driver", 20, 100, "driver")
    t.message("driver", "exec-1/0", 100)
    t.local("driver", 100, 120, "waiting", job_id=1)
    t.task("exec-1/0", 100, [("processing", 20)], job=1, stage=1)
    t.message("exec-1/0", "driver", 120)
    # WHEN hints are computed
    frame = hints(t.frame(), 120, MET)
    # THEN the hint names the gap between job 0 and job 1 and would save it
    row, ev = only(frame, "driver_bound")
    assert ev["between_jobs_share"] == pytest.approx(80 / 120)
    interval = ev["intervals"][0]
    assert (interval["after_job"], interval["before_job"]) == (0, 1)
    assert interval["duration_ns"] == 80 * MS
    assert "between job 0 and job 1" in row["action"]
    assert row["predicted_saving_ns"] == pytest.approx(80 * MS)


def test_start_up_and_the_tail_are_not_driver_bound():
    # GIVEN 80 ms of start-up before job 0 and driver time after it only
    t = Trace()
    t.local("driver", 0, 80, "startup")
    t.message("driver", "exec-1/0", 80)
    t.task("exec-1/0", 80, [("processing", 20)], job=0)
    t.local("driver", 100, 180, "driver")
    # WHEN hints are computed  THEN no driver_bound: nothing between jobs
    assert "driver_bound" not in hints(t.frame(), 180, MET)["kind"].to_list()


def test_idle_capacity_without_a_context_says_it_could_not_check():
    # GIVEN 2 executors x 2 slots; one slot busy all run, the rest 10 ms,
    # and no context (no master, no ExecutorAdded)
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 100)])
    for w in ("exec-1/1", "exec-2/0", "exec-2/1"):
        t.task(w, 0, [("processing", 10)])
        t.local(w, 10, 100, "waiting")
    # WHEN hints are computed
    frame = hints(t.frame(), 100, MET)
    # THEN 130 of 400 slot-ms were busy: idle 67.5%, peak 4, mean 1.3 slots
    row, ev = only(frame, "idle_capacity")
    assert ev["idle_share"] == pytest.approx(0.675)
    assert (ev["peak_busy_slots"], ev["mean_busy_slots"]) == (4, pytest.approx(1.3))
    # AND with no master nor executors it names no setting: info, unchecked
    # (per cluster manager: tests/summaries/test_capacity_hints.py)
    assert "no master" in ev["unchecked"] and "ExecutorAdded" in ev["unchecked"]
    assert "spark.dynamicAllocation" not in row["action"]
    assert row["severity"] == "info"


def test_hints_round_trip_through_parquet_and_json(tmp_path):
    # GIVEN hints with nested evidence
    frame = hints(shuffle_join(), 10, MET)
    # WHEN written and read back
    frame.write_parquet(tmp_path / "h.parquet")
    back = pl.read_parquet(tmp_path / "h.parquet")
    # THEN nothing is lost and evidence parses as JSON objects
    assert back.equals(frame)
    assert all(isinstance(json.loads(e), dict) for e in back["evidence"])
    assert pl.read_json(frame.write_json().encode()).equals(frame)


def test_a_critical_stage_without_task_ids_gives_no_parallelism_hint():
    # GIVEN a stage whose rows name no task (a hand-made trace)
    trace = pl.DataFrame(
        {
            "src_worker": ["exec-1/0", "exec-1/1"],
            "dst_worker": ["exec-1/0", "exec-1/1"],
            "start_ns": [0, 0],
            "end_ns": [100 * MS, 100 * MS],
            "activity": ["processing", "processing"],
            "stage_id": [0, 0],
            "operator": ["stage 0: x", "stage 0: x"],
        }
    )
    # WHEN hints are computed  THEN none, and no crash
    assert "parallelism" not in hints(trace, 100)["kind"].to_list()


def test_slow_first_waves_are_start_up_not_stragglers():
    # GIVEN a stage of 12 tasks on 2 slots whose two first tasks each take
    # 10x the median (the executor's Python workers starting)
    t = Trace()
    for s in (0, 1):
        t.task(f"exec-1/{s}", 0, [("processing", 100)])
    for i in range(5):
        for s in (0, 1):
            t.task(f"exec-1/{s}", 100 + 10 * i, [("processing", 10)])
    # WHEN hints are computed  THEN neither is a straggler task
    assert "straggler_task" not in hints(t.frame(), 150)["kind"].to_list()


def test_a_killed_speculative_copy_is_no_straggler():
    # GIVEN the straggling task of skewed_stage is a killed speculative copy
    frame = skewed_stage(100).with_columns(
        pl.when(pl.col("task_id") == 0)
        .then(pl.lit("killed"))
        .otherwise(pl.lit("success"))
        .alias("status"),
        (pl.col("task_id") == 0).alias("speculative"),
    )
    # THEN it is not flagged: the original won
    assert "straggler_task" not in hints(frame, 100)["kind"].to_list()


def test_tiny_partitions_by_bytes_are_over_partitioned():
    # GIVEN 40 tasks of 200 ms (a busy machine) on 2 slots, each reading 400 B,
    # half of each task launching and deserializing it
    t = Trace()
    for i in range(20):
        for s in (0, 1):
            t.task(
                f"exec-1/{s}",
                200 * i,
                [("scheduling", 60), ("deserialization", 40), ("processing", 100)],
                nbytes=400,
                stage=3,
            )
    frame = hints(t.frame(), 1000, MET)
    # THEN over_partitioned names the stage and 2 partitions (one per slot)
    row, ev = only(frame, "over_partitioned")
    assert row["stage_id"] == 3 and ev["suggested_partitions"] == 2
    assert "spark.sql.shuffle.partitions=2" in row["action"]
    assert "scheduling_bound" not in frame["kind"].to_list()  # not twice
    assert row["predicted_saving_ns"] > 0


def slower_executor_2() -> Trace:
    """Two one-core executors running the same stages 0 and 1 (at 0 and
    1,000 ms): executor 1 four tasks of 100 ms each, executor 2 two of 250."""
    t = Trace()
    for stage in (0, 1):
        start = 1000 * stage
        for i in range(4):
            t.task("exec-1/0", start + 100 * i, [("processing", 100)], stage=stage)
        for i in range(2):
            t.task("exec-2/0", start + 250 * i, [("processing", 250)], stage=stage)
    return t


def test_an_executor_slow_at_the_same_work_is_a_straggler_executor():
    # GIVEN two one-core executors running the same 2 stages; executor 2's
    # tasks take 2.5x as long
    t = slower_executor_2()
    frame = hints(t.frame(), 2000, MET)
    # THEN executor 2 is named, with its slowdown
    row, ev = only(frame, "straggler_executor")
    assert row["executor_id"] == "2"
    assert ev["slowdown"] == pytest.approx(2.5)


def test_an_executor_at_peer_speed_is_replayed_only_where_it_was_slow():
    # GIVEN executor 2 2.5x slower in stages 0 and 1, and as fast as
    # executor 1 in stage 2, where it runs three of four tasks and so ends last
    t = slower_executor_2()
    t.task("exec-1/0", 2000, [("processing", 500)], stage=2)
    for i in range(3):
        t.task("exec-2/0", 2000 + 500 * i, [("processing", 500)], stage=2)
    frame = hints(t.frame(), 3500, MET)
    row, ev = only(frame, "straggler_executor")
    assert row["executor_id"] == "2"
    # THEN its tasks run at executor 1's speed in stages 0 and 1 only (six
    # tasks of 100 ms on two slots: each stage 300 ms instead of 500 ms),
    # and stage 2, where it was not slow, is as it ran (its three tasks
    # over 2.5 would have cut 900 ms more)
    assert ev["replayed_saving_ns"] == pytest.approx(400 * MS, rel=0.05)


#: Stable operator labels (tracer/sql_plans.py) of :func:`skewed_join`'s stages.
JOIN_OPERATORS = {
    0: "collect at etl.py:7 · Range (0, 1000) → Exchange hashpartitioning(k, 4)",
    1: "collect at etl.py:7 · Range (0, 10) → Exchange hashpartitioning(k, 4)",
    2: "collect at etl.py:7 · SortMergeJoin [k], [k], Inner",
}


def test_a_join_run_twice_is_one_operator_with_one_merged_hotspot():
    # GIVEN the skewed join run twice, in jobs 0 and 1 (stages 3..5 the
    # second time), its stages labelled with their stable operators
    first = skewed_join()
    second = first.with_columns(
        pl.col("start_ns", "end_ns") + 105 * MS,
        pl.col("stage_id") + 3,
        pl.col("job_id") + 1,
        pl.col("task_id") + first["task_id"].max() + 1,  # type: ignore[operator]
    )
    trace = pl.concat([first, second]).with_columns(
        operator=(pl.col("stage_id") % 3).replace_strict(JOIN_OPERATORS)
    )
    # WHEN summarized
    s = summarize(trace, int(105 * MS))
    # THEN the summary has one row per operator, its stages the drill-down
    ops = s.operator.filter(pl.col("operator").is_not_null())
    assert sorted(ops["operator"]) == sorted(JOIN_OPERATORS.values())
    join = ops.filter(pl.col("operator") == JOIN_OPERATORS[2]).row(0, named=True)
    assert (join["stages"], join["stage_ids"], join["tasks"]) == (2, [2, 5], 8)
    # AND both runs' hotspots are one hint with two occurrences
    row, ev = only(s.hints, "hotspot")
    assert row["occurrences"] == 2 and row["stage_id"] in (2, 5)
    assert ev["operator"] == JOIN_OPERATORS[2] and ev["stages"] == [2, 5]


def test_a_skewed_join_named_by_its_plan_node_gets_join_advice() -> None:
    # GIVEN one stage of a join operator (its label names the join), one
    # task with 20x the median records, and no other shuffle stage in view
    t = Trace()
    for p in range(6):
        t.task(
            f"exec-1/{p}",
            0,
            [("processing", 60 if p == 3 else 10)],
            partition=p,
            records=2000 if p == 3 else 100,
            name="collect at app.py:7 · ShuffledHashJoin [key], [key], Inner",
        )
    hints = summarize(t.frame(), 60 * MS).hints
    # THEN the finding is a join hotspot (AQE can split it), not an
    # aggregation's unsplittable skew
    kinds = hints["kind"].to_list()
    assert "hotspot" in kinds and "skew_unsplittable" not in kinds


def test_a_hint_that_saves_under_a_second_is_info():
    # GIVEN the 100 ms straggler of test_straggler_task_on_time_skew
    # WHEN hints are computed with the default floor of 1 s
    frame = hints(skewed_stage(100), 100, HintOptions(straggler_min_excess_ms=0.0))
    # THEN the finding is kept, as info: 60 ms saved is no finding
    row, _ = only(frame, "straggler_task")
    assert row["severity"] == "info"
    assert row["predicted_saving_ns"] < 1e9


def test_a_task_a_few_tens_of_ms_over_its_median_is_no_straggler():
    # GIVEN the 100 ms task of test_straggler_task_on_time_skew, 10x its
    # stage's 10 ms median but only 90 ms over it (a GC pause's worth)
    # WHEN hints are computed with the default excess floor (500 ms)
    frame = hints(skewed_stage(100), 100, HintOptions(min_saving_s=0.0))
    # THEN no task is called a straggler
    assert "straggler_task" not in frame["kind"].to_list()


def test_one_task_stages_pool_into_a_straggler_executor():
    # GIVEN ten stages of one task per one-core executor, executor 2's task
    # taking 2.5x as long (no stage has two tasks a side)
    t = Trace()
    for stage in range(10):
        start = 250 * stage
        t.task("exec-1/0", start, [("processing", 100)], stage=stage)
        t.task("exec-2/0", start, [("processing", 250)], stage=stage)
    frame = hints(t.frame(), 2500, MET)
    # THEN executor 2 is named, its slowdown pooled over the nine stages
    # after its first (start-up) wave
    row, ev = only(frame, "straggler_executor")
    assert row["executor_id"] == "2"
    assert ev["slowdown"] == pytest.approx(2.5)


def test_two_one_task_stages_are_too_little_evidence():
    # GIVEN the same imbalance over three stages: the first is start-up, the
    # other two hold two tasks a side, under straggler_min_tasks (3)
    t = Trace()
    for stage in range(3):
        t.task("exec-1/0", 250 * stage, [("processing", 100)], stage=stage)
        t.task("exec-2/0", 250 * stage, [("processing", 250)], stage=stage)
    # WHEN the fair-share fallback cannot fire either (factor 10)
    options = HintOptions(min_saving_s=0.0, straggler_factor=10.0)
    # THEN no executor is named
    assert "straggler_executor" not in hints(t.frame(), 750, options)["kind"].to_list()


def test_two_slots_stalling_together_are_no_straggler_tasks():
    # GIVEN a stage of 12 tasks on 2 slots (not the executors' first) whose
    # first wave, both slots at once, takes 10x the others' 10 ms
    t = Trace()
    for s in (0, 1):
        t.task(f"exec-{s + 1}/0", 0, [("processing", 10)], stage=0)
    for s in (0, 1):
        t.task(f"exec-{s + 1}/0", 10, [("processing", 100)], stage=1)
    for i in range(5):
        for s in (0, 1):
            t.task(f"exec-{s + 1}/0", 110 + 10 * i, [("processing", 10)], stage=1)
    # WHEN hints are computed  THEN neither is a straggler task: the task
    # beside each was as slow all along
    assert "straggler_task" not in hints(t.frame(), 160)["kind"].to_list()


def short_tasks_after(t: Trace, start_ms: int) -> None:
    """Ten 10 ms tasks of stage 1, two at a time on the two executors'
    slots, from ``start_ms``."""
    for i in range(10):
        t.task(
            f"exec-{i % 2 + 1}/0",
            start_ms + 10 * (i // 2),
            [("processing", 10)],
            stage=1,
        )


def test_a_first_wave_stalled_together_just_under_the_bound_is_no_straggler():
    # GIVEN the stage whose first wave stalls on both slots: one task at
    # 90 ms (9x the others' 10 ms), the one beside it at 47 ms, under the
    # straggler bound of 5x (a stage's first wave compiling its code)
    t = Trace()
    for s in (0, 1):
        t.task(f"exec-{s + 1}/0", 0, [("processing", 10)], stage=0)
    t.task("exec-1/0", 10, [("processing", 90)], stage=1)
    t.task("exec-2/0", 10, [("processing", 47)], stage=1)
    t.task("exec-2/0", 57, [("processing", 10)], stage=1)
    short_tasks_after(t, 100)
    # WHEN hints are computed  THEN the slow one is no straggler task: of
    # the two tasks beside it, one ran over half as long as it, at once
    assert "straggler_task" not in hints(t.frame(), 220)["kind"].to_list()


def test_two_slow_tasks_that_barely_overlap_are_stragglers():
    # GIVEN the same stage where slot 1 starts its slow task 60 ms after
    # slot 0's (its stage-0 task ran until then): they ran side by side for
    # 40 of their 100 ms
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 10)], stage=0)
    t.task("exec-2/0", 0, [("processing", 70)], stage=0)
    t.task("exec-1/0", 10, [("processing", 100)], stage=1)
    t.task("exec-2/0", 70, [("processing", 100)], stage=1)
    short_tasks_after(t, 170)
    # WHEN hints are computed  THEN they are not one stall: both are named,
    # as the stage's shared tail (one hint, replayed with both at the
    # median), and their executor, as fast as the other at the stage's
    # other tasks, is not
    frame = hints(t.frame(), 220)
    row, ev = only(frame, "straggler_task")
    assert ev["slow_tasks"] == 2 and ev["partitions"] == [2, 3]
    assert "2 of 12 tasks of stage 1" in row["action"]
    assert "straggler_executor" not in frame["kind"].to_list()


def test_a_straggler_whose_input_size_is_unknown_is_not_called_normal_sized():
    # GIVEN the time-skewed stage with no records or bytes reported (a GPU
    # plan's tasks report none)
    frame = skewed_stage(100).with_columns(
        pl.lit(None, pl.Int64).alias("records"), pl.lit(None, pl.Int64).alias("bytes")
    )
    # WHEN hints are computed  THEN the straggler does not claim its size
    row, _ = only(hints(frame, 100), "straggler_task")
    assert "normal-sized" not in row["action"]
    assert "size Spark did not report" in row["action"]


def test_an_executor_slower_only_on_tasks_of_a_few_ms_is_no_straggler():
    # GIVEN the slow-executor trace scaled down to tasks of 4 and 10 ms (its
    # 2.5x is fixed costs at that size, below Spark's 100 ms speculation floor)
    t = Trace()
    for stage in (0, 1):
        start = 40 * stage
        for i in range(4):
            t.task("exec-1/0", start + 4 * i, [("processing", 4)], stage=stage)
        for i in range(2):
            t.task("exec-2/0", start + 10 * i, [("processing", 10)], stage=stage)
    # WHEN hints are computed  THEN no executor is called slow
    frame = hints(t.frame(), 80, MET)
    assert "straggler_executor" not in frame["kind"].to_list()


def test_many_slow_tasks_are_one_shared_tail_not_a_straggler_to_copy():
    # GIVEN a stage of 20 tasks on equal records where 5 take 10x the rest
    # (two kinds of partition, not one slow one)
    t = Trace()
    for i in range(20):
        length = 100 if i % 4 == 0 else 10
        start = (i // 4) * 100  # five rounds on four slots
        t.task(f"exec-1/{i % 4}", start, [("processing", length)], records=100)
    # WHEN hints are computed
    frame = hints(t.frame(), 100)
    # THEN one hint names the five together, replayed together (one of
    # them fixed alone would save nothing while four still run), and no
    # speculative copy of one task is offered for a fifth of the stage
    row, ev = only(frame, "straggler_task")
    assert ev["slow_tasks"] == 5 and ev["partitions"] == [0, 4, 8, 12, 16]
    assert row["predicted_saving_ns"] >= 150 * MS
    assert "spark.speculation" not in row["action"]


def test_a_straggler_on_a_local_master_is_replayed_at_the_median():
    # GIVEN the time-skewed stage (one task of 100 ms beside three of 10 ms
    # on four slots) on a local master, where Spark never speculates
    from sparktrail.pag.context import AppContext
    from sparktrail.pag.trace import Trace as Valid
    from sparktrail.pag.trace import load_trace

    context = AppContext(app_id="app", master="local[4]", properties={})
    trace = Valid(load_trace(skewed_stage(100)).frame, context)
    # WHEN hints are computed
    row, ev = only(hints(trace, 100), "straggler_task")
    # THEN the fix is the partition's own work, and its saving is replayed
    # with that partition at the stage's median (100 -> 10 ms), with and
    # without launch lags (there are none)
    assert "look at what makes" in row["action"]
    assert ev["replayed_saving_ns"] == 90 * MS
    assert ev["replayed_saving_no_lag_ns"] == 90 * MS
    assert row["predicted_saving_ns"] == 90 * MS


def _contexts(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The rules' context and the ranking's, as the finish hands them on."""
    import sparktrail.summaries.finish as finish

    seen: dict[str, Any] = {}
    rules, ranked = finish.rule_hints, finish.ranked_hints

    def rule_hints(context):
        seen["rules"] = context
        return rules(context)

    def ranked_hints(ranking, found):
        seen["ranking"] = ranking
        return ranked(ranking, found)

    monkeypatch.setattr(finish, "rule_hints", rule_hints)
    monkeypatch.setattr(finish, "ranked_hints", ranked_hints)
    return seen


def test_the_ranking_replays_from_the_replays_columns_alone(monkeypatch):
    # GIVEN the time-skewed stage, whose straggler's saving is replayed
    from sparktrail.whatif.replay import TASK_COLUMNS

    seen = _contexts(monkeypatch)
    # WHEN hints are computed
    _, ev = only(hints(skewed_stage(100), 100), "straggler_task")
    # THEN the ranking held no task rows but the replay's columns of the
    # facts (not the rules' ~25), handed over to the replay of the change
    rules, ranking = seen["rules"], seen["ranking"]
    assert len(rules.tasks.columns) > len(TASK_COLUMNS)
    assert ranking.tasks.columns == list(TASK_COLUMNS)
    assert ranking.tasks.is_empty() and not rules.tasks.is_empty()
    assert ranking.replay_input == []
    assert "replayed_saving_ns" in ev
    # the same model as the one built from every fact
    from sparktrail.pag.trace import Trace as Valid
    from sparktrail.whatif import Replay

    assert ranking.replay.tasks.equals(
        Replay.of(Valid(rules.trace, rules.app), rules.tasks).tasks
    )


def test_the_ranking_keeps_a_replay_the_rules_built_or_failed_to(monkeypatch):
    # GIVEN the rules' context of the skewed stage, its replay built
    seen = _contexts(monkeypatch)
    hints(skewed_stage(100), 100)
    context = seen["rules"]
    # WHEN the ranking's context is made from it
    # THEN it holds the same replay, not a second build
    built = context.replay
    assert built is not None
    assert context.for_ranking().replay is built
    # and a replay that failed (facts without a launch) is not tried again
    from dataclasses import replace

    broken = replace(context, tasks=context.tasks.drop("launch_ns"))
    with pytest.warns(UserWarning, match="no what-if replay"):
        assert broken.replay is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert broken.for_ranking().replay is None


@pytest.mark.parametrize("slice_rows", [1, 4, 10**6])
def test_stage_facts_of_a_long_run_a_slice_at_a_time_equal_one_query(
    monkeypatch, slice_rows
):
    # GIVEN the rules' context of a real Spark log's run (stages of failed,
    # busy and empty attempts on several workers)
    from dataclasses import replace

    from sparktrail.pag import trace as trace_module
    from sparktrail.summaries.hints import inputs
    from sparktrail.tracer import import_trace
    from tests.paths import SHARED_LOG

    seen = _contexts(monkeypatch)
    summarize(import_trace(SHARED_LOG, progress=False), 1000 * MS)
    context = seen["rules"]
    # (and the same tasks with the longer half of each stage's reading a
    # record, the rest nothing: busy and idle settled attempts, medians apart)
    idle = pl.col("duration_ns") < pl.col("duration_ns").median().over("stage_id")
    emptied = replace(
        context,
        tasks=context.tasks.with_columns(
            pl.when(idle).then(0).otherwise(1).alias(c) for c in ("records", "bytes")
        ),
    )
    one_query = [replace(c).stage_facts for c in (context, emptied)]
    busy = one_query[1]["median_busy_ns"]
    assert not busy.equals(one_query[1]["median_ns"])
    # WHEN the facts are taken as a long run's: sums over slices, medians
    # from sorted keys in mapped files
    monkeypatch.setattr(inputs, "SMALL_ROWS", 0)
    monkeypatch.setattr(trace_module, "SLICE_ROWS", slice_rows)
    sliced = [replace(c).stage_facts for c in (context, emptied)]
    # THEN each stage's facts are the same, column for column
    for long, one in zip(sliced, one_query, strict=True):
        assert long.schema == one.schema
        assert long.sort("stage_id").equals(one.sort("stage_id"))
        assert one.height > 1


def moderate_tail(slow_executors: int) -> pl.DataFrame:
    """A stage over four slots of tasks of 100 ms on equal records, where
    two take 3x that (under straggler_task_factor, over the uneven ratio),
    one at the start and one at the end, on ``slow_executors`` executors;
    the stage waits for the second."""
    t = Trace()
    second = "exec-1/0" if slow_executors == 1 else "exec-2/1"
    lanes = {"exec-1/1": [], "exec-2/0": [], "exec-1/0": [0], "exec-2/1": []}
    lanes[second].append(400)
    for slot, slow_starts in lanes.items():
        at = 0
        while at < 700:
            if at in slow_starts:
                t.task(slot, at, [("processing", 300)], records=100)
                at += 300
            elif at < 600 or (slow_starts and at < max(slow_starts)):
                t.task(slot, at, [("processing", 100)], records=100)
                at += 100
            else:
                break
    return t.frame()


def test_a_moderate_tail_of_two_partitions_on_two_executors_is_named():
    # GIVEN two tasks at 3x the median on two executors holding the stage
    frame = hints(moderate_tail(2), 100)
    # THEN one straggler_task names both, under the lone-straggler factor
    row, ev = only(frame, "straggler_task")
    assert ev["slow_tasks"] == 2 and ev["max_ratio"] < 5.0
    # AND its saving is what the stage waited past its other tasks (100 ms)
    assert row["predicted_saving_ns"] == pytest.approx(100 * MS, rel=0.05)


def test_a_moderate_tail_on_one_executor_is_left_to_the_executor_rule():
    # GIVEN the same two slow tasks, both on one executor
    frame = hints(moderate_tail(1), 100)
    # THEN no shared tail blames their partitions (under 5x, one executor)
    assert "straggler_task" not in frame["kind"].to_list()


def test_a_query_that_ends_long_after_its_last_job_is_a_driver_phase():
    # GIVEN a notebook's SQL write whose one job ran 2 s on two slots and
    # whose execution ended 28 s later (the driver committing the output)
    from sparktrail.pag.context import AppContext, JobSpan, SqlExecution
    from sparktrail.pag.trace import Trace as Valid

    t = Trace()
    for i in range(4):
        t.task(f"exec-1/{i % 2}", (i // 2) * 1000, [("processing", 1000)])
    s = 1_000_000_000
    context = AppContext(
        app_id="app",
        app_name="Databricks Shell",
        master="yarn",
        jobs=(JobSpan(0, 0, 2 * s, sql_id=7),),
        sql=(SqlExecution(7, "INSERT OVERWRITE t", 0, 30 * s, {}),),
    )
    frame = hints(Valid(t.frame(), context), 1000)
    # THEN a driver_phase names the query and the 28 s after its job, high
    # (the user waited for the query: its span counts as job time)
    row, ev = only(frame, "driver_phase")
    assert ev["phase"] == "after_jobs" and ev["execution_id"] == 7
    assert ev["after_jobs_ns"] == 28 * s
    assert "SQL query 7 (INSERT OVERWRITE t)" in row["action"]
    assert row["severity"] == "high"


def _tail_stage(gc_ms: float | None) -> pl.DataFrame:
    """Two executors of two slots: twelve 20 ms tasks and, one on each
    executor after its first, two 200 ms ones on the same records; the slow two spend
    ``gc_ms`` each in GC (``None``: the trace states no GC time)."""
    t = Trace()
    slow = []
    for executor in ("exec-1", "exec-2"):  # each after its executor's first
        t.task(f"{executor}/0", 0, [("processing", 20)])
        slow.append(t.task(f"{executor}/0", 20, [("processing", 200)]))
        for i in range(5):
            t.task(f"{executor}/1", 20 * i, [("processing", 20)])
    frame = t.frame()
    if gc_ms is None:
        return frame
    gc = pl.when(pl.col("task_id").is_in(slow)).then(int(gc_ms * MS)).otherwise(0)
    return frame.with_columns(gc.cast(pl.Int64).alias("jvm_gc_ns"))


def test_a_tail_slowed_by_gc_names_the_heap_not_the_rows() -> None:
    # GIVEN two slow tasks on equal records that spent most of their time
    # past the median in GC
    row, ev = only(hints(_tail_stage(gc_ms=150), 300), "straggler_task")
    # THEN the cause named is the JVM's pauses, with the heap as the lever
    assert ev["gc_of_excess"] == pytest.approx(300 / 360)
    assert "their JVM paused" in row["action"]
    assert "spark.executor.memory" in row["action"]
    assert "rows hold" not in row["action"]


def test_a_tail_on_the_same_input_without_cpu_or_gc_does_not_blame_the_rows() -> None:
    # GIVEN the same tail with no GC and no CPU time in the trace (Spark 1.x)
    row, ev = only(hints(_tail_stage(gc_ms=0), 300), "straggler_task")
    # THEN the words say the rows are no likely cause, and what else is
    assert ev["gc_of_excess"] == 0
    assert "the rows are no likely cause" in row["action"]
    assert "a slow read" in row["action"]


def test_one_slow_task_slowed_by_gc_names_the_heap() -> None:
    # GIVEN the tail stage with one slow task only, which spent 180 of its
    # 200 ms in GC
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 20)])
    slow = t.task("exec-1/0", 20, [("processing", 200)])
    for executor in ("exec-1", "exec-2"):
        for i in range(5):
            t.task(f"{executor}/1", 20 * i, [("processing", 20)])
    t.task("exec-2/0", 0, [("processing", 20)])
    gc = pl.when(pl.col("task_id") == slow).then(180 * MS).otherwise(0)
    frame = t.frame().with_columns(gc.cast(pl.Int64).alias("jvm_gc_ns"))
    row, ev = only(hints(frame, 300), "straggler_task")
    # THEN its JVM's pauses are the cause, with the heap as the lever
    assert ev["gc_of_excess"] == pytest.approx(1.0)
    assert "its JVM paused" in row["action"]
    assert "spark.executor.memory" in row["action"]


def test_a_data_tail_keeps_its_rows_when_evened_out() -> None:
    # GIVEN a stage of 8 tasks on 2 slots reading a shuffle: on each slot
    # three tasks of 100 ms, then one of 10x the rows for 800 ms: both
    # slots are busy to the end
    t = Trace()
    small = [("shuffle_read", 1), ("processing", 99)]
    for slot in (0, 1):
        for i in range(3):
            t.task(f"exec-1/{slot}", 100 * i, small, records=100, nbytes=None)
        hot = [("shuffle_read", 1), ("processing", 799)]
        t.task(f"exec-1/{slot}", 300, hot, records=1000, nbytes=None)
    frame = hints(t.frame(), 1100)
    found = frame.filter(pl.col("kind").is_in(["hotspot", "skew_unsplittable"]))
    # THEN the fix is replayed as the rows spread evenly over the 8 tasks
    # (the work stays: 2,200 ms on 2 slots), which frees nothing here; not
    # as the hot tasks at the median time, whose rows would vanish
    assert len(found) == 1
    ev = json.loads(found["evidence"][0])
    assert ev["replayed_saving_ns"] == pytest.approx(0, abs=5 * MS)
    assert found["severity"][0] == "info"
