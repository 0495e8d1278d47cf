"""``sparktrail export --format perfetto|chrome``: the trace-event JSON's rules.

The file is checked against the JSON Trace Event Format's rules that
ui.perfetto.dev and chrome://tracing rely on (no browser runs here: the
Perfetto UI is not published as a package on the registries we reach):
every complete event has ``ts``/``dur``/``pid``/``tid``/``name``; no two
slices overlap on a track; every flow start has one end; metadata names
every process and thread; the critical path track exists and holds
critical activities.
"""

from __future__ import annotations

import collections
import itertools
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.cli import main
from sparktrail.cli.export import parse_window
from sparktrail.dashboard.trace_export import chrome_trace, whole_trace
from sparktrail.engines.profiler import profile
from sparktrail.pag.trace import load_trace, write_trace
from tests.paths import SHARED_LOG

MS = 1_000_000
PATH_THREAD = "critical path"


def check_chrome_trace(doc: dict[str, Any], threshold: float = 0.5) -> dict[str, Any]:
    """Assert the format's rules on ``doc``; returns its parts for more checks."""
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    assert doc["displayTimeUnit"] in ("ms", "ns")
    events = doc["traceEvents"]
    assert isinstance(events, list)
    slices = [e for e in events if e["ph"] == "X"]
    meta = [e for e in events if e["ph"] == "M"]
    flows = [e for e in events if e["ph"] in ("s", "f")]
    assert {e["ph"] for e in events} <= {"X", "M", "s", "f"}
    # every complete event has ts/dur/pid/tid/name, integers where numbers
    for e in slices:
        assert isinstance(e["name"], str) and e["name"]
        for key in ("ts", "dur", "pid", "tid"):
            assert isinstance(e[key], int), (key, e)
        assert e["ts"] >= 0 and e["dur"] > 0
    # no two slices overlap on one track
    by_track = collections.defaultdict(list)
    for e in slices:
        by_track[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for track, spans in by_track.items():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start, f"overlap on {track}"
    # flows pair up: one start and one end per (cat, id), the end after it
    pairs = collections.defaultdict(dict)
    for e in flows:
        assert e["ph"] not in pairs[e["cat"], e["id"]], e
        pairs[e["cat"], e["id"]][e["ph"]] = e
        for key in ("ts", "pid", "tid", "name"):
            assert key in e
    for pair in pairs.values():
        assert set(pair) == {"s", "f"}
        assert pair["f"]["bp"] == "e"
        assert pair["f"]["ts"] >= pair["s"]["ts"]
    # metadata names every process and thread used
    processes = {e["pid"] for e in meta if e["name"] == "process_name"}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in meta
        if e["name"] == "thread_name"
    }
    used = {(e["pid"], e["tid"]) for e in slices + flows}
    assert {pid for pid, _ in used} <= processes
    assert used <= set(threads)
    assert all(
        e["name"]
        in {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}
        for e in meta
    )
    # the critical path track exists; its slices are critical activities
    path_track = [t for t, name in threads.items() if name == PATH_THREAD]
    assert len(path_track) == 1
    path = sorted(
        (e for e in slices if (e["pid"], e["tid"]) == path_track[0]),
        key=lambda e: e["ts"],
    )
    rows = {
        e["args"]["row"]: e for e in slices if (e["pid"], e["tid"]) != path_track[0]
    }
    for e in path:
        assert e["cat"] == "critical_path"
        source = rows[e["args"]["row"]]  # an activity on a worker's track
        assert source["name"] == e["name"]
        assert (
            source["ts"] <= e["ts"]
            and e["ts"] + e["dur"] <= source["ts"] + source["dur"]
        )
        assert source["args"]["cp_ms"] > 0 and e["args"]["cp"] > 0
    for e in slices:
        if e["cat"] == "critical":
            assert e["args"]["cp"] >= threshold
    return {"slices": slices, "flows": pairs, "threads": threads, "path": path}


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _thread(parts: dict[str, Any], name: str) -> list[dict[str, Any]]:
    track = next(t for t, n in parts["threads"].items() if n == name)
    return sorted(
        (e for e in parts["slices"] if (e["pid"], e["tid"]) == track),
        key=lambda e: e["ts"],
    )


@pytest.fixture(scope="module")
def straggler() -> pl.DataFrame:
    """The driver launches two tasks; the one on exec-1/0 runs 9 ms, the
    other 2 ms; then the driver runs 2 ms of its own code."""
    d, a, b = "driver", "exec-1/0", "exec-1/1"
    rows = [
        # src, dst, start ms, end ms, activity, stage, task
        (d, d, 0, 1, "scheduling", None, None),
        (d, a, 1, 1, "control", 0, 0),
        (d, b, 1, 1, "control", 0, 1),
        (d, d, 1, 10, "waiting", None, None),
        (a, a, 1, 10, "processing", 0, 0),
        (b, b, 1, 3, "processing", 0, 1),
        (b, b, 3, 10, "waiting", None, None),
        (b, d, 3, 3, "control", 0, 1),
        (a, d, 10, 10, "control", 0, 0),
        (d, d, 10, 12, "driver", None, None),
    ]
    src, dst, start, end, activity, stage, task = zip(*rows, strict=True)
    return pl.DataFrame(
        {
            "src_worker": src,
            "dst_worker": dst,
            "start_ns": [s * MS for s in start],
            "end_ns": [e * MS for e in end],
            "activity": activity,
            "stage_id": stage,
            "task_id": task,
            "partition": task,
            "records": [10 if t is not None else None for t in task],
        },
        schema_overrides={
            "stage_id": pl.Int64,
            "task_id": pl.Int64,
            "partition": pl.Int64,
        },
    )


@pytest.fixture(scope="module")
def straggler_file(straggler, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("straggler") / "app.arrow"
    write_trace(straggler, path)
    return path


def test_constructed_trace_marks_the_straggler(straggler_file, tmp_path, capsys):
    # GIVEN a trace whose exec-1/0 task is on every critical path
    out = tmp_path / "t.json"
    # WHEN it is exported for Perfetto
    assert (
        main(["export", str(straggler_file), "--format", "perfetto", "-o", str(out)])
        == 0
    )
    assert "wrote" in capsys.readouterr().err
    parts = check_chrome_trace(_load(out))
    # THEN the straggler's processing is critical, the other task's is not
    slow = _thread(parts, "exec-1/0")
    fast = _thread(parts, "exec-1/1")
    assert [(e["name"], e["cat"], e["ts"], e["dur"]) for e in slow] == [
        ("processing", "critical", 1000, 9000)
    ]
    assert slow[0]["args"] == {
        "stage_id": 0,
        "task_id": 0,
        "partition": 0,
        "records": 10,
        "cp": 1.0,
        "cp_ms": 9.0,
        "row": 4,
    }
    assert fast[0]["cat"] == "processing" and fast[0]["args"]["cp"] == 0
    # AND the critical path track runs driver -> straggler -> driver
    assert [
        (e["name"], e["args"]["worker"], e["ts"], e["dur"]) for e in parts["path"]
    ] == [
        ("scheduling", "driver", 0, 1000),
        ("processing", "exec-1/0", 1000, 9000),
        ("driver", "driver", 10000, 2000),
    ]
    # AND the four messages are flows: two launches, two completions
    names = collections.Counter(p["s"]["name"] for p in parts["flows"].values())
    assert names == {"launch": 2, "completion": 2}
    # AND one process per executor and one for the driver
    processes = {
        e["args"]["name"]
        for e in _load(out)["traceEvents"]
        if e.get("name") == "process_name"
    }
    assert processes == {"critical path", "driver", "executor 1"}


def test_overlapping_rows_are_clipped_on_their_track(straggler):
    # GIVEN a worker whose rows overlap (a producer's error)
    frame = pl.concat(
        [
            straggler,
            straggler.filter(pl.col("activity") == "processing")
            .head(1)
            .with_columns(
                pl.lit("gc").alias("activity"),
                (pl.col("start_ns") + 4 * MS).alias("start_ns"),
                (pl.col("end_ns") + 2 * MS).alias("end_ns"),
            ),
        ],
        how="diagonal_relaxed",
    )
    # WHEN it is laid out
    doc, stats = chrome_trace(whole_trace(load_trace(frame), 10**9))
    # THEN the later slice starts where the earlier ends: no overlap
    assert stats.clipped == 1
    parts = check_chrome_trace(doc)
    gc = [e for e in _thread(parts, "exec-1/0") if e["name"] == "gc"]
    assert [(e["ts"], e["dur"]) for e in gc] == [(10000, 2000)]


def test_a_range_is_clipped_and_an_empty_one_is_valid(straggler_file, tmp_path, capsys):
    # GIVEN a range inside the straggler's task
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "export",
                str(straggler_file),
                "--format",
                "chrome",
                "-o",
                str(out),
                "--window",
                "2ms:5ms",
            ]
        )
        == 0
    )
    parts = check_chrome_trace(_load(out))
    # THEN only its rows are exported, clipped to it, with its CP
    assert [(e["name"], e["ts"], e["dur"]) for e in _thread(parts, "exec-1/0")] == [
        ("processing", 0, 3000)
    ]
    assert [e["args"]["worker"] for e in parts["path"]] == ["exec-1/0"]
    capsys.readouterr()
    # WHEN the range holds no row
    empty = tmp_path / "e.json"
    assert (
        main(
            [
                "export",
                str(straggler_file),
                "--format",
                "chrome",
                "-o",
                str(empty),
                "--window",
                "1h:2h",
            ]
        )
        == 0
    )
    # THEN the file is a valid empty trace and stderr says so
    assert "no rows in --window 3600s:7200s" in capsys.readouterr().err
    doc = _load(empty)
    check_chrome_trace(doc)
    assert [e for e in doc["traceEvents"] if e["ph"] != "M"] == []


def test_a_profile_folder_exports_its_critical_window(straggler, tmp_path, capsys):
    # GIVEN a saved profile (it holds its most critical window's rows only)
    folder = profile(straggler, 10 * MS, name="straggler").save(tmp_path / "p")
    out = tmp_path / "p.json"
    # WHEN exported
    assert main(["export", str(folder), "--format", "perfetto", "-o", str(out)]) == 0
    parts = check_chrome_trace(_load(out))
    # THEN that window's straggler is on its critical path track
    assert "exec-1/0" in {e["args"]["worker"] for e in parts["path"]}
    # AND the command says it exported that one window, not the run
    err = capsys.readouterr().err
    assert "is a profile folder" in err and "most critical window only" in err
    assert "export the event log or trace for the whole run" in err


def test_window_option():
    assert parse_window("1s") == 10**9
    assert parse_window("1s:") == (10**9, None)
    with pytest.raises(Exception, match="ends before"):
        parse_window("2s:1s")


@pytest.mark.skipif(not SHARED_LOG.exists(), reason=f"{SHARED_LOG} is missing")
def test_real_event_log(tmp_path, capsys):
    # GIVEN a public Spark 2.3 log (two jobs, 8 tasks on local[*])
    out = tmp_path / "app.json"
    # WHEN exported
    assert (
        main(
            [
                "export",
                str(SHARED_LOG),
                "--format",
                "chrome",
                "-o",
                str(out),
                "--window",
                "250ms",
            ]
        )
        == 0
    )
    doc = _load(out)
    parts = check_chrome_trace(doc)
    # THEN each task slot is a track of the local executor, beside the driver
    names = set(parts["threads"].values())
    assert names == {PATH_THREAD, "driver", *(f"exec-driver/{i}" for i in range(4))}
    # AND every task's launch and completion is a flow bound to a slice on
    # both tracks (the enclosing slice, or one that starts or ends there)
    assert len(parts["flows"]) == 16
    spans = collections.defaultdict(list)
    for e in parts["slices"]:
        spans[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for pair in parts["flows"].values():
        for end in pair.values():
            track = spans[end["pid"], end["tid"]]
            assert any(a <= end["ts"] <= b for a, b in track), end
    # AND tasks' slices carry their stage, task and partition
    processing = [
        e
        for e in parts["slices"]
        if e["name"] == "processing" and e["cat"] != "critical_path"
    ]
    assert len(processing) == 8
    assert all(
        {"stage_id", "task_id", "partition"} <= set(e["args"]) for e in processing
    )
    # AND the critical path covers the run from start-up to the last driver time
    path = parts["path"]
    assert path[0]["name"] == "startup" and path[-1]["name"] == "driver"
    assert (
        sum(e["dur"] for e in path) == path[-1]["ts"] + path[-1]["dur"] - path[0]["ts"]
    )
    assert doc["otherData"]["app_id"] == "local-1532512550423"
