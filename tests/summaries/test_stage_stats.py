"""The stage and executor tables: Spark UI facts with each one's CP share."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from sparktrail import summarize
from sparktrail.pag import trace as trace_module
from sparktrail.pag.context import AppContext, ExecutorLife
from sparktrail.pag.trace import Trace as ContextTrace
from sparktrail.pag.trace import load_trace
from sparktrail.summaries import Summaries
from sparktrail.summaries.stage_stats import (
    EXECUTOR_STATS,
    STAGE_STATS,
    executor_stats,
    stage_stats,
)
from tests.summaries.builders import MS, Trace, shuffle_join


def skewed_stage() -> pl.DataFrame:
    """Stage 0: three tasks of 10 ms and one of 80 ms (with 8 ms of GC) on
    exec-1; stage 1 (after it, on exec-2) one task of 5 ms."""
    t = Trace()
    for slot, ms in enumerate([10, 10, 10]):
        t.task(f"exec-1/{slot}", 0, [("processing", ms)], stage=0, records=5)
    t.task(
        "exec-1/3", 0, [("processing", 72), ("gc", 8)], stage=0, records=50, nbytes=4000
    )
    t.message("exec-1/3", "exec-2/0", 80)
    t.task("exec-2/0", 80, [("processing", 5)], stage=1, name="save at App.scala:20")
    return t.frame()


def test_stage_table_has_the_spark_ui_facts_and_the_critical_share() -> None:
    # GIVEN a run whose stage 0 has one task 8x its median, then stage 1
    s = summarize(skewed_stage(), 100 * MS)
    stages = {row["stage_id"]: row for row in s.stages.iter_rows(named=True)}
    # THEN each stage's wall time, task counts and task times are Spark's
    zero = stages[0]
    assert zero["wall_ns"] == 80 * MS
    assert zero["tasks"] == 4 and zero["failed_tasks"] == 0
    assert zero["median_task_ns"] == 10 * MS
    assert zero["max_task_ns"] == 80 * MS
    assert zero["skew"] == pytest.approx(8.0)
    assert zero["records"] == 65
    assert zero["gc_share"] == pytest.approx(8 / 110)
    assert stages[1]["tasks"] == 1 and stages[1]["skew"] == pytest.approx(1.0)
    # AND the long task's stage holds most of the critical path, the
    # largest share is first and the shares are the run's stage shares
    assert s.stages["stage_id"].to_list()[0] == 0
    assert zero["cp_share"] > 0.8 > stages[1]["cp_share"] > 0
    assert s.stages["cp_share"].sum() == pytest.approx(
        s.operator["cp_share"].fill_null(0).sum()
        - s.operator.filter(pl.col("stage_id").is_null())["cp_share"].sum()
    )
    assert dict(s.stages.schema) == STAGE_STATS


def test_executor_table_counts_tasks_and_names_hosts_and_cores() -> None:
    # GIVEN the same run, with a context that knows exec-1's host and cores
    # and an executor (3) that ran nothing
    app = AppContext(
        executors=(
            ExecutorLife("1", cores=4, host="node-a"),
            ExecutorLife("2", cores=1, host="node-b"),
            ExecutorLife("3", cores=2, host="node-c"),
        )
    )
    s = summarize(ContextTrace(load_trace(skewed_stage()).frame, app), 100 * MS)
    rows = {row["executor_id"]: row for row in s.executors.iter_rows(named=True)}
    # THEN every executor has a row, with its host and cores
    assert set(rows) == {"1", "2", "3"}
    assert (rows["1"]["host"], rows["1"]["cores"]) == ("node-a", 4)
    # AND its task count, task time and CP share against its fair share
    assert rows["1"]["tasks"] == 4
    assert rows["1"]["task_ns"] == 110 * MS
    assert rows["3"]["tasks"] == 0 and rows["3"]["cp_share"] == 0.0
    executor = s.executor.filter(pl.col("executor_id") == "1")
    assert rows["1"]["cp_share"] == pytest.approx(executor["cp_share"][0])
    assert rows["1"]["ratio"] == pytest.approx(executor["ratio"][0])
    # AND the driver timeline is not an executor row
    assert None not in rows
    assert dict(s.executors.schema) == EXECUTOR_STATS


def test_failed_attempts_and_unstated_spills() -> None:
    tasks = pl.DataFrame(
        {
            "task_id": [1, 2, 3],
            "stage_id": [0, 0, 0],
            "executor": ["1", "1", "2"],
            "launch_ns": [0, 0, 0],
            "end_ns": [10, 20, 30],
            "duration_ns": [10, 20, 30],
            "run_ns": [10, 20, 30],
            "gc_ns": [0, 0, 0],
            "status": ["success", "failed", "killed"],
            "memory_bytes_spilled": [None, None, 7],
            "disk_bytes_spilled": [None, None, None],
        }
    )
    stages = stage_stats(tasks, pl.DataFrame({"stage_id": [0], "cp": [1.0]}), 1)
    assert stages.select("failed_tasks", "spilled_bytes").row(0) == (2, 7)
    executors = executor_stats(tasks, pl.DataFrame())
    by_id = dict(executors.select("executor_id", "spilled_bytes").rows())
    # exec-1 stated no spill: unknown, not 0
    assert by_id == {"1": None, "2": 7}


def test_no_tasks_gives_empty_tables() -> None:
    t = Trace()
    t.local("driver", 0, 10, "driver")
    s = summarize(t.frame(), 10 * MS)
    assert s.stages.is_empty() and s.executors.is_empty()


def test_shuffle_join_stage_shares_add_up_to_the_task_stages() -> None:
    s = summarize(shuffle_join(), 10 * MS)
    shares = dict(s.stages.select("stage_id", "cp_share").rows())
    assert shares[2] == pytest.approx(0.5)
    assert shares[0] == pytest.approx(0.25) and shares[1] == pytest.approx(0.25)


def test_a_folder_of_an_older_sparktrail_loads_with_empty_tables(
    tmp_path: Path,
) -> None:
    # GIVEN summaries saved, then the two table files removed (as an older
    # sparktrail wrote them)
    folder = summarize(skewed_stage(), 100 * MS).save(tmp_path / "s")
    (folder / "stages.parquet").unlink()
    (folder / "executors.parquet").unlink()
    # THEN they load, with empty tables of the declared columns
    back = Summaries.load(folder)
    assert back.stages.is_empty() and dict(back.stages.schema) == STAGE_STATS
    assert back.executors.is_empty()
    # AND a missing frame of the others is still an error naming it
    (folder / "operator.parquet").unlink()
    with pytest.raises(FileNotFoundError, match="operator"):
        Summaries.load(folder)


def _mixed_attempts() -> pl.DataFrame:
    """Attempts of two stages on three executors, interleaved: some failed,
    killed or without metrics, spills and records stated by some only."""
    n = 40
    return pl.DataFrame(
        {
            "task_id": list(range(n)),
            "stage_id": [k % 2 if k % 13 else None for k in range(n)],
            "operator": [None if k < 5 else f"op {k % 2}" for k in range(n)],
            "executor": [str(k % 3) if k % 11 else None for k in range(n)],
            "launch_ns": [k * 3 for k in range(n)],
            "end_ns": [k * 3 + 5 + k % 7 for k in range(n)],
            "finish_ns": [k * 3 + 6 + k % 7 for k in range(n)],
            "duration_ns": [5 + k % 7 for k in range(n)],
            "run_ns": [4 + k % 7 for k in range(n)],
            "gc_ns": [k % 3 for k in range(n)],
            "executor_run_ns": [None if k % 9 == 0 else 4 + k % 7 for k in range(n)],
            "jvm_gc_ns": [k % 3 for k in range(n)],
            "status": [["success", "failed", "killed", None][k % 4] for k in range(n)],
            "records": [None if k % 5 else k for k in range(n)],
            "bytes": [k * 10 for k in range(n)],
            "memory_bytes_spilled": [7 if k % 8 == 1 else None for k in range(n)],
            "disk_bytes_spilled": [None] * n,
        },
        schema_overrides={"disk_bytes_spilled": pl.Int64},
    ).with_columns(pl.col("executor").cast(pl.Categorical))


@pytest.mark.parametrize("rows", [1, 3, 7])
def test_tables_built_a_slice_at_a_time_equal_one_query(monkeypatch, rows) -> None:
    # GIVEN attempts whose stages and executors recur across every slice
    tasks = _mixed_attempts()
    cp = pl.DataFrame({"stage_id": [0, 1], "cp": [1.0, 0.5]})
    summary = pl.DataFrame(
        {"executor_id": ["0", "1"], "role": ["executor"] * 2, "cp_share": [0.3, 0.7]}
    )
    whole = stage_stats(tasks, cp, 2), executor_stats(tasks, summary)
    # WHEN the tables are built a few tasks at a time
    monkeypatch.setattr(trace_module, "SLICE_ROWS", rows)
    sliced = stage_stats(tasks, cp, 2), executor_stats(tasks, summary)
    # THEN they are the tables of one query over every task
    assert whole[0].height == 2 and whole[1].height == 3
    for one, parts in zip(whole, sliced, strict=True):
        assert parts.equals(one)
    # (and their facts are those of the tasks: stage 0's first operator)
    assert whole[0].filter(pl.col("stage_id") == 0)["operator"].item() == "op 0"
