"""Ground truth for the rules that check their cause (issue 26 item 4).

Four real Spark workloads, each with a known truth the hints must state:

1. a slow executor: ten 2-task stages on ``local-cluster[2,1,1024]``, one
   task per executor per stage, executor :data:`SLOW` 2.75x slower at the
   same work -> ``straggler_executor`` names it (its evidence pools the
   stages: one task a side in each);
2. a task that fails twice then succeeds, and an executor killed mid-stage
   -> ``failures`` hints name the stage, the exception and the lost
   executor; no ``straggler_task``/``straggler_executor`` for those
   attempts;
3. a first wave that stalls together (both tasks running at once sleep 2
   s, later waves take 0.1 s) -> no ``straggler_task``: the tasks beside
   them were as slow;
4. a Spark-shell-like session: jobs with think time between them, under
   the app name ``PySparkShell`` or with ``<stdin>`` call sites -> no
   ``driver_bound``; the same workload under a plain name and call sites
   -> ``driver_bound``.

Cases 1-3 run on one local-cluster application, case 4 on ``local[2]``
applications after it, all in one child process (this process's JVM may
hold the shared local session). Each case is traced live on its own
(``attach``/``detach``), so its hints are its own. Python workers find
their executor from the JVM's command line (:func:`bench.ground_truth.
executor_id`).

Run ``python -m tests.integration.test_advice_ground_truth OUT`` to run the
child application by hand.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import sparktrail
from bench import ground_truth as gt
from sparktrail.cli.profile import hints_json
from sparktrail.pag.trace import Trace, load_trace
from sparktrail.summaries.task_table import task_facts

pytestmark = pytest.mark.integration

WINDOW_NS = 1_000_000_000
#: The slow executor of case 1, its slowdown, the stages and a task's time.
SLOW, SLOWDOWN, SLOW_STAGES, TASK_S = "1", 2.75, 10, 0.5
#: Case 2: the partition that fails on its first attempts, how often.
FAILING_PARTITION, FAILS = 2, 2
#: Case 2: the partition whose first attempt kills its executor's JVM.
KILLER_PARTITION = 1
#: Case 3: tasks of the stalled stage, the stall and the other tasks' time.
STALL_TASKS, STALL_S, QUICK_S = 12, 2.0, 0.1
#: Case 4: jobs and the think time between them (seconds).
SHELL_JOBS, THINK_S = 3, 3.5
#: Case 4's workload, run as typed into a shell (``<stdin>``) or from a file.
SHELL_SRC = """
for job in range(jobs):
    if job:
        time.sleep(think)
    spark.range(0, 200_000, numPartitions=2).selectExpr("sum(id)").collect()
"""
#: Case groups (job groups of the child application).
EXECUTOR, FAILURES, STALL = "advice-executor", "advice-failures", "advice-stall"


# -- run inside the Python workers -----------------------------------------------


def _slow_work(x: int) -> int:
    factor = SLOWDOWN if gt.executor_id() == SLOW else 1.0
    time.sleep(TASK_S * factor)
    return x


def _quick(x: int) -> int:
    time.sleep(QUICK_S)
    return x


def _fail_first_attempts(index: int, rows: Any) -> Any:
    from pyspark import TaskContext

    attempt = TaskContext.get().attemptNumber()  # type: ignore[union-attr]
    if index == FAILING_PARTITION and attempt < FAILS:
        raise ValueError(f"injected failure of partition {index}, attempt {attempt}")
    time.sleep(QUICK_S)
    return [sum(1 for _ in rows)]


def _kill_executor(marker: str) -> Any:
    def work(index: int, rows: Any) -> Any:
        from pyspark import TaskContext

        attempt = TaskContext.get().attemptNumber()  # type: ignore[union-attr]
        time.sleep(0.3)
        if index == KILLER_PARTITION and attempt == 0:
            Path(marker).write_text(gt.executor_id())
            # The worker's grandparent is the executor's JVM (executor_id).
            stat = Path(f"/proc/{os.getppid()}/stat").read_text()
            os.kill(int(stat.rsplit(")", 1)[1].split()[1]), signal.SIGKILL)
            time.sleep(30)  # killed with it
        time.sleep(0.7)
        return [sum(1 for _ in rows)]

    return work


def _stall_first_wave(index: int, rows: Any) -> Any:
    # The two slots' first tasks (partitions 0 and 1) stall together.
    time.sleep(STALL_S if index < 2 else QUICK_S)
    return [sum(1 for _ in rows)]


# -- the child application -------------------------------------------------------


def _stages(sc: Any, group: str) -> list[int]:
    status = sc.statusTracker()
    stages: set[int] = set()
    for job in status.getJobIdsForGroup(group):
        info = status.getJobInfo(job)
        stages.update(info.stageIds if info else [])
    return sorted(stages)


def _traced(spark: Any, out: Path, group: str, job: Any) -> list[int]:
    """Run ``job()`` traced into ``out`` under a job group; its stages."""
    from sparktrail.tracer import attach, detach

    sc = spark.sparkContext
    attach(spark, out, flush_seconds=0.2)
    sc.setJobGroup(group, group)
    try:
        job()
    finally:
        sc.setJobGroup("", "")
        detach(spark)
    return _stages(sc, group)


def _cluster_cases(out: Path) -> dict[str, Any]:
    """Cases 1-3 on one local-cluster application."""
    from pyspark.sql import SparkSession

    facts: dict[str, Any] = {}
    conf = {
        "spark.executor.memory": "512m",
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        "spark.task.maxFailures": "8",
    }
    builder = SparkSession.builder.master(gt.LOCAL_CLUSTER).appName("advice-truth")
    builder = builder.config("spark.ui.enabled", "false").config(
        "spark.ui.showConsoleProgress", "false"
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel("OFF")
    try:
        gt._wait_executors(spark, 2)
        # Start both executors' Python workers before any trace.
        sc.parallelize(range(4), 4).map(_quick).collect()

        def slow_executor() -> None:
            for _ in range(SLOW_STAGES):
                sc.parallelize(range(2), 2).map(_slow_work).collect()

        facts["executor_stages"] = _traced(
            spark, out / "executor", EXECUTOR, slow_executor
        )

        def stall() -> None:
            # A quick stage first: the stalled one is not the executors' first.
            sc.parallelize(range(4), 4).map(_quick).collect()
            sc.parallelize(range(STALL_TASKS), STALL_TASKS).mapPartitionsWithIndex(
                _stall_first_wave
            ).collect()

        facts["stall_stages"] = _traced(spark, out / "stall", STALL, stall)

        marker = out / "killed-executor.txt"

        def failures() -> None:
            sc.parallelize(range(8), 4).mapPartitionsWithIndex(
                _fail_first_attempts
            ).collect()
            sc.parallelize(range(8), 4).mapPartitionsWithIndex(
                _kill_executor(str(marker))
            ).collect()

        facts["failure_stages"] = _traced(spark, out / "failures", FAILURES, failures)
        facts["killed_executor"] = marker.read_text()
    finally:
        spark.stop()
    return facts


def _shell_case(out: Path, name: str, call_site: str | None) -> None:
    """Case 4: ``SHELL_JOBS`` jobs with think time between them, in a local[2]
    application named ``name``, its code compiled as ``call_site``
    (``None``: run from this file)."""
    from pyspark.sql import SparkSession

    from sparktrail.tracer import attach, detach

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    try:
        spark.range(0, 1000, numPartitions=2).selectExpr("sum(id)").collect()  # warm
        attach(spark, out, flush_seconds=0.2)
        try:
            scope = {"spark": spark, "time": time, "jobs": SHELL_JOBS, "think": THINK_S}
            if call_site is None:
                for job in range(SHELL_JOBS):
                    if job:
                        time.sleep(THINK_S)
                    spark.range(0, 200_000, numPartitions=2).selectExpr(
                        "sum(id)"
                    ).collect()
            else:
                exec(compile(SHELL_SRC, call_site, "exec"), scope)
        finally:
            detach(spark)
    finally:
        spark.stop()


#: Case 4's variants: trace folder, app name, call site of the code.
SHELL_VARIANTS = {
    "shell-name": ("PySparkShell", None),
    "shell-stdin": ("advice-shell", "<stdin>"),
    "script": ("advice-shell", None),
}


def child_app(out: Path) -> dict[str, Any]:
    """Every case, in order; what happened (printed as JSON by ``__main__``)."""
    began = time.monotonic()
    gt._by_value()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["SPARK_HOME"] = str(gt.spark_home(out / ".spark"))
    facts = _cluster_cases(out)
    facts["cluster_s"] = round(time.monotonic() - began, 1)
    for folder, (name, site) in SHELL_VARIANTS.items():
        _shell_case(out / folder, name, site)
    facts["total_s"] = round(time.monotonic() - began, 1)
    return facts


# -- fixtures -----------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Child:
    """The finished child application: its trace folders and facts."""

    out: Path
    facts: dict[str, Any]
    seconds: float

    def trace(self, case: str) -> Trace:
        """One case's trace, with its context."""
        return load_trace(self.out / case)

    def profile(self, case: str) -> tuple[sparktrail.Summaries, list[dict[str, Any]]]:
        """One case's summaries and hints (as ``profile --json`` gives them)."""
        summaries = sparktrail.summarize(self.trace(case), WINDOW_NS)
        return summaries, hints_json(summaries.hints)


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    """Run the child application (every case) and wait for it."""
    pytest.importorskip("pyspark")
    out = tmp_path_factory.mktemp("advice-truth")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    began = time.monotonic()
    module = "tests.integration.test_advice_ground_truth"
    with (out / "stderr.txt").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(out)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        stdout, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = (out / "stderr.txt").read_text(errors="replace")
    assert proc.returncode == 0, stderr[-4000:]
    facts = json.loads(stdout.strip().splitlines()[-1])
    print(f"child application: {facts} in {time.monotonic() - began:.0f} s")
    yield Child(out, facts, time.monotonic() - began)


def of_kind(hints: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [h for h in hints if h["kind"] in kinds]


def brief(hints: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each hint's kind, severity, stage and executor (for messages)."""
    return [(h["kind"], h["severity"], h["stage_id"], h["executor_id"]) for h in hints]


# -- 1. a slow executor over one-task stages ------------------------------------


def test_a_slow_executor_over_one_task_stages_is_a_straggler_executor(
    child: Child,
) -> None:
    # GIVEN ten stages of two tasks on two one-core executors, executor SLOW
    # sleeping 2.75x as long as the other at the same work
    trace = child.trace("executor")
    tasks = task_facts(trace)
    per_stage = tasks.group_by("stage_id", "executor").len()
    assert per_stage.height == 2 * SLOW_STAGES
    assert (per_stage["len"] == 1).all()  # one task per executor per stage
    # WHEN it is profiled
    _, hints = child.profile("executor")
    # THEN straggler_executor names that executor, its slowdown pooled over
    # the stages (one task a side in each)
    found = of_kind(hints, "straggler_executor")
    assert [h["executor_id"] for h in found] == [SLOW], brief(hints)
    evidence = found[0]["evidence"]
    assert evidence["slowdown"] >= 1.8, evidence
    # AND every executor is on one host: it is slow beside its own host's
    # executors, and speculation cannot launch a copy there
    assert evidence["host_slowdown"] == pytest.approx(evidence["slowdown"])
    assert "speculation cannot help" in found[0]["action"]
    assert "spark.speculation=true" not in found[0]["action"]
    # AND no task is blamed (two tasks a stage have no median to beat)
    assert not of_kind(hints, "straggler_task", "hotspot"), brief(hints)
    print(f"slow executor: {brief(found)} {evidence}")


# -- 2. failed attempts and a lost executor --------------------------------------


def test_failures_and_a_lost_executor_are_failures_not_stragglers(
    child: Child,
) -> None:
    # GIVEN a stage whose partition FAILING_PARTITION raises on its first
    # two attempts, then a stage where one task SIGKILLs its executor's JVM
    failing_stage, killing_stage = child.facts["failure_stages"]
    killed = child.facts["killed_executor"]
    statuses = task_facts(child.trace("failures")).group_by("stage_id", "status").len()
    failed = dict(
        statuses.filter(pl.col("status") == "failed").select("stage_id", "len").rows()
    )
    assert failed == {failing_stage: FAILS, killing_stage: 1}, statuses
    _, hints = child.profile("failures")
    found = of_kind(hints, "failures")
    causes = {h["evidence"]["cause"]: h for h in found}
    # THEN a failures hint names the failing stage and the exception
    error = causes["task_error"]
    assert error["stage_id"] == failing_stage
    assert error["evidence"]["attempts"] == FAILS
    assert "ValueError: injected failure" in error["evidence"]["message"]
    assert "ValueError" in error["action"]
    # AND one names the lost executor, in the stage it took a task down from
    lost = causes["executor_lost"]
    assert lost["evidence"]["executors_lost"] == [killed]
    assert killing_stage in lost["evidence"]["stages"]
    # AND no failed attempt makes a task or an executor a straggler: none
    # names the failing or the killing stage, or the killed executor (the
    # surviving executor may run slower than its replacement on a loaded
    # machine, a finding of its own, kept as info there)
    stragglers = of_kind(hints, "straggler_task", "straggler_executor")
    blamed = [
        h
        for h in stragglers
        if h["stage_id"] in (failing_stage, killing_stage)
        or h["executor_id"] == killed
        or h["severity"] != "info"
    ]
    assert not blamed, brief(hints)
    print(f"failures: {brief(found)}")


# -- 3. a first wave that stalls together ----------------------------------------


def test_a_first_wave_that_stalls_together_has_no_straggler_task(
    child: Child,
) -> None:
    # GIVEN a stage of 12 tasks on two slots (not the executors' first
    # stage) whose first wave, both slots at once, stalls 2 s, the rest 0.1 s
    stalled = child.facts["stall_stages"][-1]
    tasks = task_facts(child.trace("stall")).filter(pl.col("stage_id") == stalled)
    median = tasks["duration_ns"].median()
    first = tasks.filter(pl.col("partition") < 2)
    assert (first["duration_ns"] >= 5 * median).all(), tasks  # each 5x the median
    # WHEN it is profiled
    summaries, hints = child.profile("stall")
    # THEN neither stalled task is a straggler: the task beside each was
    # as slow, for most of its time
    assert not of_kind(hints, "straggler_task"), brief(hints)
    stage_cp = summaries.operator.filter(pl.col("stage_id") == stalled)["cp_share"]
    assert stage_cp[0] >= 0.05  # on the critical path: the rule looked at it
    stall_ms = [d // 1_000_000 for d in first["duration_ns"]]
    print(f"stall: median {median / 1e6:.0f} ms, first wave {stall_ms} ms")


# -- 4. a shell's think time -----------------------------------------------------


@pytest.mark.parametrize("variant", ["shell-name", "shell-stdin"])
def test_a_shells_think_time_is_not_driver_bound(child: Child, variant: str) -> None:
    # GIVEN three jobs with 3.5 s of think time between them, in an
    # application named PySparkShell, or with its code typed at <stdin>
    summaries, hints = child.profile(variant)
    labels = summaries.operator["operator"].drop_nulls().to_list()
    if variant == "shell-stdin":
        assert labels and all("<stdin>" in label for label in labels), labels
    else:
        assert not any("<stdin>" in label for label in labels), labels
    # THEN the think time is not called driver-bound
    assert not of_kind(hints, "driver_bound"), brief(hints)


def test_the_same_pauses_in_a_script_are_driver_bound(child: Child) -> None:
    # GIVEN the same jobs and pauses in a plain application, run from a file
    summaries, hints = child.profile("script")
    labels = summaries.operator["operator"].drop_nulls().to_list()
    assert labels and all("test_advice_ground_truth.py" in x for x in labels), labels
    # THEN driver_bound names both gaps between jobs, each the pause
    (found,) = of_kind(hints, "driver_bound")
    gaps = found["evidence"]["intervals"]
    assert len(gaps) == SHELL_JOBS - 1
    for gap in gaps:
        assert gap["duration_ns"] >= THINK_S * 1e9
    print(f"script: driver_bound {found['evidence']['between_jobs_share']:.0%}")


if __name__ == "__main__":
    print(json.dumps(child_app(Path(sys.argv[1]))), flush=True)
