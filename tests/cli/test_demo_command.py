"""``sparktrail demo --serve``: Ctrl-C ends the workload quietly."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from sparktrail.cli import build_parser, demo
from sparktrail.dashboard import app as app_module


def test_ctrl_c_ends_after_the_running_round_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import sparktrail.workloads as workloads

    # GIVEN demo --serve with the server faked and a workload whose second
    # round gets a Ctrl-C (SIGINT) while it runs
    monkeypatch.setattr(app_module, "serve", lambda app, host, port: None)
    monkeypatch.setattr(workloads, "warm_python_workers", lambda spark: None)
    rounds: list[int] = []

    def round_(spark: Any, number: int) -> int:
        rounds.append(number)
        if number == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return number

    monkeypatch.setattr(workloads, "moving_hotspot", round_)
    before = signal.getsignal(signal.SIGINT)
    args = build_parser().parse_args(["demo", "--serve", "--minutes", "1"])
    # WHEN it runs
    demo._serve_moving_hotspot(None, tmp_path / "trace", args)
    # THEN that round finished, no other started, no KeyboardInterrupt
    # escaped, the user was told, and the old SIGINT handler is back
    assert rounds == [0, 1]
    assert "stopping after this round" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before
