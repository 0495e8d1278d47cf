"""``gc_bound`` and ``spill`` fire on constructed traces, with their
evidence, and not otherwise (summaries/hints/memory_pressure.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

from sparktrail.engines import summarize
from sparktrail.pag.context import AppContext
from sparktrail.summaries import HintOptions
from sparktrail.summaries.hints.memory_pressure import memory_of
from tests.summaries.builders import MS, Trace

MB = 1 << 20


def hints(trace: pl.DataFrame, options: HintOptions | None = None) -> pl.DataFrame:
    return summarize(trace, 100 * MS, options=options).hints


def of_kind(
    frame: pl.DataFrame, kind: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rows = frame.filter(pl.col("kind") == kind).iter_rows(named=True)
    return [(row, json.loads(row["evidence"])) for row in rows]


def gc_heavy(gc_ms: float, executor: str = "1", task_ms: float = 100) -> pl.DataFrame:
    """Stage 0 on two slots, each running tasks of ``task_ms`` of which
    ``gc_ms`` per 100 ms is GC, for 100 ms."""
    t = Trace()
    for s in (0, 1):
        at = 0.0
        while at < 100:
            gc = gc_ms * task_ms / 100
            pieces = [("processing", task_ms - gc), ("gc", gc)]
            t.task(f"exec-{executor}/{s}", at, pieces, stage=0)
            at += task_ms
    return t.frame()


def test_gc_bound_fires_when_gc_holds_the_path():
    # GIVEN two tasks that spend 40 of their 100 ms in GC, side by side
    # WHEN hints are computed over one 100 ms window
    found = of_kind(hints(gc_heavy(40)), "gc_bound")
    # THEN gc_bound names stage 0: GC is 40% of the path and of run time
    assert len(found) == 1
    row, ev = found[0]
    assert row["stage_id"] == 0
    assert row["cp_share"] == pytest.approx(0.4)
    assert ev["gc_share"] == pytest.approx(0.4)
    assert ev["gc_cp_ns"] == pytest.approx(40 * MS)
    (stage,) = ev["stages"]
    assert stage["stage_id"] == 0
    assert (stage["gc_ns"], stage["run_ns"]) == (80 * MS, 200 * MS)
    assert stage["gc_run_share"] == pytest.approx(0.4)
    # AND its action names memory on executors and partitions, with the
    # numbers in ms and %; no memory fraction, whose name and default
    # depend on the Spark version this trace does not state
    action = row["action"]
    assert "spark.executor.memory" in action
    assert "spark.driver.memory" not in action
    assert "memoryFraction" not in action and "memory.fraction" not in action
    # AND, the trace not saying what the stage reads, no shuffle setting:
    # the count and where to set it
    assert "spark.sql.shuffle.partitions" not in action
    assert "(4 instead of 2)" in action and "repartition(4)" in action
    assert "40%" in action and "40 ms" in action


@pytest.mark.parametrize(
    ("version", "said"),
    [
        ("3.5.0", "lower spark.memory.fraction from 0.6 to 0.5"),
        ("1.6.3", "lower spark.memory.fraction from 0.75 to 0.65"),
        ("1.5.2", None),
    ],
)
def test_the_memory_fraction_advice_follows_the_spark_version(
    version: str, said: str | None
) -> None:
    # GIVEN the GC-heavy stage, run by a given Spark version
    from sparktrail.pag.trace import Trace as Valid
    from sparktrail.pag.trace import load_trace

    context = AppContext(app_id="a", master="yarn", spark_version=version)
    trace = Valid(load_trace(gc_heavy(40)).frame, context)
    # WHEN hints are computed
    ((row, _),) = of_kind(hints(trace), "gc_bound")
    # THEN the fraction named is the one that version has, from its
    # default (1.6: 0.75; before 1.6 storage's share is no task's lever)
    if said is None:
        assert "fraction" not in row["action"]
    else:
        assert said in row["action"]


def test_gc_on_a_heap_past_32g_asks_for_smaller_executors_not_a_larger_heap():
    # GIVEN the GC-heavy stage on executors of 48g
    from sparktrail.pag.trace import Trace as Valid
    from sparktrail.pag.trace import load_trace

    context = AppContext(
        app_id="a",
        master="yarn",
        spark_version="3.5.0",
        properties={"spark.executor.memory": "48g"},
    )
    trace = Valid(load_trace(gc_heavy(40)).frame, context)
    ((row, _),) = of_kind(hints(trace), "gc_bound")
    # THEN no larger heap: smaller executors, with the reason
    action = row["action"]
    assert "raise spark.executor.memory" not in action
    assert "not a heap larger than 48g" in action
    assert "executors of at most 31g" in action


def test_gc_bound_does_not_split_tasks_already_under_the_target_time():
    # GIVEN the same 40% GC in tasks of 10 ms (under the 100 ms target)
    ((row, ev),) = of_kind(hints(gc_heavy(40, task_ms=10)), "gc_bound")
    # WHEN hints are computed  THEN gc_bound still names the heap and the
    # fraction, but does not ask for more, smaller tasks
    assert ev["stages"][0]["tasks"] == 20
    assert "spark.executor.memory" in row["action"]
    assert "smaller tasks" not in row["action"]
    assert "spark.sql.shuffle.partitions" not in row["action"]


def test_gc_bound_on_a_local_master_asks_for_driver_memory():
    # GIVEN the same tasks on the driver's slots (a local master)
    frame = hints(gc_heavy(40, executor="driver"))
    # WHEN hints are computed  THEN the heap to raise is the driver's
    ((row, ev),) = of_kind(frame, "gc_bound")
    assert ev["memory_setting"] == "spark.driver.memory"
    assert "spark.driver.memory" in row["action"]
    assert "--driver-memory" in row["action"]
    assert "spark.executor.memory" not in row["action"]


def test_little_gc_gives_no_gc_bound():
    # GIVEN tasks that spend 2 of their 100 ms in GC
    # WHEN hints are computed  THEN there is no gc_bound
    assert of_kind(hints(gc_heavy(2)), "gc_bound") == []


def test_gc_bound_needs_gc_to_be_a_large_part_of_run_time():
    # GIVEN 40% GC, under a task-time threshold of 50%
    options = HintOptions(gc_high_share=0.5)
    # WHEN hints are computed  THEN no stage qualifies: no gc_bound
    assert of_kind(hints(gc_heavy(40), options), "gc_bound") == []


def with_spills(
    trace: pl.DataFrame, spills: dict[int, tuple[int, int]]
) -> pl.DataFrame:
    """``memory_bytes_spilled``, ``disk_bytes_spilled`` on the processing
    rows of the tasks in ``spills`` (task id -> (memory, disk))."""
    processing = pl.col("activity") == "processing"
    columns = {"memory_bytes_spilled": 0, "disk_bytes_spilled": 1}
    return trace.with_columns(
        pl.when(processing)
        .then(
            pl.col("task_id").replace_strict(
                {t: v[i] for t, v in spills.items()}, default=0, return_dtype=pl.Int64
            )
        )
        .alias(name)
        for name, i in columns.items()
    )


def two_tasks() -> pl.DataFrame:
    """Stage 0: tasks 0 and 1, 100 ms each on two slots of executor 1."""
    t = Trace()
    for s in (0, 1):
        t.task(f"exec-1/{s}", 0, [("processing", 100)], stage=0)
    return t.frame()


def test_spill_fires_when_a_task_on_the_path_spilled_to_disk():
    # GIVEN two parallel tasks of stage 0, task 0 spilled 8 MB (2 MB to disk)
    trace = with_spills(two_tasks(), {0: (8 * MB, 2 * MB)})
    # WHEN hints are computed
    found = of_kind(hints(trace), "spill")
    # THEN spill names stage 0, its spilled bytes and the spilling tasks
    assert len(found) == 1
    row, ev = found[0]
    assert row["stage_id"] == 0
    assert ev["stage_cp_share"] == pytest.approx(1.0)
    assert ev["spilling_cp_share"] == pytest.approx(0.5)
    assert row["cp_share"] == pytest.approx(0.5)
    assert (ev["tasks"], ev["spilling_tasks"]) == (2, 1)
    assert ev["spilling_task_share"] == pytest.approx(0.5)
    assert ev["memory_spilled_bytes"] == 8 * MB
    assert ev["disk_spilled_bytes"] == 2 * MB
    assert ev["suggested_partitions"] == 4
    # AND its action asks for more partitions and memory (no fraction: the
    # trace states no Spark version, which decides the fraction's name)
    action = row["action"]
    assert "1 of 2 tasks (50%)" in action
    assert "8 MB in memory, 2 MB on disk" in action
    assert "(4 instead of 2)" in action and "repartition(4)" in action
    assert "spark.executor.memory" in action
    assert "fraction" not in action


def test_no_spill_to_disk_gives_no_spill_hint():
    # GIVEN the same tasks with spill columns but nothing spilled to disk
    trace = with_spills(two_tasks(), {0: (0, 0)})
    # WHEN hints are computed  THEN there is no spill hint, nor any without
    # the columns at all
    assert of_kind(hints(trace), "spill") == []
    assert of_kind(hints(two_tasks()), "spill") == []


def test_a_spill_off_the_critical_path_gives_no_hint():
    # GIVEN a 100 ms task of stage 0 and, beside it, a 10 ms task of stage 1
    # that spilled and then left its slot idle
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 100)], stage=0)
    t.task("exec-1/1", 0, [("processing", 10)], stage=1)
    trace = with_spills(t.frame(), {1: (8 * MB, 2 * MB)})
    # WHEN hints are computed  THEN stage 1 is not on the path: no spill hint
    assert of_kind(hints(trace), "spill") == []


def test_memory_settings_come_from_the_trace_context():
    # GIVEN a context that ran on YARN with 4g executors and fraction 0.8
    app = AppContext(
        master="yarn",
        properties={"spark.executor.memory": "4g", "spark.memory.fraction": "0.8"},
    )
    ctx = SimpleNamespace(app=app, tasks=pl.DataFrame())
    # WHEN the memory settings are read
    memory = memory_of(ctx)  # type: ignore[arg-type]
    # THEN the action doubles what it ran with and, at the fraction's upper
    # bound, suggests no higher one
    assert memory.heap_action() == "raise spark.executor.memory from 4g to 8g"
    assert memory.fraction_to(0.1) is None
    assert memory.fraction_to(-0.1) == pytest.approx(0.7)
    # AND on a local master with nothing set, the driver's default 1g
    local = memory_of(SimpleNamespace(app=AppContext(master="local[2]")))  # type: ignore[arg-type]
    assert (local.setting, local.now, local.suggested) == (
        "spark.driver.memory",
        "1g",
        "2g",
    )


def test_with_aqe_on_the_spill_fix_is_its_advisory_size_not_shuffle_partitions():
    # GIVEN the spilling stage in a Spark 3.5 application (AQE on by default:
    # it sets a shuffle's task count from its size)
    from sparktrail.pag.trace import Trace as Run
    from sparktrail.pag.trace import load_trace

    trace = with_spills(two_tasks(), {0: (8 * MB, 2 * MB)})
    app = AppContext(spark_version="3.5.1", master="yarn")
    run = Run(load_trace(trace).frame, app)
    # WHEN hints are computed
    frame = summarize(run, 100 * MS, options=HintOptions(min_saving_s=0.0)).hints
    [row] = frame.filter(pl.col("kind") == "spill").to_dicts()
    # THEN more partitions come from AQE's advisory size, not the setting
    # AQE overrides
    assert "spark.sql.adaptive.advisoryPartitionSizeInBytes" in row["action"]
    assert "spark.sql.shuffle.partitions" not in row["action"]


def test_a_spill_of_the_skewed_task_alone_asks_to_fix_the_skew_not_partitions():
    # GIVEN stage 0 of four tasks where only task 0, holding 50x the median
    # records, spilled (a hot key's partition)
    t = Trace()
    for s in range(4):
        records = 5000 if s == 0 else 100
        length = 400 if s == 0 else 100
        t.task(f"exec-1/{s}", 0, [("processing", length)], stage=0, records=records)
    trace = with_spills(t.frame(), {0: (8 * MB, 2 * MB)})
    # WHEN hints are computed
    [(row, ev)] = of_kind(hints(trace), "spill")
    # THEN the action names the skew as the spill's cause, not more partitions
    assert ev["skewed_spilling_tasks"] == 1
    assert "the spill is the data skew's" in row["action"]
    assert "spark.sql.shuffle.partitions" not in row["action"]
    # AND the memory remedies stay
    assert "spark.executor.memory" in row["action"]


@pytest.mark.parametrize(("setting", "named"), [(None, True), ("false", False)])
def test_a_spill_of_a_round_robin_repartition_names_its_sort(
    setting: str | None, named: bool
) -> None:
    # GIVEN two SQL tasks of a stage that writes repartition(4), both
    # spilling, on Spark 3.5 (the setting as given)
    from sparktrail.pag.context import StageInfo
    from sparktrail.pag.trace import Trace as Valid
    from sparktrail.pag.trace import load_trace

    t = Trace()
    label = "FileScan parquet → Exchange RoundRobinPartitioning(4), REPARTITION_BY_NUM"
    for slot in (0, 1):
        t.task(f"exec-1/{slot}", 0, [("processing", 100)], stage=0, name=label)
    trace = with_spills(t.frame(), {0: (8 * MB, 2 * MB), 1: (8 * MB, 2 * MB)})
    properties = (
        {}
        if setting is None
        else {"spark.sql.execution.sortBeforeRepartition": setting}
    )
    context = AppContext(
        app_id="a",
        master="yarn",
        spark_version="3.5.0",
        properties=properties,
        stages=(
            StageInfo(0, rdds=("FileScanRDD", "WholeStageCodegen (1)", "Exchange")),
        ),
    )
    ((row, _),) = of_kind(hints(Valid(load_trace(trace).frame, context)), "spill")
    # THEN the sort Spark runs before the round-robin exchange is named as
    # what spills, with its setting, unless it was off
    assert ("spark.sql.execution.sortBeforeRepartition" in row["action"]) is named
