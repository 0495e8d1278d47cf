"""Bad event logs: warnings that name file and line, the rest still imported."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from sparktrail.cli import main
from sparktrail.tracer import (
    EventLogError,
    EventLogWarning,
    ImportStats,
    import_eventlog,
    import_trace,
)
from tests.paths import SHARED_LOG

LOG = SHARED_LOG
LINES = LOG.read_text().splitlines(keepends=True)


def write(tmp_path: Path, lines: list[str], name: str = "app-1") -> Path:
    target = tmp_path / name
    target.write_text("".join(lines))
    return target


def test_truncated_last_line(tmp_path: Path) -> None:
    cut = [*LINES[:-1], LINES[-1][:20]]
    target = write(tmp_path, cut)
    stats = ImportStats()
    with pytest.warns(EventLogWarning, match=rf"{target}:30: skipped: truncated"):
        trace = import_eventlog(target, stats=stats)
    assert stats.skipped_lines == 1 and stats.tasks == 8
    assert trace.height > 0


def test_garbage_line_in_the_middle(tmp_path: Path) -> None:
    lines = [*LINES[:12], "this is not json\n", '{"Event": 3}\n', *LINES[12:]]
    target = write(tmp_path, lines)
    stats = ImportStats()
    with pytest.warns(EventLogWarning) as record:
        trace = import_eventlog(target, stats=stats)
    messages = [str(w.message) for w in record]
    assert any(f"{target}:13: skipped: line is not valid JSON" in m for m in messages)
    assert any(f"{target}:14: skipped: line is not a Spark" in m for m in messages)
    assert stats.skipped_lines == 2 and stats.tasks == 8
    assert trace.equals(import_eventlog(LOG))


def test_unknown_events(tmp_path: Path) -> None:
    lines = [
        *LINES[:5],
        '{"Event":"org.apache.spark.sql.SomethingNew","x":1}\n',
        '{"Event":"SparkListenerTaskTeleported","Task ID":3}\n',
        *LINES[5:],
    ]
    target = write(tmp_path, lines)
    stats = ImportStats()
    with pytest.warns(EventLogWarning) as record:
        trace = import_eventlog(target, stats=stats)
    messages = [str(w.message) for w in record]
    assert messages == [
        f"{target}:7: skipped: unknown task event 'SparkListenerTaskTeleported'"
    ]
    assert stats.skipped_lines == 1
    assert trace.equals(import_eventlog(LOG))


def test_future_spark_version(tmp_path: Path) -> None:
    lines = ['{"Event":"SparkListenerLogStart","Spark Version":"7.0.0"}\n', *LINES[1:]]
    target = write(tmp_path, lines)
    with pytest.warns(EventLogWarning, match=rf"{target}:1: written by Spark 7.0.0"):
        trace = import_eventlog(target)
    assert trace.equals(import_eventlog(LOG))


def test_old_spark_version_without_newer_fields(tmp_path: Path) -> None:
    """Fields missing in old logs become nulls or zeros, never errors."""
    lines = [
        '{"Event":"SparkListenerLogStart","Spark Version":"1.4.0"}\n',
        '{"Event":"SparkListenerJobStart","Job ID":0,"Submission Time":1000,'
        '"Stage IDs":[0]}\n',
        '{"Event":"SparkListenerTaskStart","Stage ID":0,"Task Info":{"Task ID":0,'
        '"Index":0,"Launch Time":1000,"Executor ID":"1","Host":"h"}}\n',
        '{"Event":"SparkListenerTaskEnd","Stage ID":0,"Task Info":{"Task ID":0,'
        '"Index":0,"Launch Time":1000,"Executor ID":"1","Finish Time":1100,'
        '"Failed":false},"Task Metrics":{"Executor Run Time":80}}\n',
        '{"Event":"SparkListenerJobEnd","Job ID":0,"Completion Time":1150}\n',
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = import_eventlog(write(tmp_path, lines))
    task = trace.filter(trace["task_id"] == 0)
    assert task["attempt"].is_null().all()
    assert task["partition"].to_list() == [0] * task.height
    assert task["operator"][0] == "stage 0"
    assert set(task["activity"]) == {"control", "scheduling", "processing"}


def test_empty_file(tmp_path: Path) -> None:
    target = write(tmp_path, [])
    with (
        pytest.warns(EventLogWarning, match=rf"{target}:0: empty event file"),
        pytest.raises(EventLogError, match=str(target)),
    ):
        import_eventlog(target)


def test_nothing_readable(tmp_path: Path) -> None:
    target = write(tmp_path, ["garbage\n", "more garbage\n"])
    with pytest.warns(EventLogWarning), pytest.raises(EventLogError, match=str(target)):
        import_eventlog(target)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        import_eventlog(tmp_path / "nope")


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "traces"
    assert main(["import", str(LOG), "-o", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("local-1532512550423: 8 tasks, 2 stages")
    assert "0 clipped tasks, 0 skipped lines" in line
    assert (out / "local-1532512550423.arrow").is_file()
    bad = write(tmp_path, ["garbage\n"])
    with pytest.warns(EventLogWarning):
        assert main(["import", str(bad), "-o", str(out)]) == 2
    assert str(bad) in capsys.readouterr().err


@pytest.mark.parametrize(
    "properties",
    ['"not an object"', "[1, 2]", '{"spark.master": 7, "spark.speculation": null}'],
)
def test_malformed_properties_still_profile(
    tmp_path: Path, properties: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the shared log with its EnvironmentUpdate's properties broken
    lines = list(LINES)
    env = next(i for i, line in enumerate(lines) if "EnvironmentUpdate" in line)
    event = '{"Event":"SparkListenerEnvironmentUpdate","Spark Properties":'
    lines[env] = f"{event}{properties}}}\n"
    log = write(tmp_path, lines)
    # WHEN it is imported THEN the context has no properties to trust
    trace = import_trace(log)
    assert trace.context.setting("spark.speculation") is None
    assert trace.context.master in (None, "7")
    # AND it still profiles, with no rule that needs the master firing on
    # a guess (idle capacity needs a non-local master it was told)
    assert main(["profile", str(log), "-o", str(tmp_path / "out")]) == 0
    assert "Hints (" in capsys.readouterr().out
