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
    assert "Give it 10 cores or slots" in str(hint["action"])
    assert "drains in 5 s" in str(hint["action"])
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


def test_batch_0s_start_up_is_no_planning_bound() -> None:
    # GIVEN a Kafka query whose batch 0 spent 3.5 s of 7 s in latestOffset
    # (the consumer's start-up), and one later batch 2 s planning, while
    # the others plan 5 ms of 400 ms
    took = [7000, 400, 400, 2400, 400, 400]
    stream = list(batches([(100, 1000)] * 6, trigger_ms=took))
    planned = [3500, 5, 5, 2000, 5, 5]
    for i, ms in enumerate(planned):
        durations = {"triggerExecution": took[i], "addBatch": took[i] - ms}
        stream[i] = StreamBatch(
            **{**stream[i].__dict__, "duration_ms": durations | {"latestOffset": ms}}
        )
    # THEN no planning_bound: the median batch after the first plans 5 ms
    # (the sums would say 50%: 2,020 of 4,000 ms)
    assert "planning_bound" not in hints_for(tuple(stream))["kind"].to_list()


def test_a_large_share_of_a_few_ms_is_no_planning_bound() -> None:
    # GIVEN batches of 40 ms, 20 ms of which are planning
    stream = batches(
        [(100, 1000)] * 6,
        trigger_ms=[40] * 6,
        durations={"addBatch": 20, "queryPlanning": 20},
    )
    # THEN no planning_bound: 50% of each trigger, but 20 ms a batch
    assert "planning_bound" not in hints_for(stream)["kind"].to_list()


def test_batches_that_grow_past_a_1s_trigger_are_a_stream_backlog() -> None:
    # GIVEN a 1 s trigger the first batches waited for, then batches of 17,
    # 19 and 21 s back to back, while the rates the progress reports keep up
    took = [400, 400, 400, 400, 400, 17_000, 19_000, 21_000]
    stream = list(batches([(1000, 1000)] * len(took), trigger_ms=took))
    at_ms = 1_795_000_000_000
    for i, start in enumerate(spark_starts(took, 1000, at_ms)):
        stream[i] = StreamBatch(**{**stream[i].__dict__, "timestamp_ns": start})
    hint = only(hints_for(tuple(stream)), "stream_backlog")
    evidence = json.loads(str(hint["evidence"]))
    # THEN the query falls behind: each batch longer than the last
    assert evidence["growing_batches"] == [5, 6, 7]
    assert evidence["trigger_interval_ns"] == S
    action = str(hint["action"])
    assert "took 17, 19, 21 s in batches 5..7 against a 1 s trigger" in action
    assert "each longer than the last" in action
    # AND the rate source states no backlog, nor do the rates: unknown
    assert "The backlog is unknown" in action
    assert "about 0 rows" not in action and "in 0 s" not in action


def test_a_query_that_waits_for_its_trigger_is_not_behind_for_growing_batches() -> None:
    # GIVEN batches of 200, 300, 400, 500 ms on a 1 s trigger: each waits
    took = [100, 200, 300, 400, 500]
    stream = list(batches([(1000, 1000)] * len(took), trigger_ms=took))
    # THEN no stream_backlog: they grow but fit the trigger
    assert "stream_backlog" not in hints_for(tuple(stream))["kind"].to_list()


def test_an_unreported_backlog_is_estimated_from_the_rates() -> None:
    # GIVEN a rate source (no latest offset: no backlog stated), 20,000
    # rows/s arriving and 12,000 processed over batches of 1.6 s
    stream = batches([(20_000, 12_000)] * 6, trigger_ms=[1600] * 6)
    hint = only(hints_for(stream), "stream_backlog")
    evidence = json.loads(str(hint["evidence"]))
    # THEN the backlog is estimated: 8,000 rows/s x 1.6 s x 5 batches
    assert evidence["backlog_estimated"] is True
    assert evidence["backlog_rows"] == 64_000
    assert "estimated from the input and processed rates" in str(hint["action"])
    assert "about 64,000 rows" in str(hint["action"])


def test_an_unknown_backlog_is_said_to_be_unknown() -> None:
    # GIVEN rates behind, but no trigger times and no offsets behind latest
    stream = tuple(
        StreamBatch(**{**b.__dict__, "duration_ms": None})
        for b in batches([(20_000, 12_000)] * 6)
    )
    hint = only(hints_for(stream), "stream_backlog")
    action = str(hint["action"])
    assert "The backlog is unknown" in action
    assert "about 0 rows" not in action and "drains in 0 s" not in action


def test_a_skew_on_a_query_that_falls_behind_is_named_its_cause() -> None:
    from sparktrail.pag.context import JobSpan
    from tests.summaries.test_over_time_hints import runs

    # GIVEN a hot partition that stays, in micro-batches 1..4 of 100 ms, of
    # a query that processes 12,000 of 20,000 rows/s arriving
    app = AppContext(
        master="local[6]",
        jobs=tuple(JobSpan(j, query_id="q-1", batch_id=j + 1) for j in range(4)),
        queries=(StreamQuery("q-1", "r-1", name="orders"),),
        batches=batches([(20_000, 12_000)] * 5, trigger_ms=[100] * 5),
    )
    trace = Trace(load_trace(runs([2, 2, 2, 2])).frame, app)
    hints = summarize(trace, 200 * MS).hints
    skew = hints.filter(pl.col("kind").is_in(["hotspot", "skew_unsplittable"]))
    assert len(skew) >= 1, hints.select("kind", "severity")
    row = skew.row(0, named=True)
    evidence = json.loads(str(row["evidence"]))
    # THEN its action says it is why the query falls behind, and the rate
    # after the fix: 12,000 / (1 - the share of the batches' time saved)
    action = str(row["action"])
    assert "This skew is why query 'orders' falls behind" in action
    assert evidence["processed_rate_after"] == pytest.approx(
        12_000 / (1 - row["saving_share"])
    )
    assert f"about {evidence['processed_rate_after']:,.0f} rows/s" in action


def test_a_small_state_is_no_state_skew() -> None:
    from tests.summaries.test_over_time_hints import kinds, runs

    # GIVEN partition 0 holding 70 of 120 state rows, its task the slowest
    assert "state_skew" not in kinds(runs([0, 0, 0], state=[70, 10, 10, 10, 10, 10]))
    # AND partition 0 holding 700 of 1,200, its task no slower than the
    # others (the time's hot partition is 3): small, and off the path
    state = [700, 100, 100, 100, 100, 100]
    assert "state_skew" not in kinds(runs([3, 3, 3], state=state))


def test_state_skew_on_the_critical_path_is_advisory() -> None:
    from tests.summaries.test_over_time_hints import runs

    state = [700, 100, 100, 100, 100, 100]
    hints = summarize(runs([0, 0, 0], state=state), 200 * MS).hints
    skew = only(hints, "state_skew")
    assert "Advisory: partition 0 of stage" in str(skew["action"])
    assert json.loads(str(skew["evidence"]))["on_critical_path"] is True


def test_planning_of_a_query_that_keeps_up_is_latency_not_a_bottleneck() -> None:
    # GIVEN a 2 s trigger whose batches (1.3 s, 0.5 s of it planning) all
    # end before the next tick: the query keeps up with its input
    took = [1300] * 8
    stream = list(
        batches(
            [(1000, 1000)] * len(took),
            trigger_ms=took,
            durations={"addBatch": 800, "queryPlanning": 500},
        )
    )
    for i, start in enumerate(spark_starts(took, 2000, 1_795_000_000_000)):
        stream[i] = StreamBatch(**{**stream[i].__dict__, "timestamp_ns": start})
    hint = only(hints_for(tuple(stream)), "planning_bound")
    evidence = json.loads(str(hint["evidence"]))
    # THEN the planning is found, but it is latency: kept as info, with
    # the interval the batches fit in, and no advice to lengthen it
    assert evidence["keeps_up"] is True
    assert evidence["trigger_interval_ns"] == 2000 * MS
    assert hint["severity"] == "info"
    assert "a longer trigger would add latency" in str(hint["action"])
