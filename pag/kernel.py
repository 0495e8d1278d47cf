"""The path-counting kernel: critical participation by dynamic programming.

For every snapshot edge ``e = (u, v)`` the number of start-to-end paths
through it is ``C(e) = f(u) * g(v)``, where ``f`` counts paths from the start
frontier to ``u`` and ``g`` paths from ``v`` to the end frontier (DESIGN §4).
``f`` is computed forward and ``g`` backward along a topological order, each
in one pass over the edges; no path is ever materialised.

Assumptions
-----------
* Vertices are numbered ``0 .. n-1`` and grouped by window: the vertices of
  window ``k`` are ``vertex_offsets[k] .. vertex_offsets[k+1]-1`` and edges
  never join two windows.
* Only ``counted`` edges (not waiting) lie on paths; every edge, counted or
  not, must be acyclic.
* Path counts exceed float64 after a few hundred barriers, so ``f`` and ``g``
  are kept as natural logarithms (``-inf`` for zero) and combined with a
  streaming log-sum-exp. The relative error of a count is about
  ``|log count| * 2**-52``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

__all__ = ["KernelResult", "count_paths", "topological_order"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
B = npt.NDArray[np.bool_]


@numba.njit(cache=True, nogil=True)
def _out_csr(n_vertices: int, src: I64) -> tuple[I64, I64]:
    # offsets doubles as the fill cursor, then shifts back: one array fewer
    # (fresh memory is what large inputs pay for most).
    offsets = np.zeros(n_vertices + 1, dtype=np.int64)
    for i in range(src.shape[0]):
        offsets[src[i] + 1] += 1
    for v in range(n_vertices):
        offsets[v + 1] += offsets[v]
    edges = np.empty(src.shape[0], dtype=np.int64)
    for i in range(src.shape[0]):
        edges[offsets[src[i]]] = i
        offsets[src[i]] += 1
    for v in range(n_vertices, 0, -1):
        offsets[v] = offsets[v - 1]
    offsets[0] = 0
    return offsets, edges


@numba.njit(cache=True, nogil=True)
def _kahn(n_vertices: int, dst: I64, offsets: I64, edges: I64) -> tuple[I64, int]:
    indegree = np.zeros(n_vertices, dtype=np.int64)
    for i in range(dst.shape[0]):
        indegree[dst[i]] += 1
    order = np.empty(n_vertices, dtype=np.int64)
    tail = 0
    for v in range(n_vertices):
        if indegree[v] == 0:
            order[tail] = v
            tail += 1
    head = 0
    while head < tail:
        v = order[head]
        head += 1
        for j in range(offsets[v], offsets[v + 1]):
            w = dst[edges[j]]
            indegree[w] -= 1
            if indegree[w] == 0:
                order[tail] = w
                tail += 1
    return order, tail


@numba.njit(cache=True, nogil=True)
def _ids_are_topological(src: I64, dst: I64) -> bool:
    for i in range(src.shape[0]):
        if src[i] >= dst[i]:
            return False
    return True


def topological_order(n_vertices: int, src: I64, dst: I64) -> tuple[I64, I64, I64]:
    """Order the vertices so every edge points forward.

    Returns ``(order, offsets, edges)``: the order (empty when the ids
    0, 1, ... already are one), and the out-adjacency in CSR form
    (``edges[offsets[v]:offsets[v+1]]`` are the edge ids leaving v).

    Raises
    ------
    ValueError
        If the graph has a cycle; ``err.args[1]`` is the id of an edge on it.

    Examples
    --------
    >>> order, _, _ = topological_order(3, np.array([2, 0]), np.array([0, 1]))
    >>> order.tolist()
    [2, 0, 1]
    >>> topological_order(3, np.array([0, 1]), np.array([1, 2]))[0].tolist()
    []
    """
    offsets, edges = _out_csr(n_vertices, src)
    if _ids_are_topological(src, dst):
        # Vertex ids sort events by time, so this is the common case; an
        # empty order means "the ids themselves".
        return np.empty(0, dtype=np.int64), offsets, edges
    order, placed = _kahn(n_vertices, dst, offsets, edges)
    if placed < n_vertices:
        raise ValueError(
            "the PAG has a cycle", _edge_on_cycle(order[:placed], src, dst)
        )
    return order, offsets, edges


def _edge_on_cycle(placed: I64, src: I64, dst: I64) -> int:
    """An edge on some cycle among the vertices Kahn's algorithm could not place."""
    import networkx as nx

    done = np.zeros(int(max(src.max(), dst.max())) + 1, dtype=bool)
    done[placed] = True
    stuck = np.flatnonzero(~done[src] & ~done[dst])
    graph = nx.MultiDiGraph()
    for e in stuck.tolist():
        graph.add_edge(int(src[e]), int(dst[e]), key=e)
    return int(nx.find_cycle(graph)[0][2])


#: Counts are ``mantissa * 2**(STEP_BITS * k)``; a mantissa that reaches
#: ``2**STEP_BITS`` moves one step up. Products of two mantissas and an int64
#: weight stay below 2**575, far from float64's 2**1024.
STEP_BITS = 256
_STEP = 2.0**STEP_BITS
_INV_STEP = 2.0**-STEP_BITS
_LN_STEP = STEP_BITS * math.log(2.0)


@numba.njit(cache=True, nogil=True)
def _down(steps: int) -> float:
    """2**(-STEP_BITS * steps), 0 once it is below every subnormal."""
    if steps * STEP_BITS > 1100:
        return 0.0
    return math.ldexp(1.0, -STEP_BITS * steps)


@numba.njit(cache=True, nogil=True)
def _count_out(src: I64, dst: I64, counted: B, offsets: I64) -> bool:
    """Out-degree in counted edges (into ``offsets[v]``); are ids topological?"""
    topological = True
    for i in range(src.shape[0]):
        topological &= src[i] < dst[i]
        offsets[src[i]] += counted[i]
    return topological


@numba.njit(cache=True, nogil=True)
def _fill_out(src: I64, dst: I64, counted: B, offsets: I64, heads: I64) -> None:
    """Counted out-neighbours in CSR form, from ``offsets[v]`` = out-degree."""
    n = offsets.shape[0] - 1
    total = 0
    for v in range(n):
        total += offsets[v]
        offsets[v] = total  # end of v's run; the fill below walks it back
    offsets[n] = total
    # Backwards with pre-decrement: offsets end at each run's start and each
    # run keeps the edges' order, without a second pass to shift them.
    for i in range(src.shape[0] - 1, -1, -1):
        if counted[i]:
            s = src[i]
            offsets[s] -= 1
            heads[offsets[s]] = dst[i]


@numba.njit(cache=True, nogil=True)
def _forward(
    order: I64,
    offsets: I64,
    heads: I64,
    at_start: B,
    f_m: F64,
    f_k: I32,
) -> None:
    """f in place, pushing each vertex's count along its counted out-edges."""
    n = at_start.shape[0]
    identity = order.shape[0] == 0
    has_in = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        v = i if identity else order[i]
        if at_start[v] and not has_in[v]:
            m, k = 1.0, 0
            f_m[v] = 1.0
        else:
            m, k = f_m[v], f_k[v]
            if m >= _STEP:
                m *= _INV_STEP
                k += 1
                f_m[v], f_k[v] = m, k
        for j in range(offsets[v], offsets[v + 1]):
            w = heads[j]
            has_in[w] = True
            kw = f_k[w]
            if kw == k:
                f_m[w] += m
            elif kw < k:
                f_m[w] = f_m[w] * _down(k - kw) + m
                f_k[w] = k
            else:
                f_m[w] += m * _down(kw - k)


@numba.njit(cache=True, nogil=True)
def _backward(
    order: I64,
    offsets: I64,
    heads: I64,
    at_end: B,
    g_m: F64,
    g_k: I32,
) -> None:
    """g in place, summing each vertex's counted successors."""
    n = at_end.shape[0]
    identity = order.shape[0] == 0
    for i in range(n - 1, -1, -1):
        v = i if identity else order[i]
        lo, hi = offsets[v], offsets[v + 1]
        if lo == hi:
            g_m[v] = 1.0 if at_end[v] else 0.0
            g_k[v] = 0
            continue
        m, k = 0.0, 0
        for j in range(lo, hi):
            w = heads[j]
            kw = g_k[w]
            if kw == k:
                m += g_m[w]
            elif kw > k:
                m = m * _down(kw - k) + g_m[w]
                k = kw
            else:
                m += g_m[w] * _down(k - kw)
        if m >= _STEP:
            m *= _INV_STEP
            k += 1
        g_m[v], g_k[v] = m, k


@numba.njit(cache=True, nogil=True)
def _window_paths(
    vertex_offsets: I64, offsets: I64, at_end: B, f_m: F64, f_k: I32, g_k: I32
) -> tuple[F64, B]:
    """ln N per window (f summed over the end frontier); has it any step > 0?"""
    n_windows = vertex_offsets.shape[0] - 1
    log_n = np.full(n_windows, -np.inf)
    scaled = np.zeros(n_windows, dtype=np.bool_)
    for w in range(n_windows):
        m, k, top = 0.0, 0, 0
        for v in range(vertex_offsets[w], vertex_offsets[w + 1]):
            top = max(top, f_k[v], g_k[v])
            if at_end[v] and offsets[v] == offsets[v + 1]:
                kv = f_k[v]
                if kv == k:
                    m += f_m[v]
                elif kv > k:
                    m = m * _down(kv - k) + f_m[v]
                    k = kv
                else:
                    m += f_m[v] * _down(k - kv)
        scaled[w] = top > 0
        if m > 0.0:
            log_n[w] = math.log(m) + k * _LN_STEP
    return log_n, scaled


@numba.njit(cache=True, nogil=True)
def _normalise(
    piece_offsets: I64,
    src: I64,
    dst: I64,
    weight: I64,
    counted: B,
    f_m: F64,
    f_k: I32,
    g_m: F64,
    g_k: I32,
    scaled: B,
) -> tuple[F64, F64]:
    """CP of every edge, and ln sum C*w per window."""
    cp = np.empty(src.shape[0])
    log_z = np.full(piece_offsets.shape[0] - 1, -np.inf)
    for w in range(log_z.shape[0]):
        lo, hi = piece_offsets[w], piece_offsets[w + 1]
        top = 0
        if scaled[w]:
            # The largest step of any C(e); smaller ones are aligned to it.
            for i in range(lo, hi):
                if counted[i] and f_m[src[i]] * g_m[dst[i]] > 0.0:
                    top = max(top, f_k[src[i]] + g_k[dst[i]])
        z = 0.0
        for i in range(lo, hi):
            c = 0.0
            if counted[i]:
                c = f_m[src[i]] * g_m[dst[i]] * weight[i]
                if scaled[w] and c > 0.0:
                    c *= _down(top - f_k[src[i]] - g_k[dst[i]])
            cp[i] = c  # C(e) w(e) / 2**(STEP_BITS * top) for now
            z += c
        if z == 0.0:
            cp[lo:hi] = 0.0
            continue
        log_z[w] = math.log(z) + top * _LN_STEP
        for i in range(lo, hi):
            cp[i] /= z
    return cp, log_z


class KernelResult:
    """Per-edge CP and per-window path statistics (natural logs)."""

    __slots__ = ("cp", "log_paths", "log_weighted_paths")

    def __init__(self, cp: F64, log_paths: F64, log_weighted_paths: F64) -> None:
        self.cp = cp
        #: ln N per window (``-inf`` when no path spans it)
        self.log_paths = log_paths
        #: ln sum_e C(e) w(e) per window: ln(N * window) when every path spans it
        self.log_weighted_paths = log_weighted_paths


def count_paths(
    src: I64,
    dst: I64,
    weight: I64,
    counted: B,
    at_start: B,
    at_end: B,
    piece_offsets: I64,
    vertex_offsets: I64,
) -> KernelResult:
    """Critical participation of every edge of a union of window DAGs.

    Parameters
    ----------
    src, dst
        Vertex ids of each edge; edges sorted by window.
    weight
        Edge weight (clipped duration, ns, >= 0).
    counted
        False for waiting edges, which lie on no path.
    at_start, at_end
        Per vertex: its time is its window's start / end.
    piece_offsets, vertex_offsets
        Window boundaries in the edge and vertex arrays.

    Examples
    --------
    Two parallel edges from ``ts`` to ``te`` share the window's CP equally:

    >>> r = count_paths(np.array([0, 0]), np.array([1, 1]), np.array([5, 5]),
    ...     np.array([True, True]), np.array([True, False]),
    ...     np.array([False, True]), np.array([0, 2]), np.array([0, 2]))
    >>> r.cp.tolist(), round(float(np.exp(r.log_paths[0])))
    ([0.5, 0.5], 2)
    """
    n_vertices = int(vertex_offsets[-1])
    offsets = np.zeros(n_vertices + 1, dtype=np.int64)
    order = np.empty(0, dtype=np.int64)
    if not _count_out(src, dst, counted, offsets):
        # Raises on a cycle among all edges, counted or not.
        order = topological_order(n_vertices, src, dst)[0]
    heads = np.empty(int(offsets.sum()), dtype=np.int64)
    _fill_out(src, dst, counted, offsets, heads)
    f_m = np.zeros(n_vertices)
    f_k = np.zeros(n_vertices, dtype=np.int32)
    _forward(order, offsets, heads, at_start, f_m, f_k)
    g_m = np.empty(n_vertices)
    g_k = np.empty(n_vertices, dtype=np.int32)
    _backward(order, offsets, heads, at_end, g_m, g_k)
    log_paths, scaled = _window_paths(vertex_offsets, offsets, at_end, f_m, f_k, g_k)
    cp, log_z = _normalise(
        piece_offsets, src, dst, weight, counted, f_m, f_k, g_m, g_k, scaled
    )
    return KernelResult(cp, log_paths, log_z)
