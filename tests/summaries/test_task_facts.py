"""Task facts: trace columns without a value come out as constant null columns."""

from __future__ import annotations

import sys

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktrail.pag import workers as worker_names
from sparktrail.pag.trace import load_trace
from sparktrail.summaries import task_table
from sparktrail.summaries.task_table import _task_chunk, task_facts
from sparktrail.synthetic import profile_trace
from tests.mapped import file_backed
from tests.summaries.builders import shuffle_join


def _every_fact(trace: pl.DataFrame) -> pl.DataFrame:
    """The facts aggregated column by column (no constant columns)."""
    frame = load_trace(trace).frame
    frame = frame.with_columns(
        pl.lit(None, dtype=pl.Int64).alias(c)
        for c in (
            "shuffle_write_bytes",
            "memory_bytes_spilled",
            "disk_bytes_spilled",
            "state_rows",
            "state_memory_bytes",
        )
        if c not in frame.columns
    )
    if "status" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("status"))
    return _task_chunk(frame, ())


@pytest.mark.parametrize("chunk_rows", [10**7, 50])
def test_facts_of_a_trace_with_absent_columns_equal_the_full_aggregation(
    monkeypatch, chunk_rows
):
    monkeypatch.setattr(task_table, "TASK_CHUNK_ROWS", chunk_rows)
    trace = profile_trace(900).with_columns(
        pl.when(pl.col("task_id") % 2 == 0).then(7).otherwise(None).alias("records")
    )
    got = task_facts(trace)
    want = _every_fact(trace)
    assert got.equals(want)
    assert got.schema == want.schema
    # Absent in the trace, so null for every task; records half stated.
    assert got["job_id"].null_count() == got.height == 288
    assert got["records"].null_count() == 144


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_facts_of_a_trace_too_long_for_one_group_by_live_in_a_mapped_file(
    monkeypatch,
):
    # GIVEN a trace longer than one group-by's rows
    monkeypatch.setattr(task_table, "TASK_CHUNK_ROWS", 50)
    trace = profile_trace(900)
    # WHEN its facts are read
    long_facts = task_facts(trace)
    # THEN the values that differ per task are pages of a file (resident
    # only while read), not of the heap; a short trace's stay in memory
    assert file_backed(long_facts["launch_ns"])
    assert file_backed(long_facts["task_id"])
    monkeypatch.setattr(task_table, "TASK_CHUNK_ROWS", 10**7)
    short_facts = task_facts(trace)
    assert not file_backed(short_facts["launch_ns"])
    assert long_facts.equals(short_facts)


def test_facts_of_a_spark_like_trace_are_unchanged(monkeypatch):
    monkeypatch.setattr(task_table, "TASK_CHUNK_ROWS", 5)
    trace = shuffle_join()
    got = task_facts(trace)
    assert got.equals(_every_fact(trace))
    assert got["job_id"].null_count() < got.height


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.sampled_from(["driver", "exec-driver/0", "exec-7/1", "exec-a/b/12"]),
            st.builds(
                "exec-{}/{}".format,
                st.text(max_size=4),
                st.text(alphabet="0123456789/x\n", max_size=3),
            ),
            st.text(max_size=6),
        ),
        max_size=12,
    )
)
@settings(max_examples=200, deadline=None)
def test_executor_parsed_per_name_equals_the_regex_per_row(workers):
    # GIVEN worker names of any shape, nulls among them
    frame = pl.DataFrame({"w": workers}, schema={"w": pl.String})
    # WHEN each distinct name is parsed once in Python
    per_name = frame.select(worker_names.executor_of_column(frame, "w")).to_series()
    # THEN it is what polars' regular expression gives on every row
    per_row = frame.select(worker_names.executor_of(pl.col("w"))).to_series()
    assert per_name.to_list() == per_row.to_list()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    "task_ids",
    [
        [3, 7, 100, 250],  # sorted, as a long run's are: a chunk at a time
        [100, 7, 250, 3],  # unsorted: scattered at once
        [3, 7, 100, 10**6],  # a task without facts: joined
    ],
)
def test_cp_shares_of_a_long_runs_tasks_sit_beside_them_in_a_mapped_file(
    monkeypatch, task_ids
):
    # GIVEN the mapped facts of a trace too long for one group-by, and the
    # CP of some of its tasks
    from sparktrail.pag import trace as trace_module
    from sparktrail.summaries.hints import task_shares

    monkeypatch.setattr(task_table, "TASK_CHUNK_ROWS", 50)
    facts = task_facts(profile_trace(900))
    assert facts["task_id"].n_chunks() > 3
    cp = pl.DataFrame(
        {"task_id": task_ids, "cp": [0.5, 1.0, 0.25, 0.125], "windows": [1, 2, 1, 1]}
    )
    in_memory = task_shares(facts, cp, 4)
    # WHEN the run's tasks are more than a slice
    monkeypatch.setattr(trace_module, "SLICE_ROWS", 40)
    mapped = task_shares(facts, cp, 4)
    # THEN the shares are pages of a file, chunk for chunk with the facts,
    # and the same shares
    assert file_backed(mapped["cp_share"]) and file_backed(mapped["running_cp_share"])
    assert not file_backed(in_memory["cp_share"])
    assert mapped["cp_share"].chunk_lengths() == mapped["task_id"].chunk_lengths()
    assert mapped.equals(in_memory)
    assert mapped.filter(pl.col("task_id") == 7)["running_cp_share"].item() == 0.5
    shares = zip(task_ids, [0.5, 1.0, 0.25, 0.125], strict=True)
    with_facts = sum(share for task, share in shares if task < 10**6)
    assert mapped["cp_share"].sum() == pytest.approx(with_facts / 4)
