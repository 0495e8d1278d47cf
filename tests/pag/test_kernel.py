"""The path-counting kernel on deep DAGs, against exact Python-int counting.

Counts here exceed float64 (1e308) many times over, so the kernel's scaled
floats (a mantissa and a per-vertex power-of-two step) must align addends
whose steps differ, drop addends too small to matter without producing NaN
or inf, and agree with exact arithmetic in log space.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from sparktrail.pag import kernel
from sparktrail.pag.kernel import count_paths


def exact(
    n: int,
    src: list[int],
    dst: list[int],
    weight: list[int],
    counted: list[bool],
    at_start: list[bool],
    at_end: list[bool],
) -> tuple[int, int, list[float]]:
    """(N, sum C*w, CP per edge) of one window, with Python ints."""
    out: list[list[int]] = [[] for _ in range(n)]
    inn: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for e in range(len(src)):
        indegree[dst[e]] += 1
        if counted[e]:
            out[src[e]].append(e)
            inn[dst[e]].append(e)
    order, ready = [], [v for v in range(n) if indegree[v] == 0]
    while ready:
        v = ready.pop()
        order.append(v)
        for e in range(len(src)):  # all edges, counted or not, order vertices
            if src[e] == v:
                indegree[dst[e]] -= 1
                if indegree[dst[e]] == 0:
                    ready.append(dst[e])
    assert len(order) == n
    f, g = [0] * n, [0] * n
    for v in order:
        start = at_start[v] and not inn[v]
        f[v] = 1 if start else sum(f[src[e]] for e in inn[v])
    for v in reversed(order):
        end = at_end[v] and not out[v]
        g[v] = 1 if end else sum(g[dst[e]] for e in out[v])
    n_paths = sum(f[v] for v in range(n) if at_end[v] and not out[v])
    cw = [
        f[src[e]] * g[dst[e]] * weight[e] if counted[e] else 0 for e in range(len(src))
    ]
    z = sum(cw)
    return n_paths, z, [float(Fraction(c, z)) if z else 0.0 for c in cw]


def run(n, src, dst, weight, counted, at_start, at_end):
    return count_paths(
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        np.array(weight, dtype=np.int64),
        np.array(counted, dtype=bool),
        np.array(at_start, dtype=bool),
        np.array(at_end, dtype=bool),
        np.array([0, len(src)], dtype=np.int64),
        np.array([0, n], dtype=np.int64),
    )


def deep_dag(barriers: int, seed: int, shuffle: bool):
    """``barriers`` layers of width 2-3, fully joined layer to layer, some
    joins doubled by a waiting (uncounted) edge, plus skip edges from early
    layers into late ones (addends whose counts differ by up to 2**barriers).
    With ``shuffle`` the vertex ids are permuted so they are no longer a
    topological order."""
    rng = np.random.default_rng(seed)
    widths = rng.choice([2, 2, 2, 3], size=barriers + 1)
    widths[0] = widths[-1] = 1
    layers, n = [], 0
    for w in widths:
        layers.append(list(range(n, n + int(w))))
        n += int(w)
    src, dst, counted = [], [], []
    for a, b in itertools.pairwise(layers):
        for u in a:
            for v in b:
                waiting = rng.random() < 0.05
                src += [u] * (1 + waiting)
                dst += [v] * (1 + waiting)
                counted += [True] + [False] * waiting
    for skip in range(barriers // 5):
        if skip % 2:  # the addends' steps differ by 0 to 3: aligned, kept
            i = int(rng.integers(0, barriers - barriers // 5))
            j = i + int(rng.integers(2, barriers // 5))
        else:  # they differ by 2**1600 and more: the skip's addend vanishes
            i = int(rng.integers(0, barriers // 4))
            j = int(rng.integers(3 * barriers // 4, barriers + 1))
        src.append(int(rng.choice(layers[i])))
        dst.append(int(rng.choice(layers[j])))
        counted.append(True)
    weight = rng.integers(0, 1_000_000, size=len(src)).tolist()
    at_start = [v in layers[0] for v in range(n)]
    at_end = [v in layers[-1] for v in range(n)]
    if shuffle:
        perm = rng.permutation(n).tolist()
        src = [perm[u] for u in src]
        dst = [perm[v] for v in dst]
        at_start = [at_start[v] for v in np.argsort(perm)]
        at_end = [at_end[v] for v in np.argsort(perm)]
    return n, src, dst, weight, counted, at_start, at_end


@pytest.mark.parametrize(("seed", "shuffle"), [(0, False), (1, True), (2, False)])
def test_deep_dags_match_exact_counts_in_log_space(seed, shuffle):
    # GIVEN 3,000 barriers of width about 2, with skip edges and waiting edges
    graph = deep_dag(3_000, seed, shuffle)
    # WHEN the kernel and exact Python-int counting run on it
    result = run(*graph)
    n_paths, z, cp = exact(*graph)
    # THEN N is far beyond float64 and its log agrees to 1e-9 relative
    assert n_paths > 10**900
    assert result.log_paths[0] == pytest.approx(math.log(n_paths), rel=1e-9)
    assert result.log_weighted_paths[0] == pytest.approx(math.log(z), rel=1e-9)
    # AND every CP agrees with the exact fraction
    assert np.isfinite(result.cp).all()
    assert result.cp == pytest.approx(cp, rel=1e-9, abs=1e-15)
    assert result.cp.sum() == pytest.approx(1.0, abs=1e-12)


def test_an_addend_2_to_the_1200_times_smaller_vanishes_cleanly():
    # GIVEN 1,200 diamonds from s to t (2**1200 paths) and an edge s -> t
    # (1 path): at t, and at s going back, one addend is 2**1200 times the
    # other, more than float64 can hold in one exponent range
    diamonds = 1_200
    src, dst = [], []
    for i in range(diamonds):
        a, top, bottom, b = 3 * i, 3 * i + 1, 3 * i + 2, 3 * i + 3
        src += [a, a, top, bottom]
        dst += [top, bottom, b, b]
    n = 3 * diamonds + 1
    src.append(0)
    dst.append(n - 1)
    weight = [1] * len(src)
    counted = [True] * len(src)
    at_start = [v == 0 for v in range(n)]
    at_end = [v == n - 1 for v in range(n)]
    # WHEN the kernel counts paths
    result = run(n, src, dst, weight, counted, at_start, at_end)
    n_paths, z, cp = exact(n, src, dst, weight, counted, at_start, at_end)
    # THEN N = 2**1200 + 1 comes out as 2**1200: no NaN, no inf
    assert n_paths == 2**diamonds + 1
    assert result.log_paths[0] == pytest.approx(diamonds * math.log(2), rel=1e-15)
    assert result.log_weighted_paths[0] == pytest.approx(math.log(z), rel=1e-15)
    assert np.isfinite(result.cp).all()
    # AND the direct edge's CP (2**-1200 / 4800) underflows to 0, the rest
    # share the window as exactly computed
    assert result.cp[-1] == 0.0
    assert result.cp == pytest.approx(cp, rel=1e-12, abs=1e-300)
    assert result.cp.sum() == pytest.approx(1.0, abs=1e-12)


def test_windows_far_apart_in_scale_do_not_disturb_each_other():
    # GIVEN two windows: 1,100 diamonds (2**1100 paths), then one edge
    diamonds = 1_100
    src, dst = [], []
    for i in range(diamonds):
        a = 3 * i
        src += [a, a, a + 1, a + 2]
        dst += [a + 1, a + 2, a + 3, a + 3]
    n1 = 3 * diamonds + 1
    src.append(n1)
    dst.append(n1 + 1)
    n = n1 + 2
    at_start = [v in (0, n1) for v in range(n)]
    at_end = [v in (n1 - 1, n1 + 1) for v in range(n)]
    # WHEN the kernel counts both at once
    result = count_paths(
        np.array(src),
        np.array(dst),
        np.full(len(src), 7),
        np.ones(len(src), dtype=bool),
        np.array(at_start),
        np.array(at_end),
        np.array([0, len(src) - 1, len(src)]),
        np.array([0, n1, n]),
    )
    # THEN each window has its own N and its CP sums to 1
    assert result.log_paths.tolist() == pytest.approx([diamonds * math.log(2), 0.0])
    assert result.log_weighted_paths[1] == pytest.approx(math.log(7))
    assert result.cp[-1] == 1.0
    assert result.cp[:-1].sum() == pytest.approx(1.0, abs=1e-12)


def test_the_int64_csr_gives_the_same_result(monkeypatch):
    # GIVEN a deep DAG, shuffled, counted with the usual int32 CSR
    graph = deep_dag(1_000, 3, shuffle=True)
    small = run(*graph)
    # WHEN the CSR must be int64 (as for 2**31 vertices or edges)
    monkeypatch.setattr(kernel, "_INT32_LIMIT", 0)
    large = run(*graph)
    # THEN nothing changes
    assert large.cp.tolist() == small.cp.tolist()
    assert large.log_paths.tolist() == small.log_paths.tolist()
    assert large.log_weighted_paths.tolist() == small.log_weighted_paths.tolist()
