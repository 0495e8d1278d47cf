"""Summaries of the real shared Spark 2.3 event log stay consistent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from sparktrail import read_trace, summarize

LOG = Path("/work/shared/eventlogs/local-1532512550423")
SECOND = 1_000_000_000

pytestmark = pytest.mark.skipif(not LOG.exists(), reason="shared log not present")


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    out = tmp_path_factory.mktemp("shared")
    subprocess.run(
        [sys.executable, "-m", "sparktrail", "import", str(LOG), "-o", str(out)],
        check=True,
        capture_output=True,
    )
    return read_trace(out)


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


def test_operators_name_their_stages_and_hints_explain_the_driver(trace):
    # GIVEN the imported log (two collect jobs after 12 s of driver code)
    s = summarize(trace, SECOND)
    # THEN stage rows carry Spark's stage names and call sites
    stages = s.operator.filter(pl.col("stage_id").is_not_null())
    assert stages["name"].to_list() == ["collect at <console>:25"] * 2
    assert stages["call_site"].to_list() == ["<console>:25"] * 2
    # AND the driver dominates: the hint points before job 0
    kinds = s.hints["kind"].to_list()
    assert kinds[0] == "driver_bound"
    evidence = json.loads(s.hints["evidence"][0])
    assert evidence["driver_share"] > 0.9
    assert evidence["intervals"][0]["before_job"] == 0


@pytest.mark.parametrize("window_ns", [SECOND, 20 * SECOND])
def test_no_memory_hints_on_a_log_without_spills_or_much_gc(trace, window_ns):
    # GIVEN the imported log: no task spilled, and GC, though 44 ms of the
    # tasks' 91 ms run time, is a sliver of a 16 s run that the driver holds
    assert trace["disk_bytes_spilled"].fill_null(0).sum() == 0
    assert trace["memory_bytes_spilled"].fill_null(0).sum() == 0
    # WHEN summarized
    s = summarize(trace, window_ns)
    # THEN GC is under 1% of the critical path and neither gc_bound nor
    # spill fires
    gc = s.activity.filter(pl.col("activity") == "gc")["cp_share"].sum()
    assert gc < 0.01
    assert not {"gc_bound", "spill"} & set(s.hints["kind"].to_list())
