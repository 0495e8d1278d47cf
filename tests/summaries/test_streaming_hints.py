"""stream_backlog, trigger_bound and planning_bound on hand-made progress."""

from __future__ import annotations

import json

import polars as pl
import pytest

from sparktrail import summarize
from sparktrail.pag.context import AppContext, ExecutorLife
from sparktrail.pag.streams import StreamBatch, StreamQuery, StreamSource
from sparktrail.pag.trace import Trace, load_trace
from tests.summaries.builders import MS, balanced

S = 1_000_000_000


def batches(
    rates: list[tuple[float, float]],
    *,
    trigger_ms: list[int] | None = None,
    spacing_ns: int = S,
    durations: dict[str, int] | None = None,
    backlog: int | None = None,
) -> tuple[StreamBatch, ...]:
    """One batch per (input, processed) rate pair, a trigger apart."""
    out = []
    for i, (inp, done) in enumerate(rates):
        took = trigger_ms[i] if trigger_ms else 500
        out.append(
            StreamBatch(
                "q-1",
                run_id="r-1",
                batch_id=i,
                timestamp_ns=i * spacing_ns,
                num_input_rows=int(inp),
                input_rows_per_second=inp,
                processed_rows_per_second=done,
                duration_ms={"triggerExecution": took, "addBatch": took}
                | (durations or {}),
                sources=(StreamSource("rate", backlog=backlog),),
            )
        )
    return tuple(out)


def hints_for(stream: tuple[StreamBatch, ...], cores: int = 4) -> pl.DataFrame:
    app = AppContext(
        master="spark://m:7077",
        executors=(ExecutorLife("1", cores=cores),),
        queries=(StreamQuery("q-1", "r-1", name="orders"),),
        batches=stream,
    )
    trace = Trace(load_trace(balanced(1, cores, 100)).frame, app)
    return summarize(trace, 100 * MS).hints


def only(hints: pl.DataFrame, kind: str) -> dict[str, object]:
    rows = hints.filter(pl.col("kind") == kind)
    assert len(rows) == 1, hints.select("kind", "severity")
    return rows.row(0, named=True)


def test_a_query_below_its_input_rate_gets_stream_backlog_with_pi() -> None:
    # GIVEN 6 batches of 20,000 rows/s arriving, 12,000 processed, 4 cores,
    # the source 50,000 offsets behind at the end
    hint = only(
        hints_for(
            batches([(20_000, 12_000)] * 6, trigger_ms=[1600] * 6, backlog=50_000)
        ),
        "stream_backlog",
    )
    evidence = json.loads(str(hint["evidence"]))
    # THEN pi: 3,000 rows/s a slot, 20,000 / (0.7 x 3,000) -> 10 slots
    assert evidence["rate_per_slot"] == pytest.approx(3000)
    assert evidence["pi"] == 10
    # AND the backlog drains at 10 x 3,000 - 20,000 = 10,000 rows/s: 5 s
    assert evidence["drain_s"] == pytest.approx(5.0)
    assert hint["severity"] == "high"  # 40% of the input falls behind
    assert "pi = 10 slots" in str(hint["action"])
    assert "'orders'" in str(hint["action"])


def test_a_query_that_keeps_up_gets_no_stream_hint() -> None:
    hints = hints_for(batches([(20_000, 26_000)] * 6))
    assert (
        not hints["kind"]
        .is_in(["stream_backlog", "trigger_bound", "planning_bound"])
        .any()
    )


def test_two_slow_batches_of_six_are_not_a_backlog() -> None:
    rates = [(20_000, 30_000)] * 4 + [(20_000, 10_000)] * 2
    assert "stream_backlog" not in hints_for(batches(rates))["kind"].to_list()


def test_batches_longer_than_their_trigger_are_trigger_bound() -> None:
    # GIVEN a 1 s trigger (the first batches waited for it), then batches
    # of 1.5 s that start back to back
    took = [400, 400, 400, 1500, 1500, 1500, 1500, 1500]
    stream = list(batches([(1000, 1000)] * 8, trigger_ms=took))
    start = 3 * S
    for i in range(3, 8):
        stream[i] = StreamBatch(**{**stream[i].__dict__, "timestamp_ns": start})
        start += 1_500_000_000
    hint = only(hints_for(tuple(stream)), "trigger_bound")
    evidence = json.loads(str(hint["evidence"]))
    assert evidence["trigger_interval_ns"] == S
    assert evidence["batches_late"] == 5
    assert "took longer than its trigger interval" in str(hint["action"])


def spark_starts(took: list[int], trigger_ms: int, at_ms: int) -> list[int]:
    """Starts (ns) as Spark's processing-time trigger gives them: the next
    tick after the previous start, or at once (5 ms on) after a late batch."""
    starts = [at_ms]
    for ms in took[:-1]:
        tick = (starts[-1] // trigger_ms + 1) * trigger_ms
        starts.append(max(tick + 3, starts[-1] + ms + 5))
    return [s * MS for s in starts]


@pytest.mark.parametrize("trigger_ms", [1000, 2500])
def test_late_batches_among_punctual_ones_are_trigger_bound(trigger_ms: int) -> None:
    # GIVEN a processing-time trigger and batches mostly longer than it:
    # the late ones start right after their predecessor, the others wait
    factors = (0.4, 2.5, 1.7, 0.3, 1.3, 2.2, 0.6, 1.5, 0.2, 0.5)
    took = [int(trigger_ms * f) for f in factors]
    stream = list(batches([(1000, 1000)] * len(took), trigger_ms=took))
    at_ms = 1_795_000_000_000  # a start on a tick, as Spark's are
    for i, start in enumerate(spark_starts(took, trigger_ms, at_ms)):
        stream[i] = StreamBatch(**{**stream[i].__dict__, "timestamp_ns": start})
    hint = only(hints_for(tuple(stream)), "trigger_bound")
    evidence = json.loads(str(hint["evidence"]))
    # THEN the interval is the trigger's, read off the punctual starts
    assert evidence["trigger_interval_ns"] == trigger_ms * MS
    assert evidence["batches_late"] == 5


def test_batches_back_to_back_do_not_show_a_trigger() -> None:
    # GIVEN batches that each start as the previous one ends (Spark's
    # default trigger, or a trigger every batch outlasts): no interval
    took = [3500, 6600, 10_000, 17_000, 4200, 6800]
    stream = list(batches([(1000, 1000)] * len(took), trigger_ms=took))
    start = 0
    for i, ms in enumerate(took):
        stream[i] = StreamBatch(**{**stream[i].__dict__, "timestamp_ns": start})
        start += (ms + 10) * MS
    # THEN no trigger_bound: the interval cannot be known
    assert "trigger_bound" not in hints_for(tuple(stream))["kind"].to_list()


def test_planning_most_of_the_trigger_is_planning_bound() -> None:
    stream = batches(
        [(100, 1000)] * 5,
        trigger_ms=[1000] * 5,
        durations={"addBatch": 300, "queryPlanning": 500, "latestOffset": 200},
    )
    hint = only(hints_for(stream), "planning_bound")
    evidence = json.loads(str(hint["evidence"]))
    assert evidence["planning_share"] == pytest.approx(0.7)
    # the saving is the planning time itself, batch 0 (a start-up) aside:
    # 4 x 700 ms
    assert hint["predicted_saving_ns"] == pytest.approx(2.8e9)
    assert "queryPlanning" in str(hint["action"])


def test_progress_without_rates_fires_nothing() -> None:
    # Spark 2.0 logs: no rates, no durations
    stream = tuple(StreamBatch("q-1", batch_id=i) for i in range(5))
    hints = hints_for(stream)
    assert not hints["kind"].is_in(["stream_backlog", "trigger_bound"]).any()
