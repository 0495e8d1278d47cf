"""The ``failures`` hint (issue 26 item 2) on real logs and hand-made events.

Expected values are read from each log's raw events (its ``TaskEnd``
reasons, ``JobEnd`` results, ``ExecutorRemoved`` reasons), not typed in.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from sparktrail.engines import summarize
from sparktrail.pag.context import AppContext, Failure
from sparktrail.pag.trace import Trace, read_context, read_trace, write_trace
from sparktrail.tracer import import_trace
from sparktrail.tracer.eventlog import EventLogReader
from sparktrail.tracer.failure_records import short_message
from sparktrail.tracer.spark_model import SparkModel

LOGS = Path(__file__).resolve().parents[3] / "shared" / "eventlogs"
PUBLIC = LOGS / "public"
EXECUTORS_DIED = PUBLIC / "spark/spark-events/application_1538416563558_0014"
FETCH_FAILED = (
    PUBLIC
    / "rapids/spark-events-profiling/tasks_executors_fail_compressed_eventlog.zstd"
)
PYTHON_ERROR = (
    PUBLIC
    / "kubeflow/skills/cli/e2e/spark-events/application_1713000000000_0001_1.zstd"
)
ABORTED = PUBLIC / "spark/spark-events/local-1422981780767"
NO_FAILURE = LOGS / "local-1532512550423"


def _events(path: Path) -> list[dict[str, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(EventLogReader(path).events())


def _failure_hints(path: Path, end_later_ns: int = 0) -> list[dict[str, Any]]:
    """The log's failures hints; ``end_later_ns`` moves its application's end."""
    if not path.exists():
        pytest.skip(f"no log {path}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_trace(path, progress=False)
        if end_later_ns:
            end = trace.context.end_ns
            assert end is not None
            later = dataclasses.replace(trace.context, end_ns=end + end_later_ns)
            trace = Trace(trace.frame, later)
        hints = summarize(trace, 1_000_000_000).hints
    rows = hints.filter(hints["kind"] == "failures").to_dicts()
    for row in rows:
        row["evidence"] = json.loads(row["evidence"])
    return rows


def _by_cause(rows: list[dict[str, Any]], cause: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["evidence"]["cause"] == cause]


def _task_failures(path: Path, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in _events(path)
        if e["Event"] == "SparkListenerTaskEnd"
        and e["Task End Reason"]["Reason"] == reason
    ]


def test_executors_that_died_are_named_with_their_exit_code() -> None:
    # GIVEN a YARN application whose executors exited with code 56
    rows = _failure_hints(EXECUTORS_DIED)
    events = _events(EXECUTORS_DIED)
    removed = {
        e["Executor ID"]: e["Removed Reason"]
        for e in events
        if e["Event"] == "SparkListenerExecutorRemoved"
    }
    lost_tasks = _task_failures(EXECUTORS_DIED, "ExecutorLostFailure")
    # THEN one hint names every lost executor, the exit code and the tasks lost
    [hint] = _by_cause(rows, "executor_lost")
    evidence = hint["evidence"]
    assert sorted(evidence["executors_lost"]) == sorted(removed)
    assert evidence["failed_attempts"] == len(lost_tasks)
    assert f"Exit status: {evidence['exit_code']}." in next(iter(removed.values()))
    assert evidence["exit_code"] == 56 and "heartbeat" in hint["action"]
    assert hint["executor_id"] in removed
    assert evidence["reason"] in removed.values() or any(
        r.startswith(evidence["reason"]) for r in removed.values()
    )
    # AND the heartbeat interval the application set is named: 60 failed
    # heartbeats at its interval is how long the driver may pause
    interval = next(
        e["Spark Properties"]["spark.executor.heartbeatInterval"]
        for e in events
        if e["Event"] == "SparkListenerEnvironmentUpdate"
    )
    assert f"spark.executor.heartbeatInterval to {interval}" in hint["action"]
    # AND, every job having succeeded, its severity is that of the time lost
    assert "failed_job" not in evidence
    assert hint["predicted_saving_ns"] > 0 and hint["severity"] != "info"


def test_executors_lost_as_the_context_shut_down_are_the_shutdown() -> None:
    # GIVEN a log whose executors were lost in its last second, fetches
    # failed on them, and whose last job was cancelled by the shutdown
    rows = _failure_hints(FETCH_FAILED)
    removed = {
        e["Executor ID"]
        for e in _events(FETCH_FAILED)
        if e["Event"] == "SparkListenerExecutorRemoved"
    }
    # THEN one finding names them all: the job's, high
    [job] = rows
    assert job["evidence"]["cause"] == "job_failed" and job["severity"] == "high"
    assert set(job["evidence"]["executors_lost_at_shutdown"]) == removed
    assert "not a shuffle problem" in job["action"]


def test_fetch_failed_after_an_executor_loss_and_the_failed_job() -> None:
    # GIVEN a log where executors were lost, FetchFailed followed and the
    # last job failed (its application's end moved a minute later, so that
    # the losses are not the shutdown's)
    rows = _failure_hints(FETCH_FAILED, end_later_ns=60_000_000_000)
    fetch = _task_failures(FETCH_FAILED, "FetchFailed")
    source = {
        e["Task End Reason"]["Block Manager Address"]["Executor ID"] for e in fetch
    }
    shuffles = {e["Task End Reason"]["Shuffle ID"] for e in fetch}
    stages = {e["Stage ID"] for e in fetch}
    [job] = [
        e
        for e in _events(FETCH_FAILED)
        if e["Event"] == "SparkListenerJobEnd"
        and e["Job Result"]["Result"] == "JobFailed"
    ]
    # THEN the fetch-failed hint names the stage, the shuffle and the executor
    # whose output was lost, and recommends keeping shuffle files
    [hint] = _by_cause(rows, "fetch_failed")
    assert {hint["stage_id"]} == stages
    assert set(hint["evidence"]["shuffle_ids"]) == shuffles
    assert {hint["executor_id"]} == source
    assert hint["evidence"]["source_executors_lost"] == sorted(source)
    assert "spark.shuffle.service.enabled=true" in hint["action"]
    # AND the failed job is high, with its message
    [failed] = _by_cause(rows, "job_failed")
    assert failed["severity"] == "high"
    assert failed["evidence"]["job_id"] == job["Job ID"]
    assert failed["evidence"]["message"] == job["Job Result"]["Exception"]["Message"]
    # AND the lost executors are named
    [lost] = _by_cause(rows, "executor_lost")
    removed = {
        e["Executor ID"]
        for e in _events(FETCH_FAILED)
        if e["Event"] == "SparkListenerExecutorRemoved"
    }
    assert set(lost["evidence"]["executors_lost"]) == removed
    resubmitted = _task_failures(FETCH_FAILED, "Resubmitted")
    assert lost["evidence"]["map_outputs_lost"] == len(resubmitted)


def test_a_python_exception_that_aborted_the_job() -> None:
    # GIVEN a PySpark application whose UDF raises in every attempt
    rows = _failure_hints(PYTHON_ERROR)
    [job] = [
        e
        for e in _events(PYTHON_ERROR)
        if e["Event"] == "SparkListenerJobEnd"
        and e["Job Result"]["Result"] == "JobFailed"
    ]
    failed = _task_failures(PYTHON_ERROR, "ExceptionFailure")
    aborted_stage = max(e["Stage ID"] for e in failed)
    in_stage = [e for e in failed if e["Stage ID"] == aborted_stage]
    description = in_stage[0]["Task End Reason"]["Description"]
    raised = description.strip().splitlines()[-1]
    # THEN the aborted stage's hint is high and names the exception, the
    # user's line and the failed job
    [hint] = [
        h for h in _by_cause(rows, "task_error") if h["stage_id"] == aborted_stage
    ]
    assert hint["severity"] == "high"
    assert hint["evidence"]["message"] == raised
    assert hint["evidence"]["attempts"] == len(in_stage)
    assert hint["evidence"]["failed_job"] == job["Job ID"]
    assert hint["evidence"]["call_site"].startswith("/app/generate_events.py:")
    assert hint["evidence"]["call_site"].split(":")[0] in description
    assert hint["executor_id"] == in_stage[0]["Task Info"]["Executor ID"]
    assert raised in hint["action"]
    # AND, the log having no application end, the hint says so
    assert hint["evidence"]["application_end"] is False
    # AND no separate job hint repeats it
    assert _by_cause(rows, "job_failed") == []


def test_a_job_aborted_after_one_failure() -> None:
    rows = _failure_hints(ABORTED)
    [failed] = _task_failures(ABORTED, "ExceptionFailure")
    [hint] = rows
    assert hint["severity"] == "high" and hint["stage_id"] == failed["Stage ID"]
    assert hint["evidence"]["message"] == failed["Task End Reason"]["Description"]
    assert f"Task 3 in stage {failed['Stage ID']}.0 failed 1 times" in hint["action"]


def test_a_log_without_failures_gets_no_failures_hint() -> None:
    assert _failure_hints(NO_FAILURE) == []


def _hand_made() -> SparkModel:
    model = SparkModel()
    feed = model.feed
    feed({"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App ID": "a"})
    feed(
        {
            "Event": "SparkListenerJobStart",
            "Job ID": 0,
            "Submission Time": 1,
            "Stage IDs": [0],
        }
    )
    for tid, attempt, reason in (
        (
            1,
            0,
            {
                "Reason": "ExceptionFailure",
                "Class Name": "java.lang.OutOfMemoryError",
                "Description": "Java heap space\n\tat x.y(Z.java:1)",
            },
        ),
        (2, 1, {"Reason": "Success"}),
    ):
        info = {
            "Task ID": tid,
            "Index": 0,
            "Attempt": attempt,
            "Executor ID": "3",
            "Host": "h",
            "Launch Time": 10 * tid,
            "Finish Time": 10 * tid + 5,
        }
        feed({"Event": "SparkListenerTaskStart", "Stage ID": 0, "Task Info": info})
        feed(
            {
                "Event": "SparkListenerTaskEnd",
                "Stage ID": 0,
                "Stage Attempt ID": 0,
                "Task End Reason": reason,
                "Task Info": info,
            }
        )
    feed(
        {
            "Event": "SparkListenerJobEnd",
            "Job ID": 0,
            "Completion Time": 40,
            "Job Result": {
                "Result": "JobFailed",
                "Exception": {
                    "Message": "Job aborted due to stage failure: "
                    "Task 0 in stage 0.0 failed 4 times"
                },
            },
        }
    )
    feed({"Event": "SparkListenerApplicationEnd", "Timestamp": 50})
    return model


def test_hand_made_events_through_the_model() -> None:
    # GIVEN an OutOfMemoryError, a retry that succeeded and a failed job
    context = _hand_made().context()
    # THEN the context keeps the failed attempt and the job, with their causes
    oom, job = context.failures
    assert (oom.kind, oom.stage_id, oom.task_id, oom.executor_id) == (
        "ExceptionFailure",
        0,
        1,
        "3",
    )
    assert oom.exception == "java.lang.OutOfMemoryError"
    assert oom.message == "Java heap space" and oom.duration_ns == 5_000_000
    assert (job.kind, job.job_id, job.stage_id) == ("JobFailed", 0, 0)
    assert context.failure_counts == {"ExceptionFailure": 1, "JobFailed": 1}


def test_an_out_of_memory_error_asks_for_memory() -> None:
    model = _hand_made()
    trace = model.build(final=True)
    hints = summarize(Trace(trace, model.context()), 10_000_000).hints
    [hint] = hints.filter(hints["kind"] == "failures").to_dicts()
    evidence = json.loads(hint["evidence"])
    assert evidence["cause"] == "out_of_memory" and hint["severity"] == "high"
    assert hint["stage_id"] == 0 and hint["executor_id"] == "3"
    assert "spark.executor.memory" in hint["action"]
    assert "Java heap space" in hint["action"]


def test_failures_round_trip_through_a_trace_file(tmp_path: Path) -> None:
    model = _hand_made()
    frame = model.build(final=True)
    context = model.context()
    path = tmp_path / "t.arrow"
    write_trace(frame, path, context=context)
    assert read_trace(path).height == frame.height
    back = read_context(path)
    assert back.failures == context.failures
    assert back.failure_counts == context.failure_counts
    # an old context (no failures) still loads
    assert AppContext.from_json('{"app_id": "x"}').failures == ()


def test_messages_are_short_and_the_count_exact() -> None:
    model = SparkModel()
    for tid in range(250):
        info = {
            "Task ID": tid,
            "Index": tid,
            "Attempt": 0,
            "Executor ID": "1",
            "Launch Time": tid,
            "Finish Time": tid + 1,
        }
        model.feed(
            {
                "Event": "SparkListenerTaskEnd",
                "Stage ID": 0,
                "Task End Reason": {
                    "Reason": "ExceptionFailure",
                    "Description": "x" * 5000,
                },
                "Task Info": info,
            }
        )
    context = model.context()
    assert context.failure_counts == {"ExceptionFailure": 250}
    assert len(context.failures) < 250
    assert all(len(f.message or "") <= 300 for f in context.failures)
    assert isinstance(context.failures[0], Failure)
    assert short_message("a\nb") == "a"


def test_a_job_cancelled_by_a_stopped_query_is_not_a_failure() -> None:
    # GIVEN a job that ended when its streaming query was stopped (no task
    # failed: the query's stop cancelled it)
    model = SparkModel()
    feed = model.feed
    feed({"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App ID": "a"})
    feed({"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 1})
    info = {
        "Task ID": 1,
        "Index": 0,
        "Attempt": 0,
        "Executor ID": "1",
        "Host": "h",
        "Launch Time": 2,
        "Finish Time": 30,
    }
    feed({"Event": "SparkListenerTaskStart", "Stage ID": 0, "Task Info": info})
    feed(
        {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": 0,
            "Stage Attempt ID": 0,
            "Task End Reason": {"Reason": "Success"},
            "Task Info": info,
        }
    )
    message = "[SPARK_JOB_CANCELLED] Job 0 cancelled Query q [id = 1] was stopped"
    feed(
        {
            "Event": "SparkListenerJobEnd",
            "Job ID": 0,
            "Completion Time": 40,
            "Job Result": {"Result": "JobFailed", "Exception": {"Message": message}},
        }
    )
    feed({"Event": "SparkListenerApplicationEnd", "Timestamp": 50})
    # WHEN its hints are computed
    trace = Trace(model.build(final=True), model.context())
    hints = summarize(trace, 10_000_000).hints
    # THEN the cancelled job is named, as info: a stop, not a failure
    [hint] = hints.filter(hints["kind"] == "failures").to_dicts()
    assert hint["severity"] == "info"
    assert "cancelled" in hint["action"] and "not failed by a task" in hint["action"]


def test_failures_that_stay_on_one_executor_name_it_not_the_program() -> None:
    # GIVEN a log whose failed attempts all ran on one executor and passed
    # on another ("Bad executor")
    log = PUBLIC / "spark/spark-events/app-20180109111548-0000"
    ends = [e for e in _events(log) if e["Event"] == "SparkListenerTaskEnd"]
    failed = {
        e["Task Info"]["Executor ID"]
        for e in ends
        if e["Task End Reason"]["Reason"] != "Success"
    }
    passed = {
        e["Task Info"]["Executor ID"]
        for e in ends
        if e["Task End Reason"]["Reason"] == "Success"
        and e["Task Info"]["Index"]
        in {
            f["Task Info"]["Index"]
            for f in ends
            if f["Task End Reason"]["Reason"] != "Success"
        }
    }
    # THEN the hint names the executors, where the retries passed, and
    # blames the executor or host, not the program
    [hint] = _by_cause(_failure_hints(log), "task_error")
    assert set(hint["evidence"]["executors"]) == failed
    assert set(hint["evidence"]["retries_passed_on"]) == passed - failed
    assert "not the program" in hint["action"]


@pytest.mark.parametrize(
    ("master", "reason", "said"),
    [
        ("yarn", "Container killed", "yarn logs -applicationId"),
        ("k8s://https://k:443", None, "kubectl describe pod"),
        ("spark://m:7077", "worker lost", "the standalone Worker of each host went"),
        ("spark://m:7077", "Command exited with code 1", "work/<app id>/<executor id>"),
        ("local[4]", "worker lost", "the lost executors' stderr on their hosts"),
    ],
)
def test_where_to_read_why_executors_died_fits_the_cluster_manager(
    master: str, reason: str | None, said: str
) -> None:
    from sparktrail.pag.context import AppContext
    from sparktrail.summaries.hints.failures import _lost_fix

    text = _lost_fix(AppContext(master=master), None, reason)
    assert said in text
    assert "YARN/Kubernetes" not in text
