"""The stage and executor tables state Spark's facts as Spark states them.

Checked against Spark's own definitions, computed here straight from each
public event log's raw JSON lines (not through the tracer): per stage the
task attempts and the longest attempt (``Finish Time - Launch Time``), per
executor its attempts and their summed duration, and the GC share
(``sum(JVM GC Time) / sum(Executor Run Time)`` over the attempts whose
``TaskEnd`` carries ``Task Metrics``). Counts must be equal, times within
1 ms. The PAG model clips a task's end on its slot (DESIGN §5); the tables
must not.

Each log is imported and summarised once (a module-scoped fixture).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import warnings
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import zstandard

from bench.public_hints import ROOT as PUBLIC
from bench.public_hints import event_logs
from sparktrail.engines import summarize
from sparktrail.summaries import Summaries
from sparktrail.tracer import import_trace

MS = 1_000_000
WINDOW_NS = 1_000_000_000
LOGS = event_logs()
_TASK_EVENTS = (b"SparkListenerTaskStart", b"SparkListenerTaskEnd")


def _name(path: Path) -> str:
    return "/".join(path.parts[-2:])


def _files(path: Path) -> list[Path]:
    """A log's files in order: itself, or a folder's numbered parts."""
    if path.is_file():
        return [path]
    parts = [p for p in path.iterdir() if p.name.startswith(("EVENT_LOG_", "events_"))]
    return sorted(parts, key=lambda p: int(re.search(r"_(\d+)", p.name)[1]))  # type: ignore[index]


def _lines(path: Path) -> Iterator[bytes]:
    """The raw lines of a log, decompressed by the codec its name says."""
    for part in _files(path):
        raw = part.read_bytes()
        if part.suffix in (".zstd", ".zst"):
            stream = io.BytesIO(raw)
            reader = zstandard.ZstdDecompressor().stream_reader(
                stream, read_across_frames=True
            )
            raw = reader.read()
        elif part.suffix == ".gz":
            raw = gzip.decompress(raw)
        elif part.suffix in (".lz4", ".snappy", ".lzf"):
            raise AssertionError(f"{part}: codec not read by this test")
        yield from raw.splitlines()


def _executor(value: Any) -> str:
    # Spark 1.x names its driver "<driver>"; the tables say "driver".
    text = str(value)
    return "driver" if text == "<driver>" else text


@dataclass
class _Attempt:
    stage: int
    executor: str
    launch_ms: int
    finish_ms: int | None = None
    failed: bool = False
    run_ms: int | None = None  # None: the TaskEnd had no Task Metrics
    gc_ms: int | None = None


@dataclass
class _Group:
    """Spark's facts of a group of attempts (a stage or an executor)."""

    tasks: int = 0
    running: int = 0
    all_failed: bool = True
    max_ms: int = 0
    total_ms: int = 0
    run_ms: int = 0
    gc_ms: int = 0
    measured: list[int] = field(default_factory=list)

    def add(self, a: _Attempt) -> None:
        self.tasks += 1
        self.all_failed &= a.failed
        if a.finish_ms is None:
            self.running += 1
            return
        duration = a.finish_ms - a.launch_ms  # Spark's TaskInfo.duration
        self.max_ms = max(self.max_ms, duration)
        self.total_ms += duration
        if a.run_ms is not None:
            self.run_ms += a.run_ms
            self.gc_ms += a.gc_ms or 0
            self.measured.append(a.run_ms)

    @property
    def gc_share(self) -> float | None:
        return self.gc_ms / self.run_ms if self.run_ms > 0 else None


def spark_attempts(path: Path) -> dict[int, _Attempt]:
    """Every task attempt of a log, by task id, from its raw events.

    An attempt is launched by its ``TaskStart`` (or a ``TaskEnd`` without
    one) and ends at its first ``TaskEnd`` (a later one of the same task
    id is Spark's ``Resubmitted``: the rerun is a new attempt).
    """
    attempts: dict[int, _Attempt] = {}
    for line in _lines(path):
        if not any(kind in line for kind in _TASK_EVENTS):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        info = event.get("Task Info") or {}
        tid, launch = info.get("Task ID"), info.get("Launch Time")
        if tid is None or launch is None:
            continue
        attempt = attempts.setdefault(
            tid,
            _Attempt(
                event.get("Stage ID", 0), _executor(info.get("Executor ID")), launch
            ),
        )
        if event["Event"] != "SparkListenerTaskEnd" or attempt.finish_ms is not None:
            continue
        attempt.finish_ms = info.get("Finish Time") or launch
        attempt.failed = bool(info.get("Failed") or info.get("Killed"))
        metrics = event.get("Task Metrics")
        if metrics is not None:
            attempt.run_ms = metrics.get("Executor Run Time", 0)
            attempt.gc_ms = metrics.get("JVM GC Time", 0)
    return attempts


def spark_groups(attempts: dict[int, _Attempt], key: str) -> dict[Any, _Group]:
    groups: dict[Any, _Group] = defaultdict(_Group)
    for attempt in attempts.values():
        groups[getattr(attempt, key)].add(attempt)
    return groups


@dataclass
class Imported:
    name: str
    attempts: dict[int, _Attempt]
    summaries: Summaries


@pytest.fixture(scope="module", params=LOGS, ids=[_name(p) for p in LOGS])
def imported(request: pytest.FixtureRequest) -> Imported:
    path: Path = request.param
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a log's own oddities are not checked here
        trace = import_trace(path, progress=False)
        summaries = summarize(trace, WINDOW_NS)
    return Imported(_name(path), spark_attempts(path), summaries)


def _rows(frame: pl.DataFrame, key: str) -> dict[Any, dict[str, Any]]:
    return {row[key]: row for row in frame.iter_rows(named=True)}


def _gc_matches(ours: float | None, spark: float | None) -> bool:
    if spark is None:
        return ours is None
    return ours is not None and ours == pytest.approx(spark, rel=1e-9)


def test_stage_table_has_sparks_task_counts_longest_task_and_gc_share(
    imported: Imported,
) -> None:
    # GIVEN a public log's stages as Spark counts them from its raw events
    spark = spark_groups(imported.attempts, "stage")
    # WHEN the stage table is read
    ours = _rows(imported.summaries.stages, "stage_id")
    # THEN every stage with an attempt is there, with Spark's attempt count,
    # its longest attempt (finish - launch, not clipped) and GC share
    assert set(ours) == set(spark), imported.name
    wrong = []
    for sid, facts in spark.items():
        row = ours[sid]
        if row["tasks"] != facts.tasks:
            wrong.append((sid, "tasks", row["tasks"], facts.tasks))
        done = facts.running == 0  # a running attempt has no Spark duration
        if done and abs(row["max_task_ns"] - facts.max_ms * MS) > MS:
            wrong.append((sid, "max_task_ms", row["max_task_ns"] / MS, facts.max_ms))
        if not _gc_matches(row["gc_share"], facts.gc_share):
            wrong.append((sid, "gc_share", row["gc_share"], facts.gc_share))
    assert not wrong, imported.name


def test_executor_table_has_sparks_task_counts_task_time_and_gc_share(
    imported: Imported,
) -> None:
    # GIVEN a public log's executors as Spark counts them from its raw events
    spark = spark_groups(imported.attempts, "executor")
    # WHEN the executor table is read
    ours = _rows(imported.summaries.executors, "executor_id")
    # THEN every executor that ran an attempt is there with Spark's attempt
    # count, its attempts' summed duration and its GC share
    assert set(spark) <= set(ours), imported.name
    wrong = []
    for executor, facts in spark.items():
        row = ours[executor]
        if row["tasks"] != facts.tasks:
            wrong.append((executor, "tasks", row["tasks"], facts.tasks))
        done = facts.running == 0
        if done and abs(row["task_ns"] - facts.total_ms * MS) > MS:
            wrong.append((executor, "task_ms", row["task_ns"] / MS, facts.total_ms))
        if not _gc_matches(row["gc_share"], facts.gc_share):
            wrong.append((executor, "gc_share", row["gc_share"], facts.gc_share))
    assert not wrong, imported.name


def test_a_stage_whose_attempts_all_failed_has_unknown_records(
    imported: Imported,
) -> None:
    # GIVEN the stages whose every attempt failed or was killed (no result)
    spark = spark_groups(imported.attempts, "stage")
    lost = [sid for sid, facts in spark.items() if facts.all_failed]
    # THEN their records and bytes are unknown (null), not 0
    ours = imported.summaries.stages.filter(pl.col("stage_id").is_in(lost))
    assert ours["records"].null_count() == len(lost)
    assert ours["bytes"].null_count() == len(lost)


def test_a_spark_1_2_log_folder_names_the_driver_as_its_single_file_log() -> None:
    # GIVEN a Spark 1.2 log folder (its driver is "<driver>") and the same
    # application's single-file log (its driver is "driver")
    folder = PUBLIC / "spark" / "legacy-dir" / "local-1422981759269"
    single = PUBLIC / "spark" / "spark-events" / "local-1422981759269"
    if not (folder.is_dir() and single.is_file()):
        pytest.skip("the public Spark 1.2 logs are not here")
    # WHEN both are summarised
    tables = []
    for path in (folder, single):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            executors = summarize(import_trace(path, progress=False), WINDOW_NS)
        tables.append(executors.executors.select("executor_id", "tasks", "task_ns"))
    # THEN both executor tables are one row, "driver", with the same facts
    assert tables[0]["executor_id"].to_list() == ["driver"]
    assert tables[0].equals(tables[1])


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"Event": f"SparkListener{kind}", **fields}


def _task_info(tid: int, launch: int, **extra: Any) -> dict[str, Any]:
    return {
        "Task ID": tid,
        "Index": tid,
        "Attempt": 0,
        "Launch Time": launch,
        "Executor ID": "1",
        "Host": "h",
        "Speculative": False,
        **extra,
    }


def test_a_task_launched_at_the_logs_last_event_counts_in_its_stage(
    tmp_path: Path,
) -> None:
    # GIVEN a log whose last event launches a second task that never ends
    # (so it took no time at all) after a first one that ran 40 ms
    t0 = 1_700_000_000_000  # ms since the epoch, as Spark writes times
    stage = {"Stage ID": 0, "Stage Attempt ID": 0}
    info = {**stage, "Stage Name": "count at A:1", "Number of Tasks": 2}
    events = [
        _event("ApplicationStart", Timestamp=t0, **{"App ID": "app-1"}),
        _event(
            "ExecutorAdded",
            Timestamp=t0,
            **{"Executor ID": "1", "Executor Info": {"Host": "h", "Total Cores": 1}},
        ),
        _event(
            "JobStart", **{"Job ID": 0, "Submission Time": t0 + 5, "Stage IDs": [0]}
        ),
        _event("StageSubmitted", **{"Stage Info": {**info, "Submission Time": t0 + 5}}),
        _event("TaskStart", **stage, **{"Task Info": _task_info(0, t0 + 10)}),
        _event(
            "TaskEnd",
            **stage,
            **{
                "Task Type": "ResultTask",
                "Task End Reason": {"Reason": "Success"},
                "Task Info": _task_info(
                    0, t0 + 10, **{"Finish Time": t0 + 50, "Failed": False}
                ),
                "Task Metrics": {"Executor Run Time": 30, "JVM GC Time": 3},
            },
        ),
        _event("TaskStart", **stage, **{"Task Info": _task_info(1, t0 + 50)}),
    ]
    log = tmp_path / "app-1"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    # WHEN it is summarised
    s = summarize(import_trace(log, progress=False), WINDOW_NS)
    # THEN the stage and the executor count both attempts, the open one
    # with no time, and the GC share is that of the measured attempt
    (row,) = s.stages.rows(named=True)
    assert (row["tasks"], row["max_task_ns"]) == (2, 40 * MS)
    assert row["gc_share"] == pytest.approx(0.1)
    executor = _rows(s.executors, "executor_id")["1"]
    assert (executor["tasks"], executor["task_ns"]) == (2, 40 * MS)
