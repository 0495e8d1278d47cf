"""moving_hotspot and state_skew over an operator's runs."""

from __future__ import annotations

import json

import polars as pl
import pytest

from sparktrail import summarize
from tests.summaries.builders import MS, Trace, with_cpu_shares

SLOTS = 6


def runs(
    hot: list[int], *, state: list[int] | None = None, two_slots: bool = False
) -> pl.DataFrame:
    """One stage per run of the same join, one after the other: six tasks
    in parallel, partition ``hot[i]`` of run ``i`` with 10x the records and
    5x the time. ``two_slots``: five tasks, the hot one on slot 0 and the
    others one after another on slot 1."""
    t = Trace()
    start = 0.0
    for stage, hot_partition in enumerate(hot):
        for p in range(SLOTS - two_slots):
            is_hot = p == hot_partition
            cold_before = sum(1 for q in range(p) if q != hot_partition)
            worker, at = (
                (f"exec-1/{int(not is_hot)}", 0 if is_hot else 10 * cold_before)
                if two_slots
                else (f"exec-1/{p}", 0)
            )
            t.task(
                worker,
                start + at,
                [("processing", 50 if is_hot else 10)],
                stage=stage,
                job=stage,
                partition=p,
                records=500 if is_hot else 50,
                name="join at App.scala:20",
            )
        start += 50
    frame = t.frame()
    if state is not None:
        rows = pl.Series("state_rows", state * len(hot), dtype=pl.Int64)
        tasks = pl.DataFrame(
            {"task_id": pl.int_range(len(rows), eager=True), "s": rows}
        )
        frame = (
            frame.join(tasks, on="task_id", how="left")
            .with_columns(
                state_rows=pl.when(pl.col("activity") == "processing").then(pl.col("s"))
            )
            .drop("s")
        )
    return frame


def kinds(frame: pl.DataFrame) -> list[str]:
    return summarize(frame, 50 * MS * 4).hints["kind"].to_list()


def test_a_hot_partition_that_moves_is_one_moving_hotspot_hint() -> None:
    # GIVEN four runs of one join whose hot partition goes 1, 1, 3, 4
    hints = summarize(runs([1, 1, 3, 4]), 200 * MS).hints
    moving = hints.filter(pl.col("kind") == "moving_hotspot")
    # THEN one hint names the operator, the partitions and the moves
    assert len(moving) == 1
    evidence = json.loads(moving["evidence"][0])
    assert evidence["hot_partitions"] == [1, 1, 3, 4]
    assert evidence["moves"] == 2 and evidence["runs"] == 4
    assert "salt the key" in moving["action"][0].lower()
    # AND its saving is the replay of splitting each run's hot partition
    assert moving["predicted_saving_ns"][0] > 0
    # AND no static split of one run's partition is advised beside it
    assert not hints["kind"].is_in(["hotspot", "skew_unsplittable"]).any()


def test_a_hot_partition_that_stays_is_a_static_hotspot() -> None:
    found = kinds(runs([2, 2, 2, 2]))
    assert "moving_hotspot" not in found
    assert {"hotspot", "skew_unsplittable"} & set(found)


def test_one_state_partition_with_most_state_rows_is_state_skew() -> None:
    # GIVEN runs whose partition 0 holds 700 of 1,200 state rows each time
    hints = summarize(runs([0, 0, 0], state=[700, 100, 100, 100, 100, 100]), 200 * MS)
    skew = hints.hints.filter(pl.col("kind") == "state_skew")
    # THEN one (merged) state_skew hint names that partition and its share
    assert len(skew) == 1
    assert skew["partition"][0] == 0
    evidence = json.loads(skew["evidence"][0])
    assert evidence["state_share"] == pytest.approx(700 / 1200, abs=1e-6)
    assert skew["occurrences"][0] == 3
    assert "fixed by the checkpoint" in skew["action"][0]


def test_even_state_is_not_state_skew() -> None:
    assert "state_skew" not in kinds(runs([0, 0, 0], state=[100] * SLOTS))


def test_a_streaming_querys_merged_hint_names_its_batches_and_busy_time() -> None:
    from sparktrail.pag.context import AppContext, JobSpan
    from sparktrail.pag.streams import StreamBatch
    from sparktrail.pag.trace import Trace as WithContext
    from sparktrail.pag.trace import load_trace

    # GIVEN the state-skewed runs as micro-batches 10, 11, 12 of a query
    # whose triggers took 100 ms each, after its first batch 9 (start-up:
    # not part of its busy time)
    frame = runs([0, 0, 0], state=[700, 100, 100, 100, 100, 100])
    app = AppContext(
        jobs=tuple(JobSpan(j, query_id="q", batch_id=10 + j) for j in range(3)),
        batches=tuple(
            StreamBatch("q", batch_id=9 + j, duration_ms={"triggerExecution": 100})
            for j in range(4)
        ),
    )
    hints = summarize(WithContext(load_trace(frame).frame, app), 200 * MS).hints
    skew = hints.filter(pl.col("kind") == "state_skew").row(0, named=True)
    evidence = json.loads(skew["evidence"])
    # THEN it names the first and last batch
    assert (evidence["first_batch"], evidence["last_batch"]) == (10, 12)
    assert "micro-batches 10..12" in skew["action"]
    # AND its saving is a share of the query's 300 ms of batches
    assert evidence["busy_ns"] == 300 * MS
    assert skew["saving_share"] == pytest.approx(
        skew["predicted_saving_ns"] / (300 * MS)
    )


def test_a_static_hotspot_in_a_streaming_query_is_a_share_of_its_batches() -> None:
    from sparktrail.pag.context import AppContext, JobSpan
    from sparktrail.pag.streams import StreamBatch
    from sparktrail.pag.trace import Trace as WithContext
    from sparktrail.pag.trace import load_trace

    # GIVEN a hot partition that stays, in micro-batches 1..4 of 100 ms
    # triggers (batch 0, the query's start-up, ran no stage of these)
    frame = runs([2, 2, 2, 2])
    app = AppContext(
        jobs=tuple(JobSpan(j, query_id="q", batch_id=j + 1) for j in range(4)),
        batches=tuple(
            StreamBatch("q", batch_id=j, duration_ms={"triggerExecution": 100})
            for j in range(5)
        ),
    )
    plain = summarize(frame, 200 * MS).hints
    streaming = summarize(WithContext(load_trace(frame).frame, app), 200 * MS).hints
    # THEN the same static findings, each saving a share of the 400 ms the
    # query's batches after the first took rather than of the run's wall time
    static = pl.col("kind").is_in(["hotspot", "skew_unsplittable"])
    before = plain.filter(static).sort("kind", "stage_id")
    after = streaming.filter(static).sort("kind", "stage_id")
    assert len(after) > 0
    assert after["predicted_saving_ns"].to_list() == pytest.approx(
        before["predicted_saving_ns"].to_list()
    )
    assert after["saving_share"].to_list() == pytest.approx(
        (after["predicted_saving_ns"] / (400 * MS)).to_list()
    )


def test_a_moving_hotspots_splits_read_spark_cpu_times() -> None:
    # GIVEN the same runs with Spark's CPU times: each hot task at 90% CPU,
    # alone for 40 of its 50 ms, the others at 30% beside each other
    frame = runs([1, 1, 3, 4])
    share = pl.when(pl.col("records").max().over("task_id") == 500).then(0.9)

    def with_cpu(f: pl.DataFrame) -> pl.DataFrame:
        return with_cpu_shares(f, share.otherwise(0.3))

    def saving(f: pl.DataFrame) -> float:
        hints = summarize(f, 200 * MS).hints.filter(pl.col("kind") == "moving_hotspot")
        return float(hints["predicted_saving_ns"][0])

    # WHEN the hints are computed  THEN on six slots each run's halves leave
    # cores free (2 x 0.9 <= 5): the same saving as without CPU times
    assert saving(with_cpu(frame)) == saving(frame)
    # AND on two slots, where each hot task ran alone for 10 of its 50 ms
    # and four cold ones (30%) ran beside it, the halves are slowed (1.4x):
    # less is saved than without CPU times
    two = runs([1, 1, 3, 4], two_slots=True)
    assert saving(with_cpu(two)) < saving(two)
