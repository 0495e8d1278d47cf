"""to_networkx: the exported PAG of one window, checked with networkx alone."""

from __future__ import annotations

import math
import warnings

import networkx as nx
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktrail.pag import SnapshotWarning, critical_participation, to_networkx
from tests.pag.reference import snapshots
from tests.pag.strategies import traces


def quietly(function, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        return function(*args)


def recount(graph: nx.DiGraph, activity_of_row: list[str]) -> tuple[int, dict]:
    """N and CP per exported edge, recomputed with networkx only.

    Merged edges stand for several trace rows between the same two events;
    each non-waiting row is a separate path step of the same weight.
    """
    ts, te = graph.graph["path_start_ns"], graph.graph["path_end_ns"]
    mult = {
        (u, v): sum(activity_of_row[i] != "waiting" for i in d["edge_index"])
        for u, v, d in graph.edges(data=True)
    }
    has_in = {v for (u, v), m in mult.items() if m}
    has_out = {u for (u, v), m in mult.items() if m}
    start = {x for x in graph if x[1] == ts and x not in has_in}
    end = {x for x in graph if x[1] == te and x not in has_out}
    order = list(nx.topological_sort(graph))
    f = {x: 1 if x in start else 0 for x in order}
    for x in order:
        if x not in start:
            f[x] = sum(f[u] * mult[u, x] for u in graph.predecessors(x))
    g = {}
    for x in reversed(order):
        g[x] = 1 if x in end else sum(g[v] * mult[x, v] for v in graph.successors(x))
    n = sum(f[x] for x in end)
    cw = {}
    for u, v, d in graph.edges(data=True):
        row_weight = d["weight_ns"] // len(d["edge_index"])
        cw[u, v] = f[u] * g[v] * mult[u, v] * row_weight
    total = sum(cw.values())
    return n, {e: (c / total if total else 0.0) for e, c in cw.items()}


def test_seq_example_graph():
    # GIVEN a task end, its report and the next launch at t=5, plus a clip
    trace = pl.DataFrame(
        {
            "src_worker": ["a", "a", "a", "a", "d", "d"],
            "dst_worker": ["a", "a", "a", "d", "a", "d"],
            "start_ns": [-5, 5, 5, 5, 5, 0],
            "end_ns": [5, 5, 15, 5, 5, 5],
            "activity": [
                "processing",
                "scheduling",
                "gc",
                "control",
                "control",
                "driver",
            ],
            "src_seq": [0, 7, 8, 7, 2, 0],
            "dst_seq": [7, 8, 9, 2, 8, 2],
        }
    )
    # WHEN the window [0, 10) is exported
    graph = quietly(to_networkx, trace, 0, 10)
    # THEN clipped ends are marked, other events keep their seq
    assert set(graph.edges) == {
        (("a", 0, "start"), ("a", 5, 7)),
        (("a", 5, 7), ("a", 5, 8)),
        (("a", 5, 8), ("a", 10, "end")),
        (("a", 5, 7), ("d", 5, 2)),
        (("d", 5, 2), ("a", 5, 8)),
        (("d", 0, 0), ("d", 5, 2)),
    }
    # AND three paths of 10 ns: CP 1/3 (processing), 1/2 (gc), 1/6 (driver)
    cp = {d["activity"]: d["cp"] for _, _, d in graph.edges(data=True)}
    assert cp["processing"] == pytest.approx(1 / 3, abs=1e-12)
    assert cp["gc"] == pytest.approx(1 / 2, abs=1e-12)
    assert cp["driver"] == pytest.approx(1 / 6, abs=1e-12)
    assert graph.edges[("a", 5, 8), ("a", 10, "end")]["weight_ns"] == 5
    assert graph.edges[("a", 5, 8), ("a", 10, "end")]["edge_index"] == [2]
    assert graph.graph == {
        "window_start_ns": 0,
        "window_end_ns": 10,
        "path_start_ns": 0,
        "path_end_ns": 10,
    }


def test_parallel_rows_are_merged():
    # GIVEN a control and a data message between the same two events
    trace = pl.DataFrame(
        {
            "src_worker": ["a", "a", "a", "b"],
            "dst_worker": ["a", "b", "b", "b"],
            "start_ns": [0, 4, 4, 6],
            "end_ns": [4, 6, 6, 10],
            "activity": ["processing", "control", "data", "processing"],
            "src_seq": [0, 1, 1, 1],
            "dst_seq": [1, 1, 1, 2],
        }
    )
    # WHEN the window is exported
    graph = to_networkx(trace, 0, 10)
    # THEN one edge stands for both rows, their CP and weight summed: two
    # paths of 10 ns, each message C*w = 2 of sum C*w = 20
    data = graph.edges[("a", 4, 1), ("b", 6, 1)]
    assert data["edge_index"] == [1, 2]
    assert data["weight_ns"] == 4
    assert data["cp"] == pytest.approx(4 / 20, abs=1e-12)
    assert graph.edges[("a", 0, 0), ("a", 4, 1)]["cp"] == pytest.approx(8 / 20)
    assert sum(d for _, _, d in graph.edges(data="cp")) == pytest.approx(1.0)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), window_ns=st.integers(1, 20), pick=st.integers(0, 10**6))
def test_exported_graph_matches_cp_and_a_networkx_recount(trace, window_ns, pick):
    # GIVEN one listed window of a random trace
    origin = (trace["start_ns"].min() // window_ns) * window_ns
    windows = snapshots(trace, window_ns, origin)
    window = windows[pick % len(windows)]
    # WHEN it is exported (as its own origin)
    graph = quietly(to_networkx, trace, window.ts, window_ns)
    table = quietly(critical_participation, trace, window_ns, origin).filter(
        pl.col("window_start_ns") == window.ts
    )
    # THEN it is a DAG whose edges carry activity, weight_ns, cp, edge_index
    assert isinstance(graph, nx.DiGraph)
    assert nx.is_directed_acyclic_graph(graph)
    for _, _, d in graph.edges(data=True):
        assert {"activity", "weight_ns", "cp", "edge_index"} <= d.keys()
    # AND its edges partition the window's pieces, with their CP
    indices = sorted(i for _, _, d in graph.edges(data="edge_index") for i in d)
    assert indices == sorted(table["edge_index"].to_list())
    cp = dict(zip(table["edge_index"], table["cp"], strict=True))
    for _, _, d in graph.edges(data=True):
        assert d["cp"] == pytest.approx(sum(cp[i] for i in d["edge_index"]), abs=1e-12)
    total = sum(d for _, _, d in graph.edges(data="cp"))
    expected = 1.0 if window.n_paths and window.total_cw else 0.0
    assert total == pytest.approx(expected, abs=1e-12)
    assert (graph.graph["path_start_ns"], graph.graph["path_end_ns"]) == (
        window.path_start,
        window.path_end,
    )
    # AND a networkx-only recount gives the same N and CP
    n, recounted = recount(graph, trace["activity"].to_list())
    assert n == window.n_paths
    for (u, v), value in recounted.items():
        assert math.isclose(graph.edges[u, v]["cp"], value, abs_tol=1e-12)


def test_export_warns_only_about_its_own_window():
    # GIVEN a window [0, 10) with a path, and a later window without one
    trace = pl.DataFrame(
        {
            "src_worker": ["a", "a"],
            "dst_worker": ["a", "a"],
            "start_ns": [0, 10],
            "end_ns": [10, 15],
            "activity": ["processing", "processing"],
        }
    )
    # WHEN the first window is exported
    with warnings.catch_warnings():
        warnings.simplefilter("error", SnapshotWarning)
        graph = to_networkx(trace, 0, 10)
    # THEN no warning is raised: the exported window has a path
    assert graph.number_of_edges() == 1


def test_export_of_a_later_window_names_original_rows():
    # GIVEN rows before, across and inside the window [20, 30)
    trace = pl.DataFrame(
        {
            "src_worker": ["a", "a", "a", "b"],
            "dst_worker": ["a", "a", "a", "b"],
            "start_ns": [0, 10, 25, 12],
            "end_ns": [10, 25, 30, 18],
            "activity": ["processing", "gc", "processing", "processing"],
        }
    )
    # WHEN that window is exported
    graph = to_networkx(trace, 20, 10)
    # THEN its edges carry the input row numbers and the clipped gc row
    # starts at a clipped-start event
    by_row = {d["edge_index"][0]: (u, v, d) for u, v, d in graph.edges(data=True)}
    assert sorted(by_row) == [1, 2]
    assert by_row[1][0] == ("a", 20, "start")
    assert by_row[1][2]["weight_ns"] == 5
    assert math.isclose(by_row[1][2]["cp"], 0.5)
