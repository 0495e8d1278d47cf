"""The batch engine: every summary and hint of a trace, a batch of windows at a time."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag.buckets import bucketed_rows
from sparktrail.pag.chunk_cp import (
    chunk_cp,
    cp_of_touching,
    one_window_cp,
    touching_rows,
    trace_extent,
)
from sparktrail.pag.memory import trim_heap
from sparktrail.pag.participation import check_window, critical_participation
from sparktrail.pag.schemas import CP_INPUT_COLUMNS
from sparktrail.pag.snapshot import trace_origin
from sparktrail.pag.streams import StreamBatch
from sparktrail.pag.trace import (
    Trace,
    TraceLike,
    collect_slices,
    load_trace,
    release_mapped_pages,
    trace_slices,
)
from sparktrail.pag.windows import (
    MIN_STRETCH,
    coarse_range,
    plain_stretches,
    to_trace_rows,
)
from sparktrail.summaries.finish import summaries_from_partials, warn_pathless
from sparktrail.summaries.partials import Partials, TaskSums
from sparktrail.summaries.result import HintOptions, Summaries

__all__ = [
    "CHUNK_ROWS",
    "Chunk",
    "Progress",
    "chunk_candidates",
    "cp_chunks",
    "micro_batch_bounds",
    "summarize",
    "summarize_micro_batches",
    "trigger_times",
    "window_chunks",
    "without_stretches",
]

#: Trace rows starting in one batch of windows.
CHUNK_ROWS = 1_000_000
#: Column holding a candidate row's row in the whole trace.
_ROW = "_sparktrail_trace_row"
#: ``progress(batches_done, batches)`` after each batch.
Progress = Callable[[int, int], None]


def summarize(
    trace: TraceLike,
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
    *,
    chunk_rows: int = CHUNK_ROWS,
    progress: Progress | None = None,
    min_stretch: int = MIN_STRETCH,
) -> Summaries:
    """Compute every summary and rebalancing hint of a trace.

    The windows are taken a batch at a time (about ``chunk_rows`` trace
    rows each): a batch's CP is computed from the rows touching it
    (:func:`~sparktrail.pag.chunk_cp.chunk_cp`) and reduced to
    :class:`~sparktrail.summaries.partials.Partials` before the next, so
    the whole CP table, as long as the trace, is never held at once. The
    result equals that of :func:`summaries_from_cp` on the whole CP table.

    Parameters
    ----------
    trace
        A trace frame, a path to a trace file or directory, or a
        :class:`~sparktrail.pag.trace.Trace`; validated once, here.
    window_ns
        Window length in nanoseconds (> 0).
    origin_ns
        Start of window 0 (default: the first ``start_ns`` floored to a
        multiple of ``window_ns``).
    options
        Hint thresholds (default :class:`HintOptions`).
    chunk_rows
        Trace rows (counted in the window they start in) per batch (> 0).
    progress
        Called as ``progress(done, batches)`` after each batch.
    min_stretch
        Runs of at least this many windows that hold no event of any row
        are one window each, weighed by their length
        (:func:`~sparktrail.pag.windows.plain_stretches`), so that the
        cost follows the rows, not the time span (DESIGN §10).

    Returns
    -------
    Summaries
        Whole-run summaries (per-window CP summed over the windows with
        paths, divided by their number, so shares sum to 1), activity per
        window, window stats and hints.

    Warns
    -----
    SnapshotWarning
        When windows have no path from start to end (their CP is 0).

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-1/0"],
    ...     "dst_worker": ["exec-1/0", "exec-1/0"], "start_ns": [0, 6],
    ...     "end_ns": [6, 8], "activity": ["processing", "gc"]})
    >>> s = summarize(t, 4)
    >>> s.activity.select("activity", "cp_share").rows()
    [('processing', 0.75), ('gc', 0.25)]
    >>> s.windows["has_paths"].to_list()
    [True, True]
    """
    window, origin = check_window(window_ns, origin_ns)
    valid = load_trace(trace)
    if origin is None:
        origin = trace_origin(valid.frame, window)
    # Handed over without a reference kept here: the finish drops the
    # per-task CP partial once the task facts have their shares (~66 MB
    # at 3.3·10^6 tasks).
    return summaries_from_partials(
        _run_partials(valid, window, origin, chunk_rows, min_stretch, progress),
        valid,
        window,
        origin_ns,
        options,
    )


def _run_partials(
    valid: Trace,
    window: int,
    origin: int,
    chunk_rows: int,
    min_stretch: int,
    progress: Progress | None,
) -> Partials:
    """The partials of every window of ``valid`` (:func:`summarize`'s
    batches), with the pathless windows warned of at its caller's caller."""
    parts = []
    # A long run's task partials are added up as they come, in mapped files
    # (DESIGN §10), not kept per batch until the combine.
    task_sums = TaskSums.for_trace(valid.frame)
    for cp, span, done, total in cp_chunks(
        valid.frame, window, origin, chunk_rows=chunk_rows, min_stretch=min_stretch
    ):
        part = Partials.of(cp.drop("start_ns", "end_ns"), span)
        del cp
        if task_sums is not None:
            task_sums.add(part.tasks)
            part = replace(part, tasks=part.tasks.clear())
        parts.append(part)
        if progress is not None:
            progress(done, total)
    if parts:
        partials = Partials.combine(parts)
        if task_sums is not None:
            partials = replace(partials, tasks=task_sums.frame())
    else:
        partials = Partials.of(critical_participation(valid, window, origin))
    del parts
    # What the loop's arrays left in the C heap goes before the finish.
    trim_heap()
    warn_pathless(partials.windows, stacklevel=3)
    return partials


def cp_chunks(
    frame: pl.DataFrame,
    window_ns: int,
    origin_ns: int,
    *,
    chunk_rows: int = CHUNK_ROWS,
    min_stretch: int = MIN_STRETCH,
) -> Iterator[tuple[pl.DataFrame, int, int, int]]:
    """The CP rows of a validated trace's windows, a batch of windows at a time.

    The one loop of the engines that read a whole trace (:func:`summarize`,
    the trace export): each batch's CP comes from the rows touching it
    (:func:`~sparktrail.pag.chunk_cp.chunk_cp`), a plain stretch's as
    one window of its length (:func:`without_stretches`).

    Yields
    ------
    (cp, span, done, batches)
        A batch's CP rows (``edge_index`` the row of ``frame``), how many
        windows each of its windows stands for (1, or a stretch's length),
        and how many batches are done of how many.

    >>> t = load_trace(pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [8], "activity": ["processing"]})).frame
    >>> [(cp["cp"].to_list(), span) for cp, span, _, _ in cp_chunks(t, 4, 0)]
    [([1.0, 1.0], 1)]
    """
    if (
        not isinstance(chunk_rows, int)
        or isinstance(chunk_rows, bool)
        or chunk_rows < 1
    ):
        raise InputError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    window, origin = window_ns, origin_ns
    # Only the columns the CP reads (no copy): each batch copies its rows.
    frame = frame.select(CP_INPUT_COLUMNS)
    runs = window_chunks(frame, window, origin, chunk_rows)
    if not runs:
        return
    extent = trace_extent(frame)
    batches = without_stretches(
        runs, plain_stretches(frame, window, origin, min_stretch), window, origin
    )
    if len(batches) > 1:  # one batch reads the whole trace: nothing to bucket
        rows_of = chunk_candidates(frame, window, origin, batches)
    release_mapped_pages()  # the passes over the whole trace's times
    for done, (ts, te, span) in enumerate(batches, 1):
        # A stretch is one window as long as it (plain_stretches).
        length, start = (te - ts, ts) if span else (window, origin)
        if len(batches) == 1:
            cp, rows = chunk_cp(frame, length, start, ts, te, extent)
        else:
            # Only the batch's candidate rows are filtered: a scan of the
            # whole trace per batch would make the run quadratic in rows.
            mine = rows_of(done - 1)
            candidates = frame[mine].with_columns(pl.Series(_ROW, mine, pl.Int64))
            del mine
            # The file's pages the gather read (~110 MB) are not read again
            # in this batch: not resident while its CP is computed.
            release_mapped_pages()
            # chunk_cp in its two steps: the candidates (a copy of ~10^6
            # rows' columns) go before the CP is computed from the rows
            # touching the batch.
            rows = touching_rows(candidates, ts, te, row_column=_ROW)
            del candidates
            cp, rows = cp_of_touching(rows, length, start, ts, te, extent)
            cp = cp.drop(_ROW, strict=False)
        # edge_index of the whole trace: the hints name driver rows by it.
        cp = to_trace_rows(cp, rows)
        del rows
        # The trace file's pages this batch read (DESIGN §10: resident
        # memory follows a batch, not the trace).
        release_mapped_pages()
        yield cp, span or 1, done, len(batches)
        # The caller has its partials: this batch's CP rows are not kept
        # beside the next batch's candidates and CP.
        del cp


def window_chunks(
    trace: pl.DataFrame, window_ns: int, origin_ns: int, chunk_rows: int
) -> list[tuple[int, int]]:
    """Runs of windows ``[ts, te)`` with about ``chunk_rows`` rows each.

    A row counts in the first window of its
    :func:`~sparktrail.pag.windows.coarse_range` (the earliest window its
    first event may lie in); the runs cover every window from the first
    row's to the one holding the last event, and a window with more rows
    than ``chunk_rows`` is a run of its own.

    >>> t = pl.DataFrame({"start_ns": [0, 1, 5, 12], "end_ns": [1, 2, 6, 19]})
    >>> window_chunks(t, 4, 0, 2)
    [(0, 4), (4, 20)]
    """
    if trace.is_empty():
        return []
    # Times only (no worker columns): an instant on a boundary lies in the
    # window before it too (and a row starting on one needs no earlier
    # batch, but is harmless in it).
    lo, hi = coarse_range(window_ns, origin_ns)
    k = lo.alias("k")
    # A slice at a time: the whole trace's window indices and their hash
    # table took ~190 MB at 10^7 rows. Slices' counts of a window, summed.
    # Each window's last events too (``last``), so that no pass reads the
    # whole trace's times at once (~1.5 GB at 10^8 rows).
    count = (pl.len().alias("count"), hi.max().alias("last"))
    counts = (
        collect_slices(trace, lambda _, part: part.lazy().group_by(k).agg(*count))
        .group_by("k")
        .agg(pl.col("count").sum(), pl.col("last").max())
        .sort("k")
    )
    windows = counts["k"].to_numpy()
    group = (np.cumsum(counts["count"].to_numpy()) - 1) // chunk_rows
    firsts = windows[np.flatnonzero(np.diff(group, prepend=-1))]
    end = max(int(windows[-1]), int(counts["last"].max())) + 1  # type: ignore[arg-type]
    bounds = [*(int(f) for f in firsts), end]
    return [
        (origin_ns + a * window_ns, origin_ns + b * window_ns)
        for a, b in itertools.pairwise(bounds)
    ]


class Chunk(NamedTuple):
    """Windows ``[ts, te)`` computed together; ``span`` > 0: they are a
    stretch of that many plain windows, computed as one window
    (:func:`~sparktrail.pag.windows.plain_stretches`)."""

    ts: int
    te: int
    span: int = 0


def without_stretches(
    batches: list[tuple[int, int]],
    stretches: list[tuple[int, int]],
    window_ns: int,
    origin_ns: int,
) -> list[Chunk]:
    """``batches`` cut around ``stretches``, each stretch a batch of its own.

    The result covers the same windows, in order; the part of a stretch
    that lies in one batch is a :class:`Chunk` with its ``span``.

    >>> for batch in without_stretches([(0, 100)], [(2, 5)], 10, 0):
    ...     print(batch)
    Chunk(ts=0, te=20, span=0)
    Chunk(ts=20, te=60, span=4)
    Chunk(ts=60, te=100, span=0)
    """
    bounds = [
        (origin_ns + a * window_ns, origin_ns + (b + 1) * window_ns)
        for a, b in stretches
    ]
    cut: list[Chunk] = []
    for ts, te in batches:
        at = ts
        for a, b in bounds:
            if b <= at or a >= te:
                continue
            a, b = max(a, at), min(b, te)
            if a > at:
                cut.append(Chunk(at, a))
            cut.append(Chunk(a, b, (b - a) // window_ns))
            at = b
        if at < te:
            cut.append(Chunk(at, te))
    return cut


def chunk_candidates(
    trace: pl.DataFrame,
    window_ns: int,
    origin_ns: int,
    batches: Sequence[tuple[int, ...]],
) -> Callable[[int], np.ndarray]:
    """The rows each of ``batches`` may need, found in one pass over the trace.

    A row touching batch ``b`` (:func:`~sparktrail.pag.windows.touches`)
    has a window of ``b`` in its
    :func:`~sparktrail.pag.windows.coarse_range`, so the rows whose coarse
    range meets ``b``'s windows are a superset of them (which
    :func:`~sparktrail.pag.chunk_cp.chunk_cp` filters exactly). The
    rows are bucketed by the batch of their first window, once; a row
    whose range reaches later batches is kept aside and added to those.

    Parameters
    ----------
    trace
        The whole trace.
    window_ns, origin_ns
        The windows.
    batches
        :func:`window_chunks` of the trace, in order.

    Returns
    -------
    callable
        ``rows(b)``: the candidate rows of batch ``b``, ascending (so they
        keep the trace's order).

    Examples
    --------
    >>> t = pl.DataFrame({"start_ns": [0, 1, 5, 12], "end_ns": [1, 9, 6, 19]})
    >>> rows = chunk_candidates(t, 4, 0, [(0, 4), (4, 20)])
    >>> rows(0).tolist(), rows(1).tolist()
    ([0, 1], [1, 2, 3])
    """
    lo, hi = coarse_range(window_ns, origin_ns)
    firsts = np.array([(b[0] - origin_ns) // window_ns for b in batches])
    spans: list[np.ndarray] = []

    def first_batches() -> Iterator[np.ndarray]:
        # In slices (:func:`~sparktrail.pag.trace.trace_slices`, pages
        # released after each): the window indices of 10^7 rows took ~500
        # MB at once.
        for start, part in trace_slices(trace):
            k = part.select(lo, hi)
            a = np.searchsorted(firsts, k["lo"].to_numpy(), side="right") - 1
            b = np.searchsorted(firsts, k["hi"].to_numpy(), side="right") - 1
            reaches = np.flatnonzero(b > a)
            spans.extend((reaches.astype(np.int64) + start, b[reaches], a[reaches]))
            yield a.astype(np.int32)

    # Bucketed by a counting sort, a slice at a time (the rows in a mapped
    # file when longer than a slice): an argsort of the whole trace's
    # batches took ~1.6 GB at 10^8 rows (DESIGN §10).
    order, bounds = bucketed_rows(first_batches(), trace.height, len(batches))
    long_rows, long_last, long_first = (
        np.concatenate(spans[i::3]) if spans else np.empty(0, np.int64)
        for i in range(3)
    )
    spans.clear()

    def rows(b: int) -> np.ndarray:
        own = order[bounds[b] : bounds[b + 1]].astype(np.int64)
        reaching = long_rows[(long_first < b) & (long_last >= b)]
        if len(reaching) == 0:
            return own
        return np.sort(np.concatenate([own, reaching]))

    return rows


def micro_batch_bounds(trace: Trace) -> list[int]:
    """Window boundaries at the streaming micro-batches' triggers.

    Each micro-batch's trigger (its start to ``trigger_end_ns``) is a
    window, and so is each wait between two triggers (of any query): a
    window that ended with the wait for the next trigger would have no
    path, waiting being on none. The first window runs from the trace's
    first event to the first trigger, the last to the trace's last event;
    boundaries outside the trace are left out. Empty when the context has
    no micro-batch.

    >>> from sparktrail.pag.context import AppContext
    >>> from sparktrail.pag.streams import StreamBatch
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [10], "activity": ["processing"]})
    >>> app = AppContext(batches=(StreamBatch("q", batch_id=0, timestamp_ns=4,
    ...     duration_ms={"triggerExecution": 0}), StreamBatch("q", batch_id=1,
    ...     timestamp_ns=7)))
    >>> micro_batch_bounds(Trace(load_trace(t).frame, app))
    [0, 4, 7, 11]
    >>> app = AppContext(batches=(StreamBatch("q", batch_id=0, timestamp_ns=2,
    ...     duration_ms={"triggerExecution": 0}),))
    >>> micro_batch_bounds(Trace(load_trace(t.with_columns(end_ns=pl.lit(3_000_000)))
    ...     .frame, app))[:2]
    [0, 2]
    """
    if trace.frame.is_empty():
        return []
    first, last = trace_extent(trace.frame)
    starts = [b.timestamp_ns for b in trace.context.batches]
    if not any(s is not None and first < s <= last for s in starts):
        return []
    inner = [t for t in trigger_times(trace.context.batches) if first < t <= last]
    return [first, *inner, last + 1]


def trigger_times(batches: Sequence[StreamBatch]) -> list[int]:
    """The micro-batches' trigger starts and ends, sorted, each once.

    These are the window boundaries of ``--window batch``
    (:func:`micro_batch_bounds`; the online pipeline's too). A batch whose
    progress lacks a time adds nothing.

    >>> from sparktrail.pag.streams import StreamBatch
    >>> trigger_times([StreamBatch("q", timestamp_ns=2_000_000,
    ...     duration_ms={"triggerExecution": 1}), StreamBatch("q")])
    [2000000, 3000000]
    """
    times = {b.timestamp_ns for b in batches} | {b.trigger_end_ns for b in batches}
    return sorted(t for t in times if t is not None)


def summarize_micro_batches(
    trace: TraceLike,
    options: HintOptions | None = None,
    *,
    progress: Progress | None = None,
) -> Summaries:
    """Every summary and hint of a streaming trace, one window per micro-batch.

    The windows are :func:`micro_batch_bounds`: a micro-batch's window runs
    from its trigger to the next, so its CP says what held that batch back
    (and the wait for the next trigger, when the batch was done early).
    Each window's CP is computed from the rows touching it
    (:func:`~sparktrail.pag.chunk_cp.chunk_cp`, as a window of its own
    length) and the partials are combined as :func:`summarize` does, so
    whole-run shares are the mean over the batches with paths.

    Parameters
    ----------
    trace
        A trace (frame, path or :class:`~sparktrail.pag.trace.Trace`) whose
        context has Structured Streaming batches.
    options, progress
        As for :func:`summarize` (``progress`` counts windows).

    Returns
    -------
    Summaries
        As :func:`summarize`; ``window_ns`` is the median window length
        and ``origin_ns`` the first window's start.

    Raises
    ------
    InputError
        If the trace's context has no micro-batch (no streaming query, or
        a trace without its context).
    """
    valid = load_trace(trace)
    bounds = micro_batch_bounds(valid)
    if not bounds:
        raise InputError(
            "--window batch needs a Structured Streaming query's micro-batches "
            "in the trace's context; this trace has none (use a window length)"
        )
    frame = valid.frame
    extent = trace_extent(frame)
    windows = list(itertools.pairwise(bounds))
    parts = []
    for done, (ts, te) in enumerate(windows, 1):
        cp, rows = one_window_cp(frame, ts, te, extent)
        cp = to_trace_rows(cp, rows)
        parts.append(Partials.of(cp.drop("start_ns", "end_ns")))
        if progress is not None:
            progress(done, len(windows))
    partials = Partials.combine(parts)
    # The waits between triggers have no path by design: only a trigger's
    # window without one is worth a warning.
    triggers = {b.timestamp_ns for b in valid.context.batches}
    warn_pathless(
        partials.windows.filter(pl.col("window_start_ns").is_in(list(triggers))),
        stacklevel=2,
    )
    median = int(np.median([te - ts for ts, te in windows]))
    return summaries_from_partials(partials, valid, median, bounds[0], options)
