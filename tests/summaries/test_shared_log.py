"""Summaries of the real shared Spark 2.3 event log stay consistent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from sparktrail import summarize
from sparktrail.pag.trace import Trace, load_trace

LOG = Path("/work/shared/eventlogs/local-1532512550423")
SECOND = 1_000_000_000

pytestmark = pytest.mark.skipif(not LOG.exists(), reason="shared log not present")


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    out = tmp_path_factory.mktemp("shared")
    subprocess.run(
        [sys.executable, "-m", "sparktrail", "import", str(LOG), "-o", str(out)],
        check=True,
        capture_output=True,
    )
    return load_trace(out)


@pytest.mark.parametrize("window_ns", [SECOND, 20 * SECOND])
def test_shares_sum_to_one(trace, window_ns):
    # GIVEN the imported log  WHEN summarized
    s = summarize(trace, window_ns)
    # THEN activity shares sum to 1 per window with paths and over the run,
    # as do straggler, executor, operator shares and fair shares
    per = s.activity_by_window.group_by("window_start_ns").agg(pl.col("cp_share").sum())
    assert per["cp_share"].to_list() == pytest.approx([1.0] * len(per))
    assert len(per) == s.windows["has_paths"].sum()
    for frame in (s.activity, s.straggler, s.executor, s.operator):
        assert frame["cp_share"].sum() == pytest.approx(1.0)
    assert s.straggler["fair_share"].sum() == pytest.approx(1.0)


def test_the_trace_file_carries_the_applications_context(trace):
    # GIVEN the log imported by the CLI and read back from its trace file
    app = trace.context
    # THEN what the application ran with came along
    assert (app.app_id, app.master, app.spark_version) == (
        "local-1532512550423",
        "local[*]",
        "2.3.0",
    )
    assert [(e.executor_id, e.cores) for e in app.executors] == [("driver", 4)]
    assert [j.job_id for j in app.jobs] == [0, 1]
    assert app.setting("spark.app.name") == "Spark shell"


def test_operators_name_their_stages_and_start_up_gets_no_advice(trace):
    # GIVEN the imported log (two collect jobs after 12 s of start-up)
    s = summarize(trace, SECOND)
    # THEN the two jobs' stages (RDD jobs: no SQL plan) are one operator,
    # named by their call site, with both stages as its drill-down
    stages = s.operator.filter(pl.col("stage_id").is_not_null())
    assert stages["name"].to_list() == ["collect at <console>:25"]
    assert stages["call_site"].to_list() == ["<console>:25"]
    assert stages["stages"].to_list() == [2]
    assert stages["stage_ids"].to_list() == [[0, 1]]
    assert stages["tasks"].to_list() == [8]
    # AND start-up holds most of the run, as its own activity
    top = s.activity.row(0, named=True)
    assert top["activity"] == "startup" and top["cp_share"] > 0.7
    # AND no hint: start-up is no driver code to advise on, the 1.2 s
    # between the jobs is under the threshold, and a local master has no
    # executors to allocate
    assert s.hints.is_empty(), s.hints


@pytest.mark.parametrize("window_ns", [SECOND, 20 * SECOND])
def test_no_memory_hints_on_a_log_without_spills_or_much_gc(trace, window_ns):
    # GIVEN the imported log: no task spilled, and GC, though 44 ms of the
    # tasks' 91 ms run time, is a sliver of a 16 s run that the driver holds
    assert trace.frame["disk_bytes_spilled"].fill_null(0).sum() == 0
    assert trace.frame["memory_bytes_spilled"].fill_null(0).sum() == 0
    # WHEN summarized
    s = summarize(trace, window_ns)
    # THEN GC is under 1% of the critical path and neither gc_bound nor
    # spill fires
    gc = s.activity.filter(pl.col("activity") == "gc")["cp_share"].sum()
    assert gc < 0.01
    assert not {"gc_bound", "spill"} & set(s.hints["kind"].to_list())
