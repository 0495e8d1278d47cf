"""Hand-computed critical participation, overflow and error examples."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import sparktrail
from sparktrail.pag import (
    CycleError,
    SnapshotWarning,
    critical_participation,
    snapshot_stats,
)
from tests.pag.reference import cp_table, snapshots

COLUMNS = ("src_worker", "dst_worker", "start_ns", "end_ns", "activity")


def trace_of(*rows: tuple) -> pl.DataFrame:
    """Rows (src, dst, start, end, activity[, src_seq, dst_seq]) as a trace."""
    records = []
    for row in rows:
        record = dict(zip(COLUMNS, row[:5], strict=True))
        record["src_seq"], record["dst_seq"] = row[5:7] if len(row) > 5 else (0, 0)
        records.append(record)
    return pl.DataFrame(records)


def cps(table: pl.DataFrame, window_start_ns: int | None = None) -> list[float]:
    if window_start_ns is not None:
        table = table.filter(pl.col("window_start_ns") == window_start_ns)
    return table["cp"].to_list()


def approx(fractions: list) -> object:
    return pytest.approx([float(Fraction(f)) for f in fractions], abs=1e-12)


# --------------------------------------------------------------------------
# (a) a straggler
# --------------------------------------------------------------------------


def straggler_trace(durations=(10, 10, 10, 40)) -> pl.DataFrame:
    """The driver launches one task per worker at t=0, each reports back when
    done; the driver then works 10 ns. Seq orders the events of each time."""
    rows = []
    last = max(durations)
    for i, d in enumerate(durations):
        w = f"exec-{i}"
        rows.append(("driver", w, 0, 0, "control", 0, 1))  # launch
        rows.append((w, w, 0, d, "processing", 1, 2))
        rows.append((w, "driver", d, d, "control", 2, 10 + i))  # result
        if d < last:
            rows.append((w, w, d, last + 10, "waiting", 2, 3))
    # the driver waits for the results, then merges them
    rows.append(("driver", "driver", 0, last, "waiting", 0, 10))
    for i in range(len(durations) - 1):
        rows.append(("driver", "driver", last, last, "scheduling", 10 + i, 11 + i))
    rows.append(("driver", "driver", last, last + 10, "driver", 13, 20))
    return trace_of(*rows)


def test_a_single_straggler_takes_the_task_share():
    # GIVEN four tasks of 10, 10, 10 and 40 ns, then 10 ns of driver work
    trace = straggler_trace()
    # WHEN CP is computed over the whole job [0, 50)
    table = critical_participation(trace, 50, origin_ns=0)
    by_activity = dict(zip(table["edge_index"], table["cp"], strict=True))
    # THEN the only path is launch -> straggler -> result -> driver work:
    # the straggler gets 40/50 and the driver 10/50, the fast tasks nothing
    straggler = trace.with_row_index().filter(
        (pl.col("activity") == "processing") & (pl.col("end_ns") == 40)
    )["index"][0]
    driver = trace.with_row_index().filter(pl.col("activity") == "driver")["index"][0]
    assert by_activity[straggler] == pytest.approx(4 / 5, abs=1e-12)
    assert by_activity[driver] == pytest.approx(1 / 5, abs=1e-12)
    assert sum(by_activity.values()) == pytest.approx(1.0, abs=1e-12)
    stats = snapshot_stats(trace, 50, origin_ns=0)
    assert stats["log10_paths"].to_list() == [0.0]
    assert stats["spans_window"].to_list() == [True]


def test_a_two_stragglers_split_the_task_share():
    # GIVEN two tasks of 40 ns among four
    trace = straggler_trace((10, 40, 10, 40))
    # WHEN CP is computed over [0, 50)
    table = critical_participation(trace, 50, origin_ns=0)
    # THEN two paths share the job: 2/5 per straggler, 1/5 for the driver
    summary = table.group_by("src_worker", "activity").agg(pl.col("cp").sum())
    got = {(r[0], r[1]): r[2] for r in summary.iter_rows()}
    assert got[("exec-1", "processing")] == pytest.approx(2 / 5, abs=1e-12)
    assert got[("exec-3", "processing")] == pytest.approx(2 / 5, abs=1e-12)
    assert got[("driver", "driver")] == pytest.approx(1 / 5, abs=1e-12)
    assert got[("exec-0", "processing")] == 0.0
    assert 10 ** snapshot_stats(trace, 50, 0)["log10_paths"][0] == pytest.approx(2)


# --------------------------------------------------------------------------
# (b) a chain of messages
# --------------------------------------------------------------------------


def test_b_chain_of_messages():
    # GIVEN a computes 3 ns and sends to b (arrives 2 ns later); b computes
    # 4 ns and sends to c (instantly); c computes 3 ns; meanwhile a computes
    # a second activity until the end
    trace = trace_of(
        ("a", "a", 0, 3, "processing"),
        ("a", "b", 3, 5, "data"),
        ("b", "b", 5, 9, "processing"),
        ("b", "c", 9, 9, "control"),
        ("c", "c", 9, 12, "processing"),
        ("a", "a", 3, 12, "processing"),
    )
    # WHEN CP is computed over [0, 12)
    table = critical_participation(trace, 12)
    # THEN two paths of 12 ns: C = (2, 1, 1, 1, 1, 1), sum C*w = 24
    assert cps(table) == approx(["1/4", "1/12", "1/6", 0, "1/8", "3/8"])
    assert table["weight_ns"].to_list() == [3, 2, 4, 0, 3, 9]


# --------------------------------------------------------------------------
# (c) equal timestamps ordered by seq
# --------------------------------------------------------------------------

SEQ_ROWS = (
    ("a", "a", 0, 5, "processing", 0, 7),  # task k ends at (a, 5, 7)
    ("a", "a", 5, 5, "scheduling", 7, 8),  # gap before task k+1
    ("a", "a", 5, 10, "processing", 8, 9),  # task k+1 from (a, 5, 8)
    ("d", "d", 0, 5, "driver", 0, 1),
    ("a", "d", 5, 5, "control", 7, 1),  # completion reaches the driver
    ("d", "d", 5, 5, "driver", 1, 2),
    ("d", "a", 5, 5, "control", 2, 8),  # launch of task k+1
    ("d", "d", 5, 10, "waiting", 2, 3),
)


def test_c_equal_timestamps_ordered_by_seq():
    # GIVEN a task that ends, reports, and is followed by a launch, all at t=5
    trace = trace_of(*SEQ_ROWS)
    # WHEN CP is computed over [0, 10)
    table = critical_participation(trace, 10)
    # THEN 3 paths: C = (2, 1, 3, 1, 1, 2, 2, 0); sum C*w = 30
    assert cps(table) == approx(["1/3", 0, "1/2", "1/6", 0, 0, 0, 0])
    assert 10 ** snapshot_stats(trace, 10)["log10_paths"][0] == pytest.approx(3)


def test_c_same_events_without_seq_make_a_cycle():
    # GIVEN the same trace without seq columns: the zero-length scheduling
    # row joins (a, 5) to itself
    trace = trace_of(*(row[:5] for row in SEQ_ROWS)).drop("src_seq", "dst_seq")
    # WHEN CP is computed
    # THEN the cycle is reported, naming a row on it
    with pytest.raises(CycleError) as err:
        critical_participation(trace, 10)
    assert err.value.edge_index in {1, 4, 5, 6}
    assert f"trace row {err.value.edge_index} " in str(err.value)


# --------------------------------------------------------------------------
# (d) a cycle
# --------------------------------------------------------------------------


def test_d_messages_at_equal_time_and_seq_form_a_cycle():
    # GIVEN two zero-length messages a -> b and b -> a at the same event keys
    trace = trace_of(
        ("a", "a", 0, 5, "processing", 0, 1),
        ("a", "b", 5, 5, "control", 1, 1),
        ("b", "a", 5, 5, "control", 1, 1),
        ("b", "b", 0, 5, "processing", 0, 1),
    )
    # WHEN CP is computed
    with pytest.raises(CycleError) as err:
        critical_participation(trace, 10)
    # THEN the error names one of the two messages
    assert err.value.edge_index in {1, 2}
    assert isinstance(err.value, ValueError)
    message = str(err.value)
    assert f"trace row {err.value.edge_index} " in message
    assert "control" in message and "@5#1" in message


def test_d_cycle_in_a_later_window_names_the_trace_row():
    # GIVEN a cycle that only exists in the second window, after other rows
    trace = trace_of(
        ("a", "a", 0, 10, "processing", 0, 1),
        ("b", "b", 0, 10, "processing", 0, 1),
        ("a", "a", 10, 20, "processing", 1, 2),
        ("a", "b", 15, 15, "control", 3, 3),
        ("b", "a", 15, 15, "control", 3, 3),
    )
    # WHEN CP is computed with 10 ns windows
    with pytest.raises(CycleError) as err:
        critical_participation(trace, 10)
    # THEN the reported row is one of the cycle's trace rows
    assert err.value.edge_index in {3, 4}


# --------------------------------------------------------------------------
# (e) a window without paths
# --------------------------------------------------------------------------


def test_e_idle_window_has_zero_cp_and_a_diagnostic():
    # GIVEN two workers that only wait
    trace = trace_of(("a", "a", 0, 10, "waiting"), ("b", "b", 0, 10, "waiting"))
    # WHEN CP is computed
    with pytest.warns(SnapshotWarning, match="window_start_ns=0"):
        table = critical_participation(trace, 10)
    # THEN CP is 0 everywhere and the stats explain why
    assert cps(table) == [0.0, 0.0]
    stats = snapshot_stats(trace, 10)
    assert stats["log10_paths"].to_list() == [None]
    assert stats["diagnostic"][0] is not None
    assert stats["spans_window"].to_list() == [False]


def test_e_pathless_window_when_everything_is_idle_at_one_instant():
    # GIVEN a worker busy [0, 4) and [6, 10), idle in between (a gap)
    trace = trace_of(("a", "a", 0, 4, "processing"), ("a", "a", 6, 10, "gc"))
    # WHEN CP is computed over [0, 10)
    with pytest.warns(SnapshotWarning):
        table = critical_participation(trace, 10)
    # THEN no path spans the window and CP is 0
    assert cps(table) == [0.0, 0.0]


def test_stats_of_mixed_windows():
    # GIVEN a window with a path, then a window where the worker only waits
    trace = trace_of(("a", "a", 0, 1, "processing"), ("a", "a", 1, 2, "waiting"))
    # WHEN the stats are asked for
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        stats = snapshot_stats(trace, 1)
    # THEN the first window has one path and the second a diagnostic
    assert stats["log10_paths"].to_list() == [0.0, None]
    assert stats["diagnostic"][0] is None
    assert stats["diagnostic"][1] is not None


# --------------------------------------------------------------------------
# (f) several windows
# --------------------------------------------------------------------------


def test_f_long_activity_is_clipped_into_each_window():
    # GIVEN a 25 ns activity then 5 ns of gc on a, b waiting throughout,
    # and a zero-length event on c exactly at the 10 ns boundary
    trace = trace_of(
        ("a", "a", 0, 25, "processing", 0, 1),
        ("a", "a", 25, 30, "gc", 1, 2),
        ("b", "b", 0, 30, "waiting", 0, 1),
        ("c", "c", 10, 10, "scheduling", 0, 1),
    )
    # WHEN CP is computed with 10 ns windows
    table = critical_participation(trace, 10)
    # THEN the activity has one piece per window, clipped to it
    long = table.filter(pl.col("edge_index") == 0)
    assert long.select("window_start_ns", "start_ns", "end_ns", "weight_ns").rows() == [
        (0, 0, 10, 10),
        (10, 10, 20, 10),
        (20, 20, 25, 5),
    ]
    # AND it carries all CP in the first two windows, half in the last
    assert long["cp"].to_list() == approx([1, 1, "1/2"])
    assert cps(table.filter(pl.col("edge_index") == 1)) == approx(["1/2"])
    # AND the boundary instant belongs to both windows, with weight 0 and CP 0
    instant = table.filter(pl.col("edge_index") == 3)
    assert instant["window_start_ns"].to_list() == [0, 10]
    assert instant["weight_ns"].to_list() == [0, 0]
    assert instant["cp"].to_list() == [0.0, 0.0]
    # AND every window sums to 1
    sums = table.group_by("window_start_ns").agg(pl.col("cp").sum())
    assert sums["cp"].to_list() == approx([1, 1, 1])


def test_f_default_origin_floors_the_first_start():
    # GIVEN a trace starting at 1_234 ns
    trace = trace_of(("a", "a", 1_234, 2_500, "processing"))
    # WHEN it is cut into 1_000 ns windows without an origin
    table = critical_participation(trace, 1_000)
    # THEN windows start at 1_000 and 2_000; both are partial, so their paths
    # run from the trace's first event and to its last one
    assert table["window_start_ns"].to_list() == [1_000, 2_000]
    assert table["cp"].to_list() == [1.0, 1.0]
    assert table["start_ns"].to_list() == [1_234, 2_000]
    assert table["end_ns"].to_list() == [2_000, 2_500]


def test_f_rows_before_the_origin_are_dropped():
    # GIVEN a trace with rows before an explicit origin
    trace = trace_of(
        ("a", "a", 0, 5, "processing", 0, 1),
        ("a", "b", 5, 5, "control", 1, 0),
        ("a", "a", 5, 15, "processing", 1, 2),
    )
    # WHEN the origin is 10
    table = critical_participation(trace, 10, origin_ns=10)
    # THEN only the part of the activity after 10 remains, on the only path
    # (the window ends at the trace's last event, 15)
    assert table.select("edge_index", "start_ns", "end_ns", "cp").rows() == [
        (2, 10, 15, 1.0)
    ]


# --------------------------------------------------------------------------
# (g) clock noise
# --------------------------------------------------------------------------


def test_g_message_received_before_it_was_sent():
    # GIVEN a message sent at 5 but stamped as received at 3
    trace = trace_of(
        ("a", "a", 0, 5, "processing", 0, 1),
        ("a", "b", 5, 3, "data", 1, 0),
        ("b", "b", 3, 10, "processing", 0, 1),
    )
    # WHEN CP is computed over [0, 10)
    table = critical_participation(trace, 10)
    stats = snapshot_stats(trace, 10)
    # THEN the message weighs 0, the one path weighs 12 ns, CP still sums to 1
    assert table["weight_ns"].to_list() == [5, 0, 7]
    assert cps(table) == approx(["5/12", 0, "7/12"])
    assert stats["spans_window"].to_list() == [False]
    assert stats["log10_paths"].to_list() == [0.0]


# --------------------------------------------------------------------------
# (h) bad windows
# --------------------------------------------------------------------------


@pytest.mark.parametrize("window_ns", [0, -5, 1.5, "1s", None])
def test_h_bad_window_is_refused_naming_it(window_ns):
    # GIVEN a valid trace
    trace = trace_of(("a", "a", 0, 5, "processing"))
    # WHEN CP is asked for with a bad window
    # THEN a ValueError names the value
    for function in (critical_participation, snapshot_stats):
        with pytest.raises(ValueError, match="window_ns") as err:
            function(trace, window_ns)
        assert repr(window_ns) in str(err.value)


def test_h_boolean_window_is_refused():
    # GIVEN a valid trace
    trace = trace_of(("a", "a", 0, 5, "processing"))
    # WHEN the window is a bool (an int subclass)
    # THEN it is refused rather than read as 1 ns
    with pytest.raises(ValueError, match="window_ns"):
        critical_participation(trace, True)


def test_h_fractional_origin_is_refused():
    # GIVEN a valid trace
    trace = trace_of(("a", "a", 0, 5, "processing"))
    # WHEN the origin is not an integer
    # THEN it is refused rather than truncated
    with pytest.raises(ValueError, match=r"origin_ns.*1\.5"):
        critical_participation(trace, 5, origin_ns=1.5)


@pytest.mark.parametrize("origin_ns", [None, 100])
def test_no_piece_gives_an_empty_table(origin_ns):
    # GIVEN an empty trace, or one whose rows all lie before the origin
    trace = (
        trace_of(("a", "a", 0, 5, "processing"))
        if origin_ns
        else sparktrail.pag.trace.empty_trace()
    )
    # WHEN CP is computed
    table = critical_participation(trace, 10, origin_ns=origin_ns)
    # THEN no window is listed
    assert table.height == 0
    assert snapshot_stats(trace, 10, origin_ns=origin_ns).height == 0


# --------------------------------------------------------------------------
# overflow: thousands of barriers in one window
# --------------------------------------------------------------------------


def barrier_trace(workers: int, rounds: int) -> tuple[pl.DataFrame, list[int], int]:
    """Rounds of processing (d_r = 1 + r % 3 ns on every worker), each ended
    by a barrier where every worker sends control to every other worker,
    then a final 1 ns of processing. Events of round r: processing from seq
    2r to the send at seq 2r+1; messages arrive at seq 2r+2, where the next
    round starts. Every start-to-end path picks one of 7 receivers per
    barrier: N = workers * (workers - 1) ** rounds.

    Returns the trace, the duration per round, and the window length.
    """
    d = np.array([1 + r % 3 for r in range(rounds)] + [1], dtype=np.int64)
    ends = np.cumsum(d)
    starts = ends - d
    names = np.array([f"exec-{i}" for i in range(workers)])
    k = np.arange(rounds + 1)
    proc = pl.DataFrame(
        {
            "src_worker": np.tile(names, rounds + 1),
            "dst_worker": np.tile(names, rounds + 1),
            "start_ns": np.repeat(starts, workers),
            "end_ns": np.repeat(ends, workers),
            "activity": "processing",
            "src_seq": np.repeat(2 * k, workers),
            "dst_seq": np.repeat(2 * k + 1, workers),
        }
    )
    a, b = np.meshgrid(np.arange(workers), np.arange(workers), indexing="ij")
    pairs = a != b
    a, b = a[pairs], b[pairs]
    n_pairs = len(a)
    r = np.repeat(np.arange(rounds), n_pairs)
    msgs = pl.DataFrame(
        {
            "src_worker": np.tile(names[a], rounds),
            "dst_worker": np.tile(names[b], rounds),
            "start_ns": ends[r],
            "end_ns": ends[r],
            "activity": "control",
            "src_seq": 2 * r + 1,
            "dst_seq": 2 * r + 2,
        }
    )
    return pl.concat([proc, msgs]), d.tolist(), int(ends[-1])


def test_overflow_2000_barriers_in_one_window():
    # GIVEN 8 workers and 2,000 all-to-all barriers in one window
    workers, rounds = 8, 2_000
    trace, d, span = barrier_trace(workers, rounds)
    # WHEN CP is computed over the whole trace
    table = critical_participation(trace, span, origin_ns=0)
    stats = snapshot_stats(trace, span, origin_ns=0)
    # THEN N = 8 * 7**2000 (far beyond float64) is reported in log10
    assert stats.height == 1
    log10_n = math.log10(workers) + rounds * math.log10(workers - 1)
    assert log10_n > 308
    assert stats["log10_paths"][0] == pytest.approx(log10_n, rel=1e-9)
    assert stats["spans_window"][0] is True
    # AND CP is finite and sums to 1
    cp = table["cp"].to_numpy()
    assert np.isfinite(cp).all()
    assert cp.sum() == pytest.approx(1.0, abs=1e-9)
    # AND by symmetry each worker's processing in round r has d_r / (8 * span)
    proc = table.filter(pl.col("activity") == "processing")
    per_round = proc.group_by("start_ns").agg(
        pl.col("cp").min().alias("lo"), pl.col("cp").max().alias("hi")
    )
    assert per_round.height == rounds + 1
    expected = {
        s: dur / (workers * span)
        for s, dur in zip(np.cumsum([0, *d[:-1]]), d, strict=True)
    }
    for start, lo, hi in per_round.iter_rows():
        assert lo == pytest.approx(expected[start], rel=1e-9)
        assert hi == pytest.approx(lo, rel=1e-9)
    assert (table.filter(pl.col("activity") == "control")["cp"] == 0.0).all()


def test_barriers_match_the_exact_integer_reference():
    # GIVEN 8 workers and 60 barriers (N = 8 * 7**60, about 10**51.6)
    trace, _, span = barrier_trace(8, 60)
    # WHEN the code and the exact reference compute CP
    table = critical_participation(trace, span, origin_ns=0)
    [window] = snapshots(trace, span, 0)
    # THEN the counts are those of the model and every CP agrees to 1e-12
    assert window.n_paths == 8 * 7**60
    expected = cp_table([window])
    got = dict(
        zip(
            zip(table["window_start_ns"], table["edge_index"], strict=True),
            table["cp"],
            strict=True,
        )
    )
    assert got.keys() == expected.keys()
    worst = max(abs(got[k] - float(v)) for k, v in expected.items())
    assert worst <= 1e-12
    log10 = snapshot_stats(trace, span, 0)["log10_paths"][0]
    assert log10 == pytest.approx(math.log10(window.n_paths), rel=1e-12)


def test_f_last_instant_opens_no_window_of_its_own():
    # GIVEN 8 ns of work ending in a message at t=8, the trace's last event
    trace = trace_of(
        ("a", "a", 0, 8, "processing", 0, 1),
        ("a", "b", 8, 8, "control", 1, 1),
    )
    # WHEN it is cut into 4 ns windows
    table = critical_participation(trace, 4, origin_ns=0)
    # THEN the boundary message lies only in [4, 8]: no pathless window [8, 12)
    assert table.select("window_start_ns", "edge_index").rows() == [
        (0, 0),
        (4, 0),
        (4, 1),
    ]
    assert table["cp"].to_list() == approx([1, 1, 0])


def test_f_boundary_instant_joins_an_existing_later_window():
    # GIVEN the same message, and work on b after it
    trace = trace_of(
        ("a", "a", 0, 8, "processing", 0, 1),
        ("a", "b", 8, 8, "control", 1, 1),
        ("b", "b", 8, 12, "processing", 1, 2),
    )
    # WHEN it is cut into 4 ns windows
    table = critical_participation(trace, 4, origin_ns=0)
    # THEN the message belongs to both [4, 8] and [8, 12]
    assert table.filter(pl.col("edge_index") == 1)["window_start_ns"].to_list() == [
        4,
        8,
    ]
    sums = table.group_by("window_start_ns", maintain_order=True).agg(
        pl.col("cp").sum()
    )
    assert sums["cp"].to_list() == approx([1, 1, 1])


def test_a_window_computed_from_its_rows_alone_matches_the_whole_trace():
    # GIVEN a trace from 3 to 27 with nothing running between 12 and 23
    trace = trace_of(
        ("a", "a", 3, 12, "processing", 0, 1),
        ("a", "b", 12, 12, "control", 1, 0),
        ("b", "b", 12, 15, "gc", 0, 1),
        ("b", "b", 23, 27, "processing", 1, 2),
    )
    with pytest.warns(SnapshotWarning):
        whole = critical_participation(trace, 10, 0)
    touching = trace.filter(pl.col("end_ns") >= 20)
    # WHEN window [20, 30) is computed from only the rows that touch it
    with pytest.warns(SnapshotWarning):
        part = critical_participation(touching, 10, 20, extent_ns=(3, 27))
    alone = critical_participation(touching, 10, 20)
    # THEN with the whole trace's extent it equals the whole trace's window
    # (no path starts at 20: CP 0); from its own rows' extent it would not
    expected = whole.filter(pl.col("window_start_ns") == 20)
    columns = ("start_ns", "end_ns", "activity", "cp")
    assert part.select(columns).rows() == expected.select(columns).rows()
    assert part["cp"].sum() == 0.0
    assert alone["cp"].sum() == 1.0
