"""The live page's "whole run" says what the run's critical path was made
of, not "No Spark job ran" (issue 46: it said so after 214 jobs)."""

from __future__ import annotations

import warnings
from pathlib import Path

from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.page_content import headline
from sparktrail.dashboard.verdict import NO_JOB
from sparktrail.dashboard.whole_run import WHOLE_RUN
from sparktrail.pag.trace import write_trace
from sparktrail.tracer import import_trace
from tests.paths import SHARED_LOG


def test_the_live_whole_run_names_its_jobs_and_critical_path(tmp_path: Path) -> None:
    # GIVEN the shared log's trace followed live to its end (2 jobs)
    trace = import_trace(SHARED_LOG, progress=False)
    write_trace(trace, tmp_path / "trace" / "part-000.arrow")
    loader = live_loader(tmp_path / "trace", 10**9, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader.start()
        snapshot = loader.step()
    assert snapshot.live and len(snapshot.windows) > 1
    # WHEN the page shows the whole run
    facts, said = headline(snapshot, WHOLE_RUN)
    # THEN the header counts the jobs and the verdict says what the critical
    # path was made of, never that no job ran
    assert dict(facts)["work"] == "2 jobs"
    assert said != NO_JOB and "ran no task" not in said
    assert "of the run; pick a window for its hints." in said
