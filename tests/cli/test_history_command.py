"""``sparktrail history`` (issue 28 item 3): a directory of public logs,
a corrupt and an empty one, scanned, re-scanned and grown."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from sparktrail.cli import main
from sparktrail.dashboard.fleet_page import ROW_KEYS
from sparktrail.fleet import APPS_DIR, ENTRY_FILE, find_logs, scan
from tests.paths import EVENTLOGS

PUBLIC = EVENTLOGS / "public"
EVENTS = PUBLIC / "spark" / "spark-events"
ROLLING = "eventlog_v2_spark-bcec39f6201b42b9925124595baad260"
#: Nine applications: plain logs of Spark 1.2 to 3.x, a zstd Spark 4.1 log
#: with a failed job, a rolling Spark 3.5 log and a Spark 1.x log folder.
LOGS = [
    EVENTS / "app-20161115172038-0000",
    EVENTS / "application_1538416563558_0014",
    EVENTS / "application_1578436911597_0052",
    EVENTS / "local-1422981759269",
    EVENTS / "local-1430917381534",
    EVENTS / "local-1426533911241",
    PUBLIC / "kubeflow/skills/cli/e2e/spark-events/local-1776286804625.zstd",
    PUBLIC / "kubeflow/examples/basic/events" / ROLLING,
    PUBLIC / "spark/legacy-dir/local-1422981759269",
]
NEW_LOG = EVENTS / "application_1628109047826_1317105"


def _copy(log: Path, folder: Path, name: str | None = None) -> Path:
    target = folder / (name or log.name)
    if log.is_dir():
        shutil.copytree(log, target)
    else:
        shutil.copyfile(log, target)
    return target


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("history") / "spark-events"
    folder.mkdir()
    for log in LOGS[:-1]:
        _copy(log, folder)
    _copy(LOGS[-1], folder, "legacy-local-1422981759269")
    text = (EVENTS / "local-1422981759269").read_bytes()[:4000]
    (folder / "corrupt-1").write_bytes(text.replace(b'"', b"'"))
    (folder / "empty-1").write_bytes(b"")
    return folder


@pytest.fixture(scope="module")
def scanned(logdir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("history-out") / "out"
    return out, scan(logdir, out, jobs=2)


def test_find_logs_lists_files_and_log_folders(logdir: Path) -> None:
    names = [log.name for log in find_logs(logdir)]
    assert len(names) == len(LOGS) + 2
    assert ROLLING in names
    assert "legacy-local-1422981759269" in names


def test_scan_profiles_every_log_and_keeps_bad_ones_as_rows(scanned: Any) -> None:
    out, result = scanned
    # THEN every log is a row: the bad ones with their error, last
    assert len(result.rows) == len(LOGS) + 2 and result.profiled == len(LOGS) + 2
    failed = [row for row in result.rows if row["error"]]
    assert {Path(row["log"]).name for row in failed} == {"corrupt-1", "empty-1"}
    assert result.rows[-2:] == failed and result.failed == 2
    assert all("no Spark listener events" in row["error"] for row in failed)
    # AND each application has its report, linked from the page
    page = (out / "index.html").read_text()
    for row in result.rows:
        if not row["error"]:
            assert (out / row["report"]).is_file()
            assert f'href="{row["report"]}"' in page
    # AND the ranking puts what can be saved first
    saving = [row["saving_core_hours"] or 0.0 for row in result.rows]
    assert saving == sorted(saving, reverse=True)
    assert result.rows[0]["predicted_saving_s"] > 0


def test_a_second_scan_profiles_nothing_and_a_new_log_is_picked_up(
    scanned: Any, logdir: Path
) -> None:
    out, first = scanned
    entries = sorted((out / APPS_DIR).glob(f"*/{ENTRY_FILE}"))
    assert len(entries) == len(LOGS) + 2
    written = {p: p.stat().st_mtime_ns for p in entries}
    # WHEN the directory is scanned again THEN nothing is profiled again
    again = scan(logdir, out, jobs=2)
    assert (again.profiled, again.reused) == (0, len(LOGS) + 2)
    assert {p: p.stat().st_mtime_ns for p in entries} == written
    assert again.rows == first.rows
    # WHEN a log is added THEN only it is profiled
    new = _copy(NEW_LOG, logdir)
    try:
        grown = scan(logdir, out, jobs=2)
        assert grown.profiled_logs == [str(new.resolve())]
        assert len(grown.rows) == len(LOGS) + 3
        assert {p: p.stat().st_mtime_ns for p in entries} == written
        # WHEN a log grows (in progress) THEN it is profiled again
        with new.open("ab") as sink:
            sink.write(b"\n")
        assert scan(logdir, out, jobs=1).profiled_logs == [str(new.resolve())]
    finally:
        new.unlink()
    # WHEN it is gone THEN its row and cache entry are too
    assert len(scan(logdir, out, jobs=1).rows) == len(LOGS) + 2


def test_history_json_contract(
    scanned: Any, logdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = scanned
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["history", str(logdir), "-o", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert "0 profiled" in captured.err
    assert len(rows) == len(LOGS) + 2
    for row in rows:
        assert list(row)[: len(ROW_KEYS)] == list(ROW_KEYS)
        if row["error"]:
            continue
        assert isinstance(row["app_id"], str) and isinstance(row["verdict"], str)
        assert isinstance(row["wall_s"], float) and row["wall_s"] > 0
        assert row["start"].endswith("Z")
        assert row["report"].endswith("/report.html")
    failing = next(r for r in rows if r["app_id"] == "local-1776286804625")
    assert failing["top_hint"] == "failures"
    saved = [r for r in rows if r["predicted_saving_s"]]
    assert saved and all(r["saving_core_hours"] is not None for r in saved)


def test_history_of_a_missing_directory_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", str(tmp_path / "nope"), "-o", str(tmp_path / "o")]) == 2
    assert "no such event-log directory" in capsys.readouterr().err


def test_files_that_are_no_event_logs_are_skipped_not_applications(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a folder of a text file and a JSON file that are no event logs
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello\n")
    (folder / "config.json").write_text('{"x": 1}\n')
    # WHEN history scans it
    code = main(["history", str(folder), "-o", str(tmp_path / "out")])
    # THEN nothing is an application: exit 2, one line saying why
    err = capsys.readouterr().err
    assert code == 2
    assert "0 applications" in err and "2 file(s) skipped: not event logs" in err
    assert err.strip().endswith(
        f"{folder}: no Spark event log in it (2 file(s) are not event logs)"
    )
    # AND beside a real log, the log is the one application
    _copy(LOGS[3], folder)
    assert main(["history", str(folder), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("1 applications: 1 profiled, 0 unchanged")
    assert "2 file(s) skipped" in err
