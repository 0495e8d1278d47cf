"""A profile's cost follows the rows, never the time span (DESIGN §10, issue 25).

A run whose driver waited ten years between two jobs (a clock jump, or an
application left open) has few rows: the batch and the online engine
compute the plain stretch of windows between them as one window, which
stands for all of them (its ``span``) in every whole-run share. On a
stretch short enough to build window by window, both ways give the same
summaries.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from sparktrail.dashboard.whole_run import whole_run_frames
from sparktrail.engines import summarize
from sparktrail.engines.online import OnlinePipeline
from sparktrail.pag import write_trace
from sparktrail.pag.snapshot import SnapshotWarning
from sparktrail.pag.windows import listed_spans, plain_stretches
from sparktrail.synthetic import driver_gap_trace as two_jobs

S = 1_000_000_000
TEN_YEARS_S = 10 * 365 * 86_400


def quietly(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        return summarize(*args, **kwargs)


def test_ten_years_of_driver_time_are_one_window() -> None:
    # GIVEN two jobs ten years apart
    trace = two_jobs(TEN_YEARS_S)
    # WHEN it is summarized in 1 s windows
    s = quietly(trace, S)
    # THEN the ten years are one window standing for all of their windows
    assert s.windows.height < 20
    assert int(s.windows["span"].max()) >= TEN_YEARS_S - 2
    # AND the whole run is nearly all driver time, as it was
    shares = dict(s.activity.select("activity", "cp_share").iter_rows())
    assert shares["driver"] > 0.999_999


def test_a_merged_stretch_gives_the_summaries_of_its_windows() -> None:
    # GIVEN a gap of 300 s: long enough to merge, short enough to build
    trace = two_jobs(300)
    # WHEN summarized with the stretch merged and window by window
    merged = quietly(trace, S)
    built = quietly(trace, S, min_stretch=10**9)
    # THEN the stretch is one window there, 300 here
    assert merged.windows.height < built.windows.height - 250
    assert merged.windows["span"].sum() == built.windows["span"].sum()
    # AND every whole-run frame agrees
    for name in ("activity", "straggler", "executor", "operator"):
        want, got = getattr(built, name), getattr(merged, name)
        key = want.columns[0]
        assert_frame_equal(
            got.sort(key), want.sort(key), check_exact=False, rel_tol=1e-9
        )
    stages = ["stage_id", "tasks", "cp_share"]
    assert_frame_equal(
        merged.stages.select(stages).sort("stage_id"),
        built.stages.select(stages).sort("stage_id"),
        check_exact=False,
        rel_tol=1e-9,
    )


def test_the_online_pipeline_closes_a_stretch_as_one_window(tmp_path: Path) -> None:
    # GIVEN the ten-year trace landing in a trace directory
    write_trace(two_jobs(TEN_YEARS_S), tmp_path / "part-000.arrow")
    # WHEN the online pipeline closes every window
    pipeline = OnlinePipeline(tmp_path, S, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        closed = pipeline.poll(final=True)
    # THEN it closed a handful, the ten years among them as one
    assert len(closed) < 20
    longest = max(closed, key=lambda w: w.end_ns - w.start_ns)
    assert longest.end_ns - longest.start_ns >= (TEN_YEARS_S - 2) * S
    assert int(longest.summaries.windows["span"].max()) >= TEN_YEARS_S - 2
    # AND the dashboard's whole run weighs it by the windows it stands for
    frames = whole_run_frames(
        tuple(_views(closed)),
        pl.concat([w.summaries.activity_by_window for w in closed]),
    )
    shares = dict(frames.summaries.activity.select("activity", "cp_share").iter_rows())
    assert shares["driver"] > 0.999_999


def _views(closed):
    from sparktrail.dashboard.live_view import WindowView

    return [
        WindowView.held(w.start_ns, w.end_ns, str(w.start_ns), w.summaries, w.cp)
        for w in closed
    ]


@pytest.mark.parametrize("gap_s", [0, 50, 64, 65, 300])
def test_listed_spans_cover_the_listed_windows(gap_s: int) -> None:
    # GIVEN gaps around the stretch threshold
    trace = two_jobs(gap_s)
    end = int(trace["end_ns"].max()) + S
    # WHEN listed as spans
    spans = listed_spans(trace, S, 0, end)
    # THEN they tile without overlap, and each long span is a plain stretch
    starts = [a for a, _ in spans]
    assert starts == sorted(starts)
    assert all(b <= c for (_, b), (c, _) in itertools.pairwise(spans))
    stretches = {(a * S, (b + 1) * S) for a, b in plain_stretches(trace, S)}
    assert all(b - a == S or (a, b) in stretches for a, b in spans)


@pytest.mark.parametrize("seed", range(20))
def test_plain_stretches_are_the_windows_without_an_event(seed: int) -> None:
    # GIVEN random rows, some ending or starting on window boundaries
    rng = np.random.default_rng(seed)
    w = 10
    start = rng.integers(0, 400, size=12) * rng.choice([1, w], size=12)
    end = start + rng.integers(0, 300, size=12)
    trace = pl.DataFrame({"start_ns": start, "end_ns": end})
    # WHEN the stretches of at least 3 windows are found
    got = plain_stretches(trace, w, 0, min_windows=3)
    # THEN they are the runs of windows whose closed span holds no event,
    # between the first and the last event, by brute force
    events = np.concatenate([start, end])
    plain = [
        not ((events >= k * w) & (events <= (k + 1) * w)).any()
        for k in range(int(events.max()) // w + 1)
    ]
    first = int(events.min()) // w
    runs, k = [], first
    while k < len(plain):
        if plain[k]:
            j = k
            while j + 1 < len(plain) and plain[j + 1]:
                j += 1
            if j - k + 1 >= 3 and j + 1 < len(plain):
                runs.append((k, j))
            k = j + 1
        else:
            k += 1
    assert got == runs
