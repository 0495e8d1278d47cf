"""How far behind the trace the live page is (issue 15, "bad input").

The live status line says how far the page is behind a live trace (wall
clock now, minus the newest closed window's end, minus the lateness), and
that the trace is idle once rows stop arriving. Without a browser: the
loader's snapshot, then the app's refresh callback over Dash's route.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest

from sparktrail.cli.serve import live_loader
from sparktrail.dashboard import live_view
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import StaticSource, lag_ns, lag_text
from sparktrail.pag import write_trace
from sparktrail.synthetic import barrier_trace
from sparktrail.units import duration

from .test_many_windows import REFRESH, post

WINDOW_NS = 500_000
LATENESS_NS = 1_000_000


def test_the_lag_is_how_long_the_first_unshown_window_has_been_due() -> None:
    s = 1_000_000_000
    # windows of 1 s, 2 s lateness, closed up to 8 s: [8 s, 9 s) is due at
    # 11 s, so at 12.5 s the page is 1.5 s behind
    assert lag_ns(12 * s + s // 2, 8 * s, 2 * s, s) == 3 * s // 2
    # not due yet: not behind
    assert lag_ns(10 * s, 8 * s, 2 * s, s) == 0
    assert lag_ns(11 * s, 8 * s, 2 * s, s) == 0
    # no window closed: unknown
    assert lag_ns(10 * s, None, 2 * s, s) is None
    assert lag_text(3 * s // 2, 2 * s) == (
        "behind the trace by 1.5 s (beyond the 2 s lateness)"
    )


def _live_trace(directory: Path, age_ns: int) -> None:
    """A trace whose last event was ``age_ns`` before now (a live one)."""
    trace = barrier_trace(1500, workers=8, seed=2)
    shift = time.time_ns() - age_ns - int(trace["end_ns"].max())  # type: ignore[arg-type]
    write_trace(
        trace.with_columns(pl.col("start_ns", "end_ns") + shift),
        directory / "part-000.arrow",
    )


def test_the_live_status_says_how_far_behind_the_page_is(tmp_path: Path) -> None:
    # GIVEN a live trace whose last event was 5 s ago (its last windows were
    # due seconds ago: the page starts behind)
    _live_trace(tmp_path, 5_000_000_000)
    loader = live_loader(tmp_path, WINDOW_NS, LATENESS_NS)
    # WHEN the loader steps
    before = time.time_ns()
    snapshot = loader.step()
    after = time.time_ns()
    # THEN the snapshot holds the lag: how long the first window not closed
    # has been due (its end plus the lateness)
    assert loader._pipeline is not None
    closed = loader._pipeline.closed_until_ns
    assert snapshot.windows and closed is not None
    assert snapshot.lag_ns is not None
    due = closed + WINDOW_NS + LATENESS_NS
    assert before - due <= snapshot.lag_ns <= after - due
    assert 4.0 < snapshot.lag_ns / 1e9 < 60.0
    # AND the status line says it
    assert "behind the trace by " in snapshot.status
    assert f"(beyond the {duration(LATENESS_NS)} lateness)" in snapshot.status
    # AND the page's status line, over the app's refresh callback, shows it
    client = create_app(StaticSource(snapshot)).server.test_client()
    status, data, _ = post(
        client,
        REFRESH,
        [("refresh", "n_intervals", 1)],
        (("shown-version", "data", 0), ("drawn-windows", "data", 0)),
    )
    assert status == 200
    shown = data["response"]["status"]["children"]
    assert "behind the trace by " in shown


def test_an_idle_trace_is_not_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a loader that read a trace, and no rows since (idle at once)
    _live_trace(tmp_path, 5_000_000_000)
    monkeypatch.setattr(live_view, "IDLE_AFTER_S", 0.0)
    loader = live_loader(tmp_path, WINDOW_NS, LATENESS_NS)
    loader.step()
    time.sleep(0.01)
    # WHEN it steps again
    snapshot = loader.step()
    # THEN there is no lag, and the status says the trace is idle
    assert snapshot.lag_ns is None
    assert "no new trace rows for " in snapshot.status
    assert "behind" not in snapshot.status
