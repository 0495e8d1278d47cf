"""``compare`` on a real pair of runs: one group-by, 200 then 8 shuffle partitions.

A child process (its own JVM: the settings must be each application's own,
from its ``EnvironmentUpdate``, which the shared session of
tests/conftest.py cannot give) runs a warm-up application without an
event log, then the same group-by job three times in an application with
``spark.sql.shuffle.partitions=200`` and in one with ``8`` (AQE off, so
the 200 partitions stay 200), on ``local[2]``, each writing its event log
into its own directory. The comparison must list the setting, match the
aggregation across the two applications, see the critical path move from
scheduling toward processing, and check BEFORE's partition hint as applied.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from sparktrail.engines.comparison import Comparison, compare
from sparktrail.sources import open_profile

pytestmark = pytest.mark.integration

WINDOW_NS = 100_000_000
PARTITIONS = (200, 8)
CHILD = """
import os, sys
from pyspark.sql import SparkSession, functions as F

out = sys.argv[1]


def job(spark):
    spark.range(0, 2_000_000, numPartitions=4).selectExpr(
        "id % 1000 as k", "id as v"
    ).groupBy("k").agg(F.sum("v")).collect()


def session(parts, log_dir=None):
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("sparktrail-compare")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(parts))
    )
    if log_dir:
        builder = (
            builder.config("spark.eventLog.enabled", "true")
            .config("spark.eventLog.dir", "file://" + os.path.abspath(log_dir))
            .config("spark.eventLog.rolling.enabled", "false")
            .config("spark.eventLog.compress", "false")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


warm = session(8)  # the JVM's first application pays for class loading
job(warm)
warm.stop()
for parts in (200, 8):
    log_dir = os.path.join(out, f"partitions-{parts}")
    os.makedirs(log_dir)
    spark = session(parts, log_dir)
    for _ in range(3):
        job(spark)
    spark.stop()
"""


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    """The two applications' event logs, profiled and compared."""
    pytest.importorskip("pyspark")
    out = tmp_path_factory.mktemp("compare-spark")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    # A script, not ``python -c``: a ``<string>`` call site reads as code
    # typed into a session, whose sub-second findings per job are info.
    script = tmp_path_factory.mktemp("child") / "compare_job.py"
    script.write_text(CHILD)
    subprocess.run(
        [sys.executable, str(script), str(out)],
        env=env,
        check=True,
        timeout=300,
        capture_output=True,
    )
    before, after = (
        open_profile(next((out / f"partitions-{n}").iterdir()), WINDOW_NS)
        for n in PARTITIONS
    )
    return compare(before, after)


def _activity(c: Comparison) -> dict[str, tuple[float, float]]:
    return {
        r["activity"]: (r["before_s"], r["after_s"])
        for r in c.activities.iter_rows(named=True)
    }


def test_the_settings_diff_lists_the_partition_count(pair: Comparison) -> None:
    settings = pair.to_json()["settings_changed"]
    assert settings["spark.sql.shuffle.partitions"] == ["200", "8"]
    assert pair.warnings == ()


def test_the_aggregation_is_matched_across_the_two_applications(
    pair: Comparison,
) -> None:
    # GIVEN both applications ran the map side and the reduce side of the
    # group-by; the map side's label ends in its exchange of 200 or 8
    assert pair.matched_operators == 2
    reduce = pair.operators.filter(
        pl.col("operator").str.contains("functions=[sum(v)]", literal=True)
    ).row(0, named=True)
    # THEN the reduce side is one row: 3 x 200 tasks before, 3 x 8 after
    assert (reduce["tasks_before"], reduce["tasks_after"]) == (600, 24)
    assert reduce["records_before"] == reduce["records_after"]
    # AND the rows add up to the wall-time delta
    deltas = pair.operators["delta_s"].to_list()
    assert math.fsum(deltas) == pytest.approx(pair.wall_delta_s, abs=1e-9)


def test_critical_time_moves_from_task_overheads_toward_processing(
    pair: Comparison,
) -> None:
    acts = _activity(pair)
    task_side = ("scheduling", "deserialization", "processing")

    def share(name: str, side: int) -> float:
        return acts[name][side] / sum(acts[a][side] for a in task_side)

    print(
        f"\nwall {pair.wall_before_ns / 1e9:.2f} s -> "
        f"{pair.wall_after_ns / 1e9:.2f} s; "
        + "; ".join(
            f"{a} {acts[a][0]:.2f} s -> {acts[a][1]:.2f} s "
            f"({share(a, 0):.0%} -> {share(a, 1):.0%})"
            for a in task_side
        )
    )
    # THEN the run is faster, scheduling fell, and processing's share of the
    # tasks' critical time rose while the per-task overheads' fell
    # (scheduling's own share alone is noise in a 1.7 s run: 39% -> 40%
    # once, beside deserialization's 23% -> 11%)
    assert pair.wall_delta_s < 0
    assert acts["scheduling"][1] < acts["scheduling"][0]
    overheads = ("scheduling", "deserialization")
    assert sum(share(a, 1) for a in overheads) < sum(share(a, 0) for a in overheads)
    assert share("processing", 1) > share("processing", 0)


def test_the_partition_hint_is_checked_as_applied(pair: Comparison) -> None:
    kinds = {"over_partitioned", "scheduling_bound", "parallelism"}
    checked = pair.hints.filter(pl.col("kind").is_in(sorted(kinds)))
    print("\n" + "\n".join(str(r) for r in pair.to_json()["hints"]))
    # GIVEN BEFORE has a hint on its 200 tiny tasks
    assert len(checked) >= 1
    for row in checked.iter_rows(named=True):
        # THEN AFTER's 8 partitions apply it, and its saving is measured
        assert row["applied"], row
        assert row["verdict"] != "not applied"
        assert row["measured_saving_s"] > 0


def test_the_report_is_written(pair: Comparison, tmp_path: Path) -> None:
    from sparktrail.dashboard.compare_report import write_compare_report

    page = write_compare_report(pair, tmp_path).read_text()
    assert "spark.sql.shuffle.partitions" in page
    assert "over_partitioned" in page or "scheduling_bound" in page
