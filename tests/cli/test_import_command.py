"""``sparktrail import`` and ``profile`` given a folder of several event logs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sparktrail.cli import main
from tests.paths import SHARED_LOG

LOG = SHARED_LOG

pytestmark = pytest.mark.skipif(not LOG.exists(), reason=f"{LOG} is missing")


@pytest.mark.parametrize("command", ["import", "profile"])
def test_folder_of_logs_is_one_line_naming_them(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a folder (spark.eventLog.dir) holding two separate event logs
    folder = tmp_path / "spark-events"
    folder.mkdir()
    shutil.copy(LOG, folder / "local-1")
    shutil.copy(LOG, folder / "local-2.inprogress")
    # WHEN it is given as the log
    code = main([command, str(folder), "-o", str(tmp_path / "out")])
    # THEN exit 2, one line that counts and names the logs to pick from
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.splitlines() == [
        f"sparktrail: error: {folder}: a folder holding 2 event logs, not one "
        "log; give the path of one: local-1, local-2.inprogress"
    ]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_one_rolling_log_in_a_folder_is_one_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a rolling log directory (its files are parts of one log)
    root = tmp_path / "eventlog_v2_local-1532512550423"
    root.mkdir()
    data = LOG.read_bytes().splitlines(keepends=True)
    (root / "events_1_local-1532512550423").write_bytes(b"".join(data[:15]))
    (root / "events_2_local-1532512550423").write_bytes(b"".join(data[15:]))
    # WHEN it is imported THEN it is one trace
    assert main(["import", str(root), "-o", str(tmp_path / "out")]) == 0
    assert [p.name for p in (tmp_path / "out").iterdir()] == [
        "local-1532512550423.arrow"
    ]
    assert "8 tasks" in capsys.readouterr().out
