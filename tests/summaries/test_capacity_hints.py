"""Capacity advice that can work where the application ran (issue 26).

``idle_capacity`` replays an idle timeout per executor and names the
cluster manager's own recipe; ``parallelism`` counts the slots concurrent
stages held, prices a reshuffle and names the program's own
``repartition(n)``. Traces are built by hand (times in ms, or in s where a
30 s idle timeout must pass).
"""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl
import pytest

from sparktrail.engines import summarize
from sparktrail.pag.context import AppContext, ExecutorLife
from sparktrail.pag.trace import Trace as RunTrace
from sparktrail.pag.trace import load_trace
from sparktrail.summaries import HintOptions
from tests.summaries.builders import MS, Trace

S = 1_000_000_000
MS_RUN = HintOptions(min_saving_s=0.0)


def hints_of(
    frame: pl.DataFrame,
    app: AppContext | None = None,
    window_ns: int = 10 * S,
    options: HintOptions = MS_RUN,
) -> pl.DataFrame:
    run = frame if app is None else RunTrace(load_trace(frame).frame, app)
    return summarize(run, window_ns, options=options).hints


def of_kind(frame: pl.DataFrame, kind: str) -> list[tuple[dict[str, Any], dict]]:
    rows = frame.filter(pl.col("kind") == kind).to_dicts()
    return [(row, json.loads(row["evidence"])) for row in rows]


def only(frame: pl.DataFrame, kind: str) -> tuple[dict[str, Any], dict]:
    found = of_kind(frame, kind)
    assert len(found) == 1, frame
    return found[0]


# -- idle_capacity -----------------------------------------------------------


def two_executors() -> pl.DataFrame:
    """Executors 1 and 2 (2 cores each, added at 5 s) in a 100 s run.

    Executor 1 is busy 5-15 s and 75-85 s (idle 60 s between, 15 s at the
    end); executor 2 is busy 5-10 s, then idle 90 s to the end.
    """
    t = Trace()
    t.local("driver", 0, 5_000, "startup")
    for slot in (0, 1):
        t.task(f"exec-1/{slot}", 5_000, [("processing", 10_000)], stage=0)
        t.local(f"exec-1/{slot}", 15_000, 75_000, "waiting")
        t.task(f"exec-1/{slot}", 75_000, [("processing", 10_000)], stage=1, job=1)
        t.local(f"exec-1/{slot}", 85_000, 100_000, "waiting")
        t.task(f"exec-2/{slot}", 5_000, [("processing", 5_000)], stage=0)
        t.local(f"exec-2/{slot}", 10_000, 100_000, "waiting")
    return t.frame()


def yarn(**properties: str) -> AppContext:
    executors = tuple(ExecutorLife(e, 2, added_ns=5 * S) for e in ("1", "2"))
    props = {"spark.master": "yarn"} | properties
    return AppContext(
        app_name="etl",
        master=props["spark.master"],
        spark_version=props.pop("version", "3.3.1"),
        start_ns=0,
        end_ns=100 * S,
        properties=props,
        executors=executors,
    )


def test_a_run_whose_job_failed_gets_its_failure_not_idle_capacity():
    # GIVEN the same idle executors in a run whose job failed midway
    from dataclasses import replace

    from sparktrail.pag.context import Failure

    app = replace(
        yarn(**{"spark.shuffle.service.enabled": "true"}),
        failures=(Failure("JobFailed", job_id=0, message="Job aborted"),),
    )
    # THEN no idle capacity: the slots waited on the failing job
    assert not of_kind(hints_of(two_executors(), app), "idle_capacity")


def test_the_idle_timeout_is_replayed_per_executor():
    # GIVEN the two executors on YARN with the external shuffle service
    app = yarn(**{"spark.shuffle.service.enabled": "true"})
    # WHEN hints are computed
    row, ev = only(hints_of(two_executors(), app), "idle_capacity")
    # THEN a 30 s timeout releases executor 1 in its 60 s gap (a new one
    # starts up for 75 s: the first executor took 5 s to register) and
    # executor 2 after its last task: (60 - 30 - 5) x 2 + (90 - 30) x 2
    assert (ev["timeout_ns"], ev["startup_ns"]) == (30 * S, 5 * S)
    assert ev["freed_core_s"] == pytest.approx(170.0)
    assert ev["freed_core_h"] == pytest.approx(170.0 / 3600, abs=1e-6)
    assert ev["gross_freed_core_s"] == pytest.approx(180.0)
    assert (ev["releases"], ev["cold_starts"]) == (2, 1)
    # AND the saving is that core time, a share of the 2 x 95 s x 2 cores
    assert row["predicted_saving_ns"] == pytest.approx(170 * S)
    assert row["saving_share"] == pytest.approx(170 / 380)
    assert ev["idle_share"] == pytest.approx(1 - 50 / 380)
    # AND the recipe: dynamic allocation with that timeout, no prerequisite
    assert "spark.dynamicAllocation.enabled=true" in row["action"]
    assert "spark.dynamicAllocation.executorIdleTimeout=30s" in row["action"]
    assert "shuffleTracking" not in row["action"] and "missing" not in ev
    assert row["severity"] == "high"


@pytest.mark.parametrize(
    ("app", "wanted", "unwanted"),
    [
        pytest.param(
            yarn(),
            ["spark.dynamicAllocation.shuffleTracking.enabled=true", "neither"],
            ["spark.shuffle.service.enabled=true"],
            id="yarn-3.x-without-shuffle-service",
        ),
        pytest.param(
            yarn(version="2.4.8"),
            ["spark.shuffle.service.enabled=true", "before 3.0"],
            ["shuffleTracking"],
            id="yarn-2.x-needs-the-service",
        ),
        pytest.param(
            yarn(**{"spark.master": "spark://host:7077"}),
            ["spark.dynamicAllocation.shuffleTracking.enabled=true"],
            [],
            id="standalone",
        ),
        pytest.param(
            yarn(**{"spark.master": "k8s://https://10.0.0.1:443"}),
            ["spark.dynamicAllocation.shuffleTracking.enabled=true", "Kubernetes"],
            ["spark.shuffle.service.enabled"],
            id="kubernetes",
        ),
        pytest.param(
            yarn(**{"spark.databricks.clusterUsageTags.clusterId": "c-1"}),
            ["Databricks", "autoscaling", "max workers"],
            [],
            id="databricks",
        ),
        pytest.param(
            yarn(**{"spark.emr-serverless.driver.disk": "20G"}),
            ["EMR Serverless", "initialCapacity", "maximumCapacity"],
            [],
            id="emr-serverless",
        ),
        pytest.param(
            yarn(**{"spark.glue.JOB_NAME": "etl"}),
            ["AWS Glue", "--enable-auto-scaling true"],
            [],
            id="glue",
        ),
        pytest.param(
            yarn(**{"spark.dataproc.scaling.version": "1"}),
            ["Dataproc Serverless", "spark.dataproc.scaling.version=2"],
            [],
            id="dataproc-serverless",
        ),
    ],
)
def test_each_cluster_manager_gets_its_own_recipe(app, wanted, unwanted):
    # GIVEN the same idle executors under another cluster manager
    # WHEN hints are computed
    row, ev = only(hints_of(two_executors(), app), "idle_capacity")
    # THEN the action is that manager's way to release idle executors
    for text in wanted:
        assert text in row["action"]
    for text in unwanted:
        assert text not in row["action"]
    assert "unchecked" not in ev
    if "Databricks" in wanted or "AWS Glue" in wanted:
        # its own autoscaler: no spark.dynamicAllocation.* value to set
        assert not re.search(r"spark\.dynamicAllocation\.\w+=", row["action"])


@pytest.mark.parametrize("master", ["local[4]", "local-cluster[2,2,1024]"])
def test_no_capacity_advice_on_one_machine(master):
    app = yarn(**{"spark.master": master})
    assert not of_kind(hints_of(two_executors(), app), "idle_capacity")


def test_a_timeout_at_or_above_the_one_in_force_is_never_proposed():
    # GIVEN dynamic allocation already on with a 10 s idle timeout
    app = yarn(
        **{
            "spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.executorIdleTimeout": "10s",
            "spark.shuffle.service.enabled": "true",
        }
    )
    # WHEN hints are computed
    row, ev = only(hints_of(two_executors(), app), "idle_capacity")
    # THEN no 30 s timeout: the replay is of the 10 s in force, and since
    # executors outlived it the cause is unchecked (info)
    assert ev["timeout_ns"] == 10 * S and ev["timeout_in_force_ns"] == 10 * S
    assert not re.search(r"(?<![\d.])(?<!min )30 ?s\b", row["action"])
    assert "outlived" in ev["unchecked"]
    assert row["severity"] == "info"


def test_a_longer_timeout_in_force_is_lowered_to_30s():
    # GIVEN dynamic allocation on with a 150 s idle timeout
    app = yarn(
        **{
            "spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.executorIdleTimeout": "150",
            "spark.shuffle.service.enabled": "true",
        }
    )
    row, ev = only(hints_of(two_executors(), app), "idle_capacity")
    # THEN the action lowers it and does not repeat what is on
    assert ev["timeout_in_force_ns"] == 150 * S
    assert "spark.dynamicAllocation.executorIdleTimeout=30s" in row["action"]
    assert "spark.dynamicAllocation.enabled=true" not in row["action"]


def test_a_run_too_short_to_free_anything_gets_no_hint():
    # GIVEN one executor of 2 cores in a 17.7 s run, busy its first second
    t = Trace()
    for slot in (0, 1):
        t.task(f"exec-1/{slot}", 0, [("processing", 1_000)])
        t.local(f"exec-1/{slot}", 1_000, 17_700, "waiting")
    app = AppContext(
        master="yarn",
        spark_version="3.3.1",
        start_ns=0,
        properties={"spark.master": "yarn", "spark.shuffle.service.enabled": "true"},
        executors=(ExecutorLife("1", 2, added_ns=0),),
    )
    # WHEN hints are computed  THEN a 30 s timeout frees nothing: no hint
    assert not of_kind(hints_of(t.frame(), app), "idle_capacity")


def rapids(cores: int = 16) -> AppContext:
    props = {
        "spark.master": "yarn",
        "spark.shuffle.service.enabled": "true",
        "spark.executor.resource.gpu.amount": "1",
        "spark.task.resource.gpu.amount": "0.0625",
        "spark.rapids.sql.concurrentGpuTasks": "2",
        "spark.plugins": "com.nvidia.spark.SQLPlugin",
    }
    return AppContext(
        master="yarn",
        spark_version="3.1.3",
        start_ns=0,
        properties=props,
        executors=(ExecutorLife("1", cores, added_ns=0),),
    )


def gpu_busy_run() -> pl.DataFrame:
    """A 16-core executor running 2 tasks at a time for 100 s."""
    t = Trace()
    for slot in (0, 1):
        t.task(f"exec-1/{slot}", 0, [("processing", 100_000)])
    for slot in range(2, 16):
        t.local(f"exec-1/{slot}", 0, 100_000, "waiting")
    return t.frame()


def test_a_busy_gpu_is_not_idle_capacity():
    # GIVEN a RAPIDS executor: 16 cores, one GPU that runs 2 tasks at a time,
    # running 2 tasks the whole run (14 CPU cores idle beside it)
    # WHEN hints are computed  THEN its GPU slots were all busy: no hint
    assert not of_kind(hints_of(gpu_busy_run(), rapids()), "idle_capacity")


def test_gpu_slots_are_the_unit_of_an_idle_gpu_executor():
    # GIVEN two RAPIDS executors (2 GPU slots each): executor 1 runs one task
    # for 100 s, executor 2 two tasks for 10 s, then idles
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 100_000)])
    t.local("exec-1/1", 0, 100_000, "waiting")
    for slot in (0, 1):
        t.task(f"exec-2/{slot}", 0, [("processing", 10_000)])
        t.local(f"exec-2/{slot}", 10_000, 100_000, "waiting")
    base = rapids()
    executors = (ExecutorLife("1", 16, added_ns=0), ExecutorLife("2", 16, added_ns=0))
    app = AppContext(
        master=base.master,
        spark_version=base.spark_version,
        start_ns=0,
        properties=base.properties,
        executors=executors,
    )
    # WHEN hints are computed
    row, ev = only(hints_of(t.frame(), app), "idle_capacity")
    # THEN capacity is 2 GPU slots per executor: 120 of 400 GPU-slot-s busy
    assert ev["slot_unit"] == "GPU slot" and ev["gpu_slots_per_executor"] == 2
    assert ev["slot_time_ns"] == 2 * 2 * 100 * S
    assert ev["idle_share"] == pytest.approx(1 - 120 / 400)
    # AND executor 2 is released 30 s after its last task: 60 s x 16 cores,
    # 60 s x 2 of the 400 GPU-slot-s
    assert ev["freed_core_s"] == pytest.approx(60 * 16)
    assert row["saving_share"] == pytest.approx(60 * 2 / 400)
    assert "GPU slot" in row["action"]


def test_a_log_without_master_or_executors_is_unchecked():
    # GIVEN the idle executors, with properties but no master nor executors
    app = AppContext(properties={"spark.app.name": "etl"})
    row, ev = only(hints_of(two_executors(), app), "idle_capacity")
    # THEN it says what it could not check, names no setting, and is info
    assert "no master" in ev["unchecked"] and "ExecutorAdded" in ev["unchecked"]
    assert "spark.dynamicAllocation" not in row["action"]
    assert row["severity"] == "info"


# -- parallelism ---------------------------------------------------------------

PARALLEL = HintOptions(min_saving_s=0.0, parallelism_min_share=0.0)


def test_slots_held_by_a_concurrent_job_are_not_free():
    # GIVEN 3 one-core executors: job 0's stage 0 holds two of them while
    # job 1's one-task stage 1 runs on the third
    t = Trace()
    for e in (1, 2):
        t.task(f"exec-{e}/0", 0, [("processing", 140)], stage=0, nbytes=None)
    t.task("exec-3/0", 0, [("processing", 150)], stage=1, job=1, nbytes=None)
    # WHEN hints are computed  THEN no slot was free for a split of either
    frame = hints_of(t.frame(), window_ns=150 * MS, options=PARALLEL)
    assert not of_kind(frame, "parallelism")


def test_the_same_stage_alone_is_split_over_the_free_slots():
    # GIVEN the same one-task stage, after job 0 ended
    t = Trace()
    for e in (1, 2):
        t.task(f"exec-{e}/0", 0, [("processing", 10)], stage=0, nbytes=None)
    t.task("exec-3/0", 10, [("processing", 150)], stage=1, job=1, nbytes=None)
    # WHEN hints are computed  THEN its work goes over the 3 free slots
    frame = hints_of(t.frame(), window_ns=160 * MS, options=PARALLEL)
    row, ev = only(frame.filter(pl.col("stage_id") == 1), "parallelism")
    assert row["stage_id"] == 1
    assert (ev["free_slots"], ev["held_slots"], ev["pi"]) == (3, 0.0, 3)


def cached_stage(nbytes: int) -> pl.DataFrame:
    """Stage 0: 2 tasks of 100 ms on a 4-core executor, each reading
    ``nbytes`` of cached blocks (no shuffle in the run)."""
    t = Trace()
    for slot in (0, 1):
        t.task(f"exec-1/{slot}", 0, [("processing", 100)], nbytes=nbytes)
    for slot in (2, 3):
        t.local(f"exec-1/{slot}", 0, 100, "waiting")
    return t.frame()


def test_a_reshuffle_that_costs_more_than_it_saves_is_not_advised():
    # GIVEN 2 x 2.5 GB of cached blocks in 2 tasks on 4 slots: splitting in
    # 4 saves ~50 ms of 100, but a repartition writes and reads 5 GB: at
    # 100 MB/s per slot, 2 x 5 GB / 1e8 B/s / 4 slots = 25 s
    frame = hints_of(cached_stage(2_500_000_000), window_ns=100 * MS, options=PARALLEL)
    # WHEN/THEN no parallelism hint
    assert not of_kind(frame, "parallelism")


def test_a_cheap_split_is_advised_with_its_price():
    # GIVEN the same stage over 2 x 1 kB: the reshuffle costs 2 x 2 kB /
    # 1e8 B/s / 4 slots = 10 us
    frame = hints_of(cached_stage(1_000), window_ns=100 * MS, options=PARALLEL)
    row, ev = only(frame, "parallelism")
    # THEN it says to repartition before it, priced
    assert ev["source"] == "input" and ev["shuffle_rate_from"] == "reference"
    assert ev["reshuffle_ns"] == pytest.approx(2 * 2_000 / 1e8 / 4 * S)
    assert "repartition(4) before it" in row["action"]
    assert "spark.sql.shuffle.partitions" not in row["action"]


def test_a_reshuffle_is_priced_at_the_runs_own_shuffle_rate():
    # GIVEN a stage that wrote 1 GB of shuffle in 1 s of task time (4 tasks
    # on 4 slots), then a scan stage of 2 tasks reading 10 MB each
    t = Trace()
    for slot in range(4):
        t.task(f"exec-1/{slot}", 0, [("processing", 250)], written=250 * 10**6)
    for slot in (0, 1):
        t.task(
            f"exec-1/{slot}",
            250,
            [("processing", 100)],
            stage=1,
            nbytes=10**7,
            name="FileScan parquet",
        )
    for slot in (2, 3):
        t.local(f"exec-1/{slot}", 250, 350, "waiting")
    # WHEN hints are computed
    frame = hints_of(t.frame(), window_ns=350 * MS, options=PARALLEL)
    row, ev = only(frame.filter(pl.col("stage_id") == 1), "parallelism")
    # THEN the repartition of 20 MB is priced at the run's 1 GB/s per slot
    # (write and read, over 4 slots: 10 ms; at the 100 MB/s reference it
    # would be 100 ms, more than the split saves), and taken off the saving
    assert (ev["source"], ev["shuffle_rate_from"]) == ("input", "run")
    assert ev["reshuffle_ns"] == pytest.approx(2 * 2e7 / 1e9 / 4 * S)
    saved = ev["replayed_saving_ns"] - ev["reshuffle_ns"]
    assert row["predicted_saving_ns"] == pytest.approx(saved)
    assert 0 < row["predicted_saving_ns"] < 50 * MS


def test_the_programs_own_repartition_is_named():
    # GIVEN stage 0 writes repartition(2)'s exchange, read by stage 1's 2
    # tasks on a 4-core executor
    t = Trace()
    label = "FileScan parquet → Exchange RoundRobinPartitioning(2), REPARTITION_BY_NUM"
    t.task("exec-1/0", 0, [("processing", 10)], stage=0, written=4_000, name=label)
    for slot in (0, 1):
        t.task(f"exec-1/{slot}", 10, [("processing", 100)], stage=1, job=1)
    for slot in (2, 3):
        t.local(f"exec-1/{slot}", 10, 110, "waiting")
    # WHEN hints are computed
    frame = hints_of(t.frame(), window_ns=110 * MS, options=PARALLEL)
    row, ev = only(frame.filter(pl.col("stage_id") == 1), "parallelism")
    # THEN the action changes that call, not spark.sql.shuffle.partitions
    assert (ev["source"], ev["repartition_n"], ev["partitions"]) == (
        "repartition",
        2,
        4,
    )
    assert "repartition(2)" in row["action"] and "repartition(4)" in row["action"]
    assert "spark.sql.shuffle.partitions=" not in row["action"]


def test_a_stage_reading_a_shuffle_gets_more_reducers():
    # GIVEN stage 0 writes a hash shuffle that stage 1 reads in 2 tasks
    t = Trace()
    label = "HashAggregate → Exchange hashpartitioning(k, 2)"
    t.task("exec-1/0", 0, [("processing", 10)], stage=0, written=4_000, name=label)
    for slot in (0, 1):
        t.task(f"exec-1/{slot}", 10, [("processing", 100)], stage=1, job=1)
    for slot in (2, 3):
        t.local(f"exec-1/{slot}", 10, 110, "waiting")
    frame = hints_of(t.frame(), window_ns=110 * MS, options=PARALLEL)
    row, ev = only(frame.filter(pl.col("stage_id") == 1), "parallelism")
    # THEN the same shuffle gets more reducers, at no extra shuffle
    assert ev["source"] == "shuffle" and "reshuffle_ns" not in ev
    assert "spark.sql.shuffle.partitions=4" in row["action"]


def gzip_scan(rdds: tuple[str, ...]) -> tuple[pl.DataFrame, AppContext]:
    """A one-stage scan of 2 files of 400 MB each (over three times the
    128 MB split cap: files that did not split) in 2 tasks of 1 s on an
    executor of 8 cores."""
    from sparktrail.pag.context import StageInfo

    t = Trace()
    for slot in (0, 1):
        t.task(f"exec-1/{slot}", 0, [("processing", 1000)], nbytes=400 << 20)
    for slot in range(2, 8):
        t.local(f"exec-1/{slot}", 0, 1000, "waiting")
    app = AppContext(
        master="yarn",
        spark_version="3.5.0",
        executors=(ExecutorLife("1", 8, host="h", added_ns=0),),
        stages=(StageInfo(0, declared_tasks=2, rdds=rdds),),
    )
    return t.frame(), app


def test_files_that_did_not_split_are_to_be_stored_splittable():
    # GIVEN a DataFrame scan whose 2 tasks read 400 MB each
    frame, app = gzip_scan(("FileScanRDD", "FileScan csv", "WholeStageCodegen (1)"))
    row, _ = only(hints_of(frame, app, window_ns=S, options=PARALLEL), "parallelism")
    # THEN the lever is the input's layout, not a split setting the files
    # ignore
    assert "store the input splittable" in row["action"]
    assert "maxPartitionBytes" not in row["action"]


def test_an_rdd_scan_of_large_splits_is_split_by_min_partitions():
    # GIVEN the same reads by the RDD API, which splits by blocks and
    # minPartitions, not by the scan's cap
    frame, app = gzip_scan(("HadoopRDD", "textFile", "MapPartitionsRDD"))
    row, _ = only(hints_of(frame, app, window_ns=S, options=PARALLEL), "parallelism")
    # THEN its own argument, with no claim that the files do not split
    assert "minPartitions" in row["action"]
    assert "store the input splittable" not in row["action"]


def test_a_kafka_read_is_split_by_the_topics_partitions():
    # GIVEN the two-task read by a DStream's direct Kafka stream
    frame, app = gzip_scan(("KafkaRDD", "createDirectStream", "MapPartitionsRDD"))
    row, _ = only(hints_of(frame, app, window_ns=S, options=PARALLEL), "parallelism")
    # THEN the lever is the topic's partitions (or a repartition of the
    # stream), not a file split argument the read does not have
    assert "more partitions of the Kafka topic" in row["action"]
    assert "textFile" not in row["action"] and "splittable" not in row["action"]


def waves(tasks: list[tuple[int, float, float]]) -> pl.DataFrame:
    """Stage 0 on 4 slots of one executor: ``(slot, start ms, ms)`` each."""
    t = Trace()
    for slot, start, ms in tasks:
        t.task(f"exec-1/{slot}", start, [("processing", ms)], nbytes=None)
    return t.frame()


def test_a_sparse_last_wave_that_holds_the_stage_is_evened_out():
    # GIVEN waves of 4, 4 and 2 tasks of 100 ms: the stage waits for its
    # last two tasks
    layout = [(s, 100 * w, 100) for w in (0, 1) for s in range(4)]
    frame = waves([*layout, (0, 200, 100), (1, 200, 100)])
    # THEN a partition count that fills every wave is asked for
    ((_, ev),) = of_kind(hints_of(frame, window_ns=S, options=PARALLEL), "parallelism")
    assert ev["case"] == "tail" and ev["last_wave"] == 2


def test_a_first_wave_task_that_holds_the_stage_is_no_wave_to_even_out():
    # GIVEN a first wave of 4 tasks, one of 190 ms, and a second wave of 2
    # tasks of 80 ms that end before it
    frame = waves(
        [(0, 0, 100), (1, 0, 100), (2, 0, 100), (3, 0, 190), (0, 100, 80), (1, 100, 80)]
    )
    # THEN no partition count is asked for: the stage waits for the
    # first-wave task, which evening the waves out would leave as it is
    assert not of_kind(hints_of(frame, window_ns=S, options=PARALLEL), "parallelism")
