"""``sparktrail live`` and ``sparktrail serve --report`` without a browser."""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl
import pytest

from sparktrail.cli import main
from sparktrail.dashboard.live_view import LATEST, load_report
from sparktrail.dashboard.page_content import GRAPHS, page_figures
from sparktrail.engines.store import WindowStore, store_dir
from sparktrail.pag import write_trace
from sparktrail.summaries import Summaries
from sparktrail.synthetic import barrier_trace
from tests.paths import KAFKA_STREAMING_LOG


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    trace = barrier_trace(1500, workers=8, seed=2).with_columns(
        pl.int_range(pl.len()).alias("task_id")
    )
    write_trace(trace, tmp_path / "trace" / "part-000.arrow")
    return tmp_path / "trace"


def test_live_once_closes_windows_up_to_the_watermark(
    trace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # WHEN live runs once, then once more on the same directory
    args = ["live", str(trace_dir), "--window", "500us", "--lateness", "1ms"]
    assert main([*args, "--once"]) == 0
    first = WindowStore(store_dir(trace_dir)).window_starts()
    assert main([*args, "--once"]) == 0
    # THEN windows were stored once, and the second run closed none
    assert first
    assert WindowStore(store_dir(trace_dir)).window_starts() == first
    assert "0 window(s) closed" in capsys.readouterr().err
    # ... and --final closes the rest
    assert main([*args, "--once", "--final"]) == 0
    assert len(WindowStore(store_dir(trace_dir)).window_starts()) > len(first)


def test_serve_needs_exactly_one_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "either TRACE_DIR or --report" in capsys.readouterr().err


def test_a_profile_output_loads_as_a_finished_snapshot(
    trace_dir: Path, tmp_path: Path
) -> None:
    # GIVEN the output of sparktrail profile
    out = tmp_path / "out"
    assert main(["profile", str(trace_dir), "-o", str(out), "--window", "1ms"]) == 0
    # WHEN it is loaded for serve --report
    snapshot = load_report(out)
    # THEN it is one whole-run view, not live, and every graph can be drawn
    assert not snapshot.live
    assert len(snapshot.windows) == 1
    figures = page_figures(snapshot, LATEST)
    assert sorted(figures) == sorted(GRAPHS)
    assert len(figures["activity-summary"].data) > 0
    # AND the critical timeline has the busiest window's CP rows to draw
    assert snapshot.windows[0].cp is not None and len(snapshot.windows[0].cp) > 0
    assert len(figures["critical-timeline"].data) > 0


def test_live_window_batch_stores_profile_window_batch_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = KAFKA_STREAMING_LOG
    if not log.exists():
        pytest.skip(f"{log} is missing")
    # GIVEN a Structured Streaming log imported to a trace directory
    trace = tmp_path / "trace"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["import", str(log), "-o", str(trace)]) == 0
        # WHEN live cuts it by micro-batch, and profile does too
        assert main(["live", str(trace), "--window", "batch", "--once", "--final"]) == 0
        assert (
            main(["profile", str(trace), "--window", "batch", "-o", str(tmp_path)]) == 0
        )
    # THEN the store holds profile's windows, each printed with its length
    store = WindowStore(store_dir(trace))
    stored = [(s, store.window_end(s)) for s in store.window_starts()]
    windows = Summaries.load(tmp_path / "summaries").windows.sort("window_start_ns")
    assert stored == windows.select("window_start_ns", "window_end_ns").rows()
    captured = capsys.readouterr()
    assert f"{len(stored)} window(s) closed" in captured.err
    assert "UTC (0.351 s): " in captured.out


def test_live_window_batch_on_the_spark_engine_is_refused_in_one_line(
    trace_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["live", str(trace_dir), "--window", "batch", "--engine", "spark"]
    assert main([*args, "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "sparktrail: error: --window batch runs on the polars engine only"
