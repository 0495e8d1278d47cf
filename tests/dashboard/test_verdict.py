"""The application header and the verdict (dashboard/verdict.py), on
hand-made summaries: one with a hint, one without, one without a job."""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl

from sparktrail.dashboard.live_view import ViewState, WindowView
from sparktrail.dashboard.page_content import headline
from sparktrail.dashboard.verdict import NO_JOB, header_facts, header_line, verdict
from sparktrail.pag.context import AppContext, ExecutorLife, JobSpan
from sparktrail.summaries import Summaries
from sparktrail.summaries.frames import SUMMARY_SCHEMAS

S = 1_000_000_000
T0 = 1_700_000_000 * S


def frame(name: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = SUMMARY_SCHEMAS[name]
    return pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema)


def summaries(
    hints: list[dict[str, Any]] = (),  # type: ignore[assignment]
    context: AppContext | None = None,
    stages: bool = True,
) -> Summaries:
    """A 20 s run of two jobs: stage 3 (a join, 200 tasks), stage 4 (8
    tasks); start-up is 60% of the critical path, processing 40%."""
    frames = {name: frame(name, []) for name in SUMMARY_SCHEMAS}
    frames["activity"] = frame(
        "activity",
        [
            {"activity": "startup", "cp_share": 0.6, "cp_ns": 12e9, "time_ns": 12 * S},
            {"activity": "processing", "cp_share": 0.4, "cp_ns": 8e9, "time_ns": S},
        ],
    )
    if stages:
        frames["operator"] = frame(
            "operator",
            [
                {"stage_id": 3, "stage_ids": [3], "stages": 1, "tasks": 200}
                | {"name": "join at etl.py:41", "job_id": 0},
                {"stage_id": 4, "stage_ids": [4], "stages": 1, "tasks": 8}
                | {"name": "count at etl.py:50", "job_id": 1},
            ],
        )
    frames["windows"] = frame(
        "windows",
        [{"window_start_ns": T0, "window_end_ns": T0 + 20 * S, "has_paths": True}],
    )
    frames["hints"] = frame("hints", list(hints))
    if context is None:
        context = AppContext(
            app_id="application_1_0007",
            app_name="nightly etl",
            spark_version="3.5.1",
            master="yarn",
            deploy_mode="cluster",
            start_ns=T0,
            end_ns=T0 + 20 * S,
            executors=(
                ExecutorLife("driver", 1),
                ExecutorLife("1", 4),
                ExecutorLife("2", 4),
            ),
            jobs=(
                JobSpan(0, T0 + 12 * S, T0 + 17 * S),
                JobSpan(1, T0 + 17 * S, T0 + 19 * S),
            ),
        )
    return Summaries(**frames, window_ns=20 * S, origin_ns=T0, context=context)


HOTSPOT = {
    "kind": "hotspot",
    "severity": "high",
    "stage_id": 3,
    "partition": 17,
    "cp_share": 0.3,
    "predicted_saving_ns": 3.2e9,
    "saving_share": 0.16,
    "evidence": json.dumps({"ratio": 9.0}),
    "action": "partition 17 of stage 3 holds 9x the median records: ...",
}
SMALL = HOTSPOT | {"kind": "straggler_task", "severity": "info", "saving_share": 0.01}


def test_header_names_the_application_spark_master_time_capacity_and_work() -> None:
    # GIVEN the summaries of a YARN run with two 4-core executors
    facts = dict(header_facts(summaries()))
    # THEN every fact is there, in words and units
    assert facts == {
        "application": "nightly etl (application_1_0007)",
        "Spark": "3.5.1",
        "master": "yarn (cluster mode)",
        "wall time": "20 s",
        "executors": "2 executors × 4 cores",
        "work": "2 jobs, 2 stages, 208 tasks",
    }
    assert header_line(summaries()).startswith(
        "nightly etl (application_1_0007) · Spark 3.5.1 · yarn (cluster mode) · "
        "20 s wall time"
    )


def test_local_mode_counts_the_driver_cores() -> None:
    # GIVEN a local[*] run whose driver has 8 cores
    local = AppContext(
        master="local[*]", executors=(ExecutorLife("driver", 8),), jobs=(JobSpan(0),)
    )
    # THEN the executors read "local, 8 cores"
    assert dict(header_facts(summaries(context=local)))["executors"] == "local, 8 cores"


def test_a_stage_of_an_operator_that_ran_twice_is_named_and_counted() -> None:
    # GIVEN the join ran as stages 3 and 9 (one operator row), the hotspot
    # in stage 9
    s = summaries([HOTSPOT | {"stage_id": 9}])
    ops = s.operator.with_columns(
        stage_ids=pl.when(pl.col("stage_id") == 3)
        .then(pl.lit([3, 9]))
        .otherwise(pl.col("stage_ids")),
    )
    s = Summaries(
        **{**s.frames(), "operator": ops},
        window_ns=s.window_ns,
        origin_ns=s.origin_ns,
        context=s.context,
    )
    # THEN the verdict names stage 9 by its operator, and the header counts
    # three stages
    assert "of stage 9 (join at etl.py:41)" in verdict(s)
    assert dict(header_facts(s))["work"] == "2 jobs, 3 stages, 208 tasks"


def test_verdict_of_a_hint_names_what_where_and_the_saving() -> None:
    # GIVEN a high hotspot hint (and an info one that is not shown)
    text = verdict(summaries([HOTSPOT, SMALL]))
    # THEN one sentence: the stage by name, the partition, and the predicted
    # saving with its share of the run; what to change is the hint's
    assert text == (
        "Partition 17 of stage 3 (join at etl.py:41) has far more data than "
        "the others: the first hint's change saves 3.2 s (16% of the run)."
    )


def test_verdict_never_names_a_remedy_its_hint_does_not() -> None:
    # GIVEN a straggler whose rule, on a local master, says Spark does not
    # speculate there, and a hotspot whose rule says rewrite the input files
    straggler = HOTSPOT | {
        "kind": "straggler_task",
        "action": "Spark does not speculate on a local master: look at what "
        "makes partition 17 slow",
    }
    layout = HOTSPOT | {
        "partition": None,
        "action": "the skew is the input files' layout: rewrite them evenly",
    }
    # THEN the verdict names neither speculation nor a hot key, only the
    # problem, the saving and where the change is
    for hint, problem in (
        (straggler, "A slow task (partition 17) of stage 3"),
        (layout, "A few partitions of stage 3"),
    ):
        text = verdict(summaries([hint]))
        assert text.startswith(problem)
        assert text.endswith("the first hint's change saves 3.2 s (16% of the run).")
        assert not re.search(r"speculat|salt|hot key|AQE", text)


def test_verdict_of_a_stream_backlog_says_cores_or_slots_not_pi() -> None:
    # GIVEN a streaming query that falls behind: 40% of its input
    backlog = {
        "kind": "stream_backlog",
        "severity": "high",
        "cp_share": 0.4,
        "saving_share": 0.4,
        "evidence": json.dumps({"pi": 10, "slots": 4}),
        "action": "query 'orders' ... Give it 10 cores or slots (DS2's pi = 10 ...",
    }
    text = verdict(summaries([backlog]))
    # THEN the verdict says how far behind, never pi
    assert text == (
        "A streaming query falls behind its input (40% of the input falls "
        "behind): the first hint says what to change."
    )
    assert not re.search(r"\bpi\b|π", text)


def test_verdict_without_a_shown_hint_says_what_the_path_was() -> None:
    # GIVEN a run whose only hint saves under 2% (info, not shown)
    text = verdict(summaries([SMALL]))
    # THEN the verdict says so from the activity summary and the jobs
    assert text == (
        "Start-up took 60% of the run; the 2 jobs ran 7 s with no bottleneck "
        "worth acting on."
    )


def test_verdict_without_a_job_says_there_was_nothing_to_profile() -> None:
    # GIVEN a context with no job, or a trace without stages
    no_job = AppContext(app_name="idle", master="local[2]")
    # THEN the verdict says no Spark job ran
    assert verdict(summaries(context=no_job)) == NO_JOB
    assert verdict(summaries(context=AppContext(), stages=False)) == NO_JOB
    # AND jobs that ran no task are counted in the header and said so
    idle_jobs = summaries(stages=False)
    assert "2 jobs" in header_line(idle_jobs)
    assert verdict(idle_jobs) == "The 2 jobs ran no task: nothing to profile."
    assert NO_JOB == "No Spark job ran: nothing to profile."
    # AND the header still says what ran, with no task
    facts = dict(header_facts(summaries(context=no_job, stages=False)))
    assert facts["executors"] == "local, 2 cores"
    assert facts["work"] == "no Spark job"


def test_dashboard_headline_of_a_report_is_the_whole_runs() -> None:
    # GIVEN a finished report's snapshot (one whole-run view)
    s = summaries([HOTSPOT])
    view = WindowView.held(T0, T0 + 20 * S, "whole run", s, None)
    snapshot = ViewState("out", "report", windows=(view,), live=False)
    # WHEN the page asks for its headline
    facts, sentence, window_line = headline(snapshot, "latest")
    # THEN it is the report's header and verdict, with no window line
    assert facts == header_facts(s)
    assert sentence == verdict(s)
    assert window_line == ""


def test_dashboard_headline_while_live_is_the_picked_windows() -> None:
    # GIVEN a live snapshot of a window without tasks and one with a hint
    quiet = summaries(stages=False)
    busy = summaries([HOTSPOT])
    views = (
        WindowView.held(T0, T0 + S, "w0", quiet, None),
        WindowView.held(T0 + S, T0 + 2 * S, "w1", busy, None),
    )
    snapshot = ViewState("trace", "live", windows=views, live=True)
    # THEN each window's verdict is its own, the header the run so far
    assert (
        headline(snapshot, str(T0))[1]
        == "This window: No Spark task ran in this window."
    )
    facts, sentence, _ = headline(snapshot, str(T0 + S))
    assert sentence.startswith("This window: Partition 17 of stage 3")
    assert dict(facts)["work"] == "2 jobs"
