"""The ``sparktrail cp`` subcommand and the CLI's error handling."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from sparktrail.cli import main
from sparktrail.cli.cp import whole_trace_window
from sparktrail.engines import summarize
from sparktrail.pag.trace import write_trace
from sparktrail.pag.workers import worker_label


def straggler_trace() -> pl.DataFrame:
    # The driver launches two tasks at t=0; slot 1 finishes at 10, slot 0
    # at 40; both report back to the driver.
    return pl.DataFrame(
        {
            "src_worker": ["driver", "driver", "s0", "s1", "s0", "s1", "driver"],
            "dst_worker": ["s0", "s1", "s0", "s1", "driver", "driver", "driver"],
            "start_ns": [0, 0, 0, 0, 40, 10, 0],
            "end_ns": [0, 0, 40, 10, 40, 10, 40],
            "activity": [
                "control",
                "control",
                "processing",
                "processing",
                "control",
                "control",
                "waiting",
            ],
        }
    )


def test_cp_prints_shares_by_activity_and_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a trace directory where slot s0 is the straggler
    write_trace(straggler_trace(), tmp_path / "trace" / "part-0.arrow")
    # WHEN the cp command runs over the whole trace
    code = main(["cp", str(tmp_path / "trace")])
    # THEN all CP is processing on s0 (the only path that spans the run)
    out = capsys.readouterr().out
    assert code == 0
    assert "7 rows, 1 windows" in out
    worker_lines = out.split("CP by worker:")[1].strip().splitlines()
    assert worker_lines[0].split() == ["s0", "100.0%"]
    assert "processing" in out.split("CP by activity:")[1].splitlines()[1]


def test_cp_with_windows_counts_every_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_trace(straggler_trace(), tmp_path / "t.arrow")
    assert main(["cp", str(tmp_path / "t.arrow"), "--window", "20ns"]) == 0
    # [0, 20) and [20, 40); the last event (t=40) opens no window of its own
    assert "2 windows" in capsys.readouterr().out


def printed_shares(out: str, heading: str) -> dict[str, str]:
    """``label -> share`` of one table printed by ``sparktrail cp``."""
    table = out.split(f"CP by {heading}:")[1].split("\n\n")[0]
    return dict(line.strip().rsplit(None, 1) for line in table.strip().splitlines())


def test_cp_names_the_workers_the_summaries_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN exec-1/0 computing, then a message exec-1/0 -> exec-2/0 in
    # flight for 3 ns, then exec-2/0 computing
    trace = pl.DataFrame(
        {
            "src_worker": ["exec-1/0", "exec-1/0", "exec-2/0"],
            "dst_worker": ["exec-1/0", "exec-2/0", "exec-2/0"],
            "start_ns": [0, 5, 8],
            "end_ns": [5, 8, 12],
            "activity": ["processing", "data", "processing"],
        }
    )
    write_trace(trace, tmp_path / "t.arrow")
    # WHEN the cp command runs over the whole trace
    assert main(["cp", str(tmp_path / "t.arrow")]) == 0
    # THEN its worker shares are the straggler summary's, which charges the
    # message to its receiver: exec-2/0 holds 7 of the 12 ns
    origin, span = whole_trace_window(trace)
    straggler = summarize(trace, span, origin).straggler
    want = {
        worker_label(w): f"{share:.1%}"
        for w, share in straggler.select("worker", "cp_share").rows()
    }
    got = printed_shares(capsys.readouterr().out, "worker")
    assert got == want
    assert list(got) == ["executor 2 · core 0", "executor 1 · core 0"]


def test_missing_trace_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["cp", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "does not exist" in err and "nope" in err


def test_corrupt_trace_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(b"this is not arrow")
    assert main(["cp", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


@pytest.mark.parametrize("window", ["0s", "10", "-1s", "fast"])
def test_bad_window_is_a_usage_error(tmp_path: Path, window: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["cp", str(tmp_path), "--window", window])
    assert exit_info.value.code == 2
