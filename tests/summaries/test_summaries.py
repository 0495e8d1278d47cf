"""Each summary on hand-built traces with known answers."""

from __future__ import annotations

import json

import polars as pl
import pytest

from sparktrail.engines import summarize
from sparktrail.pag import critical_participation
from sparktrail.pag.trace import load_trace
from sparktrail.summaries import (
    SHUFFLE_NOTE,
    HintOptions,
    activity_summary,
    communication_summary,
    enrich,
    executor_summary,
    operator_summary,
    shuffle_sources,
    straggler_summary,
    task_facts,
)
from sparktrail.summaries.finish import summaries_from_cp
from sparktrail.summaries.hints import inputs as hint_inputs
from sparktrail.whatif import Replay
from tests.summaries.builders import MS, Trace, balanced, shuffle_join
from tests.summaries.compare import assert_same_summaries


def table(trace: pl.DataFrame, window_ms: float) -> pl.DataFrame:
    return enrich(critical_participation(trace, int(window_ms * MS)), trace)


def shares(frame: pl.DataFrame, key: str) -> dict[object, float]:
    return {k: pytest.approx(v) for k, v in frame.select(key, "cp_share").rows()}


def test_activity_whole_run_and_per_window():
    # GIVEN one slot: processing 0-6 ms, gc 6-8 ms; windows of 4 ms
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 6), ("gc", 2)])
    cp = table(t.frame(), 4)
    # WHEN the activity summary is taken
    run = activity_summary(cp)
    per = activity_summary(cp, by_window=True)
    # THEN window 1 is all processing, window 2 half/half; the run averages
    assert shares(run, "activity") == {"processing": 0.75, "gc": 0.25}
    assert run["cp_ns"].to_list() == pytest.approx([6 * MS, 2 * MS])
    assert per.group_by("window_start_ns").agg(pl.col("cp_share").sum())[
        "cp_share"
    ].to_list() == pytest.approx([1.0, 1.0])
    second = per.filter(pl.col("window_start_ns") == 4 * MS)
    assert shares(second, "activity") == {"processing": 0.5, "gc": 0.5}


def test_straggler_fair_share_counts_active_workers():
    # GIVEN exec-1/0 busy all window, exec-1/1 busy 1 ms, exec-2/0 only waiting
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 4)])
    t.task("exec-1/1", 0, [("processing", 1)])
    t.local("exec-2/0", 0, 4, "waiting")
    cp = table(t.frame(), 4)
    # WHEN the straggler summary is taken
    s = straggler_summary(cp)
    # THEN the busy slot has all CP against a fair share of 1/2 (two active)
    rows = {r["worker"]: r for r in s.iter_rows(named=True)}
    assert rows["exec-1/0"]["cp_share"] == pytest.approx(1.0)
    assert rows["exec-1/0"]["fair_share"] == pytest.approx(0.5)
    assert rows["exec-1/0"]["ratio"] == pytest.approx(2.0)
    assert rows["exec-2/0"]["fair_share"] == 0.0
    assert rows["exec-2/0"]["ratio"] is None
    assert s["fair_share"].sum() == pytest.approx(1.0)
    assert s["cp_share"].sum() == pytest.approx(1.0)


def test_executor_summary_sums_slots_and_names_the_driver():
    # GIVEN two executors and a driver timeline, all busy all window
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 4)])
    t.task("exec-1/1", 0, [("processing", 4)])
    t.task("exec-2/0", 0, [("processing", 4)])
    t.local("driver", 0, 4, "driver")
    cp = table(t.frame(), 4)
    # WHEN the executor summary is taken
    e = executor_summary(cp)
    # THEN executor 1 has two slots and half the CP, its fair share too
    rows = {r["executor_id"]: r for r in e.iter_rows(named=True)}
    assert rows["1"]["slots"] == 2
    assert rows["1"]["cp_share"] == pytest.approx(0.5)
    assert rows["1"]["fair_share"] == pytest.approx(0.5)
    assert rows[None]["role"] == "driver"
    assert rows[None]["cp_share"] == pytest.approx(0.25)
    assert e["cp_share"].sum() == pytest.approx(1.0)


def test_operator_summary_counts_records_once_per_task():
    # GIVEN a task whose processing row spans two windows, and a driver row
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 8)], records=10, name="count at A.scala:3")
    trace = t.frame()
    cp = table(trace, 4)
    # WHEN the operator summary is taken
    op = operator_summary(cp, trace)
    # THEN the stage has all CP, its name and call site, and 10 records
    row = op.row(0, named=True)
    assert (row["stage_id"], row["name"], row["call_site"]) == (
        0,
        "count at A.scala:3",
        "A.scala:3",
    )
    assert row["cp_share"] == pytest.approx(1.0)
    assert (row["tasks"], row["records"]) == (1, 10)


def test_operator_summary_keeps_work_outside_stages():
    # GIVEN a stage and driver code, each half of the window
    t = Trace()
    t.local("driver", 0, 2, "driver")
    t.message("driver", "exec-1/0", 2)
    t.task("exec-1/0", 2, [("processing", 2)])
    cp = table(t.frame(), 4)
    # WHEN the operator summary is taken per window
    op = operator_summary(cp, t.frame(), by_window=True)
    # THEN shares are 1/2 each, the driver's under a null operator
    assert shares(op, "stage_id") == {None: 0.5, 0: 0.5}


def test_communication_splits_shuffle_reads_by_bytes_written():
    # GIVEN two writer stages (300 B on exec 1, 100 B on exec 2) and a reader
    trace = shuffle_join()
    cp = table(trace, 10)
    # WHEN the communication summary is taken
    c = communication_summary(cp, trace)
    # THEN the reader's 0.3 of shuffle_read CP is split 3:1 over the sources
    shuffle = c.filter(pl.col("kind") == "shuffle")
    assert shares(shuffle, "src") == {"executor 1": 0.225, "executor 2": 0.075}
    assert set(shuffle["dst"]) == {"executor 3"}
    assert set(shuffle["note"]) == {SHUFFLE_NOTE}
    control = c.filter(pl.col("kind") == "control")
    assert control["cp_share"].sum() == 0.0
    assert control["edges"].sum() == 2


def test_shuffle_sources_prefer_the_same_job_and_admit_unknown_writers():
    # GIVEN writers in job 0 (exec 1) and job 1 (exec 2); readers in job 1, 2
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 1)], stage=0, job=0, written=50)
    t.task("exec-2/0", 1, [("processing", 1)], stage=1, job=1, written=50)
    t.task("exec-3/0", 2, [("shuffle_read", 1)], stage=2, job=1)
    t.task("exec-3/0", 3, [("shuffle_read", 1)], stage=3, job=2)
    trace = t.frame()
    # WHEN sources are computed
    s = shuffle_sources(trace, [2, 3, 9])
    # THEN stage 2 reads job 1's writer, stage 3 (no writer in job 2) every
    # earlier writer, and unknown stage 9 a null source
    assert s.rows() == [
        (2, "2", 1.0),
        (3, "1", 0.5),
        (3, "2", 0.5),
        (9, None, 1.0),
    ]


def test_summarize_returns_every_frame():
    # GIVEN a balanced trace
    trace = balanced()
    # WHEN everything is summarized over two windows
    s = summarize(trace, 50 * MS)
    # THEN windows, origin and frames are there and consistent
    assert (s.window_ns, s.origin_ns) == (50 * MS, 0)
    assert s.windows["has_paths"].to_list() == [True, True]
    assert s.windows["active_workers"].to_list() == [4, 4]
    assert s.activity_by_window["cp_share"].to_list() == pytest.approx([1.0, 1.0])
    assert s.straggler["ratio"].to_list() == pytest.approx([1.0] * 4)
    assert s.executor["cp_share"].to_list() == pytest.approx([0.5, 0.5])


def test_summarize_reads_a_trace_path(tmp_path):
    # GIVEN a trace file
    from sparktrail.pag import write_trace

    path = write_trace(balanced(), tmp_path / "t.arrow")
    # WHEN summarized from its path
    s = summarize(path, 100 * MS)
    # THEN it is read and summarized
    assert s.activity["activity"].to_list() == ["processing"]


def test_pathless_trace_gives_zero_shares_not_a_crash():
    # GIVEN a trace where no path spans the window (everything waits)
    t = Trace()
    t.local("exec-1/0", 0, 4, "waiting")
    # WHEN summarized
    with pytest.warns(Warning):
        s = summarize(t.frame(), 4 * MS)
    # THEN shares are 0, no window has paths; the only hint is the idle slot
    assert s.windows["has_paths"].to_list() == [False]
    assert s.activity["cp_share"].sum() == 0.0
    assert s.activity_by_window.is_empty()
    assert s.hints["kind"].to_list() == ["idle_capacity"]


def test_facts_and_replay_built_by_the_caller_give_the_same_summaries(monkeypatch):
    # GIVEN a stage with a straggler task, whose hint the replay prices
    workers = [f"exec-1/{i}" for i in range(4)]
    frame = pl.DataFrame({"src_worker": workers, "dst_worker": workers,
        "start_ns": [0] * 4, "end_ns": [100, 10, 10, 10],
        "activity": ["processing"] * 4, "task_id": [0, 1, 2, 3],
        "stage_id": [0] * 4})  # fmt: skip
    trace = load_trace(frame)
    cp = critical_participation(trace, 100)
    ns_run = HintOptions(straggler_min_excess_ms=0.0)  # it lasts 100 ns
    alone = summaries_from_cp(cp, trace, 100, options=ns_run)
    # WHEN the caller hands in the task facts and the replay model it built
    facts = task_facts(trace)
    replay = Replay.of(trace, facts)
    monkeypatch.setattr(hint_inputs.Replay, "of", None)  # must not be built again
    given = summaries_from_cp(
        cp, trace, 100, options=ns_run, facts=facts, replay=replay
    )
    # THEN every frame is the same, and the hint's saving is the replay's
    assert_same_summaries(given, alone)
    evidence = json.loads(given.hints.row(0, named=True)["evidence"])
    assert given.hints["kind"][0] == "straggler_task"
    assert evidence["replayed_saving_ns"] == given.hints["predicted_saving_ns"][0]
