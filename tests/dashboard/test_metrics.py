"""``/metrics``: the dashboard's snapshot for Prometheus (issue 29, item 2).

Each test serves the real app (``create_app`` on 127.0.0.1 in a thread, as
``sparktrail serve`` does, or ``sparktrail serve`` itself), scrapes
``/metrics`` over HTTP and parses the body with prometheus-client's own
parser, then holds the numbers against the snapshot's frames.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.app import create_app
from sparktrail.dashboard.live_view import (
    StaticSource,
    ViewState,
    WindowView,
    load_report,
)
from sparktrail.dashboard.metrics import NO_OPERATOR, OTHER, TOP
from sparktrail.dashboard.whole_run import whole_run_frames
from sparktrail.engines.profiler import profile
from sparktrail.pag import write_trace
from sparktrail.summaries.hints import shown_hints
from sparktrail.synthetic import barrier_trace
from sparktrail.tracer import import_trace
from tests.paths import EVENTLOGS, SHARED_LOG

from .serving import served

#: A public log whose run has a failed job (a ``failures`` hint).
FAILED_LOG = EVENTLOGS / "public" / "spark" / "spark-events" / "local-1422981780767"
PIPELINE = {
    "sparktrail_windows_closed",
    "sparktrail_rows_read",
    "sparktrail_late_rows",
    "sparktrail_corrupt_files",
    "sparktrail_lag_seconds",
}
CP = {
    "sparktrail_critical_share",
    "sparktrail_critical_seconds",
    "sparktrail_worker_critical_share",
    "sparktrail_worker_critical_seconds",
    "sparktrail_operator_critical_share",
    "sparktrail_operator_critical_seconds",
}
HINTS = {"sparktrail_hint_saving_seconds", "sparktrail_hints"}


def scrape(port: int, path: str = "/metrics") -> tuple[str, dict[str, Any]]:
    """The content type and the parsed families of one scrape."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        assert r.status == 200
        body = r.read().decode()
        kind = r.headers["Content-Type"]
    return kind, {f.name: f for f in text_string_to_metric_families(body)}


#: The labels every sample carries: the application's.
APP_LABELS = ("app_id", "app_name")


def own_labels(sample: Any) -> dict[str, str]:
    """A sample's labels but the application's."""
    return {k: v for k, v in sample.labels.items() if k not in APP_LABELS}


def samples(family: Any, scope: str | None = None) -> dict[str, float]:
    """``first non-scope label value -> value`` of a family's samples."""
    out = {}
    for s in family.samples:
        labels = own_labels(s)
        if scope is not None and labels.pop("scope") != scope:
            continue
        labels.pop("scope", None)
        key = next(iter(labels.values())) if labels else ""
        out[key] = s.value
    return out


def by_label(frame: pl.DataFrame, key: str, column: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for k, v in zip(frame[key], frame[column], strict=True):
        out[NO_OPERATOR if k is None else str(k)] += float(v)
    return dict(out)


def bounded(values: dict[str, float], named: int = TOP) -> dict[str, float]:
    """``values`` with all but the ``named`` largest summed as ``other``."""
    ranked = sorted(values, key=lambda k: (-values[k], k))
    out = {k: values[k] for k in ranked[:named]}
    if len(ranked) > named:
        out[OTHER] = sum(values[k] for k in ranked[named:])
    return out


def assert_close(got: dict[str, float], want: dict[str, float]) -> None:
    assert set(got) == set(want)
    for k, v in want.items():
        assert math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-12), k


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``sparktrail profile``'s folder of the public log with a failed job."""
    out = tmp_path_factory.mktemp("report") / "profile"
    profile(import_trace(FAILED_LOG, progress=False), 1_000_000_000).save(out)
    return out


def test_a_report_is_scraped_as_the_whole_run(report: Path) -> None:
    # GIVEN serve --report on a profiled real log
    snapshot = load_report(report)
    summaries = snapshot.windows[-1].summaries
    with served(create_app(StaticSource(snapshot))) as port:
        # WHEN Prometheus scrapes /metrics (twice: nothing accumulates)
        kind, families = scrape(port)
        _, again = scrape(port)
    # THEN the text format, every family, and the same answer twice
    assert kind.startswith("text/plain")
    assert set(families) == PIPELINE | CP | HINTS
    assert {n: f.samples for n, f in families.items()} == {
        n: f.samples for n, f in again.items()
    }
    # AND the pipeline's numbers are the report's
    assert samples(families["sparktrail_windows_closed"]) == {
        "": len(summaries.windows)
    }
    assert samples(families["sparktrail_rows_read"])[""] == snapshot.rows_read > 0
    assert families["sparktrail_lag_seconds"].samples == []  # not live
    # AND every sample names the application, so two scraped runs never collide
    app = {"app_id": summaries.context.app_id, "app_name": summaries.context.app_name}
    assert app["app_id"] and app["app_name"]
    for family in families.values():
        assert all(
            {k: s.labels.get(k) for k in APP_LABELS} == app for s in family.samples
        )
    # AND a report is one run: no window scope
    share = families["sparktrail_critical_share"]
    assert {dict(s.labels)["scope"] for s in share.samples} == {"run"}
    # AND the activity shares are the report's and sum to 1
    run = samples(share, "run")
    assert_close(run, by_label(summaries.activity, "activity", "cp_share"))
    assert math.isclose(sum(run.values()), 1.0, rel_tol=1e-9)
    seconds = samples(families["sparktrail_critical_seconds"])
    want = {
        k: v / 1e9 for k, v in by_label(summaries.activity, "activity", "cp_ns").items()
    }
    assert_close(seconds, want)
    # AND workers and operators are the report's (at most TOP + other)
    for name, frame, key in (
        ("worker", summaries.straggler, "worker"),
        ("operator", summaries.operator, "operator"),
    ):
        got = samples(families[f"sparktrail_{name}_critical_share"], "run")
        assert_close(got, bounded(by_label(frame, key, "cp_share")))
        assert len(got) <= TOP + 1
    assert NO_OPERATOR in samples(families["sparktrail_operator_critical_share"], "run")
    # AND the failed job's hint is counted (it predicts no saving)
    hints = shown_hints(summaries.hints)
    assert "failures" in hints["kind"].to_list()
    counted = {
        (dict(s.labels)["kind"], dict(s.labels)["severity"]): s.value
        for s in families["sparktrail_hints"].samples
    }
    assert sum(counted.values()) == len(hints)
    assert counted[("failures", "high")] >= 1


def test_each_hint_is_a_gauge_of_its_predicted_saving(report: Path) -> None:
    # GIVEN a report whose hints predict savings (two on one stage and
    # executor, one without a prediction, one too small to show)
    snapshot = load_report(report)
    view = snapshot.windows[-1]
    stage = int(view.summaries.operator["stage_ids"].drop_nulls().explode()[0])
    operator = next(
        op
        for op, ids in view.summaries.operator.select("operator", "stage_ids").rows()
        if ids is not None and stage in ids
    )
    hints = pl.DataFrame(
        {
            "kind": ["straggler_task", "straggler_task", "failures", "skew"],
            "severity": ["high", "medium", "high", "info"],
            "stage_id": [stage, stage, None, stage],
            "executor_id": ["1", "1", None, "2"],
            "predicted_saving_ns": [3e9, 1e9, None, 5e6],
        }
    )
    summaries = dataclasses.replace(view.summaries, hints=hints)
    held = WindowView.held(view.start_ns, view.end_ns, view.label, summaries, None)
    source = StaticSource(dataclasses.replace(snapshot, windows=(held,)))
    # WHEN scraped
    with served(create_app(source)) as port:
        _, families = scrape(port)
    # THEN one gauge per shown hint's labels, the larger saving, in seconds,
    # with the operator that ran its stage
    gauges = {
        tuple(sorted(own_labels(s).items())): s.value
        for s in families["sparktrail_hint_saving_seconds"].samples
    }
    labels = {"kind": "straggler_task", "operator": operator, "stage": str(stage)}
    assert gauges == {tuple(sorted({**labels, "executor": "1"}.items())): 3.0}
    counted = {
        tuple(sorted(own_labels(s).items())): s.value
        for s in families["sparktrail_hints"].samples
    }
    assert counted == {
        (("kind", "straggler_task"), ("severity", "high")): 1.0,
        (("kind", "straggler_task"), ("severity", "medium")): 1.0,
        (("kind", "failures"), ("severity", "high")): 1.0,
    }


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace directory of the shared real log (as ``sparktrail import``)."""
    directory = tmp_path_factory.mktemp("live") / "trace"
    write_trace(import_trace(SHARED_LOG, progress=False), directory / "part-000.arrow")
    return directory


def _run_frames(snapshot: ViewState) -> Any:
    return whole_run_frames(snapshot.windows, snapshot.activity_by_window).summaries


def test_a_live_trace_directory_is_scraped_by_window_and_run(
    real_trace: Path,
) -> None:
    # GIVEN serve TRACE_DIR on a real log's trace, its windows closed
    loader = live_loader(real_trace, 1_000_000_000, 0)
    snapshot = loader.step()
    assert len(snapshot.windows) > 3
    with served(create_app(StaticSource(snapshot))) as port:
        # WHEN scraped
        _, families = scrape(port)
    # THEN the pipeline's counters are the loader's
    assert loader._pipeline is not None
    assert samples(families["sparktrail_windows_closed"])[""] == len(snapshot.windows)
    assert (
        samples(families["sparktrail_rows_read"])[""]
        == loader._pipeline.rows_read
        == snapshot.rows_read
        > 0
    )
    assert samples(families["sparktrail_late_rows"])[""] == snapshot.late_rows
    # AND the window scope is the latest closed window's
    latest = snapshot.windows[-1].summaries
    share = families["sparktrail_critical_share"]
    window = samples(share, "window")
    assert_close(window, by_label(latest.activity, "activity", "cp_share"))
    assert window and math.isclose(sum(window.values()), 1.0, rel_tol=1e-9)
    # AND the run scope is the dashboard's whole run, its shares summing to 1
    run = _run_frames(snapshot)
    got = samples(share, "run")
    assert_close(got, by_label(run.activity, "activity", "cp_share"))
    assert math.isclose(sum(got.values()), 1.0, rel_tol=1e-9)
    seconds = samples(families["sparktrail_critical_seconds"])
    want = by_label(run.activity, "activity", "cp_ns")
    assert_close(seconds, {k: v / 1e9 for k, v in want.items()})
    for name, frame, key in (
        ("worker", run.straggler, "worker"),
        ("operator", run.operator, "operator"),
    ):
        got = samples(families[f"sparktrail_{name}_critical_share"], "run")
        assert_close(got, bounded(by_label(frame, key, "cp_share")))


def test_labels_stay_bounded_and_run_counters_only_grow(tmp_path: Path) -> None:
    # GIVEN a live trace of 24 workers, its windows closing a few at a time
    trace = barrier_trace(3000, workers=24, seed=5)
    write_trace(trace, tmp_path / "part-000.arrow")
    loader = live_loader(tmp_path, 500_000, 0)
    snapshot = loader.step()
    views = snapshot.windows
    assert len(views) >= 6
    published = [dataclasses.replace(snapshot, windows=views[:k]) for k in (2, 4)]
    published.append(snapshot)
    source = _Switch(published[0])
    with served(create_app(source)) as port:
        scraped = []
        for shown in published:
            source.snapshot = shown
            scraped.append(scrape(port)[1])
    # THEN no scope names more than TOP workers besides "other"
    for families in scraped:
        share = families["sparktrail_worker_critical_share"]
        for scope in ("window", "run"):
            named = samples(share, scope)
            assert OTHER in named and len(named) == TOP + 1
        window = samples(share, "window")
        assert math.isclose(sum(window.values()), 1.0, rel_tol=1e-9)
    # AND each run counter, other included, never goes down
    first = samples(scraped[0]["sparktrail_worker_critical_seconds"])
    for families in scraped[1:]:
        now = samples(families["sparktrail_worker_critical_seconds"])
        assert set(now) == set(first)  # the named workers are kept
        assert all(now[k] >= first[k] - 1e-12 for k in first)
        first = now
    # AND the run's shares still sum to 1 over the named and other
    run = samples(scraped[-1]["sparktrail_worker_critical_share"], "run")
    assert math.isclose(sum(run.values()), 1.0, rel_tol=1e-9)
    whole = by_label(_run_frames(snapshot).straggler, "worker", "cp_share")
    named = [k for k in run if k != OTHER]
    assert_close({k: run[k] for k in named}, {k: whole[k] for k in named})


class _Switch:
    """A source whose snapshot the test sets."""

    def __init__(self, snapshot: ViewState) -> None:
        self.snapshot = snapshot

    def latest(self) -> ViewState:
        return self.snapshot


def test_before_any_window_closes_a_scrape_holds_the_pipeline_only(
    tmp_path: Path,
) -> None:
    # GIVEN serve on a trace directory with no trace yet
    snapshot = live_loader(tmp_path, 1_000_000_000, 0).step()
    assert not snapshot.windows
    with served(create_app(StaticSource(snapshot))) as port:
        # WHEN scraped
        _, families = scrape(port)
        # AND anything but GET is refused, other paths still 404
        for method, path in (("POST", "/metrics"), ("GET", "/metric")):
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{path}", method=method, data=b""
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code in (404, 405)
    # THEN the pipeline's families, zero, and no critical-path series
    assert set(families) == PIPELINE
    assert samples(families["sparktrail_windows_closed"]) == {"": 0.0}
    assert samples(families["sparktrail_rows_read"]) == {"": 0.0}
    assert families["sparktrail_lag_seconds"].samples == []


def test_serve_answers_scrapes(tmp_path: Path, report: Path) -> None:
    # GIVEN sparktrail serve --report started as a user starts it
    from .test_safety import free_port

    port = free_port()
    command = [sys.executable, "-m", "sparktrail", "serve", "--report", str(report)]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _, families = scrape(port)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(30)
    # THEN its /metrics holds the report's run
    assert set(families) == PIPELINE | CP | HINTS
    run = samples(families["sparktrail_critical_share"], "run")
    assert math.isclose(sum(run.values()), 1.0, rel_tol=1e-9)
    assert json.dumps(sorted(run))  # labels are plain strings


def test_live_answers_scrapes_with_its_pipeline(
    real_trace: Path, tmp_path: Path
) -> None:
    # GIVEN sparktrail live --metrics-port on a copy of a real log's trace
    from .test_safety import free_port

    trace, again = tmp_path / "trace", tmp_path / "again"
    for copy in (trace, again):
        copy.mkdir()
        data = (real_trace / "part-000.arrow").read_bytes()
        (copy / "part-000.arrow").write_bytes(data)
    port = free_port()
    command = [sys.executable, "-m", "sparktrail", "live", str(trace)]
    process = subprocess.Popen(
        [*command, "--lateness", "0s", "--metrics-port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _, families = scrape(port)
                if samples(families["sparktrail_windows_closed"])[""] > 0:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(30)
    # THEN its /metrics counts the windows it closed and the rows it read,
    # and shares by window and run, each summing to 1
    snapshot = live_loader(again, 1_000_000_000, 0).step()
    assert samples(families["sparktrail_windows_closed"])[""] == len(snapshot.windows)
    assert samples(families["sparktrail_rows_read"])[""] == snapshot.rows_read
    share = families["sparktrail_critical_share"]
    for scope in ("window", "run"):
        assert math.isclose(sum(samples(share, scope).values()), 1.0, rel_tol=1e-9)
    run = by_label(_run_frames(snapshot).activity, "activity", "cp_share")
    assert_close(samples(share, "run"), run)
