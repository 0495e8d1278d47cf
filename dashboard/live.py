"""What the live dashboard shows: immutable snapshots and the loop that makes them.

The Dash app only reads. A background :class:`UpdateThread` (after memray's
live view) runs a loader over and over and publishes each result as an
immutable :class:`Snapshot`; callbacks take the latest snapshot from a
:class:`SnapshotSource` and pass its frames to the pure figure builders.

Loaders
-------
* :class:`LiveLoader` runs the :class:`~sparktrail.summaries.online.
  OnlinePipeline` on a trace directory (``sparktrail serve TRACE_DIR``): the
  windows already in its store, then each window as it closes.
* :func:`load_report` reads the summaries ``sparktrail profile`` wrote
  (``sparktrail serve --report OUT_DIR``) as one "whole run" window; the
  timeline needs ``summaries/critical_window.parquet`` (CP rows of one
  window), which older reports lack.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import polars as pl

from sparktrail.summaries import Summaries
from sparktrail.summaries.online import OnlinePipeline
from sparktrail.summaries.store import SUMMARY_FRAMES, StoredWindow

__all__ = [
    "LATEST",
    "LiveLoader",
    "Snapshot",
    "SnapshotSource",
    "StaticSource",
    "UpdateThread",
    "WindowView",
    "load_report",
    "utc",
]

LOG = logging.getLogger(__name__)
#: The window-picker value that follows the newest window.
LATEST = "latest"
#: The file of CP rows a report may carry for its timeline.
REPORT_CP = "critical_window.parquet"


def utc(ns: int) -> str:
    """A timestamp in ns since the epoch as ``HH:MM:SS.mmm`` UTC.

    >>> utc(1_500_000_000_250_000_000)
    '02:40:00.250'
    """
    moment = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc)
    return moment.strftime("%H:%M:%S.%f")[:-3]


@dataclass(frozen=True)
class WindowView:
    """One window the page can show: summaries and (when known) CP rows."""

    start_ns: int
    end_ns: int
    label: str
    summaries: Summaries
    cp: pl.DataFrame | None

    @property
    def key(self) -> str:
        """The window-picker value of this window."""
        return str(self.start_ns)

    @classmethod
    def closed(cls, window: StoredWindow) -> WindowView:
        """The view of a window closed by the online pipeline."""
        label = f"{utc(window.start_ns)} – {utc(window.end_ns)} UTC"
        return cls(window.start_ns, window.end_ns, label, window.summaries, window.cp)


@dataclass(frozen=True)
class Snapshot:
    """Everything the page shows at one moment; never changed once published.

    Attributes
    ----------
    source
        What is profiled (a trace or report directory).
    status
        One line for the page: waiting, how many windows, or an error.
    windows
        The windows in time order.
    activity_by_window
        Every window's CP by activity, concatenated (the over-time chart).
    corrupt_files, late_rows
        Counters of the online pipeline.
    live
        Whether more windows may come (the page then refreshes).
    version
        Increases with every published snapshot.
    windows_version
        Increases only when the windows change; the figures depend on
        nothing else, so the page redraws them only then (a moving
        watermark changes the status line, not the figures).
    """

    source: str
    status: str
    windows: tuple[WindowView, ...] = ()
    activity_by_window: pl.DataFrame = field(default_factory=pl.DataFrame)
    corrupt_files: int = 0
    late_rows: int = 0
    live: bool = True
    version: int = 0
    windows_version: int = 0

    def window(self, key: str | None) -> WindowView | None:
        """The window picked by ``key`` (a start time, or :data:`LATEST`)."""
        if not self.windows:
            return None
        if key in (None, LATEST):
            return self.windows[-1]
        for view in self.windows:
            if view.key == key:
                return view
        return self.windows[-1]


class SnapshotSource(Protocol):
    """Anything that hands out the latest snapshot."""

    def latest(self) -> Snapshot:
        """The most recently published snapshot."""
        ...


class StaticSource:
    """A source whose snapshot never changes (a finished report)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def latest(self) -> Snapshot:
        """The one snapshot."""
        return self._snapshot


def _concat_activity(windows: tuple[WindowView, ...]) -> pl.DataFrame:
    frames = [w.summaries.activity_by_window for w in windows]
    frames = [f for f in frames if not f.is_empty()]
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed")


class LiveLoader:
    """Runs the online pipeline on a trace directory; each step, a snapshot.

    Parameters
    ----------
    trace_dir, window_ns, lateness_ns
        As for :class:`~sparktrail.summaries.online.OnlinePipeline`.
    """

    def __init__(self, trace_dir: str | Path, window_ns: int, lateness_ns: int) -> None:
        self.trace_dir = Path(trace_dir)
        self.window_ns = window_ns
        self.lateness_ns = lateness_ns
        self._pipeline: OnlinePipeline | None = None
        self._windows: tuple[WindowView, ...] = ()
        self._activity = pl.DataFrame()
        self._version = 0
        self._windows_version = 0
        self._last: Snapshot | None = None

    def _start(self) -> OnlinePipeline:
        pipeline = OnlinePipeline(self.trace_dir, self.window_ns, self.lateness_ns)
        store = pipeline.store
        self._windows = tuple(
            WindowView.closed(store.read_window(start, self.window_ns))
            for start in store.window_starts()
        )
        self._activity = _concat_activity(self._windows)
        return pipeline

    def step(self) -> Snapshot:
        """Poll the trace directory once and describe the result."""
        if self._pipeline is None:
            self._pipeline = self._start()
        pipeline = self._pipeline
        new = tuple(WindowView.closed(w) for w in pipeline.poll())
        if new:
            self._windows += new
            self._activity = _concat_activity(self._windows)
            self._windows_version += 1
        status = self._status(pipeline)
        last = self._last
        if (
            last is not None
            and not new
            and (status, pipeline.corrupt_files, pipeline.late_rows)
            == (last.status, last.corrupt_files, last.late_rows)
        ):
            return last  # unchanged: the page need not redraw
        self._version += 1
        self._last = Snapshot(
            source=str(self.trace_dir),
            status=status,
            windows=self._windows,
            activity_by_window=self._activity,
            corrupt_files=pipeline.corrupt_files,
            late_rows=pipeline.late_rows,
            live=True,
            version=self._version,
            windows_version=self._windows_version,
        )
        return self._last

    def _status(self, pipeline: OnlinePipeline) -> str:
        if not self.trace_dir.is_dir():
            return f"{self.trace_dir} does not exist yet: waiting for a trace…"
        watermark = pipeline.watermark_ns
        if watermark is None:
            return f"{self.trace_dir} holds no trace yet: waiting for trace files…"
        if not self._windows:
            return (
                "waiting for the first window to close… "
                f"(watermark {utc(watermark)} UTC)"
            )
        return (
            f"{len(self._windows)} windows closed, the latest ends "
            f"{utc(self._windows[-1].end_ns)} UTC; watermark {utc(watermark)} UTC"
        )


class UpdateThread(threading.Thread):
    """Calls ``step`` every ``interval`` seconds and publishes its snapshot.

    An exception in ``step`` is logged and published as the snapshot's
    status (with the last good windows kept); the loop goes on.

    Parameters
    ----------
    step
        Makes the next snapshot (e.g. :meth:`LiveLoader.step`).
    interval
        Seconds between steps.
    source
        Name shown before the first snapshot.
    """

    def __init__(
        self, step: Callable[[], Snapshot], interval: float = 0.1, source: str = ""
    ) -> None:
        super().__init__(name="sparktrail-update", daemon=True)
        self._step = step
        self._interval = interval
        self._stop_event = threading.Event()
        self._snapshot = Snapshot(source=source, status="starting…")
        self._errors = 0

    def latest(self) -> Snapshot:
        """The most recently published snapshot (an atomic reference read)."""
        return self._snapshot

    def run(self) -> None:
        """Step and publish until :meth:`stop`."""
        while not self._stop_event.is_set():
            self.step_once()
            self._stop_event.wait(self._interval)

    def step_once(self) -> None:
        """One step, published; errors become the status line."""
        try:
            self._snapshot = self._step()
        except Exception as err:  # the page must say what broke, not die
            self._errors += 1
            if self._errors == 1:
                LOG.exception("sparktrail dashboard update failed")
            old = self._snapshot
            self._snapshot = Snapshot(
                source=old.source,
                status=f"error: {err}",
                windows=old.windows,
                activity_by_window=old.activity_by_window,
                corrupt_files=old.corrupt_files,
                late_rows=old.late_rows,
                version=old.version + 1,
                windows_version=old.windows_version,
            )

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to end and wait for it."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)

    def wait_for(self, predicate: Callable[[Snapshot], bool], timeout: float) -> bool:
        """Wait until the latest snapshot satisfies ``predicate`` (tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self._snapshot):
                return True
            time.sleep(0.05)
        return predicate(self._snapshot)


def load_report(out_dir: str | Path) -> Snapshot:
    """The summaries of a ``sparktrail profile`` output as a finished snapshot.

    Raises
    ------
    FileNotFoundError
        If ``out_dir/summaries`` lacks a summary frame.
    """
    folder = Path(out_dir) / "summaries"
    frames = {}
    for name in SUMMARY_FRAMES:
        path = folder / f"{name}.parquet"
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: missing; expected the output of `sparktrail profile`"
            )
        frames[name] = pl.read_parquet(path)
    windows = frames["windows"]
    if windows.is_empty():
        return Snapshot(str(out_dir), "the report holds no window", live=False)
    start = int(windows["window_start_ns"].min())  # type: ignore[arg-type]
    end = int(windows["window_end_ns"].max())  # type: ignore[arg-type]
    window_ns = int(windows["window_end_ns"][0] - windows["window_start_ns"][0])
    summaries = Summaries(**frames, window_ns=window_ns, origin_ns=start)
    cp_path = folder / REPORT_CP
    cp = pl.read_parquet(cp_path) if cp_path.is_file() else None
    label = f"whole run {utc(start)} – {utc(end)} UTC"
    view = WindowView(start, end, label, summaries, cp)
    return Snapshot(
        source=str(out_dir),
        status=f"report of {len(windows)} windows of {window_ns / 1e9:g} s",
        windows=(view,),
        activity_by_window=frames["activity_by_window"],
        live=False,
        version=1,
    )
