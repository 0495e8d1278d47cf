"""The path-counting kernel: critical participation by dynamic programming.

For every snapshot edge ``e = (u, v)`` the number of start-to-end paths
through it is ``C(e) = f(u) * g(v)``, where ``f`` counts paths from the start
frontier to ``u`` and ``g`` paths from ``v`` to the end frontier (DESIGN §4).
``f`` is computed forward and ``g`` backward along a topological order, each
in one pass over a CSR of the counted edges; no path is ever materialised.
The vertex ids are that order when every edge goes from a lower id to a
higher one (events are numbered by time), else Kahn's algorithm finds one.

Assumptions
-----------
* Vertices are numbered ``0 .. n-1`` and grouped by window: the vertices of
  window ``k`` are ``vertex_offsets[k] .. vertex_offsets[k+1]-1`` and edges
  never join two windows.
* Only ``counted`` edges (not waiting) lie on paths; every edge, counted or
  not, must be acyclic.
* Path counts exceed float64 after a few hundred barriers, so each count is
  a scaled float: a float64 mantissa and a per-vertex int32 step, the count
  being ``mantissa * 2**(256 * step)``. Scaling by powers of two is exact;
  two addends are aligned to the larger step, and one more than 2**1024
  times smaller vanishes (it is below the other's last bit). Every rounding
  is then that of a float sum of positive terms: the relative error of a
  count grows at most by 2**-53 per addition along a path (in practice
  about 1e-15, whatever the count's size), and of a CP by a few more.
* Steps fit int32 below about 10**12 edges per window (a count has at most
  about m/2 bits on m edges). The CSR is int32 when the graph has fewer
  than 2**31 - 1 vertices and edges, else int64.
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
#: CSR index arrays: int32 when the graph allows, else int64
Ix = npt.NDArray[np.int32] | npt.NDArray[np.int64]
#: vertices and edges below which the CSR is int32 (tests lower it)
_INT32_LIMIT = 2**31 - 1
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


#: A count is ``mantissa * 2**(STEP_BITS * step)``; a mantissa that reaches
#: ``2**STEP_BITS`` moves one step up when its vertex is reached. Two
#: mantissas times an int64 weight, summed over 2**40 edges, stay below
#: 2**615, far from float64's 2**1024.
STEP_BITS = 256
_STEP = 2.0**STEP_BITS
_INV_STEP = 2.0**-STEP_BITS
_LN_STEP = STEP_BITS * math.log(2.0)


#: 2**(-STEP_BITS * steps) by steps; 0 from 2**-1280 on (below every
#: subnormal). A table, not ``math.ldexp``: a call in the hot loops, even on
#: a branch never taken, made the forward pass 1.5x slower.
_DOWN = np.array([math.ldexp(1.0, -STEP_BITS * d) for d in range(6)])


@numba.njit(cache=True, nogil=True, inline="always")
def _down(steps: int) -> float:
    """2**(-STEP_BITS * steps) for steps >= 0, rounded to float64 (no NaN, inf)."""
    return float(_DOWN[min(steps, _DOWN.shape[0] - 1)])


@numba.njit(cache=True, nogil=True)
def _count_out(src: I64, counted: B, offsets: Ix) -> int:
    """Counted out-degree into ``offsets[v]``; returns the counted edges."""
    total = 0
    for i in range(src.shape[0]):
        offsets[src[i]] += counted[i]
        total += counted[i]
    return total


@numba.njit(cache=True, nogil=True)
def _fill_out(src: I64, dst: I64, counted: B, offsets: Ix, heads: Ix) -> bool:
    """Counted out-neighbours in CSR form, from ``offsets[v]`` = out-degree;
    returns whether the ids are a topological order (of all edges).

    The check rides on this pass, which reads ``dst`` anyway.
    """
    n = offsets.shape[0] - 1
    total = 0
    for v in range(n):
        total += offsets[v]
        offsets[v] = total  # the end of v's run; the fill walks it back
    offsets[n] = total
    # Backwards with pre-decrement: each offset ends at its run's start and
    # each run keeps the edges' order, with no second pass to shift them.
    topological = True
    for i in range(src.shape[0] - 1, -1, -1):
        topological &= src[i] < dst[i]
        if counted[i]:
            s = src[i]
            offsets[s] -= 1
            heads[offsets[s]] = dst[i]
    return topological


@numba.njit(cache=True, nogil=True)
def _forward(
    order: I64, offsets: Ix, heads: Ix, at_start: B, f_m: F64, f_step: I32
) -> int:
    """f in place, pushed along counted edges; returns the largest step.

    ``f_step`` enters filled with -1, which marks "no counted in-edge yet":
    the first push assigns, so neither a zeroed ``f_m`` nor a separate
    in-degree array is needed.
    """
    identity = order.shape[0] == 0
    top = 0
    for i in range(at_start.shape[0]):
        v = i if identity else order[i]
        k = f_step[v]
        if k < 0:
            m, k = (1.0 if at_start[v] else 0.0), 0
        else:
            m = f_m[v]
            if m >= _STEP:
                m *= _INV_STEP
                k += 1
                top = max(top, k)
        f_m[v], f_step[v] = m, k
        for j in range(offsets[v], offsets[v + 1]):
            w = heads[j]
            kw = f_step[w]
            if kw == k:
                f_m[w] += m
            elif kw < 0:
                f_m[w], f_step[w] = m, k
            elif kw < k:
                f_m[w] = f_m[w] * _down(k - kw) + m
                f_step[w] = k
            else:
                f_m[w] += m * _down(kw - k)
    return top


@numba.njit(cache=True, nogil=True)
def _backward(
    order: I64,
    offsets: Ix,
    heads: Ix,
    at_end: B,
    vertex_offsets: I64,
    f_m: F64,
    f_step: I32,
    g_m: F64,
    g_step: I32,
) -> tuple[F64, int]:
    """g in place, pulled from counted successors; ln N per window; top step.

    N sums f over the end frontier (at the end, no counted out-edge), which
    this pass meets anyway.
    """
    identity = order.shape[0] == 0
    n_windows = vertex_offsets.shape[0] - 1
    n_m = np.zeros(n_windows)
    n_step = np.zeros(n_windows, dtype=np.int64)
    top = 0
    for i in range(at_end.shape[0] - 1, -1, -1):
        v = i if identity else order[i]
        lo, hi = offsets[v], offsets[v + 1]
        if lo == hi:
            g_m[v], g_step[v] = (1.0 if at_end[v] else 0.0), 0
            if at_end[v]:  # on the end frontier: f(v) adds to its window's N
                win = np.searchsorted(vertex_offsets, v, side="right") - 1
                m, k, kw = f_m[v], f_step[v], n_step[win]
                if kw == k:
                    n_m[win] += m
                elif kw < k:
                    n_m[win] = n_m[win] * _down(k - kw) + m
                    n_step[win] = k
                else:
                    n_m[win] += m * _down(kw - k)
            continue
        m, k = 0.0, 0
        for j in range(lo, hi):
            w = heads[j]
            kw = g_step[w]
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
            top = max(top, k)
        g_m[v], g_step[v] = m, k
    log_n = np.full(n_windows, -np.inf)
    for win in range(n_windows):
        if n_m[win] > 0.0:
            log_n[win] = math.log(n_m[win]) + n_step[win] * _LN_STEP
    return log_n, top


@numba.njit(cache=True, nogil=True)
def _normalise(
    piece_offsets: I64,
    src: I64,
    dst: I64,
    weight: I64,
    counted: B,
    f_m: F64,
    f_step: I32,
    g_m: F64,
    g_step: I32,
    scaled: bool,
) -> tuple[F64, F64]:
    """CP of every edge, and ln sum C*w per window.

    Unless ``scaled`` (some count left step 0), every step is 0 and C(e) is
    a plain product of mantissas.
    """
    cp = np.empty(src.shape[0])
    log_z = np.full(piece_offsets.shape[0] - 1, -np.inf)
    for w in range(log_z.shape[0]):
        lo, hi = piece_offsets[w], piece_offsets[w + 1]
        top = 0
        z = 0.0
        if not scaled:
            for i in range(lo, hi):
                c = f_m[src[i]] * g_m[dst[i]] * weight[i] if counted[i] else 0.0
                cp[i] = c
                z += c
        else:
            # Align every C(e) w(e) to the window's largest step.
            for i in range(lo, hi):
                if counted[i] and f_m[src[i]] * g_m[dst[i]] > 0.0:
                    top = max(top, f_step[src[i]] + g_step[dst[i]])
            for i in range(lo, hi):
                c = 0.0
                if counted[i]:
                    c = f_m[src[i]] * g_m[dst[i]] * weight[i]
                    if c > 0.0:
                        c *= _down(top - f_step[src[i]] - g_step[dst[i]])
                cp[i] = c
                z += c
        if z == 0.0:
            cp[lo:hi] = 0.0
            continue
        log_z[w] = math.log(z) + top * _LN_STEP
        # Times the reciprocal: 2.5x faster than dividing here (measured),
        # at the cost of one more rounding (2**-53 relative) per CP.
        inv_z = 1.0 / z
        for i in range(lo, hi):
            cp[i] *= inv_z
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
    # 32-bit CSR when it fits: half the memory traffic of the passes below.
    offsets: Ix
    if max(n_vertices, src.shape[0]) < _INT32_LIMIT:
        offsets = np.zeros(n_vertices + 1, dtype=np.int32)
    else:
        offsets = np.zeros(n_vertices + 1, dtype=np.int64)
    heads: Ix = np.empty(_count_out(src, counted, offsets), dtype=offsets.dtype)
    order = np.empty(0, dtype=np.int64)
    if not _fill_out(src, dst, counted, offsets, heads):
        # Raises on a cycle among all edges, counted or not.
        order = topological_order(n_vertices, src, dst)[0]
    f_m = np.empty(n_vertices)
    f_step = np.full(n_vertices, -1, dtype=np.int32)
    f_top = _forward(order, offsets, heads, at_start, f_m, f_step)
    g_m = np.empty(n_vertices)
    g_step = np.empty(n_vertices, dtype=np.int32)
    log_paths, g_top = _backward(
        order, offsets, heads, at_end, vertex_offsets, f_m, f_step, g_m, g_step
    )
    cp, log_z = _normalise(
        piece_offsets,
        src,
        dst,
        weight,
        counted,
        f_m,
        f_step,
        g_m,
        g_step,
        f_top + g_top > 0,
    )
    return KernelResult(cp, log_paths, log_z)
