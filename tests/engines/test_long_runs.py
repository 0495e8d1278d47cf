"""A run longer than a slice: its per-task and per-row arrays live in mapped
files (DESIGN §10), and the profile is the one built in memory."""

from __future__ import annotations

import sys

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from sparktrail.engines import summarize
from sparktrail.pag import trace as trace_module
from sparktrail.summaries.partials import Partials, TaskSums
from tests.mapped import file_backed
from tests.paths import FAILING_TASKS_LOG
from tests.summaries.compare import assert_same_summaries

MS = 1_000_000


def _batches(seed: int) -> list[pl.DataFrame]:
    """Task partials of consecutive batches: a task recurs in neighbours."""
    rng = np.random.default_rng(seed)
    batches = []
    for b in range(6):
        ids = np.unique(rng.integers(10 * b, 10 * b + 25, size=12))
        batches.append(
            pl.DataFrame(
                {
                    "task_id": ids.astype(np.int64),
                    "cp": rng.random(len(ids)),
                    "windows": rng.integers(1, 4, size=len(ids)),
                }
            )
        )
    return batches


def _partials(tasks: pl.DataFrame) -> Partials:
    empty = pl.DataFrame()
    return Partials(
        windows=pl.DataFrame({"window_start_ns": [0]}),
        activity=empty,
        workers=empty,
        operators=empty,
        channels=empty,
        tasks=tasks,
        stages=pl.DataFrame(
            schema={"stage_id": pl.Int64, "activity": pl.String, "cp": pl.Float64}
        ),
        driver=pl.DataFrame(schema={"edge_index": pl.Int64, "cp": pl.Float64}),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_task_sums_add_up_batches_as_the_combine_does(seed):
    # GIVEN the task partials of batches whose tasks overlap
    batches = _batches(seed)
    combined = Partials.combine([_partials(b) for b in batches]).tasks
    # WHEN they are added up as they come, by task id
    sums = TaskSums(0, 90)
    for batch in batches:
        sums.add(batch)
    got = sums.frame()
    # THEN each task has the combine's sums, in task id order (to the last
    # bits: the group-by may add a task's floats in another order)
    assert got.schema == combined.schema
    assert_frame_equal(got, combined.sort("task_id"), check_exact=False, rel_tol=1e-12)
    assert got["task_id"].is_sorted() and got.height > 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_long_run_s_task_sums_are_pages_of_a_file(monkeypatch):
    monkeypatch.setattr(trace_module, "SLICE_ROWS", 10)
    sums = TaskSums(0, 90)
    for batch in _batches(4):
        sums.add(batch)
    assert file_backed(sums.frame()["cp"])


def test_sparse_or_short_runs_keep_their_task_partials_in_memory(monkeypatch):
    dense = pl.DataFrame({"task_id": [1, 2, 3, 4]})
    sparse = pl.DataFrame({"task_id": [1, 2, 3, 10**9]})
    assert TaskSums.for_trace(dense) is None  # no longer than a slice
    monkeypatch.setattr(trace_module, "SLICE_ROWS", 2)
    assert TaskSums.for_trace(dense) is not None
    assert TaskSums.for_trace(sparse) is None  # arrays over 10^9 ids


def _rule_tasks(monkeypatch: pytest.MonkeyPatch) -> list[pl.DataFrame]:
    """The task facts with their CP shares, as the finish hands them to the
    rules, one frame a profile."""
    import sparktrail.summaries.finish as finish

    seen: list[pl.DataFrame] = []
    rules = finish.rule_hints

    def rule_hints(context):
        seen.append(context.tasks.sort("task_id"))
        return rules(context)

    monkeypatch.setattr(finish, "rule_hints", rule_hints)
    return seen


def test_a_real_log_profiled_as_a_long_run_is_profiled_as_in_memory(monkeypatch):
    # GIVEN a real Spark log's trace, profiled in batches as it is in memory
    from sparktrail.tracer import import_trace

    trace = import_trace(FAILING_TASKS_LOG, progress=False)
    tasks = _rule_tasks(monkeypatch)
    in_memory = summarize(trace, 1000 * MS, chunk_rows=10_000)
    # WHEN it is profiled as a long run: slices of 5,000 rows, so the
    # batches' rows, the task facts' rows and the task partials go to
    # mapped files
    monkeypatch.setattr(trace_module, "SLICE_ROWS", 5_000)
    framed = []
    frame_of = TaskSums.frame
    monkeypatch.setattr(
        TaskSums, "frame", lambda self: framed.append(1) or frame_of(self)
    )
    long = summarize(trace, 1000 * MS, chunk_rows=10_000)
    # THEN the task partials were added up in files, each task has the
    # same facts and CP shares, and the profile is the same
    assert framed == [1]
    assert trace.frame.height > 10 * 5_000
    assert len(tasks) == 2 and tasks[0].height == 8_580
    assert file_backed(tasks[1]["cp_share"])
    assert tasks[0]["cp_share"].sum() > 0.05  # tasks are a tenth of the path
    assert_frame_equal(tasks[1], tasks[0], check_exact=False, rel_tol=1e-12)
    assert_same_summaries(long, in_memory)


@pytest.mark.parametrize("keys", [["operator", "stage_id"], ["operator"]])
@pytest.mark.parametrize("one_label_a_stage", [True, False])
def test_operator_facts_of_a_long_run_equal_one_query(
    monkeypatch, keys, one_label_a_stage
):
    # GIVEN tasks of stages and operators that recur across slices, null
    # stages and labels among them
    from sparktrail.summaries import operator

    n = 60
    stage = [None if k % 7 == 0 else k % 3 for k in range(n)]
    label = [
        None if k % 11 == 0 else f"op {s if one_label_a_stage else k % 4}"
        for k, s in enumerate(stage)
    ]
    if one_label_a_stage:
        label = [None if s is None else f"op {s}" for s in stage]
    tasks = pl.DataFrame(
        {
            "operator": label,
            "stage_id": stage,
            "job_id": [None if k < 5 else k // 20 for k in range(n)],
            "records": [k % 5 for k in range(n)],
            "bytes": [None if k % 2 else k for k in range(n)],
            "shuffle_write_bytes": [3] * n,
            "duration_ns": [(k * 37) % 101 for k in range(n)],
        },
        schema_overrides={"stage_id": pl.Int64, "job_id": pl.Int64},
    )
    monkeypatch.setattr(operator, "SMALL_ROWS", 0)
    one = operator._facts(tasks, keys).collect()
    # WHEN the same facts are taken as a long run's, 7 tasks a slice
    monkeypatch.setattr(trace_module, "SLICE_ROWS", 7)
    sliced = operator._facts(tasks, keys).collect()
    # THEN each group has the same facts
    assert sliced.schema == one.schema
    assert_frame_equal(sliced, one, check_row_order=False)
    assert one.height > 3
