"""The live whole run's background profile: when it refreshes, and a lead
that holds still between refreshes (issue 46: the banner flickered)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.engines.run_so_far import RunSoFar, lead_key, steady_lead
from sparktrail.summaries import Summaries
from sparktrail.summaries.frames import HINTS, SUMMARY_SCHEMAS


def _summaries(hints: list[tuple[str, str, int, float]]) -> Summaries:
    frames = {n: pl.DataFrame(schema=s) for n, s in SUMMARY_SCHEMAS.items()}
    frames["hints"] = pl.DataFrame(
        [
            {"kind": k, "severity": sev, "stage_id": st, "saving_share": share}
            for k, sev, st, share in hints
        ],
        schema=HINTS,
    )
    return Summaries(**frames, window_ns=10**9, origin_ns=0)


class FakeEngine:
    """Hands out the next ranking on each profile, and counts them."""

    def __init__(self, rankings: list[list[tuple[str, str, int, float]]]) -> None:
        self.rankings = rankings
        self.calls = 0
        self.release = threading.Event()
        self.release.set()

    def summarize(self, trace: Any, options: Any = None) -> Summaries:
        self.release.wait(10)
        ranking = self.rankings[min(self.calls, len(self.rankings) - 1)]
        self.calls += 1
        return _summaries(ranking)


def _so_far(engine: FakeEngine, **kw: Any) -> RunSoFar:
    return RunSoFar(Path("trace"), engine, **kw)  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_refresh_waits_for_new_rows_the_interval_and_the_last_one() -> None:
    # GIVEN a run so far refreshed at most every 10 s
    engine = FakeEngine([[("gc", "medium", 1, 0.1)]])
    clock = Clock()
    run = _so_far(engine, min_interval_s=10.0, cost_factor=0.0, clock=clock)
    # WHEN rows are offered now, again soon, with no new rows, and later
    assert run.offer(100)
    run.wait(10)
    clock.now = 5.0
    assert not run.offer(200)  # within the interval
    clock.now = 50.0
    assert not run.offer(100)  # no row since the last
    assert run.offer(200)
    run.wait(10)
    # THEN two profiles ran, and the newest is handed out
    assert engine.calls == 2
    result = run.latest()
    assert result is not None and lead_key(result.summaries.hints)[0] == "gc"


def test_no_second_refresh_starts_while_one_runs() -> None:
    engine = FakeEngine([[("gc", "medium", 1, 0.1)]])
    engine.release.clear()
    run = _so_far(engine, min_interval_s=0.0, cost_factor=0.0)
    assert run.offer(100)
    assert not run.offer(200)
    engine.release.set()
    run.wait(10)
    assert engine.calls == 1


def test_the_lead_holds_until_another_hint_saves_clearly_more() -> None:
    # GIVEN rankings where spill leads, then gc edges ahead, then gc wins big
    engine = FakeEngine(
        [
            [("spill", "medium", 2, 0.10), ("gc", "medium", 1, 0.08)],
            [("gc", "medium", 1, 0.11), ("spill", "medium", 2, 0.10)],
            [("gc", "high", 1, 0.30), ("spill", "medium", 2, 0.10)],
        ]
    )
    run = _so_far(engine, min_interval_s=0.0, cost_factor=0.0)
    leads = []
    for _ in range(3):
        result = run.refresh()
        assert result is not None
        leads.append(lead_key(result.summaries.hints)[0])  # type: ignore[index]
    # THEN the banner's hint changes once, when the ranking really changed
    assert leads == ["spill", "spill", "gc"]


def test_a_lead_gone_or_hidden_gives_way() -> None:
    hints = _summaries([("gc", "medium", 1, 0.11), ("spill", "info", 2, 0.01)]).hints
    assert steady_lead(hints, ("spill", 2, None, None))["kind"][0] == "gc"
    assert steady_lead(hints, ("skew", 9, None, None))["kind"][0] == "gc"
    with pytest.raises(ValueError, match="margin -1"):
        steady_lead(hints, ("spill", 2, None, None), margin=-1)


def test_bad_intervals_are_named() -> None:
    with pytest.raises(ValueError, match="min_interval_s=-1"):
        _so_far(FakeEngine([[]]), min_interval_s=-1)


def test_a_costly_profile_spaces_the_next_out() -> None:
    # GIVEN profiles that take 3 s, spaced by 4 times that after each
    clock = Clock()

    class Slow(FakeEngine):
        def summarize(self, trace: Any, options: Any = None) -> Summaries:
            clock.now += 3.0
            return super().summarize(trace, options)

    run = _so_far(Slow([[]]), min_interval_s=0.0, cost_factor=4.0, clock=clock)
    assert run.offer(1)
    run.wait(10)  # ended at 3 s
    clock.now = 14.0
    assert not run.offer(2)  # 11 s after the end < 12 s
    clock.now = 15.0
    assert run.offer(2)


class FailingEngine:
    """Fails its first profile, then hands out one ranking."""

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, trace: Any, options: Any = None) -> Summaries:
        self.calls += 1
        if self.calls == 1:
            raise OSError("trace file vanished")
        return _summaries([("gc", "medium", 1, 0.1)])


def test_a_failed_refresh_is_logged_and_the_next_one_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN a background profile that fails once
    engine = FailingEngine()
    run = _so_far(engine, min_interval_s=0.0, cost_factor=0.0)  # type: ignore[arg-type]
    # WHEN it runs in the background
    with caplog.at_level("WARNING", logger="sparktrail.engines.run_so_far"):
        assert run.offer(100)
        with pytest.raises(OSError):
            run.wait(10)
        # (the Future's callbacks run just after its waiters wake)
        deadline = time.monotonic() + 5
        while "vanished" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
    # THEN the failure is said, not left in a Future nobody reads
    assert "trace file vanished" in caplog.text
    assert run.latest() is None
    # AND the next offer profiles again
    assert run.offer(200)
    run.wait(10)
    assert run.latest() is not None
