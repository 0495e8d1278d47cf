"""sparktrail benchmarks: `make bench` (or `python bench/run.py --help`).

CP section (DESIGN §7): on barrier traces of 10^4 .. 10^7 edges in one
window, measured side by side in one run:

* kernel: ``count_paths`` on a prebuilt snapshot (edges/s, one core);
* end to end: Arrow file -> ``read_trace`` -> ``critical_participation``
  (trace rows/s);
* networkx: the same counting (topological sort, forward/backward sums) on
  a networkx MultiDiGraph built from the same snapshot;
* integer reference: exact Python-int counting (small sizes only).

Kernel section (``--only kernel``): ``count_paths`` alone, per size, with
its largest relative difference to the exact reference (Python-int counts,
CP as exact fractions) on sizes up to ``--ref-max``. Only ``count_paths``
is imported from sparktrail's kernel, so running this file with another
checkout's interpreter (``/other/.venv/bin/python bench/run.py --only
kernel``) measures that checkout's kernel with the same harness.

Every figure is the median of ``--repeat`` runs; ratios compare medians
taken in the same run. Results print as Markdown tables.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from importer import import_section

import sparktrail
from sparktrail.pag.kernel import count_paths
from sparktrail.pag.memory import retain_freed_memory
from sparktrail.pag.snapshot import Snapshots, build_snapshots
from sparktrail.pag.trace import validate_trace, write_trace
from sparktrail.synthetic import barrier_trace, span_ns

F64 = npt.NDArray[np.float64]


def median_seconds(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def run_kernel(s: Snapshots) -> Any:
    return count_paths(
        s.src,
        s.dst,
        s.weight_ns,
        s.counted,
        s.vertex_at_start,
        s.vertex_at_end,
        s.piece_offsets,
        s.vertex_offsets,
    )


def networkx_counts(s: Snapshots) -> float:
    """Plain networkx: build the graph, topological sort, f/g sums, CP."""
    import networkx as nx

    graph = nx.MultiDiGraph()
    counted = np.flatnonzero(s.counted)
    src, dst, weight = s.src[counted], s.dst[counted], s.weight_ns[counted]
    graph.add_edges_from(zip(src.tolist(), dst.tolist(), weight.tolist(), strict=True))
    at_start = set(np.flatnonzero(s.vertex_at_start).tolist())
    at_end = set(np.flatnonzero(s.vertex_at_end).tolist())
    order = list(nx.topological_sort(graph))
    f: dict[int, float] = {}
    for v in order:
        preds = graph.in_edges(v)
        f[v] = 1.0 if v in at_start and not preds else sum(f[u] for u, _ in preds)
    g: dict[int, float] = {}
    for v in reversed(order):
        succs = graph.out_edges(v)
        g[v] = 1.0 if v in at_end and not succs else sum(g[w] for _, w in succs)
    cw = [f[u] * g[v] * w for u, v, w in graph.edges(keys=True)]
    total = math.fsum(cw)
    return sum(c / total for c in cw)


def integer_counts(s: Snapshots) -> int:
    """Exact integer path counting in pure Python (the reference)."""
    n = s.n_vertices
    out: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for e in np.flatnonzero(s.counted).tolist():
        out[int(s.src[e])].append(int(s.dst[e]))
        indegree[int(s.dst[e])] += 1
    f = [0] * n
    for v in range(n):  # ids are topological for barrier traces
        if s.vertex_at_start[v] and indegree[v] == 0:
            f[v] = 1
        for w in out[v]:
            f[w] += f[v]
    return sum(f[v] for v in range(n) if s.vertex_at_end[v] and not out[v])


def exact_cp(s: Snapshots) -> tuple[int, F64]:
    """N and every edge's CP with Python ints and exact fractions (one window)."""
    n = s.n_vertices
    out: list[list[int]] = [[] for _ in range(n)]
    has_in = [False] * n
    for e in np.flatnonzero(s.counted).tolist():
        out[int(s.src[e])].append(e)
        has_in[int(s.dst[e])] = True
    dst = s.dst.tolist()
    f = [0] * n
    for v in range(n):  # ids are topological for barrier traces
        if s.vertex_at_start[v] and not has_in[v]:
            f[v] = 1
        for e in out[v]:
            f[dst[e]] += f[v]
    g = [0] * n
    for v in range(n - 1, -1, -1):
        g[v] = (
            1 if s.vertex_at_end[v] and not out[v] else sum(g[dst[e]] for e in out[v])
        )
    src, weight, counted = s.src.tolist(), s.weight_ns.tolist(), s.counted.tolist()
    cw = [
        f[src[e]] * g[dst[e]] * weight[e] if counted[e] else 0 for e in range(len(src))
    ]
    total = sum(cw)
    n_paths = sum(f[v] for v in range(n) if s.vertex_at_end[v] and not out[v])
    return n_paths, np.array([float(Fraction(c, total)) for c in cw])


def kernel_section(sizes: list[int], repeat: int, ref_max: int) -> str:
    lines = [
        f"count_paths on barrier traces, one window, 16 workers; median of {repeat}"
        " runs (first run excluded: compilation).",
        "",
        "| trace rows | snapshot edges | kernel | ns/edge | max rel. diff CP "
        "| rel. diff ln N |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        trace = validate_trace(barrier_trace(size))
        snaps = build_snapshots(trace, span_ns(trace), 0)
        edges = len(snaps.row)
        run_kernel(snaps)
        k_time, result = median_seconds(lambda s=snaps: run_kernel(s), repeat)
        cp_diff = ln_diff = "—"
        if edges <= ref_max:
            n_paths, cp = exact_cp(snaps)
            nonzero = cp > 0
            rel = np.abs(result.cp[nonzero] - cp[nonzero]) / cp[nonzero]
            assert (result.cp[~nonzero] == 0).all()
            cp_diff = f"{rel.max():.1e}"
            log_n = math.log(n_paths)
            ln_diff = f"{abs(float(result.log_paths[0]) - log_n) / log_n:.1e}"
        lines.append(
            f"| {size:,} | {edges:,} | {fmt_rate(edges, k_time)} "
            f"| {k_time / edges * 1e9:.1f} | {cp_diff} | {ln_diff} |"
        )
        print(lines[-1], file=sys.stderr, flush=True)  # progress
    return "\n".join(lines)


def cp_section(sizes: list[int], repeat: int, nx_max: int, ref_max: int) -> str:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            trace = validate_trace(barrier_trace(size))
            window = span_ns(trace)
            path = write_trace(trace, Path(tmp) / f"bench-{size}.arrow")
            snaps = build_snapshots(trace, window, 0)
            edges = len(snaps.row)
            run_kernel(snaps)  # compile / warm caches
            k_time, result = median_seconds(lambda s=snaps: run_kernel(s), repeat)
            assert abs(result.cp.sum() - 1.0) < 1e-9

            def end_to_end(p: Path = path, w: int = window) -> Any:
                return sparktrail.critical_participation(sparktrail.read_trace(p), w, 0)

            cold_time, _ = median_seconds(end_to_end, 1)  # first run: page faults
            e_time, table = median_seconds(end_to_end, repeat)
            assert len(table) == edges
            nx_time = ref_time = math.nan
            if edges <= nx_max:
                nx_time, nx_sum = median_seconds(lambda s=snaps: networkx_counts(s), 1)
                assert abs(nx_sum - 1.0) < 1e-9
            if edges <= ref_max:
                ref_time, n_paths = median_seconds(lambda s=snaps: integer_counts(s), 1)
                log_n = float(result.log_paths[0])
                assert abs(math.log(n_paths) - log_n) < 1e-9 * max(1.0, log_n)
            rows.append((size, edges, k_time, e_time, cold_time, nx_time, ref_time))
    return format_cp(rows, repeat)


def fmt_rate(count: int, seconds: float) -> str:
    return "—" if math.isnan(seconds) else f"{count / seconds / 1e6:,.2f} M/s"


CpRow = tuple[int, int, float, float, float, float, float]


def format_cp(rows: list[CpRow], repeat: int) -> str:
    lines = [
        f"CP on barrier traces, one window, 16 workers; median of {repeat} runs "
        "(networkx and integer reference: 1 run).",
        "",
        "| trace rows | snapshot edges | kernel | kernel ns/edge "
        "| Arrow file → CP table | same, first (cold) run | networkx "
        "| kernel ÷ networkx | integer reference |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, edges, k, e, cold, nx_t, ref in rows:
        speedup = "—" if math.isnan(nx_t) else f"{nx_t / k:,.0f}×"
        lines.append(
            f"| {size:,} | {edges:,} | {fmt_rate(edges, k)} | {k / edges * 1e9:.1f} "
            f"| {fmt_rate(size, e)} ({e:.2f} s) | {fmt_rate(size, cold)} "
            f"| {fmt_rate(edges, nx_t)} | {speedup} "
            f"| {fmt_rate(edges, ref)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="10000,100000,1000000,10000000",
        help="comma-separated trace sizes in rows",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--nx-max", type=int, default=1_000_000, help="largest size for networkx"
    )
    parser.add_argument(
        "--ref-max", type=int, default=100_000, help="largest size for the int ref"
    )
    parser.add_argument(
        "--import-mb", type=float, default=100.0, help="event-log size to import"
    )
    parser.add_argument(
        "--only", default="cp,import", help="sections to run: cp, import, kernel"
    )
    args = parser.parse_args(argv)
    sections = set(args.only.split(","))
    # As the sparktrail CLI does: keep freed memory instead of paying page
    # faults again on every run (see sparktrail.pag.memory).
    retain_freed_memory()
    sizes = [int(s) for s in args.sizes.split(",")]
    if "cp" in sections:
        print("## Critical participation\n")
        print(cp_section(sizes, args.repeat, args.nx_max, args.ref_max), flush=True)
    if "kernel" in sections:
        print("## CP kernel\n")
        print(kernel_section(sizes, args.repeat, args.ref_max), flush=True)
    if "import" in sections:
        print("\n## Event-log import\n")
        print(import_section(args.import_mb, min(args.repeat, 3)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
