"""``capacity_bound`` (summaries/hints/saturation.py): every slot busy while
the jobs ran, more executors replayed, the platform's remedy; a request the
cluster did not grant is named as such (issue 42).

Two YARN executors of 2 cores run 16 tasks of 1 s (4 waves); times in ms.
"""

from __future__ import annotations

import pytest

from sparktrail.pag.context import AppContext, ExecutorLife, JobSpan
from tests.summaries.builders import Trace
from tests.summaries.test_capacity_hints import S, hints_of, only


def busy_run(instances: str) -> tuple[dict, dict]:
    """The capacity_bound hint of the run, asking for ``instances``."""
    t = Trace()
    for i in range(16):
        executor, core = 1 + i % 2, (i // 2) % 2
        t.task(f"exec-{executor}/{core}", 1000 * (i // 4), [("processing", 1000)])
    app = AppContext(
        master="yarn",
        spark_version="3.5.0",
        start_ns=0,
        end_ns=4 * S,
        properties={"spark.executor.instances": instances},
        executors=tuple(
            ExecutorLife(str(e), 2, host=f"h{e}", added_ns=0) for e in (1, 2)
        ),
        jobs=(JobSpan(0, start_ns=0, end_ns=4 * S),),
    )
    return only(hints_of(t.frame(), app), "capacity_bound")


def test_busy_slots_ask_for_more_executors():
    # GIVEN the application asked for the 2 executors it got
    row, ev = busy_run("2")
    # THEN twice the executors, replayed, through the request
    assert ev["busy_share"] == pytest.approx(1.0)
    assert ev["replayed_executors"] == 4
    assert "spark.executor.instances=4 (now 2)" in row["action"]


def test_executors_the_cluster_did_not_grant_are_not_asked_for_again():
    # GIVEN it asked for 4 executors and ran on 2
    row, ev = busy_run("4")
    # THEN the request is no lever: the cluster's capacity is
    assert ev["requested_executors"] == 4
    assert "only 2 of the 4 executors it asked for" in row["action"]
    assert "the YARN queue's free capacity" in row["action"]
    assert "spark.executor.instances=4" not in row["action"]
