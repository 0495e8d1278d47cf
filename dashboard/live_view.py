"""What the live dashboard shows: immutable snapshots and the loop that makes them.

The Dash app only reads. A background :class:`UpdateThread` (after memray's
live view) runs a loader over and over and publishes each result as an
immutable :class:`ViewState`; callbacks take the latest snapshot from a
:class:`ViewSource` and pass its frames to the pure figure builders.

Loaders
-------
* :class:`LiveLoader` steps the :class:`~sparktrail.engines.online.
  OnlinePipeline` that ``sparktrail serve TRACE_DIR`` opens (the dashboard
  does not start a pipeline, it only reads what one closed): the windows
  already in its store, then each window as it closes.
* :func:`load_report` reads the summaries ``sparktrail profile`` wrote
  (``sparktrail serve --report OUT_DIR``) as one "whole run" window; the
  timeline needs ``summaries/critical_window.parquet`` (CP rows of one
  window), which older reports lack.

How far behind
--------------
A live snapshot says how far the page is behind the trace
(:attr:`ViewState.lag_ns`, :func:`lag_ns`): how long the oldest window
that is due but not shown yet has been due. A window ``[ts, te)`` is due
once ``te`` plus the lateness has passed (the pipeline waits that long by
design), so the lag is the wall-clock time when the snapshot is published,
minus the lateness, minus the end of the first window not closed yet; 0
when every due window is shown. A pipeline that keeps up stays a fraction
of a second behind (the time to notice a new file and close the window:
``bench/online_latency.py``'s "published beyond lateness"); one that
cannot keep up closes several windows per step and falls further behind
each step. Trace times are the Spark driver's clock: the figure assumes it
agrees with this machine's (the live tracer and ``sparktrail serve`` on one
host). Once no trace rows have arrived for :data:`IDLE_AFTER_S` (the
application ended or paused), nothing is due: the status says how long
the trace has been idle instead.

Many windows
------------
A snapshot lists every window but holds the frames of few: a
:class:`WindowView` reads its summaries and CP rows when first asked (from
the store, through a small cache of the newest and recently picked
windows). Starting on a store of 10,000 windows reads one small frame per
window (``activity_by_window``, for the over-time chart, in one call), and
each step appends the new windows' rows instead of concatenating them all
again (``bench/dashboard_windows.py``).
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import polars as pl

from sparktrail.engines.profiler import Profile
from sparktrail.engines.store import WindowStore
from sparktrail.summaries import Summaries
from sparktrail.summaries.run_shares import windows_extent
from sparktrail.units import duration

from .report import window_text

if TYPE_CHECKING:
    from sparktrail.engines.run_so_far import RunSoFar

__all__ = [
    "IDLE_AFTER_S",
    "LATEST",
    "LiveLoader",
    "StaticSource",
    "UpdateThread",
    "ViewSource",
    "ViewState",
    "WindowFrames",
    "WindowView",
    "append_rows",
    "closed_label",
    "lag_ns",
    "lag_text",
    "load_report",
    "profile_snapshot",
    "read_activity",
    "utc",
    "window_start",
]

LOG = logging.getLogger(__name__)
#: The window-picker value that follows the newest window.
LATEST = "latest"
#: Windows whose frames a :class:`LiveLoader` keeps in memory: the newest
#: and the recently picked; others are read from the store when picked.
CACHED_WINDOWS = 32
#: Seconds without new trace rows after which the trace counts as idle (the
#: status says so instead of how far behind the page is).
IDLE_AFTER_S = 30.0
#: What a window key looks like: a start time in ns.
_KEY = re.compile(r"-?[0-9]{1,19}")


def utc(ns: int) -> str:
    """A timestamp in ns since the epoch as ``HH:MM:SS.mmm`` UTC.

    >>> utc(1_500_000_000_250_000_000)
    '02:40:00.250'
    """
    moment = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc)
    return moment.strftime("%H:%M:%S.%f")[:-3]


class WindowFrames(NamedTuple):
    """The frames of one window: summaries and (when known) CP rows."""

    summaries: Summaries
    cp: pl.DataFrame | None


@dataclass(frozen=True)
class WindowView:
    """One window the page can show: bounds, label, and its frames.

    ``frames`` hands out the window's :class:`WindowFrames`; it may read
    them from the store (see :class:`LiveLoader`), so a snapshot of many
    windows holds their labels, not their frames.
    """

    start_ns: int
    end_ns: int
    label: str
    frames: Callable[[], WindowFrames] = field(repr=False, compare=False)

    @property
    def key(self) -> str:
        """The window-picker value of this window."""
        return str(self.start_ns)

    @property
    def summaries(self) -> Summaries:
        """The window's summaries."""
        return self.frames().summaries

    @property
    def cp(self) -> pl.DataFrame | None:
        """The window's CP rows, if known."""
        return self.frames().cp

    @classmethod
    def held(
        cls,
        start_ns: int,
        end_ns: int,
        label: str,
        summaries: Summaries,
        cp: pl.DataFrame | None,
    ) -> WindowView:
        """A view whose frames are in memory."""
        frames = WindowFrames(summaries, cp)
        return cls(start_ns, end_ns, label, lambda: frames)


def lag_ns(
    now_ns: int, closed_until_ns: int | None, lateness_ns: int, window_ns: int
) -> int | None:
    """How far a live page is behind its trace, in ns (see "How far behind").

    How long the first window not closed yet (``[closed_until_ns,
    closed_until_ns + window_ns)``, on the trace's clock) has been due at
    ``now_ns`` (wall clock): ``now_ns - lateness_ns - closed_until_ns -
    window_ns``, at least 0; ``None`` before any window closed.

    >>> s = 1_000_000_000
    >>> lag_ns(11 * s + s // 2, 8 * s, 2 * s, s)  # [8 s, 9 s) due at 11 s
    500000000
    >>> lag_ns(10 * s, 8 * s, 2 * s, s), lag_ns(1, None, 0, s)
    (0, None)
    """
    if closed_until_ns is None:
        return None
    return max(0, now_ns - lateness_ns - closed_until_ns - window_ns)


def lag_text(lag: int, lateness_ns: int) -> str:
    """The status line's part that says how far behind the page is.

    >>> lag_text(400_000_000, 2_000_000_000)
    'behind the trace by 400 ms (beyond the 2 s lateness)'
    >>> lag_text(75_000_000_000, 0)
    'behind the trace by 1 min 15 s (beyond the 0 s lateness)'
    """
    return (
        f"behind the trace by {duration(lag)} "
        f"(beyond the {duration(lateness_ns)} lateness)"
    )


def closed_label(start_ns: int, end_ns: int) -> str:
    """The picker label of a window closed by the online pipeline.

    >>> closed_label(0, 1_000_000_000)
    '00:00:00.000 – 00:00:01.000 UTC'
    """
    return f"{utc(start_ns)} – {utc(end_ns)} UTC"


def window_start(key: object) -> int | None:
    """The start time a window-picker value names, or ``None``.

    The value comes from the page, so anything may arrive: only a decimal
    integer string is a start time.

    >>> window_start("1500000000000000000"), window_start("../../etc/passwd")
    (1500000000000000000, None)
    """
    if isinstance(key, str) and _KEY.fullmatch(key):
        return int(key)
    return None


@dataclass(frozen=True)
class ViewState:
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
    corrupt_files, late_rows, rows_read
        Counters of the online pipeline (a report: the rows it profiled).
    lag_ns
        How far the page is behind a live trace when published (see "How
        far behind"); ``None`` when unknown: no window closed yet, the
        trace idle, or not a live source.
    live
        Whether more windows may come (the page then refreshes).
    run
        The whole run so far, profiled as ``sparktrail profile`` would
        (:class:`~sparktrail.engines.run_so_far.RunSoFar`); ``None`` before
        its first profile, or for a report (whose one view is the run).
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
    rows_read: int = 0
    lag_ns: int | None = None
    live: bool = True
    run: Summaries | None = None
    version: int = 0
    windows_version: int = 0

    def window(self, key: object) -> WindowView | None:
        """The window picked by ``key`` (a start time, or :data:`LATEST`).

        Any other value (one this snapshot does not hold, or not a window
        key at all) picks the latest window.
        """
        if not self.windows:
            return None
        start = window_start(key)
        if start is not None:
            at = bisect.bisect_left(self.windows, start, key=lambda v: v.start_ns)
            if at < len(self.windows) and self.windows[at].start_ns == start:
                return self.windows[at]
        return self.windows[-1]


class ViewSource(Protocol):
    """Anything that hands out the latest snapshot."""

    def latest(self) -> ViewState:
        """The most recently published snapshot."""
        ...


class StaticSource:
    """A source whose snapshot never changes (a finished report)."""

    def __init__(self, snapshot: ViewState) -> None:
        self._snapshot = snapshot

    def latest(self) -> ViewState:
        """The one snapshot."""
        return self._snapshot


def append_rows(frame: pl.DataFrame, more: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """``frame`` with the rows of ``more`` after it (columns unified).

    Appends chunks rather than copying ``frame``; rechunks once they pile up.

    >>> a = pl.DataFrame({"x": [1]})
    >>> append_rows(a, [pl.DataFrame({"x": [2], "y": ["b"]})]).rows()
    [(1, None), (2, 'b')]
    """
    frames = [f for f in (frame, *more) if not f.is_empty()]
    if not frames:
        return pl.DataFrame()
    if len(frames) == 1:
        return frames[0]
    out = pl.concat(frames, how="diagonal_relaxed", rechunk=False)
    return out.rechunk() if out.n_chunks() > 64 else out


def read_activity(store: WindowStore, starts: Sequence[int]) -> pl.DataFrame:
    """``activity_by_window`` of the stored windows ``starts``, concatenated.

    One read per window (:meth:`~sparktrail.engines.store.WindowStore.
    read_frame`), concatenated once.
    """
    if not starts:
        return pl.DataFrame()
    frames = [store.read_frame(s, "activity_by_window") for s in starts]
    return pl.concat(frames, how="diagonal_relaxed").rechunk()


class _FrameCache:
    """The frames of recently used windows; a miss reads the store (thread-safe)."""

    def __init__(self, read: Callable[[int], WindowFrames], size: int) -> None:
        self._read = read
        self._size = size
        self._held: OrderedDict[int, WindowFrames] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, start_ns: int) -> WindowFrames:
        with self._lock:
            frames = self._held.get(start_ns)
            if frames is not None:
                self._held.move_to_end(start_ns)
                return frames
        frames = self._read(start_ns)  # outside the lock: other windows go on
        self.put(start_ns, frames)
        return frames

    def put(self, start_ns: int, frames: WindowFrames) -> None:
        with self._lock:
            self._held[start_ns] = frames
            self._held.move_to_end(start_ns)
            while len(self._held) > self._size:
                self._held.popitem(last=False)


class LivePipeline(Protocol):
    """What a :class:`LiveLoader` reads of the online pipeline that its
    caller runs (:class:`~sparktrail.engines.online.OnlinePipeline`): the
    dashboard only reads; the CLI starts the pipeline that writes."""

    @property
    def store(self) -> WindowStore: ...
    @property
    def fixed_ns(self) -> int | None: ...
    @property
    def open_window_ns(self) -> int | None: ...
    @property
    def closed_until_ns(self) -> int | None: ...
    @property
    def watermark_ns(self) -> int | None: ...
    @property
    def rows_read(self) -> int: ...
    @property
    def corrupt_files(self) -> int: ...
    @property
    def late_rows(self) -> int: ...

    def poll(self) -> Sequence[Any]: ...


class LiveLoader:
    """Steps the online pipeline its caller opens; each step, a snapshot.

    Parameters
    ----------
    open_pipeline
        Opens the pipeline on the trace directory (called at the first
        step, so that a directory that does not exist yet is waited for):
        the caller's, as the dashboard only reads (``sparktrail serve``
        passes :class:`~sparktrail.engines.online.OnlinePipeline`).
    trace_dir, lateness_ns
        The pipeline's trace directory and lateness, for the status line.
    cached_windows
        How many windows' frames to keep in memory (the newest and the
        recently picked); the others are read from the store when picked.
    run_so_far
        Profiles the whole trace now and then in the background; each
        snapshot carries its newest result (``None``: no whole-run answers).
    """

    def __init__(
        self,
        open_pipeline: Callable[[], LivePipeline],
        trace_dir: str | Path,
        lateness_ns: int,
        cached_windows: int = CACHED_WINDOWS,
        run_so_far: RunSoFar | None = None,
    ) -> None:
        self._open_pipeline = open_pipeline
        self._run_so_far = run_so_far
        self._run: Summaries | None = None
        self.trace_dir = Path(trace_dir)
        self.lateness_ns = lateness_ns
        self._pipeline: LivePipeline | None = None
        self._windows: tuple[WindowView, ...] = ()
        self._activity = pl.DataFrame()
        self._version = 0
        self._windows_version = 0
        self._last: ViewState | None = None
        self._frames = _FrameCache(self._read_frames, cached_windows)
        # Rows read so far, and when (monotonic) that count last grew.
        self._rows_read = -1
        self._rows_at = 0.0

    def _read_frames(self, start_ns: int) -> WindowFrames:
        assert self._pipeline is not None  # views exist once the pipeline does
        window = self._pipeline.store.read_window(start_ns, self._pipeline.fixed_ns)
        return WindowFrames(window.summaries, window.cp)

    def _view(self, start_ns: int, end_ns: int) -> WindowView:
        frames = functools.partial(self._frames.get, start_ns)
        return WindowView(start_ns, end_ns, closed_label(start_ns, end_ns), frames)

    def _start(self) -> LivePipeline:
        pipeline = self._open_pipeline()
        starts = pipeline.store.window_starts()
        w = pipeline.fixed_ns
        self._windows = tuple(
            self._view(s, s + w if w is not None else pipeline.store.window_end(s))
            for s in starts
        )
        self._activity = read_activity(pipeline.store, starts)
        return pipeline

    def start(self) -> None:
        """Open the pipeline and its store now (the first step does otherwise).

        Raises
        ------
        InputError
            When another process writes the store, or it holds another
            window length.
        """
        if self._pipeline is None:
            self._pipeline = self._start()

    def step(self) -> ViewState:
        """Poll the trace directory once and describe the result."""
        self.start()
        assert self._pipeline is not None
        pipeline = self._pipeline
        closed = pipeline.poll()
        if closed:
            for window in closed:
                frames = WindowFrames(window.summaries, window.cp)
                self._frames.put(window.start_ns, frames)
            self._windows += tuple(self._view(w.start_ns, w.end_ns) for w in closed)
            self._activity = append_rows(
                self._activity, [w.summaries.activity_by_window for w in closed]
            )
            self._windows_version += 1
        run_changed = self._follow_run(pipeline.rows_read)
        if run_changed:
            self._windows_version += 1
        lag = self._lag(pipeline)
        status = self._status(pipeline, lag)
        last = self._last
        if (
            last is not None
            and not closed
            and not run_changed
            and (status, pipeline.corrupt_files, pipeline.late_rows)
            == (last.status, last.corrupt_files, last.late_rows)
            and pipeline.rows_read == last.rows_read
        ):
            return last  # unchanged: the page need not redraw
        self._version += 1
        self._last = ViewState(
            source=str(self.trace_dir),
            status=status,
            windows=self._windows,
            activity_by_window=self._activity,
            corrupt_files=pipeline.corrupt_files,
            late_rows=pipeline.late_rows,
            rows_read=pipeline.rows_read,
            lag_ns=lag,
            live=True,
            run=self._run,
            version=self._version,
            windows_version=self._windows_version,
        )
        return self._last

    def _follow_run(self, rows_read: int) -> bool:
        """Offer the trace to the whole-run profile; whether a new one is in."""
        if self._run_so_far is None:
            return False
        self._run_so_far.offer(rows_read)
        result = self._run_so_far.latest()
        if result is None or result.summaries is self._run:
            return False
        self._run = result.summaries
        return True

    def _lag(self, pipeline: LivePipeline) -> int | None:
        """:func:`lag_ns` now, or ``None`` while the trace is idle."""
        now = time.monotonic()
        if pipeline.rows_read != self._rows_read:
            self._rows_read, self._rows_at = pipeline.rows_read, now
        if now - self._rows_at > IDLE_AFTER_S:
            return None
        length = pipeline.open_window_ns
        if length is None:  # the next micro-batch window's end is not known
            return 0
        wall = time.time_ns()
        return lag_ns(wall, pipeline.closed_until_ns, self.lateness_ns, length)

    def _status(self, pipeline: LivePipeline, lag: int | None) -> str:
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
        if lag is not None:
            behind = lag_text(lag, self.lateness_ns)
        else:
            idle = round((time.monotonic() - self._rows_at) * 1e9)
            behind = f"no new trace rows for {duration(idle)}"
        return (
            f"{len(self._windows)} windows closed, the latest ends "
            f"{utc(self._windows[-1].end_ns)} UTC; watermark {utc(watermark)} UTC; "
            f"{behind}"
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
        self, step: Callable[[], ViewState], interval: float = 0.1, source: str = ""
    ) -> None:
        super().__init__(name="sparktrail-update", daemon=True)
        self._step = step
        self._interval = interval
        self._stop_event = threading.Event()
        self._snapshot = ViewState(source=source, status="starting…")
        self._errors = 0

    def latest(self) -> ViewState:
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
            self._snapshot = ViewState(
                source=old.source,
                status=f"error: {err}",
                windows=old.windows,
                activity_by_window=old.activity_by_window,
                corrupt_files=old.corrupt_files,
                late_rows=old.late_rows,
                rows_read=old.rows_read,
                lag_ns=old.lag_ns,
                run=old.run,
                version=old.version + 1,
                windows_version=old.windows_version,
            )

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to end and wait for it."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)

    def wait_for(self, predicate: Callable[[ViewState], bool], timeout: float) -> bool:
        """Wait until the latest snapshot satisfies ``predicate`` (tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self._snapshot):
                return True
            time.sleep(0.05)
        return predicate(self._snapshot)


def load_report(out_dir: str | Path) -> ViewState:
    """A saved :class:`~sparktrail.engines.profiler.Profile` (the output of
    ``sparktrail profile``) as a finished snapshot.

    Raises
    ------
    FileNotFoundError
        If ``out_dir/summaries`` lacks a summary frame.
    """
    return profile_snapshot(Profile.load(out_dir), str(out_dir))


def profile_snapshot(profile: Profile, source: str) -> ViewState:
    """A :class:`~sparktrail.engines.profiler.Profile` as a finished
    snapshot: one whole-run view (``source`` names what was profiled)."""
    summaries = profile.summaries
    windows = summaries.windows
    extent = windows_extent(windows)
    if extent is None:
        return ViewState(source, "the report holds no window", live=False)
    start, end = extent
    cp = None if profile.critical_cp.is_empty() else profile.critical_cp
    label = f"whole run {utc(start)} – {utc(end)} UTC"
    view = WindowView.held(start, end, label, summaries, cp)
    return ViewState(
        source=source,
        status=f"report of {len(windows)} windows of {window_text(summaries)}",
        windows=(view,),
        activity_by_window=summaries.activity_by_window,
        rows_read=profile.rows or 0,
        live=False,
        version=1,
    )
