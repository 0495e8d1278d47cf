"""What each hint's saving is a share of: the hints frame's ``share_of``,
set by the rule, which the dashboard reads instead of guessing."""

from __future__ import annotations

import polars as pl

from sparktrail.dashboard.figures import saving_text
from tests.summaries.test_capacity_hints import hints_of, two_executors, yarn
from tests.summaries.test_streaming_hints import batches, hints_for, only


def test_a_capacity_saving_is_a_share_of_slot_time() -> None:
    app = yarn(**{"spark.shuffle.service.enabled": "true"})
    hints = hints_of(two_executors(), app)
    row = hints.filter(pl.col("kind") == "idle_capacity").row(0, named=True)
    assert row["share_of"] == "slot_time"
    assert saving_text(row).endswith("of slot time)")
    # the other hints of the run are shares of its wall time
    others = hints.filter(pl.col("kind") != "idle_capacity")["share_of"]
    assert set(others.to_list()) <= {"run"}


def test_a_backlog_is_a_share_of_the_input() -> None:
    stream = batches([(20_000, 12_000)] * 6, trigger_ms=[1600] * 6, backlog=50_000)
    hint = only(hints_for(stream), "stream_backlog")
    assert hint["share_of"] == "input"
    assert saving_text(hint) == "40% of the input falls behind"


def test_planning_is_a_share_of_the_query_s_batch_time() -> None:
    stream = batches(
        [(100, 1000)] * 5,
        trigger_ms=[1000] * 5,
        durations={"addBatch": 300, "queryPlanning": 500, "latestOffset": 200},
    )
    hint = only(hints_for(stream), "planning_bound")
    # 4 x 700 ms of planning in 4 x 1 s of triggers
    assert hint["share_of"] == "query_batch_time"
    assert saving_text(hint) == "2.8 s (70% of the query's batch time)"
