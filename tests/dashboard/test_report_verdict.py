"""The report's first lines: the application header and the verdict."""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from sparktrail.dashboard.report import write_report
from sparktrail.dashboard.verdict import NO_JOB, header_line, verdict
from sparktrail.engines import summarize
from sparktrail.engines.profiler import Profile, window_cp
from sparktrail.pag.context import AppContext, ExecutorLife, JobSpan
from sparktrail.pag.trace import Trace, load_trace

S = 1_000_000_000


def straggler_trace(context: AppContext) -> Trace:
    """One stage of four tasks on executor 1; task 0 runs 10 s, the others 1 s."""
    workers = [f"exec-1/{i}" for i in range(4)]
    frame = pl.DataFrame(
        {
            "src_worker": workers,
            "dst_worker": workers,
            "start_ns": [0] * 4,
            "end_ns": [s * S for s in (10, 1, 1, 1)],
            "activity": ["processing"] * 4,
            "task_id": [0, 1, 2, 3],
            "stage_id": [0] * 4,
            "partition": [0, 1, 2, 3],
            "records": [100] * 4,
        }
    )
    return Trace(load_trace(frame).frame, context)


CONTEXT = AppContext(
    app_id="app-42",
    app_name="etl",
    spark_version="3.5.1",
    master="yarn",
    start_ns=0,
    end_ns=10 * S,
    executors=(ExecutorLife("1", 4),),
    jobs=(JobSpan(0, 0, 10 * S),),
)


def report(trace: Trace, out: Path) -> str:
    summaries = summarize(trace, S)
    cp = window_cp(trace.frame, 0, S)
    write_report(Profile(summaries, cp, "app.arrow"), out)
    return (out / "report.html").read_text(encoding="utf-8")


def test_report_opens_with_the_header_and_the_verdict(tmp_path: Path) -> None:
    # GIVEN a run with a straggler task, profiled into a report
    trace = straggler_trace(CONTEXT)
    page = report(trace, tmp_path)
    summaries = summarize(trace, S)
    # THEN the header and the verdict come before the overview and the
    # first chart, in the words of header_facts and verdict
    header, said = page.index('id="app-header"'), page.index('id="verdict"')
    first_chart = page.index("Plotly.newPlot")
    assert header < said < page.index('id="overview"') < first_chart
    assert html.escape(verdict(summaries)) in page
    assert "saves 6 s (60% of the run)" in verdict(summaries)
    for value in ("etl (app-42)", "3.5.1", "yarn", "1 executor × 4 cores"):
        assert html.escape(value) in page
    assert "1 job, 1 stage, 4 tasks" in header_line(summaries)


def test_report_of_a_run_without_jobs_says_so(tmp_path: Path) -> None:
    # GIVEN an application that ran no job (its trace: driver time only)
    frame = pl.DataFrame(
        {
            "src_worker": ["driver"],
            "dst_worker": ["driver"],
            "start_ns": [0],
            "end_ns": [2 * S],
            "activity": ["driver"],
        }
    )
    context = AppContext(app_name="idle", master="local[2]", start_ns=0, end_ns=2 * S)
    page = report(Trace(load_trace(frame).frame, context), tmp_path)
    # THEN the verdict says no Spark job ran, before any chart
    assert page.index(NO_JOB) < page.index("Plotly.newPlot")
    assert "no Spark job" in page
