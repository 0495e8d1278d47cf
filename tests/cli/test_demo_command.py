"""``sparktrail demo --serve``: Ctrl-C ends the workload quietly."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from sparktrail.cli import build_parser, demo
from sparktrail.dashboard import app as app_module


class FakeContext:
    def __init__(self) -> None:
        self.levels: list[str] = []

    def setLogLevel(self, level: str) -> None:
        self.levels.append(level)


class FakeSpark:
    def __init__(self) -> None:
        self.sparkContext = FakeContext()


class FakeQuery:
    lastProgress: dict[str, Any] = {  # noqa: RUF012 (PySpark's name)
        "batchId": 3,
        "inputRowsPerSecond": 2000.0,
        "processedRowsPerSecond": 2500.0,
    }

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_ctrl_c_ends_after_the_running_round_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import sparktrail.workloads as workloads

    # GIVEN demo --serve with the server faked and a workload whose second
    # round gets a Ctrl-C (SIGINT) while it runs
    monkeypatch.setattr(app_module, "serve", lambda app, host, port, **_: None)
    monkeypatch.setattr(workloads, "warm_python_workers", lambda spark: None)
    rounds: list[int] = []

    def round_(spark: Any, number: int) -> int:
        rounds.append(number)
        if number == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return number

    monkeypatch.setattr(workloads, "moving_hotspot", round_)
    query = FakeQuery()
    started: list[str] = []

    def streaming(spark: Any, checkpoint: str, **_: Any) -> FakeQuery:
        started.append(checkpoint)
        return query

    monkeypatch.setattr(workloads, "streaming_join", streaming)
    before = signal.getsignal(signal.SIGINT)
    args = build_parser().parse_args(["demo", "--serve", "--minutes", "1"])
    # WHEN it runs
    spark = FakeSpark()
    demo._serve_moving_hotspot(spark, tmp_path / "trace", args)
    # THEN that round finished, no other started, no KeyboardInterrupt
    # escaped, the user was told, and the old SIGINT handler is back
    assert rounds == [0, 1]
    # AND the streaming query ran beside it, its checkpoint hidden in the
    # trace directory, and was stopped with its abort's ERROR log muted
    assert started == [str(tmp_path / "trace" / ".checkpoint")]
    assert query.stopped
    assert spark.sparkContext.levels == ["OFF", "ERROR"]
    printed = capsys.readouterr()
    assert "streaming batch 3: 2,000 rows/s in" in printed.out
    assert "stopping after this round" in printed.err
    assert signal.getsignal(signal.SIGINT) is before
