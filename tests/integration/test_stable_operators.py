"""The demo's repeated join is one operator with one merged hint (issue 12 item 1).

``sparktrail demo --serve`` runs :func:`~sparktrail.workloads.moving_hotspot`
round after round: the same join, each round a new SQL execution, job and
stages. Traced live, its join must be one operator (one bar) across the
rounds, and its hotspot one hint with its occurrences (DESIGN §6, §8).
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import sparktrail
from sparktrail import workloads
from sparktrail.dashboard.figures import operator_bars
from sparktrail.pag.trace import load_trace
from sparktrail.summaries import HintOptions
from sparktrail.tracer import attach, detach
from tests.integration.shared_session import sql_conf

pytestmark = pytest.mark.integration

ROUNDS = 4
#: What ``sparktrail demo`` sets (sparktrail/cli/demo.py ``_session``).
DEMO_SQL = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}


@pytest.fixture(scope="module")
def demo_rounds(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[pl.DataFrame, sparktrail.Summaries]:
    """``ROUNDS`` rounds of the demo's join (the hot key moves after the
    third), traced live; the trace and its summaries."""
    out = tmp_path_factory.mktemp("demo-rounds") / "trace"
    with sql_conf(spark, DEMO_SQL):
        attach(spark, out)
        try:
            for round_ in range(ROUNDS):
                workloads.moving_hotspot(spark, round_)
        finally:
            detach(spark)
    traced = load_trace(out)
    # Every round's join stage is looked at for a hotspot (each holds a few
    # percent of the critical path, around the default 5%, which made the
    # rounds with a hint vary from run to run under load).
    options = HintOptions(task_stage_min_share=0.01)
    return traced.frame, sparktrail.summarize(traced, 1_000_000_000, options=options)


def join_rows(operator: pl.DataFrame) -> pl.DataFrame:
    return operator.filter(pl.col("operator").str.contains("ShuffledHashJoin"))


def test_the_join_is_one_operator_across_rounds(
    demo_rounds: tuple[pl.DataFrame, sparktrail.Summaries],
) -> None:
    trace, summaries = demo_rounds
    # GIVEN the join ran in a new stage every round
    joins = trace.filter(pl.col("operator").str.contains("ShuffledHashJoin"))
    assert joins["stage_id"].n_unique() == ROUNDS
    assert joins["job_id"].n_unique() == ROUNDS
    # THEN the operator summary has exactly one row for it, its stages the
    # drill-down, named by the workload's call site and the join node
    [join] = join_rows(summaries.operator).iter_rows(named=True)
    assert join["stages"] == ROUNDS
    assert join["stage_ids"] == sorted(joins["stage_id"].unique().to_list())
    assert join["operator"].startswith("collect at workloads.py:")
    assert "#" not in join["operator"]
    # AND no operator is a stage of its own: every one ran in every round
    named = summaries.operator.filter(pl.col("operator").is_not_null())
    assert set(named["stages"].to_list()) == {ROUNDS}
    # AND the chart has one bar for it
    bars = list(operator_bars(summaries.operator).data[0].y)
    assert len([b for b in bars if "ShuffledHashJoin" in b]) == 1


def test_its_hotspots_merge_into_one_hint(
    demo_rounds: tuple[pl.DataFrame, sparktrail.Summaries],
) -> None:
    _, summaries = demo_rounds
    [join] = join_rows(summaries.operator).iter_rows(named=True)
    # THEN the join's hotspots are one hint, with its occurrences
    hotspots = summaries.hints.filter(pl.col("kind") == "hotspot")
    on_join = hotspots.filter(pl.col("stage_id").is_in(join["stage_ids"]))
    assert on_join.height == 1, hotspots
    assert on_join["occurrences"][0] >= 2
