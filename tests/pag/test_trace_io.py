"""Trace files: round trips through write_trace/read_trace, and refusals."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from sparktrail.pag import (
    SnapshotWarning,
    TraceError,
    critical_participation,
    read_trace,
    write_trace,
)
from sparktrail.pag.trace import TRACE_COLUMNS, trace_file_names, trace_files


def sample(n: int = 3, offset: int = 0) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "src_worker": ["exec-1/0"] * n,
            "dst_worker": ["exec-1/0"] * n,
            "start_ns": [offset + 10 * i for i in range(n)],
            "end_ns": [offset + 10 * i + 10 for i in range(n)],
            "activity": (["processing", "gc", "waiting"] * n)[:n],
            "src_seq": list(range(n)),
            "dst_seq": list(range(1, n + 1)),
        }
    )


def write_raw(table: pa.Table, path, metadata: dict | None = None, stream=False):
    """Write an Arrow IPC file as a foreign producer would (no validation)."""
    if metadata is not None:
        table = table.replace_schema_metadata(metadata)
    with pa.OSFile(str(path), "wb") as sink:
        opener = ipc.new_stream if stream else ipc.new_file
        with opener(sink, table.schema) as writer:
            writer.write_table(table)
    return path


# --------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------


def test_file_round_trip_keeps_rows_types_and_extra_columns(tmp_path):
    # GIVEN a trace with an extra producer column
    trace = sample().with_columns(pl.lit("SUCCESS").alias("status"))
    # WHEN it is written and read back
    written = write_trace(trace, tmp_path / "sub" / "t.arrow")
    back = read_trace(written)
    # THEN rows, canonical types and the extra column survive
    assert written == tmp_path / "sub" / "t.arrow"
    assert back.columns == [*TRACE_COLUMNS, "status"]
    assert dict(back.schema) == {**TRACE_COLUMNS, "status": pl.String()}
    for name in trace.columns:
        assert back[name].to_list() == trace[name].to_list(), name
    # AND no temporary file is left behind
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["t.arrow"]
    # AND the schema version is recorded
    with pa.memory_map(str(written)) as source:
        meta = ipc.open_file(source).schema.metadata
    assert meta[b"sparktrail.schema_version"] == b"1"


def test_directory_round_trip_reads_files_in_name_order(tmp_path):
    # GIVEN three trace files in a directory, and a file of another kind
    write_trace(sample(3, offset=700), tmp_path / "part-2.arrow")
    write_trace(sample(3, offset=0), tmp_path / "part-0.arrow")
    write_trace(
        sample(3, offset=100).with_columns(pl.lit(1).alias("attempt")),
        tmp_path / "part-1.arrow",
    )
    (tmp_path / "notes.txt").write_text("not a trace")
    # WHEN the directory is read
    back = read_trace(tmp_path)
    # THEN all rows come in file-name order, extra columns kept (null elsewhere)
    assert back["start_ns"].to_list() == [0, 10, 20, 100, 110, 120, 700, 710, 720]
    assert back["attempt"].to_list() == [None] * 3 + [1] * 3 + [None] * 3
    # AND a directory path works for critical_participation too
    with pytest.warns(SnapshotWarning):  # the waiting-only windows
        table = critical_participation(tmp_path, 20, origin_ns=0)
    first = table.filter(pl.col("window_start_ns") == 0)
    assert first["cp"].to_list() == pytest.approx([0.5, 0.5])


def test_hidden_file_being_written_is_ignored(tmp_path):
    # GIVEN a complete trace and a half-written hidden temporary file
    write_trace(sample(), tmp_path / "t.arrow")
    (tmp_path / ".t2.arrow.123.tmp.arrow").write_bytes(b"ARROW1\x00\x00garbage")
    (tmp_path / ".partial.arrow").write_bytes(b"ARROW1")
    # WHEN the directory is read
    back = read_trace(tmp_path)
    # THEN only the complete file is read
    assert back.height == 3


def test_files_in_hidden_directories_are_not_trace(tmp_path):
    # GIVEN a trace in a subdirectory, and trace-named files in hidden ones
    # (the live store under .sparktrail, a checkpoint folder)
    write_trace(sample(), tmp_path / "app" / "t.arrow")
    write_trace(sample(), tmp_path / ".sparktrail" / "store" / "w" / "cp.arrow")
    write_trace(sample(), tmp_path / "app" / ".checkpoints" / "t.arrow")
    # WHEN the directory's trace files are listed and read
    files = trace_files(tmp_path)
    # THEN only the visible one is
    assert files == [tmp_path / "app" / "t.arrow"]
    assert read_trace(tmp_path).height == 3


def test_trace_file_names_are_the_trace_files_relative_to_the_root(tmp_path):
    # GIVEN files at the top, nested two deep, hidden, and of other kinds
    for name in ("b.arrow", "a/z.arrow", "a/b/c.arrow", "a-b.arrow", ".x/y.arrow"):
        write_trace(sample(), tmp_path / name)
    (tmp_path / "a" / "notes.txt").write_text("not a trace")
    # WHEN the names are listed
    names = trace_file_names(tmp_path)
    # THEN they are trace_files' paths, relative and /-separated
    want = [p.relative_to(tmp_path).as_posix() for p in trace_files(tmp_path)]
    assert (
        sorted(names)
        == sorted(want)
        == ["a-b.arrow", "a/b/c.arrow", "a/z.arrow", "b.arrow"]
    )
    assert [tmp_path / n for n in sorted(names, key=lambda n: tmp_path / n)] == (
        trace_files(tmp_path)
    )


def test_dictionary_encoded_strings_are_accepted(tmp_path):
    # GIVEN a file whose string columns are dictionary-encoded
    table = sample().to_arrow()
    for name in ("src_worker", "dst_worker", "activity"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, table[name].dictionary_encode())
    path = write_raw(table, tmp_path / "dict.arrow")
    # WHEN it is read
    back = read_trace(path)
    # THEN the columns are plain strings with the same values
    assert back.schema["activity"] == pl.String()
    assert back["activity"].to_list() == ["processing", "gc", "waiting"]
    assert back["src_worker"].to_list() == ["exec-1/0"] * 3


def test_missing_seq_columns_are_filled_with_zero(tmp_path):
    # GIVEN a file without src_seq/dst_seq, with narrow integer times
    table = (
        sample()
        .drop("src_seq", "dst_seq")
        .with_columns(
            pl.col("start_ns").cast(pl.Int32), pl.col("end_ns").cast(pl.Int32)
        )
    )
    path = write_raw(table.to_arrow(), tmp_path / "noseq.arrow")
    # WHEN it is read
    back = read_trace(path)
    # THEN seqs are 0, times int64, optional columns present and null
    assert back["src_seq"].to_list() == [0, 0, 0]
    assert back["dst_seq"].to_list() == [0, 0, 0]
    assert back.schema["start_ns"] == pl.Int64()
    assert back["operator"].null_count() == 3


def test_arrow_stream_file_is_read(tmp_path):
    # GIVEN a trace written in the Arrow IPC stream format
    path = write_raw(sample().to_arrow(), tmp_path / "s.arrow", stream=True)
    # WHEN it is read
    # THEN it reads like a file-format trace
    assert read_trace(path)["end_ns"].to_list() == [10, 20, 30]


def test_empty_directory_gives_an_empty_trace(tmp_path):
    # GIVEN an empty directory
    # WHEN it is read
    back = read_trace(tmp_path)
    # THEN the trace is empty but has every column
    assert back.height == 0
    assert list(back.columns) == list(TRACE_COLUMNS)


# --------------------------------------------------------------------------
# refusals
# --------------------------------------------------------------------------


def assert_trace_error(err, path, column, value, *words):
    message = str(err.value)
    assert str(path) in message
    assert err.value.path == str(path)
    assert err.value.column == column
    if column is not None:
        assert column in message
    if value is not None:
        assert err.value.value == value
        assert str(value) in message
    for word in words:
        assert word in message


def test_missing_column_is_named(tmp_path):
    # GIVEN a file without the activity column
    path = write_raw(sample().drop("activity").to_arrow(), tmp_path / "t.arrow")
    # WHEN it is read
    with pytest.raises(TraceError) as err:
        read_trace(path)
    # THEN the error names the file and the column
    assert_trace_error(err, path, "activity", None, "missing")


@pytest.mark.parametrize(
    ("cast", "type_name"),
    [(pl.String, "String"), (pl.Float64, "Float64")],
)
def test_mistyped_column_is_named(tmp_path, cast, type_name):
    # GIVEN a file whose start_ns is a string or a float
    table = sample().with_columns(pl.col("start_ns").cast(cast)).to_arrow()
    path = write_raw(table, tmp_path / "t.arrow")
    # WHEN it is read
    with pytest.raises(TraceError) as err:
        read_trace(path)
    # THEN the error names the file, the column and the type found
    assert_trace_error(err, path, "start_ns", None, type_name, "Int64")
    assert str(err.value.value) == type_name


def test_unknown_activity_is_named(tmp_path):
    # GIVEN a file with an activity outside the schema
    table = sample().with_columns(
        pl.Series("activity", ["processing", "napping", "gc"])
    )
    path = write_raw(table.to_arrow(), tmp_path / "t.arrow")
    # WHEN it is read
    with pytest.raises(TraceError) as err:
        read_trace(path)
    # THEN the error names the file, the column, the value and its row
    assert_trace_error(err, path, "activity", "napping", "row 1")


def test_local_activity_ending_before_it_starts_is_named(tmp_path):
    # GIVEN a local activity with end < start
    table = sample().with_columns(pl.Series("end_ns", [10, 7, 30]))
    path = write_raw(table.to_arrow(), tmp_path / "t.arrow")
    # WHEN it is read
    with pytest.raises(TraceError) as err:
        read_trace(path)
    # THEN the error names the file, the column, the value and its row
    assert_trace_error(err, path, "end_ns", 7, "row 1", "start_ns 10")


def test_message_received_before_sent_is_accepted(tmp_path):
    # GIVEN a communication edge with end < start (clock noise)
    table = pl.DataFrame(
        {
            "src_worker": ["a"],
            "dst_worker": ["b"],
            "start_ns": [10],
            "end_ns": [7],
            "activity": ["data"],
        }
    )
    # WHEN it is written and read
    # THEN it is kept as it is
    assert read_trace(write_trace(table, tmp_path / "t.arrow"))["end_ns"][0] == 7


def test_null_in_required_column_is_named(tmp_path):
    # GIVEN a null worker
    table = sample().with_columns(pl.Series("dst_worker", ["a", None, "a"]))
    path = write_raw(table.to_arrow(), tmp_path / "t.arrow")
    # WHEN it is read
    with pytest.raises(TraceError) as err:
        read_trace(path)
    # THEN the error names the file, the column and the row
    assert_trace_error(err, path, "dst_worker", None, "null", "row 1")


def test_newer_schema_version_is_refused(tmp_path):
    # GIVEN a file written by a newer sparktrail
    path = write_raw(
        sample().to_arrow(),
        tmp_path / "t.arrow",
        metadata={b"sparktrail.schema_version": b"2"},
    )
    # WHEN it is read
    with pytest.raises(TraceError) as err:
        read_trace(path)
    # THEN the error names the file and the version
    assert_trace_error(err, path, None, 2, "schema version", "newer")


def test_non_arrow_file_is_refused(tmp_path):
    # GIVEN a CSV file with the trace suffix, inside a directory
    path = tmp_path / "t.arrow"
    sample().write_csv(path)
    # WHEN the file, or its directory, is read
    for target in (path, tmp_path):
        with pytest.raises(TraceError) as err:
            read_trace(target)
        # THEN the error names the file
        assert_trace_error(err, path, None, None, "not an Arrow")


def test_write_refuses_an_invalid_frame_without_leaving_a_file(tmp_path):
    # GIVEN an invalid frame
    bad = sample().with_columns(pl.Series("activity", ["processing", "x", "gc"]))
    # WHEN it is written
    with pytest.raises(TraceError) as err:
        write_trace(bad, tmp_path / "t.arrow")
    # THEN nothing is written and the error names the target path
    assert err.value.path == str(tmp_path / "t.arrow")
    assert list(tmp_path.iterdir()) == []


def test_nonexistent_path_raises_file_not_found(tmp_path):
    # GIVEN a path that does not exist
    missing = tmp_path / "nope"
    # WHEN it is read
    # THEN FileNotFoundError names it
    with pytest.raises(FileNotFoundError, match="nope"):
        read_trace(missing)
    with pytest.raises(FileNotFoundError):
        critical_participation(missing, 10)


def test_trace_files_store_strings_as_views(tmp_path):
    # string_view is polars' layout: a reader maps the strings, no copy.
    path = write_trace(sample(), tmp_path / "t.arrow")
    with pa.memory_map(str(path)) as source:
        schema = ipc.open_file(source).schema
    assert schema.field("src_worker").type == pa.string_view()
    assert schema.field("start_ns").type == pa.int64()


def test_batches_read_back_as_the_frames_concatenated(tmp_path):
    from sparktrail.pag.trace import write_trace_batches

    parts = [sample(3), sample(2, offset=100), sample(4, offset=200)]
    path = write_trace_batches(iter(parts), tmp_path / "t.arrow")
    whole = write_trace(pl.concat(parts), tmp_path / "whole.arrow")
    assert read_trace(path).equals(read_trace(whole))
    assert read_trace(path).height == 9


def test_batches_of_other_columns_are_refused_and_nothing_is_left(tmp_path):
    from sparktrail.pag.trace import write_trace_batches

    other = sample(2).with_columns(pl.lit("x").alias("extra"))
    with pytest.raises(TraceError, match="frame 1 has columns"):
        write_trace_batches([sample(2), other], tmp_path / "t.arrow")
    assert list(tmp_path.iterdir()) == []


def test_no_batches_write_an_empty_trace(tmp_path):
    from sparktrail.pag.trace import write_trace_batches

    path = write_trace_batches([], tmp_path / "t.arrow")
    frame = read_trace(path)
    assert frame.height == 0
    assert frame.columns == list(TRACE_COLUMNS)


@pytest.mark.parametrize(
    ("column", "value", "words"),
    [("activity", "napping", ("napping",)), ("end_ns", -1, ("-1 < start_ns",))],
)
def test_a_bad_row_past_the_first_slice_is_named_by_its_own_row(
    tmp_path, column, value, words
):
    # GIVEN a file longer than one validation slice (the checks read it a
    # slice at a time) whose row 1,000,002 is bad
    rows = 1_000_005
    table = sample(rows).with_columns(
        pl.when(pl.int_range(rows) == 1_000_002)
        .then(pl.lit(value))
        .otherwise(pl.col(column))
        .alias(column)
    )
    path = write_raw(table.to_arrow(), tmp_path / "t.arrow")
    # WHEN it is read  THEN the error names that row, not its place in a slice
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert_trace_error(err, path, column, None, *words, "row 1000002")
