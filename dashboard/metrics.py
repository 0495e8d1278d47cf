"""Prometheus metrics of the dashboard's latest snapshot (``GET /metrics``).

:func:`add_metrics_route` answers ``/metrics`` on the dashboard's Flask
server (``sparktrail serve``) in Prometheus' text exposition format (or
OpenMetrics, when the scraper asks for it), from a
:class:`~prometheus_client.CollectorRegistry` of the app's own (never the
process-wide default one). Its one collector, :class:`SnapshotCollector`,
reads the source's current immutable
:class:`~sparktrail.dashboard.live_view.ViewState` on each scrape; nothing
is computed between scrapes.

What is exported
----------------
Per the latest closed window (``scope="window"``) and over the run
(``scope="run"``):

* ``sparktrail_critical_share{activity,scope}``: the share of the
  critical path in each activity (sums to 1 per scope when the scope has a
  path);
* ``sparktrail_worker_critical_share{worker,scope}`` and
  ``sparktrail_operator_critical_share{operator,scope}``: the same by
  worker and by operator, at most :data:`TOP` named and the rest summed as
  ``other``.

Over the run only (counters, in seconds):
``sparktrail_critical_seconds_total{activity}``,
``sparktrail_worker_critical_seconds_total{worker}`` and
``sparktrail_operator_critical_seconds_total{operator}``: critical time
(CP x window length) summed over the closed windows.

The current hints (the latest window's, or the report's, as the page's
hints table shows them): ``sparktrail_hint_saving_seconds{kind,operator,
stage,executor}``, each hint's predicted saving (hints without one are
left out; two hints with the same labels give the larger saving), and
``sparktrail_hints{kind,severity}``, how many there are.

Every sample carries ``app_id`` and ``app_name`` where the trace names
the application (a live trace learns them from its first window).

The pipeline: ``sparktrail_windows_closed_total``,
``sparktrail_rows_read_total``, ``sparktrail_late_rows_total``,
``sparktrail_corrupt_files_total`` and ``sparktrail_lag_seconds`` (how far
the page is behind the trace; no sample while unknown: before the first
window closed, or while the trace is idle). Before any window closed a
scrape holds these and no critical-path series.

Bounded labels
--------------
Activities are the trace's fixed vocabulary. Workers and operators are
not: a window names its top :data:`TOP` by CP share and sums the rest as
``other``. Over the run the named ones are *kept* once named (the first
:data:`TOP` to rank in the run's top), so that each run counter, ``other``
included, only grows; a worker or operator that rises later is counted in
``other``. A finished report (``serve --report``) is one whole run: its
named ones are the run's top :data:`TOP`, and it has no ``window`` scope.

Cost
----
The run totals are kept by the collector and grow by the windows closed
since the last scrape (each one's frames read once: from memory, or from
the store for a window no longer cached), so a scrape costs the new
windows, not the run.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import flask
import polars as pl

from sparktrail.summaries import Summaries, n_path_windows
from sparktrail.summaries.frames import CP_NS, CP_SHARE, HAS_PATHS
from sparktrail.summaries.hints import shown_hints

from .live_view import (
    ViewSource,
    ViewState,
    WindowFrames,
    WindowView,
    closed_label,
    lag_ns,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

__all__ = [
    "METRICS_PATH",
    "NO_OPERATOR",
    "OTHER",
    "TOP",
    "PipelineSnapshots",
    "SnapshotCollector",
    "add_metrics_route",
    "metrics_registry",
    "serve_metrics",
]

#: Where the dashboard answers scrapes (under Dash's routes prefix).
METRICS_PATH = "metrics"
#: Workers and operators named per scope; the rest are summed as :data:`OTHER`.
TOP = 10
#: The label of the workers or operators beyond the named ones.
OTHER = "other"
#: The operator label of critical time outside any stage (driver, idle).
NO_OPERATOR = "(no stage)"
#: What ``/metrics`` says when prometheus-client is not installed.
MISSING = (
    "sparktrail: /metrics needs prometheus-client: pip install 'sparktrail[metrics]'\n"
)

#: The three CP dimensions: (metric stem, label, frame field, key column).
_DIMENSIONS = (
    ("critical", "activity", "activity", "activity"),
    ("worker_critical", "worker", "straggler", "worker"),
    ("operator_critical", "operator", "operator", "operator"),
)


def _label(value: object, dimension: str) -> str:
    if value is None or value == "":
        return NO_OPERATOR if dimension == "operator" else "(none)"
    return str(value)


def _sums(frame: pl.DataFrame, key: str, dimension: str) -> dict[str, list[float]]:
    """``label -> [share, cp_ns]`` of one frame (labels merged by text)."""
    out: dict[str, list[float]] = {}
    if frame.is_empty() or key not in frame.columns:
        return out
    cp_ns = frame[CP_NS] if CP_NS in frame.columns else [0.0] * len(frame)
    for k, share, ns in zip(frame[key], frame[CP_SHARE], cp_ns, strict=True):
        row = out.setdefault(_label(k, dimension), [0.0, 0.0])
        row[0] += float(share or 0.0)
        row[1] += float(ns or 0.0)
    return out


def _ranked(sums: dict[str, list[float]]) -> list[str]:
    """Labels by share, largest first (ties by label, for a stable order)."""
    return sorted(sums, key=lambda k: (-sums[k][0], k))


def _bounded(
    sums: dict[str, list[float]], named: Iterable[str]
) -> list[tuple[str, float, float]]:
    """``(label, share, cp_ns)`` of the ``named`` labels and one ``other``
    row summing the rest (only when there is a rest)."""
    keep = [k for k in named if k in sums]
    rest = [v for k, v in sums.items() if k not in set(keep)]
    rows = [(k, sums[k][0], sums[k][1]) for k in keep]
    if rest:
        rows.append((OTHER, sum(v[0] for v in rest), sum(v[1] for v in rest)))
    return rows


def _paths(summaries: Summaries) -> int:
    """How many windows of the run a summaries' windows with a path stand for."""
    windows = summaries.windows
    if windows.is_empty() or not bool(windows[HAS_PATHS].any()):
        return 0
    return n_path_windows(windows)


@dataclass
class _RunTotals:
    """CP summed over the closed windows, grown by the windows not yet seen.

    ``sums[dimension][label] = [share x span summed, cp_ns summed]``; the
    run's share is the first over :attr:`paths` (as the dashboard's whole
    run: :func:`~sparktrail.dashboard.whole_run.whole_run_frames`).
    """

    seen: int = 0
    last_start: int | None = None
    paths: int = 0
    sums: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    kept: dict[str, list[str]] = field(default_factory=dict)

    def follows(self, windows: tuple[WindowView, ...]) -> bool:
        """Whether ``windows`` extend the ones already summed."""
        if self.seen > len(windows):
            return False
        return self.seen == 0 or windows[self.seen - 1].start_ns == self.last_start

    def add(self, view: WindowView) -> None:
        summaries = view.summaries
        paths = _paths(summaries)
        span = n_path_windows(summaries.windows) if paths else 1
        for _, dimension, frame_name, key in _DIMENSIONS:
            frame = getattr(summaries, frame_name)
            into = self.sums.setdefault(dimension, {})
            for label, (share, ns) in _sums(frame, key, dimension).items():
                row = into.setdefault(label, [0.0, 0.0])
                row[0] += share * span
                row[1] += ns
        self.paths += paths
        self.seen += 1
        self.last_start = view.start_ns


def _keep(kept: list[str], sums: dict[str, list[float]]) -> list[str]:
    """``kept`` filled up to :data:`TOP` from the best ranked of ``sums``."""
    for label in _ranked(sums):
        if len(kept) >= TOP:
            break
        if label not in kept:
            kept.append(label)
    return kept


class SnapshotCollector:
    """A Prometheus collector of ``source``'s latest snapshot (see the module).

    Thread-safe: the dashboard's server answers scrapes from several
    threads; the run totals are updated under a lock.
    """

    def __init__(self, source: ViewSource) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._run = _RunTotals()

    def describe(self) -> list[Metric]:
        """Nothing up front: the registry then never collects at registration."""
        return []

    def collect(self) -> Iterator[Metric]:
        """The metric families of the latest snapshot, each sample labelled
        with the application it is of."""
        snapshot = self._source.latest()
        app = _app_labels(snapshot)
        families = list(_pipeline_families(snapshot))
        if snapshot.windows:
            scopes = self._scopes(snapshot)
            families += [*_cp_families(scopes), *_hint_families(snapshot)]
        for family in families:
            family.samples = [
                sample._replace(labels={**app, **sample.labels})
                for sample in family.samples
            ]
            yield family

    def _scopes(self, snapshot: ViewState) -> _Scopes:
        """The window's and the run's CP by dimension, labels bounded."""
        window: dict[str, list[tuple[str, float, float]]] = {}
        if snapshot.live:
            summaries = snapshot.windows[-1].summaries
            for _, dimension, frame_name, key in _DIMENSIONS:
                sums = _sums(getattr(summaries, frame_name), key, dimension)
                named = _ranked(sums)
                window[dimension] = _bounded(
                    sums, named if dimension == "activity" else named[:TOP]
                )
        run: dict[str, list[tuple[str, float, float]]] = {}
        with self._lock:
            totals, paths = self._run_sums(snapshot)
            for _, dimension, _, _ in _DIMENSIONS:
                sums = totals.get(dimension, {})
                if dimension == "activity":
                    named = _ranked(sums)
                else:
                    named = list(_keep(self._run.kept.setdefault(dimension, []), sums))
                rows = _bounded(sums, named)
                run[dimension] = [(k, s / paths, ns) for k, s, ns in rows]
        return _Scopes(window, run, has_run_path=paths > 0 and any(run.values()))

    def _run_sums(
        self, snapshot: ViewState
    ) -> tuple[dict[str, dict[str, list[float]]], float]:
        """The run's sums and what to divide their shares by (under the lock)."""
        if not snapshot.live:  # a report: its one view already is the run
            summaries = snapshot.windows[-1].summaries
            sums = {
                dimension: _sums(getattr(summaries, frame_name), key, dimension)
                for _, dimension, frame_name, key in _DIMENSIONS
            }
            return sums, 1.0
        if not self._run.follows(snapshot.windows):
            self._run = _RunTotals()  # another run (or the store was reset)
        for view in snapshot.windows[self._run.seen :]:
            self._run.add(view)
        return self._run.sums, float(max(1, self._run.paths))


@dataclass(frozen=True)
class _Scopes:
    window: dict[str, list[tuple[str, float, float]]]
    run: dict[str, list[tuple[str, float, float]]]
    has_run_path: bool


def _app_labels(snapshot: ViewState) -> dict[str, str]:
    """``app_id`` and ``app_name`` of the snapshot's application (where the
    trace names them), so that two scraped applications never collide."""
    if not snapshot.windows:
        return {}
    context = snapshot.windows[-1].summaries.context
    labels = {"app_id": context.app_id, "app_name": context.app_name}
    return {key: value for key, value in labels.items() if value}


def _gauge(name: str, doc: str, labels: list[str]) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(name, doc, labels=labels)


def _counter(name: str, doc: str, labels: list[str] | None = None) -> Any:
    from prometheus_client.core import CounterMetricFamily

    return CounterMetricFamily(name, doc, labels=labels or [])


def _pipeline_families(snapshot: ViewState) -> Iterator[Metric]:
    windows = _counter(
        "sparktrail_windows_closed", "Windows closed (a report: its windows)."
    )
    windows.add_metric([], float(_windows_closed(snapshot)))
    rows = _counter("sparktrail_rows_read", "Trace rows read.")
    rows.add_metric([], float(snapshot.rows_read))
    late = _counter(
        "sparktrail_late_rows", "Trace rows that arrived after their window closed."
    )
    late.add_metric([], float(snapshot.late_rows))
    corrupt = _counter("sparktrail_corrupt_files", "Trace files skipped as unreadable.")
    corrupt.add_metric([], float(snapshot.corrupt_files))
    lag = _gauge(
        "sparktrail_lag_seconds",
        "How long the first window not shown yet has been due (live only; "
        "no sample while unknown or idle).",
        [],
    )
    if snapshot.lag_ns is not None:
        lag.add_metric([], snapshot.lag_ns / 1e9)
    yield from (windows, rows, late, corrupt, lag)


def _windows_closed(snapshot: ViewState) -> int:
    if not snapshot.live and snapshot.windows:
        return len(snapshot.windows[-1].summaries.windows)
    return len(snapshot.windows)


def _cp_families(scopes: _Scopes) -> Iterator[Metric]:
    for stem, dimension, _, _ in _DIMENSIONS:
        what = "activity" if dimension == "activity" else dimension
        share = _gauge(
            f"sparktrail_{stem}_share",
            f"Share of the critical path by {what} (scope: the latest closed "
            "window, or the run).",
            [dimension, "scope"],
        )
        for scope, rows in (("window", scopes.window), ("run", scopes.run)):
            if scope == "run" and not scopes.has_run_path:
                continue
            for label, value, _ in rows.get(dimension, []):
                share.add_metric([label, scope], value)
        seconds = _counter(
            f"sparktrail_{stem}_seconds",
            f"Critical time by {what} over the run, in seconds (CP x window "
            "length, summed over the closed windows).",
            [dimension],
        )
        if scopes.has_run_path:
            for label, _, ns in scopes.run.get(dimension, []):
                seconds.add_metric([label], ns / 1e9)
        yield share
        yield seconds


def _stage_operators(summaries: Summaries) -> dict[int, str]:
    """Stage id -> the operator that ran it (the operator frame's drill-down)."""
    frame = summaries.operator
    if frame.is_empty() or "stage_ids" not in frame.columns:
        return {}
    pairs = (
        frame.select("operator", "stage_ids")
        .explode("stage_ids")
        .drop_nulls("stage_ids")
    )
    return {int(stage): _label(op, "operator") for op, stage in pairs.iter_rows()}


def _hint_families(snapshot: ViewState) -> Iterator[Metric]:
    summaries = snapshot.windows[-1].summaries
    saving = _gauge(
        "sparktrail_hint_saving_seconds",
        "Each current hint's predicted saving of wall time, in seconds "
        "(hints without a prediction, e.g. a failed job, are counted by "
        "sparktrail_hints only).",
        ["kind", "operator", "stage", "executor"],
    )
    count = _gauge(
        "sparktrail_hints",
        "Current hints by kind and severity.",
        ["kind", "severity"],
    )
    hints = shown_hints(summaries.hints)
    if hints.is_empty():
        yield from (saving, count)
        return
    operators = _stage_operators(summaries)
    best: dict[tuple[str, str, str, str], float] = {}
    counts: dict[tuple[str, str], int] = {}
    for row in hints.iter_rows(named=True):
        kind = str(row["kind"])
        key = (kind, str(row.get("severity") or ""))
        counts[key] = counts.get(key, 0) + 1
        ns = row.get("predicted_saving_ns")
        if ns is None:
            continue
        stage = row.get("stage_id")
        labels = (
            kind,
            operators.get(stage, "") if stage is not None else "",
            "" if stage is None else str(stage),
            row.get("executor_id") or "",
        )
        best[labels] = max(best.get(labels, float("-inf")), ns / 1e9)
    for labels, value in best.items():
        saving.add_metric(list(labels), value)
    for key, n in counts.items():
        count.add_metric(list(key), float(n))
    yield from (saving, count)


def metrics_registry(source: ViewSource) -> CollectorRegistry:
    """A registry of its own holding one :class:`SnapshotCollector` of ``source``.

    Raises
    ------
    ImportError
        If prometheus-client is not installed (the ``metrics`` extra).
    """
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(source))  # type: ignore[arg-type]
    return registry


def add_metrics_route(
    server: flask.Flask, source: ViewSource, path: str = "/" + METRICS_PATH
) -> None:
    """Answer ``GET path`` on ``server`` with the metrics of ``source``.

    Without prometheus-client the route says how to install it (501).
    """
    try:
        registry: CollectorRegistry | None = metrics_registry(source)
    except ImportError:
        registry = None

    def metrics() -> flask.Response:
        if registry is None:
            return flask.Response(MISSING, status=501, mimetype="text/plain")
        from prometheus_client.exposition import choose_encoder

        encode: Callable[[Any], bytes]
        encode, content_type = choose_encoder(flask.request.headers.get("Accept", ""))
        return flask.Response(encode(registry), content_type=content_type)

    server.add_url_rule(path, "sparktrail_metrics", metrics, methods=["GET"])


class PipelineSnapshots:
    """Snapshots of a pipeline that ``sparktrail live`` runs, for its metrics.

    ``live`` has no page: after each poll it calls :meth:`publish` with the
    windows that closed, and :func:`serve_metrics` answers scrapes from
    :meth:`latest`. The newest :data:`HELD` windows' frames are held; older
    ones are read from the pipeline's store when first needed (the
    collector reads each window once).
    """

    HELD = 8

    def __init__(self, pipeline: Any, source: str, lateness_ns: int) -> None:
        self._pipeline = pipeline
        self._source = source
        self._lateness_ns = lateness_ns
        self._held: dict[int, WindowFrames] = {}
        store = pipeline.store
        self._views = tuple(self._view(s, self._end(s)) for s in store.window_starts())
        self._snapshot = ViewState(source, "starting…", windows=self._views)

    def _fixed(self) -> int | None:
        fixed = getattr(self._pipeline, "fixed_ns", None)
        if fixed is None and isinstance(
            getattr(self._pipeline, "window_ns", None), int
        ):
            fixed = self._pipeline.window_ns
        return fixed  # type: ignore[no-any-return]

    def _end(self, start_ns: int) -> int:
        fixed = self._fixed()
        return start_ns + fixed if fixed else self._pipeline.store.window_end(start_ns)

    def _frames(self, start_ns: int) -> WindowFrames:
        held = self._held.get(start_ns)
        if held is not None:
            return held
        window = self._pipeline.store.read_window(start_ns, self._fixed())
        return WindowFrames(window.summaries, window.cp)

    def _view(self, start_ns: int, end_ns: int) -> WindowView:
        label = closed_label(start_ns, end_ns)
        return WindowView(
            start_ns, end_ns, label, functools.partial(self._frames, start_ns)
        )

    def latest(self) -> ViewState:
        """The snapshot of the last :meth:`publish`."""
        return self._snapshot

    def publish(self, closed: Iterable[Any]) -> None:
        """Add the windows that just closed (``ClosedWindow``) and the counters."""
        pipeline = self._pipeline
        added = []
        for window in closed:
            self._held[window.start_ns] = WindowFrames(window.summaries, window.cp)
            added.append(self._view(window.start_ns, window.end_ns))
        for start in sorted(self._held)[: -self.HELD]:
            del self._held[start]
        self._views += tuple(added)
        length = getattr(pipeline, "open_window_ns", None) or self._fixed()
        lag = (
            lag_ns(time.time_ns(), pipeline.closed_until_ns, self._lateness_ns, length)
            if length
            else None
        )
        self._snapshot = ViewState(
            source=self._source,
            status=f"{len(self._views)} windows closed",
            windows=self._views,
            corrupt_files=pipeline.corrupt_files,
            late_rows=pipeline.late_rows,
            rows_read=int(getattr(pipeline, "rows_read", 0)),
            lag_ns=lag,
            version=self._snapshot.version + 1,
        )


def serve_metrics(source: ViewSource, host: str, port: int) -> Any:
    """Answer ``/metrics`` (any path, as prometheus-client does) on
    ``host:port`` from a daemon thread; returns the server (``shutdown()``).

    Raises
    ------
    ImportError
        If prometheus-client is not installed (the ``metrics`` extra).
    """
    from prometheus_client import start_http_server

    started = start_http_server(port, addr=host, registry=metrics_registry(source))
    return started[0] if isinstance(started, tuple) else started
