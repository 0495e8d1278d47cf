"""Faults in real Spark runs: the trace holds every task attempt that ran.

Ground truth is the event log: every task with a ``TaskStart`` or a
``TaskEnd`` must be in the trace exactly once (one launch edge), with the
status its first ``TaskEnd`` gives (``Success`` -> success, ``TaskKilled``
-> killed, ``ExecutorLostFailure`` and other failures -> failed, no
``TaskEnd`` -> running). The live trace is checked against the raw log the
listener wrote, and that log against Spark's own event log of the same
application (written independently by Spark's ``EventLoggingListener``).

* Executor lost, speculation tried, session stopped: one ``local-cluster``
  application (two executor JVMs of one core each) in a subprocess, since
  this process's JVM holds the shared local session. Its worker directories
  go under a private ``SPARK_HOME`` of links to pyspark (Spark writes them
  to ``$SPARK_HOME/work``, here the virtualenv).
* Speculative duplicates: Spark never launches a copy on a host where the
  task has an attempt (``TaskSetManager.dequeueTaskFromList``:
  ``!(speculative && hasAttemptOnHost(index, host))``), and every executor
  of ``local``/``local-cluster`` is on one host; the subprocess shows Spark
  marking tasks speculatable and launching none. So one task of that real
  log is duplicated as a speculative attempt (a *mutated* real log).
* Job group cancelled: the shared local session, while the subprocess runs.

Run ``python tests/integration/test_faults.py OUT EVENTS`` to run the
subprocess application by hand.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import sparktrail
from sparktrail.tracer import attach, import_eventlog

pytestmark = pytest.mark.integration

WINDOW_NS = 1_000_000_000
#: Groups of the subprocess application's jobs, in the order they run.
SPEC, LOST, STOP = "faults-spec", "faults-lost", "faults-stop"
#: The executor the subprocess kills.
VICTIM = "0"
#: Events the sparktrail listener keeps (tracer/java: SparktrailListener.USED).
KEPT = {
    f"SparkListener{name}"
    for name in [
        "ApplicationStart",
        "ApplicationEnd",
        "EnvironmentUpdate",
        "ExecutorAdded",
        "ExecutorRemoved",
        "JobStart",
        "JobEnd",
        "StageSubmitted",
        "StageCompleted",
        "TaskStart",
        "TaskEnd",
    ]
}


# -- ground truth ------------------------------------------------------------


def status_of(reason: str | None) -> str:
    """The trace status a first ``TaskEnd`` reason means."""
    if reason is None:
        return "running"
    if reason in ("Success", "Resubmitted"):
        return "success"
    return "killed" if reason in ("TaskKilled", "TaskCommitDenied") else "failed"


@dataclass
class Attempt:
    """One task attempt as an event log records it."""

    task_id: int
    stage_id: int
    index: int
    attempt: int
    executor_id: str
    speculative: bool
    ends: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return status_of(self.ends[0] if self.ends else None)


@dataclass
class LogTruth:
    """What an event log says ran: task attempts, job groups, event counts."""

    attempts: dict[int, Attempt] = field(default_factory=dict)
    group_stages: dict[str, set[int]] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)
    #: Events after ``ApplicationEnd`` (a stopping context's teardown).
    after_end: Counter[str] = field(default_factory=Counter)

    def stages(self, group: str) -> set[int]:
        return self.group_stages.get(group, set())

    def of(self, group: str) -> dict[int, Attempt]:
        """The attempts of a job group's stages."""
        stages = self.stages(group)
        return {t: a for t, a in self.attempts.items() if a.stage_id in stages}

    def statuses(self, group: str | None = None) -> dict[int, str]:
        chosen = self.attempts if group is None else self.of(group)
        return {t: a.status for t, a in chosen.items()}


def log_lines(path: Path) -> list[str]:
    """The lines of a plain event-log file or rolling directory, in order."""
    if path.is_file():
        return path.read_text().splitlines()
    segments = sorted(path.glob("events_*"), key=lambda p: int(p.name.split("_", 2)[1]))
    return [line for p in segments for line in p.read_text().splitlines()]


def read_truth(path: Path) -> LogTruth:
    """Parse a log with plain ``json`` (not sparktrail's reader).

    The last line of a log Spark is writing may be cut short: it is skipped.
    """
    truth = LogTruth()
    lines = log_lines(path)
    for n, line in enumerate(lines, 1):
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                break
            raise
        kind = event["Event"]
        truth.events[kind] += 1
        if (
            truth.events["SparkListenerApplicationEnd"]
            and kind != "SparkListenerApplicationEnd"
        ):
            truth.after_end[kind] += 1
        if kind in ("SparkListenerTaskStart", "SparkListenerTaskEnd"):
            info = event["Task Info"]
            attempt = truth.attempts.setdefault(
                info["Task ID"],
                Attempt(
                    info["Task ID"],
                    event["Stage ID"],
                    info["Index"],
                    info["Attempt"],
                    info["Executor ID"],
                    info["Speculative"],
                ),
            )
            if kind == "SparkListenerTaskEnd":
                attempt.ends.append(event["Task End Reason"]["Reason"])
        elif kind == "SparkListenerJobStart":
            group = (event.get("Properties") or {}).get("spark.jobGroup.id")
            if group:
                truth.group_stages.setdefault(group, set()).update(event["Stage IDs"])
    return truth


def trace_tasks(trace: pl.DataFrame) -> pl.DataFrame:
    """One row per task of a trace, with the facts each of its rows repeats."""
    tasks = trace.filter(pl.col("task_id").is_not_null())
    launch = (pl.col("src_worker") == "driver") & (pl.col("activity") == "control")
    return (
        tasks.group_by("task_id")
        .agg(
            pl.col("stage_id").first(),
            pl.col("partition").first(),
            pl.col("attempt").first(),
            pl.col("executor_id").first(),
            pl.col("speculative").first(),
            pl.col("status").first(),
            pl.col("status").n_unique().alias("statuses"),
            launch.sum().alias("launches"),
            pl.col("shuffle_write_bytes").is_not_null().sum().alias("work_rows"),
        )
        .sort("task_id")
    )


def check_exact(trace: pl.DataFrame, truth: LogTruth) -> pl.DataFrame:
    """Every attempt of the log is in the trace once, with its status."""
    tasks = trace_tasks(trace)
    assert tasks["launches"].to_list() == [1] * tasks.height  # no duplicates
    assert (tasks["statuses"] == 1).all()
    got = dict(zip(tasks["task_id"], tasks["status"], strict=True))
    assert got == truth.statuses()  # no loss, no extra task
    return tasks


# -- the local-cluster application (run in a subprocess) ----------------------


def _stage_progress(sc: Any, group: str, tasks: int) -> tuple[int, int]:
    """(completed, active) tasks of the group's stage of ``tasks`` tasks."""
    status = sc.statusTracker()
    for job in status.getJobIdsForGroup(group):
        info = status.getJobInfo(job)
        for sid in info.stageIds if info else []:
            stage = status.getStageInfo(sid)
            if stage is not None and stage.numTasks == tasks:
                return stage.numCompletedTasks, stage.numActiveTasks
    return 0, 0


def _wait(sc: Any, group: str, tasks: int, done: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _stage_progress(sc, group, tasks)[0] < done:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{group}: {done} tasks did not finish")
        time.sleep(0.05)


def _executor_pid(app_id: str, executor: str) -> int:
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if (
            "org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd
            and app_id in cmd
            and cmd[cmd.index("--executor-id") + 1] == executor
        ):
            return int(proc.pid)
    raise LookupError(f"no executor {executor} of {app_id}")


def _in_thread(sc: Any, group: str, job: Any, errors: dict[str, str]) -> Any:
    """Run ``job()`` in a thread under a job group; its error goes to errors."""

    def run() -> None:
        sc.setJobGroup(group, group)
        try:
            job()
        except Exception as err:  # the job is meant to be cut short
            errors[group] = type(err).__name__

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _slow_map(index: int, rows: Any) -> Any:
    time.sleep(3.0 if index == 0 else 0.3)
    return ((len(x) % 3, 1) for x in rows)


def _sleep_1_5(x: int) -> tuple[int, int]:
    time.sleep(1.5)
    return x % 2, x


def _nap(x: int) -> int:
    time.sleep(0.2)
    return x


def _sleep_1(x: int) -> int:
    time.sleep(1.0)
    return x


def cluster_app(out: Path, events: Path) -> dict[str, Any]:
    """Trace one local-cluster application through three faults.

    1. ``faults-spec``: speculation on, a map stage reading a text file in
       6 partitions, partition 0 slow (3 s vs 0.3 s); Spark marks tasks
       speculatable but cannot launch a copy.
    2. ``faults-lost``: 8 map tasks of 1.5 s; after 4 finished, executor
       ``VICTIM`` is SIGKILLed while it runs one (-> ExecutorLostFailure)
       and holds finished map outputs (-> Resubmitted, rerun).
    3. ``faults-stop``: 8 tasks of 1 s; ``spark.stop()`` after 2 finished.

    Returns what happened, for the test (printed as JSON by ``__main__``).
    """
    from pyspark.sql import SparkSession

    began = time.monotonic()
    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("sparktrail-faults")
        .config("spark.executor.memory", "512m")
        # C1 only: the executor JVMs start (and restart) with less CPU.
        .config("spark.executor.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", events.as_uri())
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.eventLog.compress", "false")
        .config("spark.speculation", "true")
        .config("spark.speculation.multiplier", "1")
        .config("spark.speculation.quantile", "0.1")
        .config("spark.speculation.interval", "100ms")
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    jvm = sc._jvm
    # Spark says in the driver log when it marks a task speculatable.
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.scheduler.TaskSetManager",
        jvm.org.apache.logging.log4j.Level.INFO,
    )
    while len(sc.statusTracker().getExecutorInfos()) < 3:  # driver + 2
        time.sleep(0.1)
    started = time.monotonic()
    handle = attach(spark, out, flush_seconds=0.2)
    sc.parallelize(range(4), 4).map(_nap).collect()  # warm Python workers
    errors: dict[str, str] = {}

    sc.setJobGroup(SPEC, SPEC)
    lines = out.parent / "faults-input.txt"  # read with input records and bytes
    lines.write_text("".join(f"line {i}\n" for i in range(600)))
    sc.textFile(str(lines), 6).mapPartitionsWithIndex(_slow_map).reduceByKey(
        lambda a, b: a + b
    ).collect()

    lost = _in_thread(
        sc,
        LOST,
        lambda: (
            sc.parallelize(range(8), 8)
            .map(_sleep_1_5)
            .reduceByKey(lambda a, b: a + b)
            .collect()
        ),
        errors,
    )
    _wait(sc, LOST, 8, 4)
    pid = _executor_pid(sc.applicationId, VICTIM)
    os.kill(pid, signal.SIGKILL)
    lost.join()

    stop = _in_thread(
        sc, STOP, lambda: sc.parallelize(range(8), 8).map(_sleep_1).count(), errors
    )
    _wait(sc, STOP, 8, 2)
    spark.stop()
    stop.join()
    # The listener finishes the raw log when the bus has delivered its last
    # event, and the follower then writes the rest and exits, on their own.
    follower = handle._proc
    assert follower is not None
    try:
        follower.wait(timeout=60)
        exited = True
    except subprocess.TimeoutExpired:
        exited = False
    stats = handle.detach()
    return {
        "app_id": handle.app_id,
        "victim_pid": pid,
        "errors": errors,
        "follower_exited_alone": exited,
        "task_ends": stats.task_ends,
        "trace_files": stats.trace_files,
        "rows": stats.rows,
        "startup_s": round(started - began, 1),
        "jobs_s": round(time.monotonic() - started, 1),
    }


# -- fixtures -----------------------------------------------------------------


@dataclass
class Cluster:
    """The finished subprocess application: its trace, logs and output."""

    out: Path
    result: dict[str, Any]
    stderr: str
    raw_dir: Path
    raw: LogTruth
    spark: LogTruth
    spark_log: Path
    trace: pl.DataFrame
    seconds: float


@pytest.fixture(scope="module")
def cluster_proc(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[str], Path, float]]:
    """Start the local-cluster application (the first test to ask starts it)."""
    pyspark = pytest.importorskip("pyspark")
    pytest.importorskip("psutil")
    root = tmp_path_factory.mktemp("faults")
    home = root / "spark-home"
    home.mkdir()
    for entry in Path(pyspark.__file__).resolve().parent.iterdir():
        if entry.name != "work":
            (home / entry.name).symlink_to(entry)
    (root / "events").mkdir()
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable}
    with (root / "stderr.txt").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, __file__, str(root / "trace"), str(root / "events")],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
    yield proc, root, time.monotonic()
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def cluster(cluster_proc: tuple[subprocess.Popen[str], Path, float]) -> Cluster:
    proc, root, began = cluster_proc
    stdout, _ = proc.communicate(timeout=300)
    stderr = (root / "stderr.txt").read_text(errors="replace")
    assert proc.returncode == 0, stderr[-4000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    out = root / "trace"
    (raw_dir,) = (out / "raw").glob("eventlog_v2_*")
    (spark_log,) = (root / "events").iterdir()
    return Cluster(
        out=out,
        result=result,
        stderr=stderr,
        raw_dir=raw_dir,
        raw=read_truth(raw_dir),
        spark=read_truth(spark_log),
        spark_log=spark_log,
        trace=sparktrail.read_trace(out),
        seconds=time.monotonic() - began,
    )


# -- 3. a job group cancelled halfway (shared session; runs first) -------------


def test_cancelled_job_group(
    spark: Any,
    spark_eventlog_dir: Path,
    tmp_path: Path,
    cluster_proc: tuple[subprocess.Popen[str], Path, float],
) -> None:
    # GIVEN a traced job of 12 one-second tasks on local[2] (the cluster
    # application runs meanwhile in its subprocess)
    sc = spark.sparkContext
    group = "faults-cancel"
    sc.parallelize(range(2), 2).count()  # warm the Python workers
    handle = attach(spark, tmp_path / "trace", flush_seconds=0.2)
    errors: dict[str, str] = {}
    job = _in_thread(
        sc, group, lambda: sc.parallelize(range(12), 12).map(_sleep_1).count(), errors
    )
    # WHEN its group is cancelled after 4 tasks finished
    _wait(sc, group, 12, 4)
    sc.cancelJobGroup(group)
    job.join()
    deadline = time.monotonic() + 60
    while _stage_progress(sc, group, 12)[1] > 0:  # killed tasks report back
        assert time.monotonic() < deadline
        time.sleep(0.05)
    handle.detach()
    sc.setJobGroup("faults-flush", "flush")
    sc.parallelize(range(1), 1).count()  # Spark flushes its log at job ends
    (flush,) = sc.statusTracker().getJobIdsForGroup("faults-flush")
    sc.setJobGroup("", "")
    spark_log = spark_eventlog_dir / f"{sc.applicationId}.inprogress"
    deadline = time.monotonic() + 20
    needle = b'"SparkListenerJobEnd","Job ID":%d' % flush
    while needle not in spark_log.read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.1)

    # THEN the trace holds every attempt of the raw log, finished and killed
    assert errors[group]
    raw = read_truth(handle.log_dir)
    trace = sparktrail.read_trace(tmp_path / "trace")
    check_exact(trace, raw)
    statuses = Counter(raw.statuses(group).values())
    assert statuses["success"] >= 4 and statuses["killed"] >= 1, statuses
    assert set(statuses) == {"success", "killed"}
    # AND the raw log holds what Spark's own log holds for that job
    assert raw.statuses(group) == read_truth(spark_log).statuses(group)
    assert len(raw.of(group)) < 12  # cancelled before every task launched
    # AND it summarizes
    summaries = sparktrail.summarize(trace, WINDOW_NS)
    assert summaries.operator.height >= 1
    print(f"cancel: {dict(statuses)} of {len(raw.of(group))} launched")


# -- the cluster application as a whole --------------------------------------


def test_cluster_trace_holds_every_task_spark_logged(cluster: Cluster) -> None:
    # GIVEN the local-cluster application's live trace, raw log, Spark's log
    # THEN the raw log lost no task Spark logged (tasks end after the
    # application end when a session stops mid-job), and the trace holds
    # every attempt of the raw log once, with its status
    assert cluster.raw.statuses() == cluster.spark.statuses()
    assert cluster.raw.events["SparkListenerTaskEnd"] == sum(
        len(a.ends) for a in cluster.spark.attempts.values()
    )
    check_exact(cluster.trace, cluster.raw)
    assert cluster.result["task_ends"] == cluster.raw.events["SparkListenerTaskEnd"]
    # AND the files written while it ran are the import of the whole raw log
    # (a Resubmitted TaskEnd does not change rows written before it)
    keys = ["start_ns", "src_worker", "src_seq", "dst_worker", "dst_seq", "activity"]
    whole = import_eventlog(cluster.raw_dir)
    assert cluster.trace.sort(keys).equals(whole.sort(keys))
    print(
        f"cluster: {cluster.result} in {cluster.seconds:.0f} s; "
        f"{len(cluster.raw.attempts)} attempts, {cluster.trace.height} rows, "
        f"statuses {Counter(cluster.raw.statuses().values())}"
    )


# -- 1. executor lost mid-stage ------------------------------------------------


def test_executor_lost_mid_stage(cluster: Cluster) -> None:
    raw, tasks = cluster.raw, trace_tasks(cluster.trace)
    map_stage = min(raw.stages(LOST))  # parent stages get the lower ids
    attempts = [a for a in raw.of(LOST).values() if a.stage_id == map_stage]
    # GIVEN 8 map tasks, executor VICTIM killed after 4 of them finished
    # THEN the task it ran is failed (ExecutorLostFailure) on VICTIM
    failed = [a for a in attempts if a.status == "failed"]
    assert failed and {a.executor_id for a in failed} == {VICTIM}
    assert {a.ends[0] for a in failed} == {"ExecutorLostFailure"}
    # AND the map outputs it held were resubmitted and run again elsewhere
    resubmitted = [a for a in attempts if "Resubmitted" in a.ends]
    assert resubmitted and {a.executor_id for a in resubmitted} == {VICTIM}
    for lost in failed + resubmitted:
        retries = [
            a for a in attempts if a.index == lost.index and a.attempt > lost.attempt
        ]
        assert [a.status for a in retries] == ["success"]
        assert retries[0].executor_id != VICTIM
    # AND every partition's output counts once: shuffle bytes on 8 attempts
    ours = tasks.filter(pl.col("stage_id") == map_stage)
    assert ours.height == len(attempts) > 8
    assert ours["work_rows"].sum() == 8
    by_id = {r["task_id"]: r for r in ours.iter_rows(named=True)}
    for a in attempts:
        row = by_id[a.task_id]
        assert (row["status"], row["executor_id"], row["attempt"]) == (
            a.status,
            a.executor_id,
            a.attempt,
        )
    # AND the job itself succeeded
    assert LOST not in cluster.result["errors"]
    summaries = sparktrail.summarize(cluster.trace, WINDOW_NS)
    stage = summaries.operator.filter(pl.col("stage_id") == map_stage)
    assert stage["tasks"].to_list() == [len(attempts)]
    print(
        f"lost: {len(attempts)} map attempts, {len(failed)} failed, "
        f"{len(resubmitted)} resubmitted, {len(attempts) - 8} retries"
    )


# -- 2. speculation: tried for real, then a mutated real log ------------------


def test_speculation_never_launches_on_one_host(cluster: Cluster) -> None:
    # GIVEN speculation on (multiplier 1, quantile 0.1, interval 100 ms) and
    # a map stage whose partition 0 sleeps 10x longer than the others
    marked = cluster.stderr.count("as speculatable")
    # THEN Spark marked tasks speculatable, but launched no copy: every
    # executor is on the same host as the attempt it would copy
    assert marked >= 1, "Spark never considered speculating"
    for truth in (cluster.raw, cluster.spark):
        assert not any(a.speculative for a in truth.attempts.values())
    print(f"speculation: {marked} tasks marked speculatable, 0 launched")


def speculative_copy(lines: list[str], stage: int) -> tuple[list[str], int]:
    """A speculative attempt of a stage's last task added to a real log.

    The copy starts on another executor once that one is idle (its tasks of
    the stage ended) and is killed 2 ms after the original succeeds, as
    Spark does ("another attempt succeeded"); it carries the original's
    metrics (the worst case for double counting). Returns the new log and
    the copied partition.
    """
    events = [json.loads(line) for line in lines]
    ends = [e for e in events if e["Event"] == "SparkListenerTaskEnd"]
    original = max(
        (e for e in ends if e["Stage ID"] == stage),
        key=lambda e: e["Task Info"]["Finish Time"],
    )
    info = original["Task Info"]
    others = [
        e["Task Info"] for e in ends if e["Stage ID"] == stage and e is not original
    ]
    other_executor = next(
        i["Executor ID"] for i in others if i["Executor ID"] != info["Executor ID"]
    )
    idle = max(i["Finish Time"] for i in others if i["Executor ID"] == other_executor)
    launch, killed = idle + 5, info["Finish Time"] + 2
    assert launch < info["Finish Time"]
    task_id = 1 + max(e["Task Info"]["Task ID"] for e in events if "Task Info" in e)
    copy_info = {
        **info,
        "Task ID": task_id,
        "Attempt": 1,
        "Executor ID": other_executor,
        "Speculative": True,
        "Launch Time": launch,
        "Getting Result Time": 0,
        "Finish Time": 0,
        "Failed": False,
        "Killed": False,
    }
    start = {
        "Event": "SparkListenerTaskStart",
        "Stage ID": stage,
        "Stage Attempt ID": original["Stage Attempt ID"],
        "Task Info": copy_info,
    }
    end = copy.deepcopy(original)
    end["Task End Reason"] = {
        "Reason": "TaskKilled",
        "Kill Reason": "another attempt succeeded",
    }
    end["Task Info"] = {**copy_info, "Finish Time": killed, "Killed": True}
    end["Task Metrics"]["Executor Run Time"] = killed - launch
    at = events.index(original)
    mutated = [*lines[:at], json.dumps(start), lines[at], json.dumps(end)]
    return [*mutated, *lines[at + 1 :]], info["Index"]


def test_speculative_duplicate_in_a_mutated_real_log(
    cluster: Cluster, tmp_path: Path
) -> None:
    # GIVEN Spark's own log of the cluster application, and a copy where
    # the last map task of faults-spec (the slow partition 0, unless the
    # machine was busier) got a speculative attempt, killed
    lines = log_lines(cluster.spark_log)
    map_stage = min(cluster.spark.stages(SPEC))
    lines, partition = speculative_copy(lines, map_stage)
    mutated = tmp_path / "mutated"
    mutated.write_text("\n".join(lines) + "\n")
    # WHEN both are imported and summarized
    before = import_eventlog(cluster.spark_log)
    after = import_eventlog(mutated)
    # THEN the trace holds both attempts of the partition, the copy marked
    truth = read_truth(mutated)
    tasks = check_exact(after, truth)
    both = (pl.col("stage_id") == map_stage) & (pl.col("partition") == partition)
    assert tasks.filter(both).select("attempt", "speculative", "status").rows() == [
        (0, False, "success"),
        (1, True, "killed"),
    ]
    # AND the stage's records and bytes count the partition once
    work = ["records", "bytes", "shuffle_write_bytes"]
    ops = [
        sparktrail.summarize(t, WINDOW_NS)
        .operator.filter(pl.col("stage_id") == map_stage)
        .select("job_id", "tasks", *work)
        for t in (before, after)
    ]
    assert ops[0].height == ops[1].height == 1  # the stage (and job) once
    assert ops[1]["tasks"][0] == ops[0]["tasks"][0] + 1  # attempts
    assert ops[1].select(work).equals(ops[0].select(work))
    assert min(ops[0].select(work).row(0)) > 0  # input read, shuffle written
    print(f"speculative (mutated): stage {map_stage} p{partition} {ops[1].to_dicts()}")


# -- 4. the SparkSession stopped while tracing --------------------------------


def test_session_stopped_while_tracing(cluster: Cluster, tmp_path: Path) -> None:
    raw, spark = cluster.raw, cluster.spark
    # GIVEN faults-stop, 8 one-second tasks, and spark.stop() after 2 ended
    # THEN the job failed, the follower finished on its own
    assert cluster.result["errors"].get(STOP)
    assert cluster.result["follower_exited_alone"]
    # AND the raw log kept the teardown Spark posts after the application
    # end: at least the stopped job's end (JobFailed)
    assert spark.after_end["SparkListenerJobEnd"] >= 1
    assert raw.after_end == Counter(
        {k: n for k, n in spark.after_end.items() if k in KEPT}
    )
    # AND the trace holds the tasks that ended (some during the teardown,
    # after the application end) and marks those cut short as running
    statuses = raw.statuses(STOP)
    assert statuses == spark.statuses(STOP)
    counts = Counter(statuses.values())
    assert counts["success"] >= 2 and counts["running"] >= 1, counts
    tasks = trace_tasks(cluster.trace).filter(pl.col("task_id").is_in(list(statuses)))
    assert dict(zip(tasks["task_id"], tasks["status"], strict=True)) == statuses
    # AND profile reads the trace directory
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparktrail",
            "profile",
            str(cluster.out),
            "-o",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "report" / "report.html").is_file()
    print(f"stop: {dict(counts)} of {len(statuses)} launched")


if __name__ == "__main__":
    result = cluster_app(Path(sys.argv[1]), Path(sys.argv[2]))
    print(json.dumps(result), flush=True)
