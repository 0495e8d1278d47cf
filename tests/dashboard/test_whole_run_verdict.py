"""The live page's "whole run" answers what ``sparktrail profile`` answers
(issue 46): before its first profile it says what the run's critical path
was made of, never "No Spark job ran" (it said so after 214 jobs); once
the run so far is profiled in the background, the page leads with that
profile's verdict, hints and tables."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import sparktrail
from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.live_view import LiveLoader, ViewState
from sparktrail.dashboard.page_content import TABLES, headline, table_data
from sparktrail.dashboard.verdict import NO_JOB, verdict
from sparktrail.dashboard.whole_run import WHOLE_RUN
from sparktrail.pag.trace import write_trace
from sparktrail.tracer import import_trace
from tests.paths import EVENTLOGS, SHARED_LOG

#: A YARN run whose executors were lost: a high ``failures`` hint.
FAILED_YARN_LOG = (
    EVENTLOGS / "public" / "spark" / "spark-events" / "application_1538416563558_0014"
)


def _trace_dir(log: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("live") / "trace"
    write_trace(import_trace(log, progress=False), out / "part-000.arrow")
    return out


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared log's trace (2 jobs, to its ApplicationEnd) in a directory."""
    return _trace_dir(SHARED_LOG, tmp_path_factory)


@pytest.fixture(scope="module")
def failed_trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The YARN log's trace, whose run has a shown hint."""
    return _trace_dir(FAILED_YARN_LOG, tmp_path_factory)


def _followed(loader: LiveLoader) -> ViewState:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader.start()
        return loader.step()


def test_before_its_profile_the_whole_run_names_its_jobs_and_critical_path(
    trace_dir: Path, tmp_path: Path
) -> None:
    # GIVEN the trace followed live to its end, with no whole-run profile
    loader = live_loader(trace_dir, 10**9, 0, run_so_far=None)
    snapshot = _followed(loader)
    assert snapshot.live and len(snapshot.windows) > 1 and snapshot.run is None
    # WHEN the page shows the whole run
    facts, said, _ = headline(snapshot, WHOLE_RUN)
    # THEN the header counts the jobs and the verdict says what the critical
    # path was made of, never that no job ran
    assert dict(facts)["work"] == "2 jobs"
    assert said != NO_JOB and "ran no task" not in said
    assert "of the run; pick a window for its hints." in said


@pytest.mark.parametrize("which", ["trace_dir", "failed_trace_dir"])
def test_the_live_whole_run_is_what_profile_says(
    which: str, request: pytest.FixtureRequest
) -> None:
    # GIVEN a trace followed live, its run so far profiled in the background
    trace_dir: Path = request.getfixturevalue(which)
    loader = live_loader(trace_dir, 10**9, 0)
    first = _followed(loader)
    run_so_far = loader._run_so_far
    assert run_so_far is not None
    run_so_far.wait(120)
    snapshot = _followed(loader)
    assert snapshot.run is not None
    assert snapshot.windows_version > first.windows_version  # the page redraws
    # WHEN the page shows the whole run
    facts, said, window_line = headline(snapshot, WHOLE_RUN)
    # THEN its verdict, hints and tables are those `sparktrail profile` gives
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        profiled = sparktrail.profile(trace_dir).summaries
    assert said == verdict(profiled)
    if which == "failed_trace_dir":  # led by the hint, as the terminal is
        assert "the first hint's change saves" in said
    assert (
        snapshot.run.hints.select("kind", "stage_id").rows()
        == profiled.hints.select("kind", "stage_id").rows()
    )
    assert dict(facts)["work"].endswith(f"{profiled.operator['tasks'].sum()} tasks")
    for records, note in table_data(snapshot, WHOLE_RUN):
        assert records and not note
    assert len(table_data(snapshot, WHOLE_RUN)) == len(TABLES)
    # AND the smaller line says the application ended (the log's end was read)
    assert window_line.startswith("The application ended at ")
    assert "so far" not in dict(facts)["wall time"]
    # AND a picked window keeps the run's verdict above its own line
    window = snapshot.windows[-1].key
    _, said_there, line_there = headline(snapshot, window)
    assert said_there == said
    assert line_there.startswith("The application ended at ")
    assert ". Latest window (" in line_there
