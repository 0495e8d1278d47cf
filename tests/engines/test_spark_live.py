"""The live pipeline on Spark stores the polars engine's windows and summaries.

The integration tests run on the shared local[2] session of
``tests/conftest.py``; the others need no Spark.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

from sparktrail.cli import main
from sparktrail.engines.online import OnlinePipeline, TraceFileWarning
from sparktrail.engines.spark_live import SparkLivePipeline, _decode
from sparktrail.engines.store import WindowStore, store_dir
from sparktrail.pag import write_trace
from sparktrail.pag.schemas import TRACE
from sparktrail.pag.trace import validate_trace
from sparktrail.synthetic import profile_trace
from tests.engines.test_online import chunks, land
from tests.summaries.compare import assert_same_summaries

WINDOW = 1_000_000  # ns
LATENESS = 600_000
GAP = 500_000  # a driver-only stretch between two jobs, in one window


def driver_gap_trace() -> pl.DataFrame:
    """A barrier trace cut at a round start, its second half moved ``GAP``
    later and the gap filled by a driver row: the driver row is critical in
    the windows it covers, between two jobs: the driver hint reads its row
    back from the window's rows."""
    trace = profile_trace(1500, workers=4)
    barriers = sorted(set(trace.filter(pl.col("activity") == "control")["end_ns"]))
    # A round start 0.2 windows into a window: both jobs touch the window.
    middle = barriers[len(barriers) // 2] // WINDOW * WINDOW + WINDOW // 5
    cut = min(barriers, key=lambda b: abs(b - middle))
    late = pl.col("start_ns") >= cut
    moved = trace.with_columns(
        *(
            pl.when(late).then(pl.col(c) + GAP).otherwise(pl.col(c)).alias(c)
            for c in ("start_ns", "end_ns")
        ),
        pl.when(late).then(2).otherwise(1).alias("job_id"),  # the gap is between
    )
    # Workers report to the driver at the cut; it answers at the gap's end.
    workers = sorted(set(trace["src_worker"]))
    driver = pl.DataFrame(
        {
            "src_worker": ["driver", *workers, *["driver"] * len(workers)],
            "dst_worker": ["driver", *["driver"] * len(workers), *workers],
            "start_ns": [cut] * (1 + len(workers)) + [cut + GAP] * len(workers),
            "end_ns": [cut + GAP] + [cut] * len(workers) + [cut + GAP] * len(workers),
            "activity": ["driver"] + ["control"] * 2 * len(workers),
        }
    )
    return pl.concat([moved, driver], how="diagonal_relaxed").sort("start_ns")


def assert_same_windows(got: list[Any], want: list[Any]) -> None:
    assert [w.start_ns for w in got] == [w.start_ns for w in want]
    for a, b in zip(got, want, strict=True):
        assert_frame_equal(a.cp, b.cp, check_exact=False, rel_tol=1e-9, abs_tol=1e-9)
        assert_same_summaries(a.summaries, b.summaries)


@pytest.mark.integration
def test_the_spark_engine_stores_the_polars_engines_windows(
    tmp_path: Path, spark: Any
) -> None:
    # GIVEN the same files landing in two directories: half of the trace
    # and an unreadable file, then (after a restart of the Spark pipeline)
    # the rest and a copy of the first chunk, which arrives late
    parts = chunks(driver_gap_trace(), 4)
    dirs = {"polars": tmp_path / "polars", "spark": tmp_path / "spark"}
    for d in dirs.values():
        land(d, pl.concat(parts[:2]), 0)
        (d / "part-000b.arrow").write_bytes(b"not arrow at all")
    polars = OnlinePipeline(dirs["polars"], WINDOW, LATENESS)
    on_spark = SparkLivePipeline(dirs["spark"], WINDOW, LATENESS, spark=spark)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceFileWarning)
        want, got = polars.poll(), on_spark.poll()
    assert want, "some windows close before the restart"
    restarted = SparkLivePipeline(dirs["spark"], WINDOW, LATENESS, spark=spark)
    for d in dirs.values():
        land(d, pl.concat(parts[2:]), 1)
        land(d, parts[0], 2)
    # WHEN both close every window
    want += polars.poll(final=True)
    got += restarted.poll(final=True)
    # THEN they closed the same windows with the same CP rows and summaries
    assert len(want) > 3
    assert_same_windows(got, want)
    # ... the driver row was critical, and its hint read it back
    assert any(w.summaries.hints["kind"].eq("driver_bound").any() for w in got)
    # ... and counted the same late rows and unreadable file
    assert restarted.late_rows == polars.late_rows == len(parts[0])
    assert restarted.corrupt_files == polars.corrupt_files == 1
    # ... and each window is in the store once
    store = WindowStore(store_dir(dirs["spark"]))
    assert store.window_starts() == [w.start_ns for w in want]


@pytest.mark.integration
def test_live_engine_spark_once_final_fills_the_store_as_polars_does(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN one trace in two directories
    trace = profile_trace(600, workers=4)
    for name in ("polars", "spark"):
        write_trace(trace, tmp_path / name / "part-000.arrow")
    args = ["--window", "500us", "--lateness", "1ms", "--once", "--final"]
    # WHEN live runs on each engine
    assert main(["live", str(tmp_path / "polars"), *args]) == 0
    assert main(["live", str(tmp_path / "spark"), *args, "--engine", "spark"]) == 0
    # THEN both stores hold the same windows
    starts = {
        name: WindowStore(store_dir(tmp_path / name)).window_starts()
        for name in ("polars", "spark")
    }
    assert starts["spark"] == starts["polars"]
    assert len(starts["spark"]) > 1
    assert f"{len(starts['spark'])} window(s) closed" in capsys.readouterr().err


def test_a_store_of_the_polars_engine_is_refused(tmp_path: Path) -> None:
    # GIVEN a store written by the polars engine
    land(tmp_path, profile_trace(300, workers=4), 0)
    OnlinePipeline(tmp_path, WINDOW, LATENESS).poll()
    # WHEN the Spark engine opens it THEN it refuses, naming the other engine
    # (before a Spark session is needed)
    with pytest.raises(ValueError, match="written by the polars engine"):
        SparkLivePipeline(tmp_path, WINDOW, LATENESS)


def test_the_polars_engine_refuses_a_spark_store(tmp_path: Path) -> None:
    WindowStore(store_dir(tmp_path)).write_checkpoint({"version": "spark-1"})
    with pytest.raises(ValueError, match="written by the spark engine"):
        OnlinePipeline(tmp_path, WINDOW, LATENESS)


def test_files_decode_to_trace_rows_or_one_marker_row() -> None:
    # GIVEN the bytes of a trace file, of an empty one and of a broken one
    trace = profile_trace(60, workers=2)
    good, empty = io.BytesIO(), io.BytesIO()
    trace.write_ipc(good)
    trace.clear().write_ipc(empty)
    batch = pa.RecordBatch.from_pydict(
        {
            "path": ["a.arrow", "b.arrow", "c.arrow"],
            "content": [good.getvalue(), empty.getvalue(), b"broken"],
        }
    )
    # WHEN they are decoded as on an executor
    out = pl.from_arrow(pa.Table.from_batches(list(_decode(iter([batch])))))
    assert isinstance(out, pl.DataFrame)
    # THEN the good file gives its rows, numbered, and the others a marker
    rows = out.filter(pl.col("_path") == "a.arrow")
    assert rows["_file_row"].to_list() == list(range(len(trace)))
    assert rows.select(*TRACE).equals(validate_trace(trace).select(*TRACE))
    markers = out.filter(pl.col("_file_row").is_null())
    assert markers["_path"].to_list() == ["b.arrow", "c.arrow"]
    assert markers["_error"][0] is None
    assert "c.arrow" in markers["_error"][1]


def test_a_store_whose_spark_checkpoint_is_gone_is_refused(tmp_path: Path) -> None:
    # GIVEN a checkpoint that applied a micro-batch, but no Spark stream state
    checkpoint = {"version": "spark-1", "window_ns": WINDOW, "last_batch": 0}
    WindowStore(store_dir(tmp_path)).write_checkpoint(checkpoint)
    # WHEN the Spark engine opens it THEN it refuses rather than skip every file
    with pytest.raises(ValueError, match=r"stream checkpoint .* is gone"):
        SparkLivePipeline(tmp_path, WINDOW, LATENESS)
