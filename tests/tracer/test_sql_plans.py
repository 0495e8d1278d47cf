"""Stable operator labels from SQL plans (DESIGN §8, issue 12 item 1)."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import polars as pl
import pytest

from sparktrail.tracer import import_trace
from sparktrail.tracer.fields import EventError
from sparktrail.tracer.spark_model import SparkModel
from sparktrail.tracer.sql_plans import (
    MAX_PLANS,
    SQL_PLAN_UPDATE,
    SQL_START,
    SqlPlans,
    call_site,
)
from tests.paths import EVENTLOGS, KAFKA_STREAMING_LOG
from tests.tracer.spark_model_support import build, task_events

SITE = "collect at /home/me/jobs/etl.py:76"


def node(name: str, text: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"nodeName": name, "simpleString": text, "children": list(children)}


def plan(round_: int) -> dict[str, Any]:
    """A group-by's plan as Spark 3/4 writes it; ids grow with every run."""
    k = f"k#{100 * round_ + 3}L"
    return node(
        "WholeStageCodegen (2)",
        "WholeStageCodegen (2)",
        node(
            "HashAggregate",
            f"HashAggregate(keys=[{k}], functions=[count(1)])",
            node(
                "InputAdapter",
                "InputAdapter",
                node(
                    "Exchange",
                    f"Exchange hashpartitioning({k}, 4), ENSURE_REQUIREMENTS, "
                    f"[plan_id={40 + round_}]",
                    node(
                        "WholeStageCodegen (1)",
                        "WholeStageCodegen (1)",
                        node(
                            "HashAggregate",
                            f"HashAggregate(keys=[{k}], functions=[partial_count(1)])",
                            node("Range", "Range (0, 100, step=1, splits=2)"),
                        ),
                    ),
                ),
            ),
        ),
    )


def rdds(*scopes: str) -> list[dict[str, Any]]:
    return [
        {"RDD ID": i, "Scope": json.dumps({"id": str(i), "name": s})}
        for i, s in enumerate(scopes)
    ]


def stage(sid: int, t: int, scopes: list[str], name: str = SITE) -> dict[str, Any]:
    return {
        "Event": "SparkListenerStageSubmitted",
        "Stage Info": {
            "Stage ID": sid,
            "Stage Name": name,
            "Number of Tasks": 1,
            "Submission Time": t,
            "RDD Info": rdds(*scopes),
        },
    }


def group_by_rounds(rounds: int, event: str = SQL_START) -> list[dict[str, Any]]:
    """``rounds`` runs of one group-by: an execution, a job of two stages."""
    events: list[dict[str, Any]] = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App ID": "a"},
        {
            "Event": "SparkListenerEnvironmentUpdate",
            "Spark Properties": {"spark.master": "local[1]"},
        },
    ]
    for r in range(rounds):
        t, job, first = 100 * r + 10, r, 2 * r
        events += [
            {
                "Event": event,
                "executionId": r,
                "description": "collect at NativeMethodAccessorImpl.java:0",
                "sparkPlanInfo": plan(r),
            },
            {
                "Event": "SparkListenerJobStart",
                "Job ID": job,
                "Submission Time": t,
                "Stage IDs": [first, first + 1],
                "Properties": {"spark.sql.execution.id": str(r)},
            },
            stage(first, t, ["WholeStageCodegen (1)", "Exchange"]),
            *task_events(2 * job, first, t + 1, t + 20),
            stage(first + 1, t + 21, ["Exchange", "WholeStageCodegen (2)"]),
            *task_events(2 * job + 1, first + 1, t + 22, t + 40),
            {"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": t + 41},
        ]
    events.append({"Event": "SparkListenerApplicationEnd", "Timestamp": 100 * rounds})
    return events


def test_each_stage_is_labelled_with_its_call_site_and_plan_node() -> None:
    # GIVEN three runs of one group-by, each a new execution and new stages
    trace, _ = build(group_by_rounds(3))
    # WHEN the tasks' operators are read
    ops = (
        trace.filter(pl.col("task_id").is_not_null())
        .group_by("operator")
        .agg(pl.col("stage_id").unique().sort())
        .sort("operator")
    )
    # THEN the map side and the reduce side are one operator each across
    # the runs, named by the user's call site and the plan node, without ids
    assert ops.rows() == [
        (
            "collect at etl.py:76 · HashAggregate(keys=[k], functions=[count(1)])",
            [1, 3, 5],
        ),
        (
            "collect at etl.py:76 · HashAggregate(keys=[k], "
            "functions=[partial_count(1)]) → Exchange hashpartitioning(k, 4)",
            [0, 2, 4],
        ),
    ]


def test_the_execution_description_replaces_a_call_site_in_spark_code() -> None:
    # GIVEN the same runs whose stages Spark named after its own frames
    # (AQE's map stages), with the plan coming from AQE's plan updates
    events = group_by_rounds(2, SQL_PLAN_UPDATE)
    for e in events:
        if e["Event"] == "SparkListenerStageSubmitted":
            e["Stage Info"]["Stage Name"] = "$anonfun$run$1 at FutureTask.java:266"
        if e["Event"] == SQL_PLAN_UPDATE:
            e["description"] = "count at jobs.py:9"
    # WHEN built
    trace, _ = build(events)
    labels = set(trace["operator"].drop_nulls())
    # THEN the description's call site names them; Spark's frames never do
    assert len(labels) == 2
    assert all(label.startswith("count at jobs.py:9 · Hash") for label in labels)
    assert not any("FutureTask" in label for label in labels)


def test_without_a_plan_the_call_site_alone_names_the_operator() -> None:
    # GIVEN an RDD job (no SQL execution) run twice
    events = group_by_rounds(2)
    events = [e for e in events if e["Event"] != SQL_START]
    trace, _ = build(events)
    # THEN its stages are labelled by their call site, with no stage id
    assert set(trace["operator"].drop_nulls()) == {"collect at etl.py:76"}


@pytest.mark.parametrize(
    ("name", "site"),
    [
        ("start at NativeMethodAccessorImpl.java:0", None),
        ("count at <console>:23", "count at <console>:23"),
        ("show at /a/b/c.py:12", "show at c.py:12"),
        ("run at <unknown>:0", None),
        ("no call site", None),
    ],
)
def test_call_site_keeps_user_code_only(name: str, site: str | None) -> None:
    assert call_site(name) == site


#: Real SQL logs: Spark 3.1 (AQE), 3.0 (SortMergeJoin), streaming, Spark 4.1.
PUBLIC = EVENTLOGS / "public"
SQL_LOGS = [
    PUBLIC / "spark/spark-events/local-1642039451826",
    PUBLIC / "rapids/spark-events-profiling/rp_sql_eventlog.zstd",
    PUBLIC / "spark/spark-events/local-1596020211915",
    PUBLIC / "kubeflow/skills/cli/e2e/spark-events/local-1776286804625.zstd",
]


def operators(path: Any) -> pl.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_trace(path)
    return (
        trace.frame.filter(pl.col("stage_id").is_not_null())
        .group_by("operator")
        .agg(pl.col("stage_id").unique().sort(), pl.col("job_id").unique())
    )


@pytest.mark.parametrize("path", SQL_LOGS, ids=lambda p: p.name)
def test_real_sql_logs_label_stages_with_plan_nodes_and_no_ids(path: Any) -> None:
    if not path.exists():
        pytest.skip(f"{path} is not here")
    ops = operators(path)
    labels = ops["operator"].to_list()
    # THEN no label carries an expression or plan id, nor a stage id
    assert not any(re.search(r"#\d+|plan_id|^stage \d+", label) for label in labels)
    # AND the plans name what most stages ran: a plan node after the call
    # site, an aggregate, join or sort among them
    planned = [label for label in labels if " · " in label or " at " not in label]
    assert len(planned) >= len(labels) / 2, labels
    assert any(re.search(r"Aggregate|Join|Sort", label) for label in planned)
    assert not any("NativeMethodAccessorImpl" in label for label in labels)


def test_the_same_query_shape_keeps_its_label_across_jobs() -> None:
    # GIVEN the Spark 3.1 log of two count() queries of the same shape
    # (different ranges), each run as three AQE jobs
    path = PUBLIC / "spark/spark-events/local-1642039451826"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    ops = operators(path).with_columns(jobs=pl.col("job_id").list.len())
    # THEN its partial and its final aggregate are one operator each,
    # over both queries' jobs
    for function in ("partial_count(1)]) → Exchange SinglePartition", "[count(1)])"):
        row = ops.filter(pl.col("operator").str.contains(function, literal=True))
        assert row.height == 1, ops
        assert row["jobs"][0] == 2 and len(row["stage_id"][0]) == 2
        assert row["operator"][0].startswith("count at <console>:23 · HashAggregate")


def test_streaming_batches_share_their_operators() -> None:
    # GIVEN a Structured Streaming log: 8 micro-batches of one word count
    path = KAFKA_STREAMING_LOG
    if not path.exists():
        pytest.skip(f"{path} is not here")
    ops = operators(path)
    # THEN each of its two stages is one operator over all the batches
    # (no batch number, state version nor run id in the label)
    assert ops.height == 2
    assert sorted(len(ids) for ids in ops["stage_id"]) == [8, 8]
    assert all("StructuredKafkaWordCount.scala:86 · " in op for op in ops["operator"])


def test_only_the_newest_plans_are_kept() -> None:
    # GIVEN more executions than are kept (a long streaming run)
    plans = SqlPlans()
    for execution in range(MAX_PLANS + 5):
        plans.execution_start(
            {"executionId": execution, "description": "d", "sparkPlanInfo": plan(0)}
        )
    # THEN the oldest are forgotten, the newest kept
    assert len(plans.plans) == len(plans.descriptions) == MAX_PLANS
    assert min(plans.plans) == 5 and max(plans.plans) == MAX_PLANS + 4


def test_bad_properties_change_nothing() -> None:
    # GIVEN a job start whose properties are no object
    events = group_by_rounds(1)
    for e in events:
        if e["Event"] == "SparkListenerJobStart":
            e["Properties"] = ["spark.sql.execution.id", "0"]
    model = SparkModel()
    # WHEN fed, THEN it is refused, naming the field, before it changed the job
    with pytest.raises(EventError, match="Properties"):
        for e in events:
            model.feed(e)
    assert model.jobs == {}
