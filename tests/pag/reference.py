"""An independent reference implementation of DESIGN §4, for tests only.

Written from the spec, deliberately slow and obvious: one window at a time,
Python ints for path counts, ``fractions.Fraction`` for CP, and a brute-force
path enumerator to check the counts themselves.

Vertices are ``(worker, time, tag, seq)``: ``tag`` is -1 for a clipped start
(which precedes every event of the worker at ``ts``), +1 for a clipped end
(which follows every event at ``te``) and 0 for an event named by the trace.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction

import polars as pl

COMMUNICATION = ("control", "data")


class RefCycleError(ValueError):
    """The reference found a cycle in a window's PAG."""


@dataclass
class Piece:
    """One trace row clipped into one window."""

    row: int
    u: tuple
    v: tuple
    start: int
    end: int
    weight: int
    counted: bool
    activity: str


@dataclass
class Window:
    ts: int
    te: int
    path_start: int = 0  # ts, or the trace's first event if later
    path_end: int = 0  # te, or the trace's last event if earlier
    pieces: list[Piece] = field(default_factory=list)
    f: dict = field(default_factory=dict)
    g: dict = field(default_factory=dict)
    start_frontier: set = field(default_factory=set)
    end_frontier: set = field(default_factory=set)
    n_paths: int = 0
    counts: list[int] = field(default_factory=list)  # C(e) per piece
    cp: list[Fraction] = field(default_factory=list)
    total_cw: int = 0

    @property
    def vertices(self) -> set:
        out = set()
        for p in self.pieces:
            out.add(p.u)
            out.add(p.v)
        return out


def _rows(trace: pl.DataFrame) -> list[dict]:
    rows = trace.to_dicts()
    for r in rows:
        r.setdefault("src_seq", 0)
        r.setdefault("dst_seq", 0)
        r["src_seq"] = r["src_seq"] or 0
        r["dst_seq"] = r["dst_seq"] or 0
    return rows


def clip_row(r: dict, index: int, ts: int, te: int) -> Piece | None:
    """The piece of row ``r`` in window [ts, te), or None if it has none."""
    s, e = r["start_ns"], r["end_ns"]
    local = r["src_worker"] == r["dst_worker"]
    counted = r["activity"] != "waiting"
    if local and e > s:
        lo, hi = max(s, ts), min(e, te)
        if lo >= hi:
            return None
        u = (
            (r["src_worker"], lo, -1, 0)
            if s < ts
            else (r["src_worker"], s, 0, r["src_seq"])
        )
        v = (
            (r["dst_worker"], hi, 1, 0)
            if e > te
            else (r["dst_worker"], e, 0, r["dst_seq"])
        )
        return Piece(index, u, v, lo, hi, hi - lo, counted, r["activity"])
    # an instant: zero-length local edge or any communication edge
    if not (ts <= min(s, e) and max(s, e) <= te):
        return None
    u = (r["src_worker"], s, 0, r["src_seq"])
    v = (r["dst_worker"], e, 0, r["dst_seq"])
    return Piece(index, u, v, s, e, max(e - s, 0), counted, r["activity"])


def topological(vertices: set, pieces: list[Piece]) -> list:
    """Kahn's algorithm over all pieces (counted or not); raises on a cycle."""
    indeg = dict.fromkeys(vertices, 0)
    out = defaultdict(list)
    for p in pieces:
        indeg[p.v] += 1
        out[p.u].append(p)
    ready = sorted(v for v, d in indeg.items() if d == 0)
    order = []
    while ready:
        x = ready.pop()
        order.append(x)
        for p in out[x]:
            indeg[p.v] -= 1
            if indeg[p.v] == 0:
                ready.append(p.v)
    if len(order) != len(vertices):
        raise RefCycleError("cycle")
    return order


def analyse_window(window: Window) -> Window:
    """Fill in frontiers, f, g, N, C(e) and exact CP of a window."""
    pieces = window.pieces
    verts = window.vertices
    order = topological(verts, pieces)
    counted = [p for p in pieces if p.counted]
    has_in = {p.v for p in counted}
    has_out = {p.u for p in counted}
    window.start_frontier = {
        x for x in verts if x[1] == window.path_start and x not in has_in
    }
    window.end_frontier = {
        x for x in verts if x[1] == window.path_end and x not in has_out
    }
    incoming = defaultdict(list)
    outgoing = defaultdict(list)
    for p in counted:
        incoming[p.v].append(p)
        outgoing[p.u].append(p)
    f: dict = {}
    for x in order:
        f[x] = 1 if x in window.start_frontier else sum(f[p.u] for p in incoming[x])
    g: dict = {}
    for x in reversed(order):
        g[x] = 1 if x in window.end_frontier else sum(g[p.v] for p in outgoing[x])
    window.f, window.g = f, g
    window.n_paths = sum(f[x] for x in window.end_frontier)
    window.counts = [f[p.u] * g[p.v] if p.counted else 0 for p in pieces]
    window.total_cw = sum(
        c * p.weight for c, p in zip(window.counts, pieces, strict=True)
    )
    if window.total_cw == 0:
        window.cp = [Fraction(0)] * len(pieces)
    else:
        window.cp = [
            Fraction(c * p.weight, window.total_cw)
            for c, p in zip(window.counts, pieces, strict=True)
        ]
    return window


def default_origin(trace: pl.DataFrame, window_ns: int) -> int:
    first = trace["start_ns"].min()
    return 0 if first is None else (first // window_ns) * window_ns


def is_interval(r: dict) -> bool:
    return r["src_worker"] == r["dst_worker"] and r["end_ns"] > r["start_ns"]


def snapshots(
    trace: pl.DataFrame, window_ns: int, origin_ns: int | None = None
) -> list[Window]:
    """Every listed window (k >= 0 from the origin), analysed.

    A window is listed when a positive-length local piece lies in it, or
    when it is the earliest window holding some instant (zero-length or
    communication edge); a listed window then holds every piece that lies
    in it, including instants on its start boundary.
    """
    if origin_ns is None:
        origin_ns = default_origin(trace, window_ns)
    rows = _rows(trace)
    if not rows:
        return []
    latest = max(max(r["start_ns"], r["end_ns"]) for r in rows)
    earliest = min(min(r["start_ns"], r["end_ns"]) for r in rows)
    n_windows = max(0, (latest - origin_ns) // window_ns + 1)
    candidates = []
    for k in range(n_windows):
        ts = origin_ns + k * window_ns
        te = ts + window_ns
        # Paths span the window clipped to the trace's extent.
        w = Window(ts, te, max(ts, earliest), min(te, latest))
        for i, r in enumerate(rows):
            piece = clip_row(r, i, w.ts, w.te)
            if piece is not None:
                w.pieces.append(piece)
        candidates.append(w)
    listed = set()
    seen_instants = set()
    for k, w in enumerate(candidates):
        for p in w.pieces:
            if is_interval(rows[p.row]):
                listed.add(k)
            elif p.row not in seen_instants:
                seen_instants.add(p.row)
                listed.add(k)
    return [analyse_window(candidates[k]) for k in sorted(listed)]


def brute_force_counts(
    window: Window, limit: int = 200_000
) -> tuple[int, list[int]] | None:
    """(N, C per piece) by enumerating every start-to-end path; None past ``limit``."""
    outgoing = defaultdict(list)
    for i, p in enumerate(window.pieces):
        if p.counted:
            outgoing[p.u].append(i)
    counts = [0] * len(window.pieces)
    n = 0
    stack = [(x, ()) for x in window.start_frontier]
    while stack:
        x, path = stack.pop()
        if x in window.end_frontier:
            n += 1
            if n > limit:
                return None
            for i in path:
                counts[i] += 1
            continue
        for i in outgoing[x]:
            stack.append((window.pieces[i].v, (*path, i)))
    return n, counts


def cp_table(windows: list[Window]) -> dict[tuple[int, int], Fraction]:
    """Exact CP keyed by (window_start_ns, edge_index)."""
    return {
        (w.ts, p.row): cp for w in windows for p, cp in zip(w.pieces, w.cp, strict=True)
    }
