"""``sparktrail.watch``: a block of code on a running SparkSession, traced
live and profiled alone (issue 44, item 2), on the shared local[2] session.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import sparktrail
from sparktrail.errors import InputError
from sparktrail.notebook import NO_JOB, profile_html

pytestmark = pytest.mark.integration


def _slow_partition(spark: Any) -> None:
    spark.sparkContext.parallelize(range(8), 8).map(
        lambda x: time.sleep(2.0) if x == 3 else x
    ).count()


def test_a_block_is_profiled_alone(spark: Any, capsys: pytest.CaptureFixture) -> None:
    # GIVEN a job before the block, then a block whose partition 3 sleeps 2 s
    spark.range(1000).count()
    time.sleep(1.0)
    before = time.time_ns()
    with sparktrail.watch(spark) as block:
        _slow_partition(spark)
    after = time.time_ns()
    # THEN its profile is the block's: it starts within the block, and its
    # one job is the slow partition's
    profile = block.profile
    assert profile is not None
    context = profile.summaries.context
    assert before <= context.start_ns <= context.end_ns <= after  # type: ignore[operator]
    assert [j.job_id for j in context.jobs] and len(context.jobs) == 1
    # AND the verdict, printed when the block ended, names the slow task,
    # not the session's start-up nor a log cut short
    printed = capsys.readouterr().out
    assert block.verdict in printed
    assert "partition 3" in block.verdict
    assert "Start-up" not in block.verdict
    # AND a notebook shows it as HTML: the verdict and the hints
    page = profile_html(profile)
    assert 'id="verdict"' in page and "partition 3" in page
    assert "not whole" not in page


def test_a_block_without_a_job_says_so(spark: Any) -> None:
    with sparktrail.watch(spark, show=False) as block:
        sum(range(10))
    assert block.profile is None
    assert block.verdict == NO_JOB


def test_watch_needs_a_running_session() -> None:
    with pytest.raises(InputError, match="running SparkSession, not str"):
        sparktrail.watch("spark")
