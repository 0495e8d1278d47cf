"""``sparktrail serve INPUT`` (issue 44, item 5): an event log is profiled
and its report served; a profile folder is served as ``--report``; a
folder of several logs points at ``history --serve``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import sparktrail
from sparktrail.cli import main
from sparktrail.dashboard import app as app_module
from sparktrail.dashboard.live_view import StaticSource
from tests.paths import SHARED_LOG


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `serve` would have served, without a server."""
    got: dict[str, Any] = {}
    monkeypatch.setattr(app_module, "create_app", lambda source: source)
    monkeypatch.setattr(
        app_module, "serve", lambda app, host, port, verbose=False: got.update(app=app)
    )
    return got


def test_serve_of_an_event_log_serves_its_profile(served: dict[str, Any]) -> None:
    # WHEN `serve` is given an event log file
    assert main(["serve", str(SHARED_LOG)]) == 0
    # THEN it serves the profile of that log: one whole-run view whose
    # verdict is `sparktrail profile`'s
    source = served["app"]
    assert isinstance(source, StaticSource)
    snapshot = source.latest()
    assert not snapshot.live and len(snapshot.windows) == 1
    expected = sparktrail.profile(SHARED_LOG)
    shown = snapshot.windows[0].summaries
    assert sparktrail.verdict(shown) == sparktrail.verdict(expected.summaries)


def test_serve_of_a_profile_folder_is_its_report(
    served: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN a profile folder
    sparktrail.profile(SHARED_LOG).save(tmp_path / "p")
    # WHEN `serve` is given the folder itself
    assert main(["serve", str(tmp_path / "p")]) == 0
    # THEN it serves it as `--report` does
    assert served["app"].latest().source == str(tmp_path / "p")


def test_serve_of_a_folder_of_logs_points_at_history(
    served: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a folder holding two event logs
    for name in ("a", "b"):
        shutil.copyfile(SHARED_LOG, tmp_path / name)
    # THEN one line, exit 2, naming the command that shows them all
    assert main(["serve", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"sparktrail history {tmp_path} --serve" in err
    assert "app" not in served
