"""``profile TRACE_DIR`` of a trace directory holding only the listener's
raw log (what a driver with the listener jar and no sparktrail leaves)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktrail.cli import main
from sparktrail.sources import open_trace
from tests.paths import SHARED_LOG

LOG = SHARED_LOG

pytestmark = pytest.mark.skipif(not LOG.exists(), reason=f"{LOG} is missing")


def raw_log(trace_dir: Path, app: str) -> Path:
    """A finished rolling log ``trace_dir/raw/eventlog_v2_<app>/``, in two parts."""
    root = trace_dir / "raw" / f"eventlog_v2_{app}"
    root.mkdir(parents=True)
    data = LOG.read_bytes().splitlines(keepends=True)
    (root / f"events_1_{app}").write_bytes(b"".join(data[:15]))
    (root / f"events_2_{app}").write_bytes(b"".join(data[15:]))
    (root / f"appstatus_{app}").touch()
    return root


def test_a_trace_dir_of_only_the_raw_log_is_profiled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a trace directory with the raw log and no Arrow file
    raw_log(tmp_path / "trace", "local-1532512550423")
    # WHEN it is profiled THEN its raw log is imported
    trace, kind = open_trace(tmp_path / "trace")
    assert kind == "event log" and trace.context is not None
    assert main(["profile", str(tmp_path / "trace"), "-o", str(tmp_path / "out")]) == 0
    assert "8 tasks" in capsys.readouterr().out
    assert (tmp_path / "out" / "report.html").is_file()


def test_two_raw_logs_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN two applications' raw logs in one trace directory
    raw_log(tmp_path / "trace", "local-1")
    raw_log(tmp_path / "trace", "local-2")
    # WHEN it is profiled THEN one line names both
    code = main(["profile", str(tmp_path / "trace"), "-o", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "2 event logs" in err and "eventlog_v2_local-1, eventlog_v2_local-2" in err
