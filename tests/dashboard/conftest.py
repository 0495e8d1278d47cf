"""A live snapshot of 10,000 windows, for the dashboard's many-window tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.dashboard.live_view import ViewState, WindowView, closed_label
from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.store import WindowStore
from sparktrail.pag import write_trace
from sparktrail.synthetic import barrier_trace

MANY = 10_000
S = 1_000_000_000
T0 = 1_700_000_000 * S


@pytest.fixture(scope="session")
def many_windows(tmp_path_factory: pytest.TempPathFactory) -> ViewState:
    """10,000 one-second windows as a live snapshot (frames held in memory).

    The online pipeline closes a few real windows of a small trace; window
    ``i`` of the snapshot starts ``i`` seconds after ``T0`` and shares the
    frames of real window ``i mod k``, its over-time rows moved to its
    own start.
    """
    trace_dir = tmp_path_factory.mktemp("many") / "trace"
    write_trace(barrier_trace(1500, workers=8, seed=2), trace_dir / "part-000.arrow")
    seeds = OnlinePipeline(trace_dir, 500_000, 1_000_000).poll(final=True)
    assert len(seeds) > 3
    views = []
    for i in range(MANY):
        seed = seeds[i % len(seeds)]
        start = T0 + i * S
        label = closed_label(start, start + S)
        views.append(WindowView.held(start, start + S, label, seed.summaries, seed.cp))
    by_seed = pl.concat(
        [
            s.summaries.activity_by_window.with_columns(seed=pl.lit(i, pl.Int64))
            for i, s in enumerate(seeds)
        ],
        how="diagonal_relaxed",
    )
    columns = by_seed.columns[:-1]
    replicas = pl.DataFrame({"i": pl.int_range(MANY, eager=True)}).with_columns(
        seed=pl.col("i") % len(seeds), window_start_ns=T0 + pl.col("i") * S
    )
    activity = (
        replicas.join(by_seed.drop("window_start_ns", "window_end_ns"), on="seed")
        .with_columns(window_end_ns=pl.col("window_start_ns") + S)
        .sort("window_start_ns", "activity")
        .select(columns)
    )
    return ViewState(
        source=f"{MANY:,} synthetic windows",
        status=f"{MANY:,} windows closed",
        windows=tuple(views),
        activity_by_window=activity,
        live=True,
        version=1,
        windows_version=1,
    )


@pytest.fixture
def store_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Start times of the windows read from any store from now on."""
    read: list[int] = []
    original = WindowStore.read_window

    def spy(store: WindowStore, start_ns: int, window_ns: int) -> Any:
        read.append(start_ns)
        return original(store, start_ns, window_ns)

    monkeypatch.setattr(WindowStore, "read_window", spy)
    return read


@pytest.fixture
def browser(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A headless Chromium whose page loads wait the test module's ``WAIT``."""
    from tests.dashboard.browser_support import chromium

    driver = chromium(tmp_path / "chromium", request.module.WAIT)
    yield driver
    driver.quit()
