"""Critical participation (CP) of every trace edge, per tumbling window.

``CP(e) = C(e) * w(e) / sum_x C(x) * w(x)`` where ``C(e)`` counts the
start-to-end paths of the window's PAG through ``e`` (DESIGN §4). CP sums to
1 over a window that has at least one such path, and is 0 everywhere in a
window that has none (reported by :func:`snapshot_stats` and a
:class:`~sparktrail.pag.snapshot.SnapshotWarning`).

Assumptions
-----------
* ``trace`` follows the trace schema (:mod:`sparktrail.pag.trace`); a path
  is read with :func:`~sparktrail.pag.trace.read_trace`.
* Windows are ``[origin + k * window_ns, origin + (k + 1) * window_ns)`` for
  k >= 0; a window is listed when an edge lies in it (see
  :mod:`~sparktrail.pag.snapshot` for instants on a window boundary).
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from .kernel import KernelResult, count_paths
from .schemas import (
    CP,
    CP_TABLE,
    EDGE_INDEX,
    END_NS,
    START_NS,
    WEIGHT_NS,
    WINDOW_END_NS,
    WINDOW_START_NS,
    check_frame,
)
from .snapshot import Snapshots, SnapshotWarning, build_snapshots, trace_origin
from .trace import Trace, TraceLike, load_trace

if TYPE_CHECKING:
    import networkx as nx

from sparktrail.errors import InputError

__all__ = [
    "CycleError",
    "check_window",
    "critical_participation",
    "snapshot_stats",
    "to_networkx",
]

#: Relative tolerance for "every path spans the window": sum C*w == N * window.
SPAN_RTOL = 1e-9


class CycleError(InputError):
    """The PAG of a window is not a DAG; ``edge_index`` names a row on a cycle."""

    def __init__(self, message: str, edge_index: int) -> None:
        super().__init__(message)
        self.edge_index = edge_index


def _load(trace: TraceLike) -> pl.DataFrame:
    return load_trace(trace).frame


def _as_int(name: str, value: object) -> int:
    """``value`` as an int, refusing bools, fractions and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float | np.floating) and float(value).is_integer():
            return int(value)
        raise InputError(f"{name} must be an integer number of ns, got {value!r}")
    return int(value)


def check_window(window_ns: object, origin_ns: object) -> tuple[int, int | None]:
    """The window length and origin as ints: the one rule every engine applies.

    An integral float is taken (``4.0`` is 4 ns); anything else that is not
    an integer, or a length that is not positive, is refused naming it.

    >>> check_window(4.0, None)
    (4, None)
    >>> check_window(0, None)
    Traceback (most recent call last):
    ...
    sparktrail.errors.InputError: window_ns must be positive, got 0
    """
    window = _as_int("window_ns", window_ns)
    if window <= 0:
        raise InputError(f"window_ns must be positive, got {window_ns!r}")
    if origin_ns is None:
        return window, None
    return window, _as_int("origin_ns", origin_ns)


def _snapshots(
    trace: pl.DataFrame,
    window_ns: int,
    origin_ns: int | None,
    extent_ns: tuple[int, int] | None = None,
) -> Snapshots:
    if origin_ns is None:
        origin_ns = trace_origin(trace, window_ns)
    if extent_ns is not None:
        first_ns, last_ns = (_as_int("extent_ns", value) for value in extent_ns)
        extent_ns = (first_ns, last_ns)
    return build_snapshots(trace, window_ns, origin_ns, extent_ns)


def _run_kernel(trace: pl.DataFrame, snaps: Snapshots) -> KernelResult:
    try:
        return count_paths(
            snaps.src,
            snaps.dst,
            snaps.weight_ns,
            snaps.counted,
            snaps.vertex_at_start,
            snaps.vertex_at_end,
            snaps.piece_offsets,
            snaps.vertex_offsets,
        )
    except ValueError as err:
        if len(err.args) < 2:
            raise
        row = int(snaps.row[err.args[1]])
        record = trace.row(row, named=True)
        raise CycleError(
            f"the PAG is not a DAG: trace row {row} ({record['activity']} "
            f"{record['src_worker']}@{record['start_ns']}#{record['src_seq']} -> "
            f"{record['dst_worker']}@{record['end_ns']}#{record['dst_seq']}) "
            "lies on a cycle; give events at equal timestamps distinct seq values",
            row,
        ) from err


def _warn_pathless(result: KernelResult, snaps: Snapshots) -> None:
    empty = np.flatnonzero(result.log_paths == -np.inf)
    if len(empty):
        first = int(snaps.window_start_ns[empty[0]])
        warnings.warn(
            f"{len(empty)} of {len(snaps.windows)} windows have no path from "
            f"start to end (first at window_start_ns={first}); their CP is 0",
            SnapshotWarning,
            stacklevel=3,
        )


def critical_participation(
    trace: TraceLike,
    window_ns: int,
    origin_ns: int | None = None,
    *,
    extent_ns: tuple[int, int] | None = None,
) -> pl.DataFrame:
    """Compute the CP of every edge in every tumbling window of a trace.

    Parameters
    ----------
    trace
        A trace frame, a path to a trace file or directory, or a
        :class:`~sparktrail.pag.trace.Trace` (not validated again).
    window_ns
        Window length in nanoseconds (> 0).
    origin_ns
        Start of window 0; default: the first ``start_ns`` floored to a
        multiple of ``window_ns``.
    extent_ns
        ``(first, last)`` event times of the whole trace, when ``trace`` is
        only the rows of a larger trace that touch some windows (one
        window's rows, a partition of a distributed trace): the first and
        last windows' paths then start and end where the whole trace's do,
        and those windows get the same CP as in the whole trace.

    Returns
    -------
    polars.DataFrame
        One row per snapshot edge (a trace row clipped to a window), sorted
        by window then ``edge_index``: ``window_start_ns, window_end_ns,
        edge_index, src_worker, dst_worker, start_ns, end_ns, activity,
        operator, stage_id, task_id, weight_ns, cp``.

    Raises
    ------
    ValueError
        If ``window_ns`` is not a positive integer.
    CycleError
        If a window's PAG has a cycle (equal timestamps without seq).
    TraceError
        If the trace breaks the schema.

    Examples
    --------
    A worker computes for 10 ns while another is idle; all CP goes to it:

    >>> t = pl.DataFrame({"src_worker": ["a", "b"], "dst_worker": ["a", "b"],
    ...     "start_ns": [0, 0], "end_ns": [10, 10],
    ...     "activity": ["processing", "waiting"]})
    >>> critical_participation(t, 10)["cp"].to_list()
    [1.0, 0.0]
    """
    window, origin = check_window(window_ns, origin_ns)
    frame = _load(trace)
    snaps = _snapshots(frame, window, origin, extent_ns)
    result = _run_kernel(frame, snaps)
    _warn_pathless(result, snaps)
    # The CP table leaves the pag stage here: checked against its schema.
    return check_frame(_cp_frame(frame, snaps, result), CP_TABLE, "CP table")


def _piece_windows(snaps: Snapshots) -> np.ndarray:
    counts = np.diff(snaps.piece_offsets)
    return np.repeat(snaps.window_start_ns, counts)


def _cp_frame(
    trace: pl.DataFrame, snaps: Snapshots, result: KernelResult
) -> pl.DataFrame:
    """The CP table (:data:`~sparktrail.pag.schemas.CP_TABLE`): computed
    columns from the snapshots and the kernel, the others copied from the
    trace row of each piece."""
    ts = _piece_windows(snaps)
    computed = {
        WINDOW_START_NS: ts,
        WINDOW_END_NS: ts + snaps.window_ns,
        EDGE_INDEX: snaps.row,
        START_NS: snaps.start_ns,
        END_NS: snaps.end_ns,
        WEIGHT_NS: snaps.weight_ns,
        CP: result.cp,
    }
    copied = trace.select(c for c in CP_TABLE if c not in computed)[
        pl.Series(snaps.row)
    ]
    return pl.DataFrame(
        {
            name: computed[name] if name in computed else copied[name]
            for name in CP_TABLE
        }
    )


def snapshot_stats(
    trace: TraceLike,
    window_ns: int,
    origin_ns: int | None = None,
    *,
    extent_ns: tuple[int, int] | None = None,
) -> pl.DataFrame:
    """Describe each window's PAG: size, path count and whether paths span it.

    Parameters are those of :func:`critical_participation`.

    Returns
    -------
    polars.DataFrame
        One row per window holding an edge: ``window_start_ns,
        window_end_ns, path_start_ns, path_end_ns`` (where paths start and
        end: the window clipped to the trace's extent), ``edges, vertices,
        log10_paths`` (null when no path spans the window), ``spans_window``
        (every counted path has length ``path_end_ns - path_start_ns``; false
        when clock noise made a message arrive before it was sent) and
        ``diagnostic`` (null, or why CP is 0 there).

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["a", "b"], "dst_worker": ["a", "b"],
    ...     "start_ns": [0, 0], "end_ns": [10, 10],
    ...     "activity": ["processing", "processing"]})
    >>> stats = snapshot_stats(t, 10)
    >>> stats.select("edges", "vertices", "spans_window").row(0)
    (2, 4, True)
    >>> round(10 ** stats["log10_paths"][0])  # two parallel paths
    2
    """
    window, origin = check_window(window_ns, origin_ns)
    frame = _load(trace)
    snaps = _snapshots(frame, window, origin, extent_ns)
    result = _run_kernel(frame, snaps)
    log_n = result.log_paths
    has_paths = log_n > -np.inf
    path_length = snaps.path_end_ns - snaps.path_start_ns
    with np.errstate(divide="ignore"):
        spans = np.isclose(
            result.log_weighted_paths,
            log_n + np.log(path_length.astype(np.float64)),
            rtol=0.0,
            atol=SPAN_RTOL,
        )
    return pl.DataFrame(
        {
            "window_start_ns": snaps.window_start_ns,
            "window_end_ns": snaps.window_start_ns + window,
            "path_start_ns": snaps.path_start_ns,
            "path_end_ns": snaps.path_end_ns,
            "edges": np.diff(snaps.piece_offsets),
            "vertices": np.diff(snaps.vertex_offsets),
            "log10_paths": pl.Series(
                np.where(has_paths, log_n / math.log(10), np.nan)
            ).fill_nan(None),
            "spans_window": has_paths & spans,
            "diagnostic": [
                _diagnostic(paths, weighted)
                for paths, weighted in zip(
                    has_paths, result.log_weighted_paths > -np.inf, strict=True
                )
            ],
        }
    )


def _diagnostic(has_paths: bool, has_weight: bool) -> str | None:
    if not has_paths:
        return "no path spans the window; CP is 0"
    if not has_weight:
        return "the paths carry no time (zero-length span); CP is 0"
    return None


def to_networkx(trace: TraceLike, window_start_ns: int, window_ns: int) -> nx.DiGraph:
    """The PAG of one window as a networkx DiGraph, with CP on its edges.

    Vertices are ``(worker, time_ns, seq)`` events (a clipped start has seq
    ``"start"``, a clipped end ``"end"``). The graph's attributes give the
    window and where its paths start and end (``path_start_ns``,
    ``path_end_ns``: the window clipped to the trace's extent). Each edge
    carries ``activity``, ``weight_ns``, ``cp`` and ``edge_index``; trace
    rows that join the same two events are merged, their CP and weight
    summed and ``edge_index`` a list.

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [10], "activity": ["processing"]})
    >>> g = to_networkx(t, 0, 10)
    >>> list(g.edges(data="cp"))
    [(('a', 0, 0), ('a', 10, 0), 1.0)]
    """
    import networkx as nx

    window, origin = check_window(window_ns, window_start_ns)
    assert origin is not None
    frame = _load(trace)
    # Every row counts (the trace's extent sets the frontiers of its first
    # and last windows); warn only about the window exported.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        table = critical_participation(Trace(frame), window, origin)
    table = table.filter(pl.col("window_start_ns") == origin)
    if len(table) and table["cp"].sum() == 0.0:
        warnings.warn(
            f"the window at {origin} has no path from start to end; its CP is 0",
            SnapshotWarning,
            stacklevel=2,
        )
    rows = frame[table["edge_index"].to_list()] if len(table) else frame.clear()
    first = frame.select(pl.min_horizontal("start_ns", "end_ns").min()).item()
    last = frame.select(pl.max_horizontal("start_ns", "end_ns").max()).item()
    graph = nx.DiGraph(
        window_start_ns=origin,
        window_end_ns=origin + window,
        path_start_ns=origin if first is None else max(origin, first),
        path_end_ns=origin + window if last is None else min(origin + window, last),
    )
    for piece, row in zip(
        table.iter_rows(named=True), rows.iter_rows(named=True), strict=True
    ):
        u = _event(
            row["src_worker"], piece["start_ns"], row, "src_seq", row["start_ns"]
        )
        v = _event(row["dst_worker"], piece["end_ns"], row, "dst_seq", row["end_ns"])
        if graph.has_edge(u, v):
            data = graph.edges[u, v]
            data["cp"] += piece["cp"]
            data["weight_ns"] += piece["weight_ns"]
            data["edge_index"].append(piece["edge_index"])
        else:
            graph.add_edge(
                u,
                v,
                activity=piece["activity"],
                weight_ns=piece["weight_ns"],
                cp=piece["cp"],
                edge_index=[piece["edge_index"]],
            )
    return graph


def _event(
    worker: str, time: int, row: dict[str, object], seq_column: str, original: object
) -> tuple[str, int, object]:
    if time == original:
        return (worker, time, row[seq_column])
    return (worker, time, "start" if seq_column == "src_seq" else "end")
