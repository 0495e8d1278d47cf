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

import numba
import numpy as np
import numpy.typing as npt

__all__ = ["KernelResult", "count_paths", "topological_order"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
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


@numba.njit(cache=True, nogil=True)
def _log_add(acc_max: F64, acc_sum: F64, w: int, x: float) -> None:
    """Add e**x to the streaming sum acc_sum[w] * e**acc_max[w]."""
    m = acc_max[w]
    if x > m:
        acc_sum[w] = acc_sum[w] * np.exp(m - x) + 1.0
        acc_max[w] = x
    else:
        acc_sum[w] += np.exp(x - m)


@numba.njit(cache=True, nogil=True)
def _log_paths(
    order: I64,
    offsets: I64,
    edges: I64,
    dst: I64,
    counted: B,
    at_start: B,
    at_end: B,
) -> tuple[F64, F64, B]:
    n = at_start.shape[0]
    identity = order.shape[0] == 0
    has_in = np.zeros(n, dtype=np.bool_)
    has_out = np.zeros(n, dtype=np.bool_)
    for v in range(n):
        for j in range(offsets[v], offsets[v + 1]):
            e = edges[j]
            if counted[e]:
                has_out[v] = True
                has_in[dst[e]] = True

    # log_f holds the running maximum of a vertex's incoming terms until the
    # vertex is reached, then its value: one array fewer than a separate max.
    log_f = np.full(n, -np.inf)
    acc_sum = np.zeros(n)
    for i in range(n):
        v = i if identity else order[i]
        if at_start[v] and not has_in[v]:
            log_f[v] = 0.0
        elif acc_sum[v] > 0.0:
            log_f[v] += np.log(acc_sum[v])
        x = log_f[v]
        if x == -np.inf:
            continue
        for j in range(offsets[v], offsets[v + 1]):
            e = edges[j]
            if counted[e]:
                _log_add(log_f, acc_sum, dst[e], x)

    log_g = acc_sum  # reused: every acc_sum entry has been read
    log_g[:] = -np.inf
    for i in range(n - 1, -1, -1):
        v = i if identity else order[i]
        if at_end[v] and not has_out[v]:
            log_g[v] = 0.0
            continue
        m = -np.inf
        for j in range(offsets[v], offsets[v + 1]):
            e = edges[j]
            if counted[e] and log_g[dst[e]] > m:
                m = log_g[dst[e]]
        if m == -np.inf:
            continue
        s = 0.0
        for j in range(offsets[v], offsets[v + 1]):
            e = edges[j]
            if counted[e]:
                s += np.exp(log_g[dst[e]] - m)
        log_g[v] = m + np.log(s)
    end_frontier = at_end & ~has_out
    return log_f, log_g, end_frontier


@numba.njit(cache=True, nogil=True)
def _window_paths(vertex_offsets: I64, log_f: F64, end_frontier: B) -> F64:
    """ln N per window: log-sum-exp of f over the window's end frontier."""
    out = np.full(vertex_offsets.shape[0] - 1, -np.inf)
    for k in range(out.shape[0]):
        m = -np.inf
        for v in range(vertex_offsets[k], vertex_offsets[k + 1]):
            if end_frontier[v] and log_f[v] > m:
                m = log_f[v]
        if m == -np.inf:
            continue
        s = 0.0
        for v in range(vertex_offsets[k], vertex_offsets[k + 1]):
            if end_frontier[v]:
                s += np.exp(log_f[v] - m)
        out[k] = m + np.log(s)
    return out


@numba.njit(cache=True, nogil=True)
def _normalise(
    piece_offsets: I64,
    src: I64,
    dst: I64,
    weight: I64,
    counted: B,
    log_f: F64,
    log_g: F64,
) -> tuple[F64, F64]:
    """CP of every edge, and ln sum C*w per window."""
    cp = np.empty(src.shape[0])
    log_z = np.full(piece_offsets.shape[0] - 1, -np.inf)
    for k in range(log_z.shape[0]):
        lo, hi = piece_offsets[k], piece_offsets[k + 1]
        m = -np.inf
        for i in range(lo, hi):
            x = -np.inf
            if counted[i] and weight[i] > 0:
                x = log_f[src[i]] + log_g[dst[i]] + np.log(weight[i])
            cp[i] = x  # ln C(e) w(e) for now
            if x > m:
                m = x
        if m == -np.inf:
            cp[lo:hi] = 0.0
            continue
        s = 0.0
        for i in range(lo, hi):
            s += np.exp(cp[i] - m)
        log_z[k] = m + np.log(s)
        for i in range(lo, hi):
            cp[i] = np.exp(cp[i] - m) / s
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
    order, offsets, edges = topological_order(n_vertices, src, dst)
    log_f, log_g, end_frontier = _log_paths(
        order, offsets, edges, dst, counted, at_start, at_end
    )
    log_paths = _window_paths(vertex_offsets, log_f, end_frontier)
    cp, log_z = _normalise(piece_offsets, src, dst, weight, counted, log_f, log_g)
    return KernelResult(cp, log_paths, log_z)
