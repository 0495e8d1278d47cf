"""Online profiling: follow a trace directory and close windows as they settle.

:class:`OnlinePipeline` reads the trace files that land in a directory,
keeps the rows of windows that are still open, and closes a window once
the watermark, the latest event time seen minus ``lateness_ns``, has
passed its end. A closed window's CP, its summaries and its hints go to
the store (:mod:`~sparktrail.engines.store`) under the trace directory.

Assumptions
-----------
* Windows are ``[k * window_ns, (k + 1) * window_ns)``: multiples of the
  window length since the Unix epoch, the windows
  :func:`~sparktrail.pag.critical_participation` uses by default.
  With ``window_ns`` = :data:`~sparktrail.engines.engine_choice.MICRO_BATCHES`
  (``--window batch``) they are a Structured Streaming query's
  micro-batches and the waits between them, as ``profile --window batch``
  cuts them (:func:`~sparktrail.engines.batch.micro_batch_bounds`): their
  boundaries are the triggers' starts and ends in the context of the
  newest trace file. A boundary is known once its batch's progress event
  was traced, so a window closes when the watermark has passed a known
  boundary after it; until the first micro-batch is traced, none closes
  (``final`` closes what is left as one window). A batch's progress must
  arrive within the lateness too: a boundary that turns up inside the
  closed range is ignored.
* A trace row arrives at most ``lateness_ns`` after the latest event seen
  when it arrives. A later row whose time lies in a closed window is
  counted in ``late_rows`` and kept only for the windows still open.
* Trace files are complete when they appear under their final name
  (:func:`~sparktrail.pag.write_trace` renames them into place) and do not
  change afterwards; names starting with a dot (temporary files, the
  store) are skipped. A file that cannot be read is skipped with a
  :class:`TraceFileWarning` and counted, and read again if its size changes.

CP of a closed window
---------------------
Only the rows that touch the window go into its computation, clipped to
it, with ``extent_ns`` = (first event seen, latest event seen): a window in
the middle of a run has paths from ``ts`` to ``te`` (the latest event lies
past ``te`` once the watermark passed it); the first window's paths start
at the trace's first event. Each closed window therefore gets the CP that
:func:`~sparktrail.pag.critical_participation` of the whole trace gives it.
``edge_index`` in the stored CP rows is the row's position in the
concatenation of the trace files in the order they were consumed.

Summaries and hints are computed per window, from that window's CP rows
and the trace rows touching it (so a task's facts, such as its duration,
are whole, but a stage's median task is taken over the tasks touching the
window).

Restart
-------
The checkpoint names every file consumed (size, rows, row offset, and the
range of its event times), the end of the last closed window (every window
before it is in the store) and the counters. A poll that closes windows
writes it twice: first with the end of the range it is about to close
(``closing_until_ns``) and the state after reading the new files, then
the range's windows, then the checkpoint with the range closed. The
writer may be killed at any instruction; a new pipeline on the same
directory

* removes what the killed one left half-written (hidden temporaries),
* re-reads only the consumed files that may touch a window not closed yet,
* finishes a close that was cut short, from the state saved before it:
  windows of the range already in the store were computed from that same
  state and are kept, the others are written,
* and then reads the files that arrived meanwhile.

So no window is lost, none is written twice or rewritten, and the
counters are those of a run that was never stopped. A store with windows
but no checkpoint cannot tell how they were made (with which window
length, say): they are removed and computed again. Windows past the
checkpoint of a store without the closing mark (an older sparktrail)
count as closed.

A run with restarts stores what a run without them would when rows keep
the lateness bound and file names sort in arrival order: a poll consumes
the new files by name, and ``edge_index`` follows the consumption order.

Falling behind
--------------
A producer faster than the pipeline leaves more new files at each poll.
A poll reads new files (in name order) until it has read
``max_poll_rows`` rows, closes the windows they let it close, and leaves
the other files to the next poll: the backlog waits on disk, not in
memory, and the buffer holds at most about ``max_poll_rows`` rows beyond
the lateness. The windows stored are those of a run whose files arrived
later, which, under the same condition as for restarts, are the same.

Small windows on one core
-------------------------
A poll that follows a window of fewer than
:data:`~sparktrail.engines.threads.ONE_CORE_ROWS` trace rows runs with its
thread and polars' thread pool on one core
(:func:`~sparktrail.engines.threads.one_core`): such a window's close is a
few hundred small polars queries, each handing its work to the pool, and
where waking another core is slow (a virtual machine) the hand-offs cost
more than the parallel work gains. Larger windows keep every core.

Two threads a window
--------------------
A window's CP (its snapshot and the path-counting kernel, numba code that
releases the GIL) is computed on a helper thread that may use every core
(:func:`~sparktrail.engines.threads.background`), while the poll's thread
computes what does not depend on it: the window's task facts and their
what-if replay model (built whether or not a hint asks for it: it costs
the poll no time when the CP takes longer). Then the summaries and hints
are finished from both, with the same result as one after the other.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag import CycleError
from sparktrail.pag.chunk_cp import one_window_cp, touching_rows
from sparktrail.pag.context import AppContext
from sparktrail.pag.participation import check_window
from sparktrail.pag.streams import StreamBatch
from sparktrail.pag.trace import (
    Trace,
    TraceError,
    read_context,
    read_trace,
    trace_file_names,
)
from sparktrail.pag.windows import (
    first_event,
    last_event,
    listed_spans,
    to_trace_rows,
)
from sparktrail.summaries import task_facts
from sparktrail.summaries.finish import summaries_from_cp
from sparktrail.summaries.result import HintOptions, Summaries
from sparktrail.whatif import Replay

from .batch import trigger_times
from .checkpoint import PipelineCounters, check_checkpoint
from .engine_choice import MICRO_BATCHES
from .open_rows import ROW, OpenRows, Part, WindowBuckets
from .store import StoredWindow, WindowStore, store_dir
from .threads import ONE_CORE_ROWS, background, one_core
from .watermark import batch_close_until, close_until

__all__ = [
    "CHECKPOINT_VERSION",
    "MAX_POLL_ROWS",
    "ClosedWindow",
    "OnlinePipeline",
    "PipelineCounters",
    "TraceFileWarning",
]

CHECKPOINT_VERSION = 1
#: The helper thread a window's CP is computed on (see "Two threads a window").
CP_THREAD = "sparktrail-cp"
#: Rows a poll reads before it closes windows (see "Falling behind"): some
#: 3 s of trace at 300,000 rows/s.
MAX_POLL_ROWS = 1_000_000

#: A closed window as the pipeline returns it (the same as the store holds).
ClosedWindow = StoredWindow


class TraceFileWarning(UserWarning):
    """A trace file that could not be read; the pipeline skipped it."""


@dataclass
class _FileEntry:
    size: int
    rows: int
    offset: int
    min_ns: int | None
    max_ns: int | None


class OnlinePipeline(PipelineCounters):
    """Follow a trace directory; close, compute and store windows as they settle.

    Parameters
    ----------
    trace_dir
        Directory the trace files land in (need not exist yet).
    window_ns
        Window length in nanoseconds (> 0), or
        :data:`~sparktrail.engines.engine_choice.MICRO_BATCHES` for a window per
        streaming micro-batch (see "Assumptions").
    lateness_ns
        How far behind the latest event a row may still arrive (>= 0).
    options
        Hint thresholds (default :class:`HintOptions`).
    max_poll_rows
        Rows a poll reads at most (and then up to the end of a file) before
        closing windows; the rest waits for the next poll (> 0).

    Raises
    ------
    ValueError
        If a length is out of range, the store was written with another
        window length, or another process is writing it.

    Attributes
    ----------
    corrupt_files, late_rows, failed_windows : int
        Files skipped as unreadable; rows that arrived after their window
        closed; windows whose PAG had a cycle (skipped, with a warning).
    """

    def __init__(
        self,
        trace_dir: str | Path,
        window_ns: int | str,
        lateness_ns: int,
        options: HintOptions | None = None,
        max_poll_rows: int = MAX_POLL_ROWS,
    ) -> None:
        if window_ns != MICRO_BATCHES:
            window_ns, _ = check_window(window_ns, None)  # type: ignore[arg-type]
        if lateness_ns < 0:
            raise InputError(f"lateness_ns must be >= 0, got {lateness_ns!r}")
        if max_poll_rows <= 0:
            raise InputError(f"max_poll_rows must be > 0, got {max_poll_rows!r}")
        self.max_poll_rows = max_poll_rows
        self.trace_dir = Path(trace_dir)
        self.window_ns = window_ns
        self.lateness_ns = lateness_ns
        self.options = options
        self.store = WindowStore(store_dir(trace_dir))
        self._files: dict[str, _FileEntry] = {}
        #: name -> (its entry, the entry's JSON text): see _checkpoint_json.
        self._encoded_files: dict[str, tuple[_FileEntry, str]] = {}
        self._corrupt: dict[str, int] = {}
        # The newest file's context is the whole so far (see read_context).
        self._context = AppContext()
        #: The context's batches and their trigger times (see _boundaries).
        self._triggers: tuple[tuple[StreamBatch, ...], list[int]] = ((), [])
        self._next_row = 0
        self._first: int | None = None
        self._last: int | None = None
        self._closed_until: int | None = None
        # End of the close under way (or cut short by a crash), else None.
        self._closing_until: int | None = None
        # Rows before this are late. Only an older store, with windows past
        # its checkpoint, sets it below closed_until: their rows are not.
        self._late_until: int | None = None
        self.late_rows = 0
        self.failed_windows = 0
        # The buffer: each file's rows of the open windows.
        self._open_rows = OpenRows()
        # Whether the last window closed had under ONE_CORE_ROWS rows.
        self._small_windows = False
        self._resume()

    # -- state -------------------------------------------------------------

    @property
    def open_window_ns(self) -> int | None:
        """The length of the first window not closed yet, once its end is
        known (a micro-batch window's is not before its trigger is traced)."""
        if self.fixed_ns is not None:
            return self.fixed_ns
        if self._first is None:
            return None
        start = self._open_from()
        ends = [t for t in self._boundaries() if t > start]
        return ends[0] - start if ends else None

    @property
    def buffered_rows(self) -> int:
        """Rows held in memory for the windows still open."""
        return len(self._open_rows)

    def _resume(self) -> None:
        self.store.remove_temporaries()
        checkpoint = self.store.read_checkpoint()
        if checkpoint is None:
            for start in self.store.window_starts():  # of unknown making
                self.store.remove_window(start)
            return
        self._load_checkpoint(checkpoint)
        starts = self.store.window_starts()
        if starts and self._closing_until is None and self.fixed_ns is not None:
            # An older sparktrail wrote windows before their checkpoint.
            end = starts[-1] + self.fixed_ns
            if self._closed_until is None or end > self._closed_until:
                self._closed_until = end
        self._reread_open_files()

    def _load_checkpoint(self, data: dict[str, Any]) -> None:
        check_checkpoint(
            data, self.store.checkpoint_path, CHECKPOINT_VERSION, self.window_ns
        )
        self._load_checkpoint_fields(data)
        self._files = {name: _FileEntry(**e) for name, e in data["files"].items()}
        self._closing_until = data.get("closing_until_ns")
        self._late_until = self._closed_until

    def _reread_open_files(self) -> None:
        """Rebuild the buffer from consumed files that may touch open windows,
        and the context from the newest consumed file."""
        newest = max(self._files, key=lambda n: self._files[n].offset, default=None)
        if newest is not None:
            with contextlib.suppress(TraceError, OSError):
                self._context = read_context(self.trace_dir / newest)
        for name, entry in list(self._files.items()):
            path = self.trace_dir / name
            if not path.is_file() or path.stat().st_size != entry.size:
                del self._files[name]  # changed or gone: read again as new
                continue
            if entry.max_ns is None or (
                self._closed_until is not None and entry.max_ns < self._closed_until
            ):
                continue
            try:
                frame = self._read(path)
            except TraceError:
                frame = None  # changed in place: read again as new (and corrupt)
                del self._files[name]
            if frame is not None:
                self._buffer(frame, entry.offset, count_late=False)

    def checkpoint(self) -> dict[str, Any]:
        """The state a restart needs, as JSON-ready data."""
        files = {name: vars(e) for name, e in self._files.items()}
        return self._checkpoint_head() | {"files": files}

    def _checkpoint_head(self) -> dict[str, Any]:
        """The checkpoint but its files."""
        return self._checkpoint_fields(CHECKPOINT_VERSION) | {
            "closing_until_ns": self._closing_until
        }

    def _checkpoint_json(self) -> str:
        """:meth:`checkpoint` as :func:`json.dumps` writes it, each file's
        entry encoded once.

        The checkpoint lists every file consumed, and a poll that closes a
        window writes it twice: encoded whole, it took 2.9 ms a poll once
        600 files had landed (a file a second: an hour makes 3,600), against
        1.2 ms at 20 files. A consumed file's entry does not change (a file
        read again gets a new entry, which is encoded anew), so its text is
        kept.
        """
        head = json.dumps(self._checkpoint_head())
        encoded = self._encoded_files
        files = []
        for name, entry in self._files.items():
            known = encoded.get(name)
            if known is None or known[0] is not entry:
                known = encoded[name] = (
                    entry,
                    f"{json.dumps(name)}: {json.dumps(vars(entry))}",
                )
            files.append(known[1])
        return f'{head[:-1]}, "files": {{{", ".join(files)}}}}}'

    # -- reading -----------------------------------------------------------

    def _new_files(self) -> list[tuple[str, Path, int]]:
        """The files not consumed yet, as (name, path, size), in path order."""
        if not self.trace_dir.is_dir():
            return []
        found = []
        for name in trace_file_names(self.trace_dir):
            if name in self._files:  # consumed: no stat (thousands an hour)
                continue
            path = self.trace_dir / name
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if self._corrupt.get(name) != size:
                found.append((name, path, size))
        return sorted(found, key=lambda new: new[1])  # as trace_files orders them

    def _read(self, path: Path) -> pl.DataFrame | None:
        try:
            return read_trace(path)
        except FileNotFoundError:
            return None

    def _consume(self, name: str, path: Path, size: int) -> None:
        try:
            frame = self._read(path)
        except TraceError as err:
            self._corrupt[name] = size
            warnings.warn(
                f"skipped trace file {path}: {err}", TraceFileWarning, stacklevel=4
            )
            return
        if frame is None:
            return
        self._corrupt.pop(name, None)
        with contextlib.suppress(TraceError, FileNotFoundError):
            context = read_context(path)
            self._context = context if context.known else self._context
        bounds = self._buffer(frame, self._next_row, count_late=True)
        self._files[name] = _FileEntry(size, len(frame), self._next_row, *bounds)
        self._next_row += len(frame)

    def _buffer(
        self, frame: pl.DataFrame, offset: int, *, count_late: bool
    ) -> tuple[int | None, int | None]:
        """Buffer a file's rows, numbered from ``offset``; returns their
        first and last event (None, None: no rows)."""
        if frame.is_empty():
            return None, None
        # One query for the bounds and the late rows (four queries over the
        # file's rows took ~1 ms a file of 30,000 rows).
        stats = [
            first_event.min().alias("a"),
            last_event.max().alias("b"),
            last_event.min().alias("c"),
        ]
        counting = count_late and self._late_until is not None
        if counting:
            stats.append((first_event < self._late_until).sum().alias("late"))
        row = frame.select(stats).row(0)
        first, last, ends_from = row[0], row[1], row[2]
        if counting:
            self.late_rows += row[3]
        self._observe(first, last)
        rows = np.arange(offset, offset + frame.height, dtype=np.int64)
        whole = Part(
            frame.clone().insert_column(0, pl.Series(ROW, rows)),
            first,
            ends_from,
            last,
        )
        closed = self._closed_until
        self._open_rows.add(whole if closed is None else whole.ending_from(closed))
        return first, last

    # -- closing -----------------------------------------------------------

    def poll(self, *, final: bool = False) -> list[ClosedWindow]:
        """Read new trace files and close every window the watermark passed.

        A close that a crash cut short (see "Restart") is finished first.

        Parameters
        ----------
        final
            The trace is complete: read every new file (whatever
            ``max_poll_rows``) and close every window up to the last event.

        Returns
        -------
        list of ClosedWindow
            The windows closed by this call, in time order (already written
            to the store, and the checkpoint after them).
        """
        # On one core when the last window closed was small (see
        # engines/threads.py): the next is most likely small too.
        with one_core(self._small_windows):
            return self._poll(final)

    def _poll(self, final: bool) -> list[ClosedWindow]:
        closed = []
        if self._closing_until is not None:  # a close a crash cut short
            closed += self._close_range(self._closing_until, resumed=True)
        new = self._new_files()
        read_from = self._next_row
        for name, path, size in new:
            if not final and self._next_row - read_from >= self.max_poll_rows:
                break  # the rest next poll (see "Falling behind")
            self._consume(name, path, size)
        if self._last is not None:
            until = self._close_until(final)
            if until is not None and until > self._open_from():
                return closed + self._close_range(until)
        if new:  # nothing to close, but a restart need not read them again
            self.store.write_checkpoint(self._checkpoint_json())
        return closed

    def _close_until(self, final: bool) -> int | None:
        """Where the windows the watermark passed end (``None``: nowhere yet)."""
        assert self._last is not None
        if self.fixed_ns is not None:
            return close_until(self._last, self.lateness_ns, self.fixed_ns, final=final)
        return batch_close_until(
            self._last, self.lateness_ns, self._boundaries(), final=final
        )

    def _boundaries(self) -> list[int]:
        """Micro-batch boundaries after the first event (see "Assumptions")."""
        assert self._first is not None
        first = self._first
        batches = self._context.batches
        if self._triggers[0] is not batches:  # sorted once per context read
            self._triggers = (batches, trigger_times(batches))
        return [t for t in self._triggers[1] if t > first]

    def _windows_before(self, rows: pl.DataFrame, until: int) -> list[tuple[int, int]]:
        """The windows from the first open one to ``until``, as (start, end)."""
        lo = self._open_from()
        w = self.fixed_ns
        if w is not None:  # a plain stretch is one window (DESIGN §10)
            return listed_spans(rows, w, lo, until)
        inner = [t for t in self._boundaries() if lo < t < until]
        return list(itertools.pairwise([lo, *inner, until]))

    def _close_range(self, until: int, *, resumed: bool = False) -> list[ClosedWindow]:
        """Close every window before ``until``; see "Restart" above."""
        rows = self._open_rows.before(until)
        windows = self._windows_before(rows, until)
        self._closing_until = until
        if windows and not resumed:
            self.store.write_checkpoint(self._checkpoint_json())
        closed = []
        w = self.fixed_ns
        near = WindowBuckets(rows, w) if w is not None and len(windows) > 1 else None
        for ts, te in windows:
            if self.store.has_window(ts):  # written before a crash
                continue
            window = self._close(rows if near is None else near.around(ts), ts, te)
            if window is not None:
                closed.append(window)
        self._closed_until = self._late_until = until
        self._closing_until = None
        self._open_rows.drop_closed(until)
        self.store.write_checkpoint(self._checkpoint_json())
        return closed

    def _close(self, rows: pl.DataFrame, ts: int, te: int) -> ClosedWindow | None:
        """Close the window ``[ts, te)`` from ``rows`` and store it (``None``:
        it has no CP rows, or a cycle, which is warned about and counted)."""
        near = touching_rows(rows, ts, te, row_column=ROW)
        if near.is_empty():
            return None
        # The CP on a helper thread (see "Two threads a window"), meanwhile
        # the task facts and the what-if model on this one.
        computing = background(CP_THREAD).submit(self._closing_cp, near, ts, te)
        try:
            facts, replay = _task_model(Trace(near, self._context))
        except BaseException:
            with contextlib.suppress(Exception):
                computing.result()  # it reads the pipeline's state: let it end
            raise
        try:
            cp = computing.result()
        except CycleError as err:
            self.failed_windows += 1
            warnings.warn(
                f"skipped window at {ts}: {err}", TraceFileWarning, stacklevel=4
            )
            return None
        self._small_windows = len(near) < ONE_CORE_ROWS
        if cp.is_empty():
            return None
        stored = to_trace_rows(cp, near)
        # Its CP rows are written while its summaries are computed.
        with self.store.begin_window(ts, stored) as write:
            summaries = self._summaries(cp, near, ts, te, facts, replay)
            write.finish(summaries)
        return ClosedWindow(start_ns=ts, end_ns=te, cp=stored, summaries=summaries)

    def _closing_cp(self, near: pl.DataFrame, ts: int, te: int) -> pl.DataFrame:
        """The closing window's CP rows from the trace rows touching it
        (:func:`~sparktrail.pag.chunk_cp.one_window_cp`). Run on the
        helper thread: it reads the pipeline's state and changes none of it.

        Raises
        ------
        CycleError
            If the window's rows hold a cycle.
        """
        assert self._first is not None and self._last is not None
        # Origin ts: only this window is kept (clipped rows may open a
        # pathless neighbour; its ``windows`` frame says if it has paths).
        extent = (self._first, self._last)
        cp, _ = one_window_cp(near, ts, te, extent, touching=True)
        return cp

    def _summaries(
        self,
        cp: pl.DataFrame,
        near: pl.DataFrame,
        ts: int,
        te: int,
        facts: pl.DataFrame | None = None,
        replay: Replay | None = None,
    ) -> Summaries:
        """The window's summaries and hints from its CP rows (and its task
        facts and what-if model, when they are built already)."""
        trace = Trace(near, self._context)
        w = self.fixed_ns
        return summaries_from_cp(
            cp,
            trace,
            te - ts,
            ts,
            self.options,
            facts=facts,
            replay=replay,
            span=1 if w is None else max(1, (te - ts) // w),
        )


def _task_model(trace: Trace) -> tuple[pl.DataFrame, Replay | None]:
    """A window's task facts and their what-if replay model (``None``: the
    rows cannot be replayed; the hints then say so, as without it)."""
    facts = task_facts(trace)
    try:
        return facts, Replay.of(trace, facts)
    except (InputError, ValueError, KeyError):
        return facts, None
