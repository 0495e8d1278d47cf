"""A trace as Chrome trace-event JSON (Perfetto, chrome://tracing), CP marked.

The rows to export and the critical time of each come first
(:class:`CriticalRows`, built by :func:`whole_trace`, :func:`time_range` or
:func:`profile_window`); :func:`chrome_trace` lays them out as trace events
and :func:`write_chrome_trace` writes the JSON. The OpenTelemetry export
(:mod:`~sparktrail.dashboard.otlp_export`) takes the same rows.

Layout (the JSON Trace Event Format)
------------------------------------
* One process per executor (``exec-<id>/<slot>`` workers; another worker
  name is a process of its own) and one for the driver; one thread
  (track) per worker. A local row of positive length is a complete slice
  (``ph: "X"``, ``ts``/``dur`` in whole microseconds from the first
  exported event) named after its activity, with ``args`` ``stage, task,
  partition, records, bytes, cp, cp_ms, operator, row``.
* A track's slices never overlap: a worker's local rows are sequential by
  construction (DESIGN §5), and a slice that would start before the end
  of the one before it on its track is clipped to that end (or dropped
  when nothing is left); so is a slice shorter than a microsecond.
* A message (``src_worker != dst_worker``: a task's launch, its
  completion, a data message) is a flow (``ph: "s"`` on the sender's
  track, ``ph: "f"`` with ``bp: "e"`` on the receiver's, one ``id``).
* ``cp`` of a slice is its *criticality*: the fraction of the critical
  paths of its window(s) that run through it, ``CP x path span /
  length`` (DESIGN §4: ``C(e) / N``, between 0 and 1), averaged over its
  windows by length; ``cp_ms`` is its critical time, ``CP x path span``
  summed over its windows. A slice whose criticality is at least the
  threshold has ``cat: "critical"`` and ``cname: "terrible"`` (red in
  chrome://tracing; Perfetto colours by name).
* A process "critical path" holds one track: at each instant of each
  window, the local activity with the highest criticality there (the
  window's CP rows swept by time, :func:`critical_segments`); its slices
  never overlap, as windows do not.
"""

from __future__ import annotations

import heapq
import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl

from sparktrail.engines.batch import CHUNK_ROWS, cp_chunks
from sparktrail.engines.profiler import Profile, window_cp
from sparktrail.pag.chunk_cp import touching_rows, trace_extent
from sparktrail.pag.context import AppContext
from sparktrail.pag.participation import check_window
from sparktrail.pag.snapshot import trace_origin
from sparktrail.pag.trace import Trace
from sparktrail.pag.windows import TRACE_ROW
from sparktrail.pag.workers import slot_of

__all__ = [
    "CRITICAL_THRESHOLD",
    "CriticalRows",
    "chrome_trace",
    "critical_segments",
    "profile_window",
    "time_range",
    "whole_trace",
    "write_chrome_trace",
]

#: Default criticality from which a slice is marked critical: at least half
#: of its window's critical paths run through it.
CRITICAL_THRESHOLD = 0.5
#: Columns of each row :class:`CriticalRows` adds: its critical time (ns)
#: and its criticality (0..1).
CP_NS = "cp_ns"
CRITICALITY = "criticality"
#: Optional trace columns copied into a slice's args when present.
ARG_COLUMNS = ("stage_id", "task_id", "partition", "records", "bytes", "operator")
#: Column naming a candidate row's row in the whole trace.
_ROW = "_sparktrail_export_row"
_US = 1_000


@dataclass(frozen=True)
class CriticalRows:
    """The rows to export, each with its critical time, and the critical path.

    Attributes
    ----------
    rows
        Trace rows (local ones clipped to the exported range) with
        ``trace_row`` (their row in the whole trace), :data:`CP_NS` and
        :data:`CRITICALITY`.
    path
        The critical path track: ``start_ns, end_ns, trace_row,
        criticality``, sorted, never overlapping.
    context
        The application's context (empty when unknown).
    name
        What was exported, for titles.
    window_ns
        The CP window length (``None``: one window, the range).
    range_ns
        The exported ``(start_ns, end_ns)``, or ``None`` for the whole trace.
    """

    rows: pl.DataFrame
    path: pl.DataFrame
    context: AppContext
    name: str
    window_ns: int | None = None
    range_ns: tuple[int, int] | None = None

    @property
    def total_cp_ns(self) -> float:
        """The run's critical time: every row's summed."""
        return float(self.rows[CP_NS].sum()) if len(self.rows) else 0.0


def _pieces(cp: pl.DataFrame, extent: tuple[int, int]) -> pl.DataFrame:
    """CP rows with their critical time and criticality (module docstring).

    A window's paths span it clipped to the trace's extent (DESIGN §4).
    """
    span = pl.min_horizontal(pl.col("window_end_ns"), pl.lit(extent[1])) - (
        pl.max_horizontal(pl.col("window_start_ns"), pl.lit(extent[0]))
    )
    cp_ns = (pl.col("cp") * span.clip(lower_bound=0)).alias(CP_NS)
    return cp.with_columns(cp_ns).with_columns(
        pl.when(pl.col("weight_ns") > 0)
        .then(pl.col(CP_NS) / pl.col("weight_ns"))
        .otherwise(0.0)
        .alias(CRITICALITY)
    )


def _per_row(pieces: pl.DataFrame) -> pl.DataFrame:
    return pieces.group_by("edge_index").agg(
        pl.col(CP_NS).sum(), pl.col("weight_ns").sum()
    )


def critical_segments(pieces: pl.DataFrame) -> pl.DataFrame:
    """The most critical local activity at each instant of each window.

    ``pieces`` are CP rows (``window_start_ns, start_ns, end_ns,
    edge_index, weight_ns``) with :data:`CRITICALITY`. Within a window the
    pieces are swept by time: each stretch between two event times goes to
    the piece covering it with the highest criticality (ties: the lower
    ``edge_index``); consecutive stretches of one piece merge. Instants
    no piece of positive criticality covers are left out.

    Returns ``start_ns, end_ns, trace_row, criticality``.

    >>> p = pl.DataFrame({"window_start_ns": [0, 0, 0],
    ...     "start_ns": [0, 0, 6], "end_ns": [10, 4, 10],
    ...     "edge_index": [0, 1, 2], "weight_ns": [10, 4, 4],
    ...     "criticality": [0.5, 0.75, 0.25]})
    >>> critical_segments(p).rows()
    [(0, 4, 1, 0.75), (4, 10, 0, 0.5)]
    """
    local = pieces.filter(
        (pl.col("weight_ns") > 0)
        & (pl.col(CRITICALITY) > 0)
        & (pl.col("end_ns") > pl.col("start_ns"))
    ).sort("window_start_ns", "start_ns")
    out: list[tuple[int, int, int, float]] = []
    if local.height:
        window = local["window_start_ns"].to_numpy()
        starts = local["start_ns"].to_numpy()
        ends = local["end_ns"].to_numpy()
        crit = local[CRITICALITY].to_numpy()
        rows = local["edge_index"].to_numpy()
        cuts = [0, *np.flatnonzero(np.diff(window) != 0) + 1, local.height]
        for a, b in itertools.pairwise(cuts):
            _sweep(starts[a:b], ends[a:b], crit[a:b], rows[a:b], out)
    return pl.DataFrame(
        out,
        schema={
            "start_ns": pl.Int64(),
            "end_ns": pl.Int64(),
            TRACE_ROW: pl.Int64(),
            CRITICALITY: pl.Float64(),
        },
        orient="row",
    )


def _sweep(
    starts: np.ndarray,
    ends: np.ndarray,
    crit: np.ndarray,
    rows: np.ndarray,
    out: list[tuple[int, int, int, float]],
) -> None:
    """One window's pieces (sorted by start) swept into ``out``."""
    points = np.unique(np.concatenate([starts, ends]))
    heap: list[tuple[float, int, int]] = []
    j = 0
    n = len(starts)
    for at, until in zip(points[:-1].tolist(), points[1:].tolist(), strict=True):
        while j < n and starts[j] <= at:
            heapq.heappush(heap, (-float(crit[j]), int(rows[j]), int(ends[j])))
            j += 1
        while heap and heap[0][2] <= at:
            heapq.heappop(heap)
        if not heap:
            continue
        neg, row, _ = heap[0]
        if out and out[-1][2] == row and out[-1][1] == at:
            out[-1] = (out[-1][0], until, row, -neg)
        else:
            out.append((at, until, row, -neg))


def _with_cp(rows: pl.DataFrame, per_row: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (with ``trace_row``) joined to their summed CP pieces."""
    joined = rows.join(
        per_row.rename({"edge_index": TRACE_ROW}), on=TRACE_ROW, how="left"
    )
    return joined.with_columns(
        pl.col(CP_NS).fill_null(0.0),
        pl.when(pl.col("weight_ns") > 0)
        .then(pl.col(CP_NS) / pl.col("weight_ns"))
        .otherwise(0.0)
        .fill_null(0.0)
        .alias(CRITICALITY),
    ).drop("weight_ns")


def whole_trace(
    trace: Trace, window_ns: int, name: str = "trace", *, chunk_rows: int = CHUNK_ROWS
) -> CriticalRows:
    """Every row of ``trace`` with its critical time over windows of
    ``window_ns`` (origin as :func:`~sparktrail.pag.critical_participation`'s).

    The CP is computed a batch of windows at a time (about ``chunk_rows``
    rows each, :func:`~sparktrail.pag.chunk_cp.chunk_cp`, as the batch
    engine does) and reduced to per-row sums and the critical path's
    segments before the next batch, so the CP table is never held whole.

    >>> t = pl.DataFrame({"src_worker": ["a", "b"], "dst_worker": ["a", "b"],
    ...     "start_ns": [0, 0], "end_ns": [10, 4],
    ...     "activity": ["processing", "gc"]})
    >>> from sparktrail.pag.trace import load_trace
    >>> r = whole_trace(load_trace(t), 10)
    >>> r.rows.select("activity", "cp_ns", "criticality").rows()
    [('processing', 10.0, 1.0), ('gc', 0.0, 0.0)]
    >>> r.path.rows()
    [(0, 10, 0, 1.0)]
    """
    window, _ = check_window(window_ns, None)
    frame = trace.frame
    numbered = frame.with_row_index(TRACE_ROW).with_columns(
        pl.col(TRACE_ROW).cast(pl.Int64)
    )
    if frame.is_empty():
        return _empty(numbered, trace.context, name, window)
    origin = trace_origin(frame, window)
    extent = trace_extent(frame)
    sums: list[pl.DataFrame] = []
    paths: list[pl.DataFrame] = []
    for cp, _, _, _ in cp_chunks(frame, window, origin, chunk_rows=chunk_rows):
        pieces = _pieces(cp, extent)
        sums.append(_per_row(pieces))
        paths.append(critical_segments(pieces))
    per_row = _per_row(pl.concat(sums)) if sums else _per_row(_no_pieces())
    path = (
        pl.concat(paths).sort("start_ns") if paths else critical_segments(_no_pieces())
    )
    return CriticalRows(_with_cp(numbered, per_row), path, trace.context, name, window)


def _no_pieces() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "window_start_ns": pl.Int64(),
            "start_ns": pl.Int64(),
            "end_ns": pl.Int64(),
            "edge_index": pl.Int64(),
            "weight_ns": pl.Int64(),
            CP_NS: pl.Float64(),
            CRITICALITY: pl.Float64(),
        }
    )


def _empty(
    rows: pl.DataFrame,
    context: AppContext,
    name: str,
    window_ns: int | None,
    range_ns: tuple[int, int] | None = None,
) -> CriticalRows:
    return CriticalRows(
        _with_cp(rows.clear(), _per_row(_no_pieces())),
        critical_segments(_no_pieces()),
        context,
        name,
        window_ns,
        range_ns,
    )


def time_range(
    trace: Trace, start_ns: int, end_ns: int, name: str = "trace"
) -> CriticalRows:
    """The rows of ``trace`` touching ``[start_ns, end_ns)`` (local rows
    clipped to it), with the CP of that one window
    (:func:`~sparktrail.engines.profiler.window_cp`).

    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "a"],
    ...     "start_ns": [0, 10], "end_ns": [10, 20],
    ...     "activity": ["processing", "gc"]})
    >>> from sparktrail.pag.trace import load_trace
    >>> r = time_range(load_trace(t), 5, 15)
    >>> r.rows.select("start_ns", "end_ns", "trace_row", "criticality").rows()
    [(5, 10, 0, 1.0), (10, 15, 1, 1.0)]
    """
    frame = trace.frame
    if end_ns <= start_ns:
        raise ValueError(f"empty range [{start_ns}, {end_ns})")
    rows = touching_rows(frame, start_ns, end_ns) if len(frame) else frame
    if rows.is_empty():
        numbered = frame.with_row_index(TRACE_ROW).with_columns(
            pl.col(TRACE_ROW).cast(pl.Int64)
        )
        return _empty(numbered, trace.context, name, None, (start_ns, end_ns))
    local = pl.col("src_worker") == pl.col("dst_worker")
    rows = rows.with_columns(
        pl.when(local)
        .then(pl.max_horizontal("start_ns", pl.lit(start_ns)))
        .otherwise(pl.col("start_ns"))
        .alias("start_ns"),
        pl.when(local)
        .then(pl.min_horizontal("end_ns", pl.lit(end_ns)))
        .otherwise(pl.col("end_ns"))
        .alias("end_ns"),
    )
    pieces = _pieces(window_cp(frame, start_ns, end_ns), trace_extent(frame))
    return CriticalRows(
        _with_cp(rows, _per_row(pieces)),
        critical_segments(pieces),
        trace.context,
        name,
        None,
        (start_ns, end_ns),
    )


def profile_window(saved: Profile) -> CriticalRows:
    """The rows of a saved profile's most critical window (its CP rows:
    the profile holds no other trace rows), with their CP."""
    cp = saved.critical_cp
    context = saved.summaries.context
    window = saved.critical_window
    if cp.is_empty():
        return _empty(
            _no_pieces().rename({"edge_index": TRACE_ROW}),
            context,
            saved.name,
            None,
            window,
        )
    # The window's paths start and end at its rows' first and last events
    # (the trace's extent, where the window holds the trace's start or end).
    extent = (int(cp["start_ns"].min()), int(cp["end_ns"].max()))  # type: ignore[arg-type]
    pieces = _pieces(cp, extent)
    rows = cp.rename({"edge_index": TRACE_ROW}).drop(
        "window_start_ns", "window_end_ns", "weight_ns", "cp"
    )
    return CriticalRows(
        _with_cp(rows, _per_row(pieces)),
        critical_segments(pieces),
        context,
        saved.name,
        None,
        window,
    )


# -- the trace events ------------------------------------------------------


def _worker_key(worker: str) -> tuple[int, str, int, str]:
    """(process order, process name, thread order, worker) of a worker."""
    if worker == "driver":
        return (1, "driver", 0, worker)
    slot = slot_of(worker)
    if slot is None:
        return (3, worker, 0, worker)
    return (2, f"executor {slot[0]}", slot[1], worker)


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


@dataclass(frozen=True)
class _Tracks:
    """pid and tid of every worker, and the metadata events naming them."""

    ids: dict[str, tuple[int, int]]
    metadata: list[dict[str, Any]]
    path: tuple[int, int]


def _tracks(workers: set[str]) -> _Tracks:
    keys = sorted(
        (_worker_key(w) for w in workers),
        key=lambda k: (k[0], _natural(k[1]), k[2], k[3]),
    )
    path = (1, 1)
    metadata = _names(path[0], path[1], "critical path", "critical path", 0, 0)
    pids: dict[str, int] = {}
    ids: dict[str, tuple[int, int]] = {}
    for tid, (_, process, order, worker) in enumerate(keys, start=2):
        if process not in pids:
            pids[process] = len(pids) + 2
        pid = pids[process]
        ids[worker] = (pid, tid)
        metadata += _names(pid, tid, process, worker, pid - 1, order)
    # A process named once: drop the repeats.
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for event in metadata:
        key = (event["name"], event["pid"], event.get("tid"))
        if event["name"].startswith("process_") and key in seen:
            continue
        seen.add(key)
        unique.append(event)
    return _Tracks(ids, unique, path)


def _names(
    pid: int, tid: int, process: str, thread: str, pid_order: int, tid_order: int
) -> list[dict[str, Any]]:
    meta = {"ph": "M", "pid": pid, "ts": 0}
    return [
        {**meta, "name": "process_name", "args": {"name": process}},
        {**meta, "name": "process_sort_index", "args": {"sort_index": pid_order}},
        {**meta, "tid": tid, "name": "thread_name", "args": {"name": thread}},
        {
            **meta,
            "tid": tid,
            "name": "thread_sort_index",
            "args": {"sort_index": tid_order},
        },
    ]


@dataclass(frozen=True)
class TraceStats:
    """What :func:`chrome_trace` laid out: slices, flows, critical ones,
    the critical path's slices, and slices clipped or dropped (overlap or
    shorter than a microsecond)."""

    slices: int
    flows: int
    critical: int
    path: int
    clipped: int
    dropped: int


def _slices(rows: pl.DataFrame, t0: int) -> pl.DataFrame:
    """Local rows of positive length as non-overlapping µs slices per worker."""
    local = rows.filter(
        (pl.col("src_worker") == pl.col("dst_worker"))
        & (pl.col("end_ns") > pl.col("start_ns"))
    )
    timed = local.with_columns(
        ((pl.col("start_ns") - t0) // _US).alias("ts"),
        ((pl.col("end_ns") - t0) // _US).alias("te"),
    ).sort("src_worker", "ts", "te", TRACE_ROW)
    before = pl.col("te").cum_max().shift(1).over("src_worker")
    clipped = timed.with_columns(
        pl.max_horizontal("ts", before.fill_null(pl.col("ts"))).alias("ts_clipped")
    )
    return clipped.with_columns(
        (pl.col("ts_clipped") > pl.col("ts")).alias("was_clipped")
    )


def _arg(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def chrome_trace(
    data: CriticalRows, threshold: float = CRITICAL_THRESHOLD
) -> tuple[dict[str, Any], TraceStats]:
    """The Chrome trace-event JSON object of ``data`` (module docstring).

    Returns the object (``traceEvents``, ``displayTimeUnit``,
    ``otherData``) and what it holds.
    """
    rows = data.rows
    times = pl.concat([rows["start_ns"], rows["end_ns"], data.path["start_ns"]])
    t0 = int(times.min()) if len(times) else 0  # type: ignore[arg-type]
    workers = set(rows["src_worker"].to_list()) | set(rows["dst_worker"].to_list())
    tracks = _tracks(workers)
    events: list[dict[str, Any]] = list(tracks.metadata)
    args_of = [c for c in ARG_COLUMNS if c in rows.columns]

    slices = _slices(rows, t0)
    kept = slices.filter(pl.col("te") > pl.col("ts_clipped"))
    on_tracks = _slice_events(kept, tracks, args_of, threshold)
    events += on_tracks
    messages = rows.filter(pl.col("src_worker") != pl.col("dst_worker"))
    events += _flow_events(messages, tracks, t0)
    on_path = _path_events(data, tracks, args_of, t0)
    events += on_path
    n_critical = sum(1 for event in on_tracks if event["cat"] == "critical")
    n_path = len(on_path)

    stats = TraceStats(
        slices=kept.height,
        flows=messages.height,
        critical=n_critical,
        path=n_path,
        clipped=int(kept["was_clipped"].sum()),
        dropped=slices.height - kept.height,
    )
    other = {
        "generator": "sparktrail",
        "name": data.name,
        "app_id": data.context.app_id,
        "start_unix_ns": t0,
        "window_ns": data.window_ns,
        "range_ns": list(data.range_ns) if data.range_ns else None,
        "critical_threshold": threshold,
        "clipped_slices": stats.clipped,
        "dropped_slices": stats.dropped,
    }
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}, stats


def _slice_events(
    kept: pl.DataFrame, tracks: _Tracks, args_of: list[str], threshold: float
) -> list[dict[str, Any]]:
    """A complete event per slice on its worker's track; a critical one
    (criticality at least ``threshold``, some CP) is coloured as such."""
    events = []
    for row in kept.select(
        "src_worker",
        "activity",
        "ts_clipped",
        "te",
        TRACE_ROW,
        CP_NS,
        CRITICALITY,
        *args_of,
    ).iter_rows(named=True):
        pid, tid = tracks.ids[row["src_worker"]]
        args = {c: row[c] for c in args_of if row[c] is not None}
        args.update(
            cp=_arg(row[CRITICALITY]), cp_ms=_arg(row[CP_NS] / 1e6), row=row[TRACE_ROW]
        )
        event = {
            "ph": "X",
            "name": row["activity"],
            "cat": row["activity"],
            "ts": row["ts_clipped"],
            "dur": row["te"] - row["ts_clipped"],
            "pid": pid,
            "tid": tid,
            "args": args,
        }
        if row[CRITICALITY] >= threshold and row[CP_NS] > 0:
            event["cat"] = "critical"
            event["cname"] = "terrible"
        events.append(event)
    return events


def _flow_events(
    messages: pl.DataFrame, tracks: _Tracks, t0: int
) -> list[dict[str, Any]]:
    """A flow (start and end event) per message between two workers."""
    events = []
    for row in messages.select(
        "src_worker", "dst_worker", "start_ns", "end_ns", "activity", TRACE_ROW
    ).iter_rows(named=True):
        src, dst = tracks.ids[row["src_worker"]], tracks.ids[row["dst_worker"]]
        sent = (row["start_ns"] - t0) // _US
        received = max(sent, (row["end_ns"] - t0) // _US)
        name = _message_name(row["src_worker"], row["dst_worker"], row["activity"])
        flow = {"name": name, "cat": row["activity"], "id": row[TRACE_ROW]}
        events.append({**flow, "ph": "s", "ts": sent, "pid": src[0], "tid": src[1]})
        events.append(
            {**flow, "ph": "f", "bp": "e", "ts": received, "pid": dst[0], "tid": dst[1]}
        )
    return events


def _path_events(
    data: CriticalRows, tracks: _Tracks, args_of: list[str], t0: int
) -> list[dict[str, Any]]:
    """The critical path as slices on its own track, one after the other
    (a slice overlapping the previous one starts where it ended)."""
    if not len(data.path):
        return []
    path = (
        data.path.join(
            data.rows.select(TRACE_ROW, "src_worker", "activity", *args_of),
            on=TRACE_ROW,
            how="left",
        )
        .with_columns(
            ((pl.col("start_ns") - t0) // _US).alias("ts"),
            ((pl.col("end_ns") - t0) // _US).alias("te"),
        )
        .sort("ts")
    )
    events = []
    last = None
    for row in path.iter_rows(named=True):
        ts = row["ts"] if last is None else max(row["ts"], last)
        if row["te"] <= ts:
            continue
        last = row["te"]
        args = {c: row[c] for c in args_of if row[c] is not None}
        args.update(
            worker=row["src_worker"], cp=_arg(row[CRITICALITY]), row=row[TRACE_ROW]
        )
        events.append(
            {
                "ph": "X",
                "name": row["activity"],
                "cat": "critical_path",
                "ts": ts,
                "dur": row["te"] - ts,
                "pid": tracks.path[0],
                "tid": tracks.path[1],
                "args": args,
            }
        )
    return events


def _message_name(src: str, dst: str, activity: str) -> str:
    if activity == "control" and src == "driver":
        return "launch"
    if activity == "control" and dst == "driver":
        return "completion"
    return activity


def _chunks(document: dict[str, Any]) -> Iterator[bytes]:
    yield b'{"traceEvents":[\n'
    for i, event in enumerate(document["traceEvents"]):
        yield (b",\n" if i else b"") + orjson.dumps(event)
    yield b'\n],\n"displayTimeUnit":' + orjson.dumps(document["displayTimeUnit"])
    yield b',\n"otherData":' + orjson.dumps(document["otherData"]) + b"}\n"


def write_chrome_trace(
    data: CriticalRows,
    path: str | os.PathLike[str],
    threshold: float = CRITICAL_THRESHOLD,
) -> TraceStats:
    """Write :func:`chrome_trace` of ``data`` to ``path`` (one event a line);
    returns its :class:`TraceStats`. The file is written under a temporary
    name and renamed, so it is whole or absent."""
    document, stats = chrome_trace(data, threshold)
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    with partial.open("wb") as out:
        for chunk in _chunks(document):
            out.write(chunk)
    partial.replace(target)
    return stats
