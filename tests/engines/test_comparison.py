"""compare(BEFORE, AFTER): decomposition, matching, settings, checked savings.

Two small runs are built task by task (tests/summaries/builders.py): a
driver gap, then stages run one after another on two slots of one
executor, each stage's operator label given; the hints a test checks are
set on BEFORE's summaries, so each verdict is reached on purpose.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import polars as pl
import pytest

from sparktrail.engines.comparison import (
    EXECUTORS_KEY,
    NO_PATH,
    UNATTRIBUTED,
    Comparison,
    compare,
)
from sparktrail.engines.profiler import Profile, profile
from sparktrail.pag.context import AppContext, ExecutorLife
from sparktrail.pag.trace import Trace, load_trace
from sparktrail.summaries.frames import HINTS
from tests.summaries.builders import Trace as Builder

WINDOW_NS = 100_000_000
SCAN, AGG, JOIN = "scan at etl.py:10", "agg at etl.py:76 · HashAggregate [k]", "join"
#: A stage: its operator label and its tasks (ms, records), or with a
#: third item, (ms, records, partition) for skew.
Stage = tuple[str, list[tuple[int, int]]]


def run(
    stages: list[Stage],
    *,
    driver_ms: int = 200,
    slots: int = 2,
    props: dict[str, str] | None = None,
    app: str = "etl",
    name: str = "run",
) -> Profile:
    """A run: ``driver_ms`` of driver, then each stage's tasks on ``slots``."""
    b = Builder()
    b.local("driver", 0, driver_ms, "driver")
    start = driver_ms
    labels = {}
    for stage_id, (label, tasks) in enumerate(stages):
        labels[stage_id] = label
        free = [start] * slots
        for ms, records in tasks:
            slot = min(range(slots), key=lambda k: free[k])
            b.task(
                f"exec-1/{slot}",
                free[slot],
                [("processing", ms)],
                stage=stage_id,
                job=stage_id,
                records=records,
            )
            free[slot] += ms
        start = max(free)
    frame = b.frame().with_columns(
        operator=pl.col("stage_id").replace_strict(labels, default=None)
    )
    context = AppContext(
        app_id=f"app-{name}",
        app_name=app,
        master="yarn",
        properties={
            "spark.app.id": f"app-{name}",
            "spark.driver.port": str(40000 + len(name)),
            **(props or {}),
        },
        executors=(ExecutorLife("1", slots, host=f"host-{name}"),),
    )
    return profile(Trace(load_trace(frame).frame, context), WINDOW_NS, name=name)


def with_hints(p: Profile, *hints: dict[str, Any]) -> Profile:
    """``p`` with these hints (the rest of each row defaulted)."""
    rows = [
        {
            "severity": "high",
            "stage_id": None,
            "executor_id": None,
            "partition": None,
            "cp_share": 0.3,
            "predicted_saving_ns": None,
            "saving_share": 0.3,
            "occurrences": 1,
            "evidence": "{}",
            "action": "",
            **h,
        }
        for h in hints
    ]
    frame = pl.DataFrame(rows, schema=HINTS, orient="row")
    return replace(p, summaries=replace(p.summaries, hints=frame))


def total(frame: pl.DataFrame) -> float:
    return math.fsum(frame["delta_s"].to_list())


def ops(c: Comparison) -> dict[str, dict[str, Any]]:
    return {r["operator"]: r for r in c.operators.iter_rows(named=True)}


# -- decomposition ------------------------------------------------------------------


def test_the_operator_deltas_and_the_rest_sum_to_the_wall_delta():
    # GIVEN a run whose scan took 2 s and its aggregation 1 s, and a run
    # whose scan took 1 s, aggregation 1 s, with a longer driver gap
    before = run([(SCAN, [(1000, 100)] * 4), (AGG, [(500, 10)] * 4)])
    after = run(
        [(SCAN, [(500, 100)] * 4), (AGG, [(500, 10)] * 4)], driver_ms=500, name="b"
    )
    c = compare(before, after)
    # THEN wall time fell by 0.7 s (1 s of scan, 0.3 s more driver)
    assert c.wall_delta_s == pytest.approx(-0.7)
    # AND the rows, the unattributed one last, add up to it exactly
    assert c.operators["operator"][-1] == UNATTRIBUTED
    assert total(c.operators) == pytest.approx(c.wall_delta_s, abs=1e-12)
    rows = ops(c)
    assert rows[SCAN]["delta_s"] == pytest.approx(-1.0)
    assert rows[AGG]["delta_s"] == pytest.approx(0.0, abs=1e-9)
    assert rows[UNATTRIBUTED]["delta_s"] == pytest.approx(0.3)
    # AND the activities the same (processing -1 s, driver +0.3 s)
    acts = {r["activity"]: r for r in c.activities.iter_rows(named=True)}
    assert acts["processing"]["delta_s"] == pytest.approx(-1.0)
    assert acts["driver"]["delta_s"] == pytest.approx(0.3)
    assert c.activities["activity"][-1] == NO_PATH
    assert total(c.activities) == pytest.approx(c.wall_delta_s, abs=1e-12)
    # AND the operators held each run's critical time: no warning
    assert c.warnings == ()


def test_operators_match_by_label_not_by_stage_id():
    # GIVEN AFTER runs the aggregation first (other stage ids), adds a join
    # and drops the scan
    before = run([(SCAN, [(500, 100)] * 2), (AGG, [(800, 10)] * 2)])
    after = run([(AGG, [(300, 10)] * 2), (JOIN, [(400, 5)] * 2)], name="b")
    rows = ops(compare(before, after))
    # THEN the aggregation is one row, matched
    assert rows[AGG]["matched"]
    assert rows[AGG]["before_s"] == pytest.approx(0.8)
    assert rows[AGG]["after_s"] == pytest.approx(0.3)
    # AND an operator of one run only is compared with 0
    assert (rows[SCAN]["after_s"], rows[SCAN]["matched"]) == (0.0, False)
    assert (rows[JOIN]["before_s"], rows[JOIN]["matched"]) == (0.0, False)
    assert compare(before, after).matched_operators == 1


def test_the_settings_diff_leaves_out_what_always_differs():
    before = run(
        [(SCAN, [(500, 1)] * 2)], props={"spark.sql.shuffle.partitions": "200"}
    )
    after = run(
        [(SCAN, [(500, 1)] * 4)],
        slots=4,
        props={"spark.sql.shuffle.partitions": "8", "spark.speculation": "true"},
        name="after",
    )
    settings = compare(before, after).to_json()["settings_changed"]
    # THEN the changed and new settings are listed, ids and ports are not,
    # and the executors' cores are
    assert settings == {
        "spark.speculation": [None, "true"],
        "spark.sql.shuffle.partitions": ["200", "8"],
        EXECUTORS_KEY: ["1 × 2 cores", "1 × 4 cores"],
    }


# -- checked savings ----------------------------------------------------------------


def agg_runs(
    agg_before_ms: int, agg_after_ms: int, **after_kw: Any
) -> tuple[Profile, Profile]:
    before = run([(SCAN, [(400, 100)] * 2), (AGG, [(agg_before_ms, 10)] * 4)])
    after = run(
        [(SCAN, [(400, 100)] * 2), (AGG, [(agg_after_ms, 10)] * 4)],
        name="after",
        **after_kw,
    )
    return before, after


def over_partitioned(predicted_s: float) -> dict[str, Any]:
    return {
        "kind": "over_partitioned",
        "stage_id": 1,
        "predicted_saving_ns": predicted_s * 1e9,
        "action": "set spark.sql.shuffle.partitions=8 (now 200)",
    }


@pytest.mark.parametrize(
    ("after_ms", "predicted_s", "verdict", "measured_s"),
    [
        (500, 1.5, "effective", 1.0),  # 2 s -> 1 s of 1.5 s predicted
        (850, 1.5, "partly effective", 0.3),  # 2 s -> 1.7 s
        (1000, 1.5, "no effect", 0.0),
        (1500, 1.5, "made it worse", -1.0),
    ],
)
def test_an_applied_setting_gets_its_verdict(
    after_ms, predicted_s, verdict, measured_s
):
    # GIVEN BEFORE's hint recommends a setting and AFTER runs with it
    before, after = agg_runs(
        1000, after_ms, props={"spark.sql.shuffle.partitions": "8"}
    )
    before = with_hints(before, over_partitioned(predicted_s))
    [hint] = compare(before, after).to_json()["hints"]
    # THEN it is applied, its saving measured on the operator it named
    assert hint["operator"] == AGG
    assert hint["applied"] is True
    assert hint["predicted_saving_s"] == pytest.approx(predicted_s)
    assert hint["measured_saving_s"] == pytest.approx(measured_s, abs=1e-9)
    assert hint["verdict"] == verdict


def test_a_hint_whose_change_is_not_in_after_is_not_applied():
    before, after = agg_runs(1000, 500)  # faster, but not by the hint's setting
    before = with_hints(before, over_partitioned(1.5))
    [hint] = compare(before, after).to_json()["hints"]
    assert hint["applied"] is False
    assert hint["measured_saving_s"] is None
    assert hint["verdict"] == "not applied"


def test_info_hints_are_not_checked():
    before, after = agg_runs(1000, 500)
    before = with_hints(before, {**over_partitioned(0.01), "severity": "info"})
    assert compare(before, after).to_json()["hints"] == []


def test_a_changed_partition_count_applies_a_parallelism_hint():
    # GIVEN the aggregation ran as 4 tasks, then as 8 of half the time
    before = run([(AGG, [(1000, 10)] * 4)])
    after = run([(AGG, [(500, 5)] * 8)], name="after")
    before = with_hints(
        before,
        {
            "kind": "parallelism",
            "stage_id": 0,
            "predicted_saving_ns": 0.5e9,
            "action": "repartition the aggregation into 8 partitions",
        },
    )
    [row] = compare(before, after).hints.to_dicts()
    assert row["applied"] and row["how"] == "4 → 8 tasks per stage"
    assert row["verdict"] == "no effect"  # 2 s on 2 slots either way


def test_speculation_on_applies_a_straggler_task_hint():
    before = run([(AGG, [(3000, 10), (500, 10), (500, 10)])])
    after = run(
        [(AGG, [(1000, 10), (500, 10), (500, 10)])],
        props={"spark.speculation": "true"},
        name="after",
    )
    before = with_hints(
        before,
        {
            "kind": "straggler_task",
            "stage_id": 0,
            "predicted_saving_ns": 2e9,
            "action": "turn on speculation",
        },
    )
    [row] = compare(before, after).hints.to_dicts()
    assert row["applied"] and row["how"] == "spark.speculation=true"
    assert row["measured_saving_s"] == pytest.approx(2.0)
    assert row["verdict"] == "effective"


def test_a_fixed_slow_partition_applies_a_straggler_task_hint():
    # GIVEN a 3 s task beside 0.5 s ones, then the same stage without it
    # (the fix was in the partition's own work; speculation stayed off)
    before = run([(AGG, [(3000, 10), (500, 10), (500, 10)])])
    after = run([(AGG, [(500, 10)] * 3)], name="after")
    before = with_hints(
        before,
        {
            "kind": "straggler_task",
            "stage_id": 0,
            "predicted_saving_ns": 2e9,
            "action": "look at what makes partition 0 slow",
        },
    )
    # WHEN compare checks the hint
    [row] = compare(before, after).hints.to_dicts()
    # THEN the longest task over the median fell (6 -> 1): it was applied
    assert row["applied"] and row["how"] == "longest task / median 6.0 → 1.0"
    assert row["measured_saving_s"] == pytest.approx(2.0)
    assert row["verdict"] == "effective"


def test_a_shorter_driver_gap_applies_a_driver_bound_hint():
    before = run([(AGG, [(500, 10)] * 2)], driver_ms=3000)
    after = run([(AGG, [(500, 10)] * 2)], driver_ms=1000, name="after")
    before = with_hints(
        before,
        {
            "kind": "driver_bound",
            "predicted_saving_ns": 2.5e9,
            "action": "move driver work off the path",
        },
    )
    [row] = compare(before, after).hints.to_dicts()
    assert row["applied"] and row["operator"] is None
    assert row["measured_saving_s"] == pytest.approx(2.0)
    assert row["verdict"] == "effective"


def test_a_split_hot_partition_applies_a_hotspot_hint():
    before = run([(AGG, [(4000, 400), (500, 10), (500, 10), (500, 10)])])
    after = run([(AGG, [(1000, 100)] * 4 + [(500, 10)] * 3)], name="after")
    before = with_hints(
        before,
        {
            "kind": "hotspot",
            "stage_id": 0,
            "predicted_saving_ns": 2e9,
            "action": "salt the hot key",
        },
    )
    [row] = compare(before, after).hints.to_dicts()
    assert row["applied"] and row["how"].startswith("longest task / median 8.0 →")
    assert row["verdict"] == "effective"  # 4 s -> 2.5 s of critical time


# -- regressions --------------------------------------------------------------------


def test_slower_with_the_same_input_is_a_regression_with_more_input_is_volume():
    before = run([(SCAN, [(1000, 100)] * 2), (AGG, [(1000, 10)] * 2)])
    after = run([(SCAN, [(2500, 200)] * 2), (AGG, [(2500, 10)] * 2)], name="after")
    found = {r["operator"]: r for r in compare(before, after).to_json()["regressions"]}
    assert found[AGG]["cause"] == "regression"
    assert found[SCAN]["cause"] == "input volume"
    assert "records) grew +100%" in found[SCAN]["detail"]


def test_a_small_growth_is_no_regression():
    before = run([(AGG, [(1000, 10)] * 2)])
    after = run([(AGG, [(1500, 10)] * 2)], name="after")  # +0.5 s < 1 s
    assert compare(before, after).regressions.is_empty()


def test_a_hint_new_in_after_is_a_regression():
    before, after = agg_runs(1000, 1000)
    after = with_hints(
        after, {"kind": "gc_bound", "stage_id": 1, "action": "more memory"}
    )
    [row] = compare(before, after).to_json()["regressions"]
    assert (row["kind"], row["operator"], row["cause"]) == ("new hint", AGG, "gc_bound")


# -- bad input, saving -----------------------------------------------------------------


def test_two_applications_are_compared_where_they_match_with_a_warning():
    before = run([(SCAN, [(500, 1)] * 2), (AGG, [(500, 1)] * 2)])
    after = run([(SCAN, [(500, 1)] * 2), (JOIN, [(500, 1)] * 2)], app="other", name="o")
    c = compare(before, after)
    assert c.matched_operators == 1
    [warning] = c.warnings
    assert "two applications ('etl' and 'other')" in warning
    assert "1 of 2 operators matched" in warning


def test_few_matching_operators_warn_even_under_one_name():
    before = run([(SCAN, [(500, 1)] * 2), (AGG, [(500, 1)] * 2), ("x", [(5, 1)])])
    after = run([(JOIN, [(500, 1)] * 2), ("y", [(5, 1)]), (SCAN, [(5, 1)])], name="o")
    [warning] = compare(before, after).warnings
    assert warning.startswith("only 1 of 3 operators")


def test_a_comparison_saves_and_loads(tmp_path):
    before, after = agg_runs(1000, 500, props={"spark.sql.shuffle.partitions": "8"})
    c = compare(with_hints(before, over_partitioned(1.5)), after)
    back = Comparison.load(c.save(tmp_path / "cmp"))
    assert back.to_json() == c.to_json()
    assert json.loads(json.dumps(back.to_json())) == back.to_json()
    assert set(c.to_json()) == {
        "wall_delta_s",
        "operators",
        "activities",
        "settings_changed",
        "hints",
        "regressions",
        "matched_operators",
        "warnings",
    }


def test_a_changed_exchange_partition_count_is_the_same_operator():
    # GIVEN the map side's label ends in its exchange's partition count
    map_200 = "collect at etl.py:9 · HashAggregate → Exchange hashpartitioning(k, 200)"
    map_8 = "collect at etl.py:9 · HashAggregate → Exchange hashpartitioning(k, 8)"
    before = run([(map_200, [(500, 100)] * 2), (AGG, [(10, 1)] * 200)])
    after = run([(map_8, [(500, 100)] * 2), (AGG, [(100, 1)] * 8)], name="after")
    c = compare(before, after)
    # THEN both sides match, the map side under its count-free label
    assert c.matched_operators == 2
    key = map_8.replace("(k, 8)", "(k, n)")
    assert ops(c)[key]["matched"]
    assert (ops(c)[AGG]["tasks_before"], ops(c)[AGG]["tasks_after"]) == (200, 8)


def test_a_salted_join_is_the_same_operator_and_applies_its_hotspot_hint():
    # GIVEN a join whose hot partition AFTER salts: its keys gain a salt,
    # it now ends in the exchange of the aggregation by the real key, and
    # the code above it grew two lines; that aggregation is new
    join = "collect at etl.py:40 · ShuffledHashJoin [key], [key], Inner, BuildRight"
    salted = (
        "collect at etl.py:42 · ShuffledHashJoin [key, salt], [key, salt], Inner, "
        "BuildRight → Exchange hashpartitioning(key, 8)"
    )
    merge = "collect at etl.py:42 · HashAggregate [key]"
    before = run([(SCAN, [(500, 100)] * 2), (join, [(4000, 400)] + [(500, 10)] * 3)])
    after = run(
        [
            (SCAN, [(500, 100)] * 2),
            (salted, [(2000, 200)] * 2 + [(500, 10)] * 3),
            (merge, [(50, 1)] * 2),
        ],
        name="after",
    )
    before = with_hints(
        before,
        {"kind": "hotspot", "stage_id": 1, "predicted_saving_ns": 1.5e9},
    )
    c = compare(before, after)
    # THEN the join is matched under BEFORE's label, the new aggregation not
    rows = ops(c)
    assert rows[join]["matched"] and rows[join]["after_s"] > 0
    assert not rows[merge]["matched"] and rows[merge]["before_s"] == 0.0
    assert c.matched_operators == 2
    # AND the hint is applied (the hot task's ratio fell), measured on it
    [row] = c.hints.to_dicts()
    assert row["applied"] and row["operator"] == join
    assert row["measured_saving_s"] == pytest.approx(
        rows[join]["before_s"] - rows[join]["after_s"]
    )


def test_two_operators_alike_but_for_their_lines_stay_unmatched():
    # GIVEN BEFORE's two scans differ only in their lines, and AFTER's one
    # scan moved: which of the two it is cannot be told
    before = run([("scan at etl.py:10", [(500, 1)]), ("scan at etl.py:20", [(500, 1)])])
    after = run([("scan at etl.py:15", [(400, 1)])], name="after")
    # THEN nothing is paired by the loose key
    assert compare(before, after).matched_operators == 0


def test_a_hot_partition_split_in_two_applies_its_hint_by_records():
    # GIVEN a hot partition of 400 records (4 s) that AFTER splits in two
    # halves of 200 records: each half still runs 4x the median, as the
    # other tasks got faster too, so the longest task over the median
    # does not fall
    before = run([(AGG, [(4000, 400), (1000, 10), (1000, 10), (1000, 10)])])
    after = run(
        [(AGG, [(2000, 200), (2000, 200), (500, 10), (500, 10), (500, 10)])],
        name="after",
    )
    hot = {"kind": "hotspot", "stage_id": 0, "predicted_saving_ns": 1e9}
    before = with_hints(before, hot | {"evidence": json.dumps({"records": 400})})
    after = with_hints(after, hot | {"evidence": json.dumps({"records": 200})})
    # THEN the hint is applied: its hottest partition's records halved
    [row] = compare(before, after).hints.to_dicts()
    assert row["applied"] and row["how"] == "hottest partition 400 → 200 records"
    # AND without the records the longest-over-median check alone does not
    # see it
    plain = with_hints(before, hot)
    [row] = compare(plain, with_hints(after, hot)).hints.to_dicts()
    assert not row["applied"]
