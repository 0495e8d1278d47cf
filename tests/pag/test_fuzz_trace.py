"""Fuzzing the trace reader with corrupt Arrow files and schema drift.

The contract (robustness issue, deliverable 1): :func:`read_trace` either
returns a valid trace or raises :class:`TraceError` naming the file; never
another exception, never a crash. The inputs start from a valid trace
written by :func:`write_trace` (file and stream format): cut at a byte,
bytes flipped or overwritten, garbage appended or prepended; tables whose
schema drifted (a column dropped, renamed, duplicated, retyped, nulled, an
extra column of an odd type, odd schema metadata, no rows); other formats
under the ``.arrow`` name. ``SPARKTRAIL_FUZZ_EXAMPLES`` sets the examples
per test (default 150; e.g. 2000 for a long run).
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from sparktrail.pag.trace import (
    SCHEMA_VERSION_KEY,
    TRACE_COLUMNS,
    TraceError,
    read_trace,
    validate_trace,
    write_trace,
)

EXAMPLES = int(os.environ.get("SPARKTRAIL_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def sample(n: int = 40) -> pl.DataFrame:
    """A valid trace with every schema column and two extra ones."""
    workers = [f"exec-{i % 3}/0" for i in range(n)]
    return pl.DataFrame(
        {
            "src_worker": workers,
            "dst_worker": [w if i % 5 else "driver" for i, w in enumerate(workers)],
            "start_ns": [1_000 * i for i in range(n)],
            "end_ns": [1_000 * i + 700 for i in range(n)],
            "activity": [("processing", "gc", "control")[i % 3] for i in range(n)],
            "operator": [f"stage {i % 2}: map 🔥" if i % 4 else None for i in range(n)],
            "job_id": [i // 10 for i in range(n)],
            "stage_id": [i % 2 for i in range(n)],
            "task_id": list(range(n)),
            "partition": [i % 7 for i in range(n)],
            "records": [i * 3 if i % 2 else None for i in range(n)],
            "bytes": [i * 1024 for i in range(n)],
            "src_seq": list(range(n)),
            "dst_seq": list(range(1, n + 1)),
            "status": ["success"] * n,
            "speculative": [i % 9 == 0 for i in range(n)],
        }
    )


def _written(stream: bool) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(sample(), Path(tmp) / "t.arrow")
        if not stream:
            return path.read_bytes()
        table = ipc.open_file(pa.memory_map(str(path))).read_all()
    sink = io.BytesIO()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


VALID = {"file": _written(False), "stream": _written(True)}
BASE = ipc.open_file(pa.BufferReader(VALID["file"])).read_all()


# -- the contract ------------------------------------------------------------


def check_read(path: Path, named: Path | None = None) -> str:
    """Read ``path``: a valid trace, or a TraceError naming the file."""
    try:
        frame = read_trace(path)
    except TraceError as err:
        assert err.path is not None
        assert str(named or path) in str(err), str(err)
        assert str(err).startswith(f"{err.path}: "), str(err)
        return "refused (TraceError)"
    assert frame.columns[: len(TRACE_COLUMNS)] == list(TRACE_COLUMNS)
    assert {c: frame.schema[c] for c in TRACE_COLUMNS} == TRACE_COLUMNS
    validate_trace(frame)
    return "read"


def check_bytes(data: bytes) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.arrow"
        path.write_bytes(data)
        return check_read(path)


def check_table(table: pa.Table, stream: bool = False) -> str:
    sink = io.BytesIO()
    opener = ipc.new_stream if stream else ipc.new_file
    with opener(sink, table.schema) as writer:
        writer.write_table(table)
    return check_bytes(sink.getvalue())


# -- corrupt bytes -----------------------------------------------------------


@st.composite
def corrupted(draw: st.DrawFn) -> bytes:
    """A valid trace file (or stream) cut, flipped, overwritten or padded."""
    kind = draw(st.sampled_from(sorted(VALID)))
    data = bytearray(VALID[kind])
    how = draw(st.sampled_from(["cut", "flip", "overwrite", "append", "prepend"]))
    event(f"corruption: {kind} {how}")
    if how == "cut":
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    if how == "flip":
        for _ in range(draw(st.integers(1, 8))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
        return bytes(data)
    junk = draw(st.binary(min_size=1, max_size=64))
    if how == "overwrite":
        at = draw(st.integers(0, len(data) - 1))
        data[at : at + len(junk)] = junk
        return bytes(data)
    return bytes(data + junk) if how == "append" else bytes(junk + data)


def flipped(at: int, mask: int) -> bytes:
    """The valid trace file with the byte at ``at`` xor-ed with ``mask``."""
    data = bytearray(VALID["file"])
    data[at] ^= mask
    return bytes(data)


def renamed(old: bytes, new: bytes) -> bytes:
    """The valid trace file with a name replaced byte for byte."""
    assert len(old) == len(new)
    return VALID["file"].replace(old, new)


# Regressions: each crashed read_trace before it was fixed (the offsets are
# those of this sample as pyarrow 26 writes it).
@FUZZ
@given(data=corrupted())
@example(data=b"")  # an empty file
@example(data=VALID["file"][:6])  # only the magic
@example(data=VALID["file"][: len(VALID["file"]) // 2])  # no footer
@example(data=VALID["stream"][: len(VALID["stream"]) // 2])  # a cut stream
@example(data=flipped(1248, 0x80))  # offsets out of bounds: segfault in polars
@example(data=flipped(1088, 0x40))  # PanicException: max string length exceeded
@example(data=flipped(1760, 0xFF))  # null count > length: was read silently
@example(data=flipped(1680, 0xFF))  # validity buffer too small: out-of-bounds read
@example(data=renamed(b"src_worker", b"src_work\xff\xfe"))  # UnicodeDecodeError
@example(  # metadata not UTF-8: PanicException in polars
    data=renamed(b"sparktrail.schema_version", b"sparktrail.schema_versio\xff")
)
def test_corrupt_file_reads_or_is_refused(data: bytes) -> None:
    """GIVEN a damaged trace file WHEN read THEN a valid trace or a TraceError."""
    event(f"outcome: {check_bytes(data)}")


# -- schema drift ------------------------------------------------------------

ODD_TYPES: dict[str, Callable[[pa.ChunkedArray], pa.Array | pa.ChunkedArray]] = {
    "string": lambda c: pc.cast(c, pa.string()),
    "large_string": lambda c: pc.cast(pc.cast(c, pa.string()), pa.large_string()),
    "string_view": lambda c: pc.cast(pc.cast(c, pa.string()), pa.string_view()),
    "dictionary": lambda c: c.dictionary_encode(),
    "int8": lambda c: pc.cast(c, pa.int8(), safe=False),
    "int32": lambda c: pc.cast(c, pa.int32(), safe=False),
    "uint64": lambda c: pc.cast(c, pa.uint64(), safe=False),
    "float64": lambda c: pc.cast(c, pa.float64(), safe=False),
    "bool": lambda c: pa.array([i % 2 == 0 for i in range(len(c))]),
    "binary": lambda c: pc.cast(pc.cast(c, pa.string()), pa.binary()),
    "timestamp": lambda c: pa.array(range(len(c)), pa.timestamp("ns")),
    "null": lambda c: pa.nulls(len(c)),
    "list": lambda c: pa.array([[i] for i in range(len(c))]),
    "struct": lambda c: pa.array([{"a": i} for i in range(len(c))]),
    "decimal": lambda c: pa.array(range(len(c)), pa.decimal128(10, 0)),
    "map": lambda c: pa.array(
        [[("k", i)] for i in range(len(c))], pa.map_(pa.string(), pa.int64())
    ),
}


def _cast(table: pa.Table, i: int, how: str) -> pa.Table:
    """Column ``i`` converted to the odd type ``how`` (if pyarrow can)."""
    try:
        column = ODD_TYPES[how](table.column(i))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return table
    return table.set_column(i, pa.field(table.field(i).name, column.type), column)


def _nulls(table: pa.Table, i: int, at: list[int]) -> pa.Table:
    """Column ``i`` with nulls at rows ``at``."""
    column = table.column(i).combine_chunks()
    mask = pa.array([k in at for k in range(len(column))], pa.bool_())
    try:
        nulled = pc.if_else(mask, pa.scalar(None, column.type), column)
    except pa.ArrowNotImplementedError:  # no kernel for this type
        return table
    return table.set_column(i, table.field(i).name, nulled)


def _index(name: str) -> int:
    return BASE.schema.get_field_index(name)


DRIFTS = ("drop", "rename", "duplicate", "retype", "nulls", "extra", "metadata")
DRIFTS += ("rows", "chunks")


@st.composite
def drifted(draw: st.DrawFn) -> pa.Table:
    """The sample trace with one to three schema changes."""
    table = BASE
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(DRIFTS))
        event(f"drift: {how}")
        if table.num_columns == 0 and how not in ("extra", "metadata", "rows"):
            continue
        i = draw(st.integers(0, max(0, table.num_columns - 1)))
        if how == "drop":
            table = table.remove_column(i)
        elif how == "rename":
            name = table.field(i).name
            new = draw(st.sampled_from(["", "START_NS", "start_ns ", "é", name * 2]))
            names = table.column_names
            table = table.rename_columns([*names[:i], new, *names[i + 1 :]])
        elif how == "duplicate":
            table = table.append_column(table.field(i), table.column(i))
        elif how == "retype":
            table = _cast(table, i, draw(st.sampled_from(sorted(ODD_TYPES))))
        elif how == "nulls":
            rows = st.integers(0, max(0, table.num_rows - 1))
            table = _nulls(table, i, draw(st.lists(rows, max_size=3)))
        elif how == "extra":
            kind = draw(st.sampled_from(sorted(ODD_TYPES)))
            column = ODD_TYPES[kind](pa.chunked_array([range(table.num_rows)]))
            table = table.append_column(draw(st.text(max_size=8)), column)
        elif how == "metadata":
            raw = draw(
                st.one_of(
                    st.sampled_from([b"1", b"2", b"0", b"-1", b"x", b"", b"9" * 5000]),
                    st.binary(max_size=8),
                )
            )
            table = table.replace_schema_metadata({SCHEMA_VERSION_KEY: raw})
        elif how == "rows":
            start = draw(st.integers(0, table.num_rows))
            table = table.slice(start, draw(st.integers(0, 5)))
        else:  # several record batches, and an empty one
            size = draw(st.integers(1, 16))
            # From the columns, not from Python values: pyarrow cannot build
            # a dictionary of string_view (the trace's strings) from a list.
            empty = pa.RecordBatch.from_arrays(
                [c.slice(0, 0).combine_chunks() for c in table.columns],
                schema=table.schema,
            )
            batches = [*table.to_batches(max_chunksize=size), empty]
            table = pa.Table.from_batches(batches, schema=table.schema)
    return table


@FUZZ
@given(table=drifted(), stream=st.booleans())
@example(table=BASE.drop_columns(["activity"]), stream=False)  # required column
@example(table=_cast(BASE, _index("start_ns"), "string"), stream=False)
@example(table=_cast(BASE, _index("start_ns"), "int32"), stream=False)
@example(table=_nulls(BASE, _index("end_ns"), [3]), stream=False)
@example(table=_cast(BASE, _index("src_worker"), "dictionary"), stream=False)
@example(table=_cast(BASE, _index("activity"), "large_string"), stream=True)
@example(  # two columns named src_worker: polars DuplicateError
    table=BASE.append_column(BASE.field(0), BASE.column(0)), stream=False
)
@example(  # an extra column "*": pl.col wildcard, DuplicateError (found by fuzzing)
    table=BASE.append_column("*", BASE.column(0)), stream=False
)
@example(  # an extra column named like a pattern: pl.col regex
    table=BASE.append_column("^src_.*$", BASE.column(0)), stream=True
)
def test_drifted_schema_reads_or_is_refused(table: pa.Table, stream: bool) -> None:
    """GIVEN a trace whose schema drifted WHEN read THEN a trace or TraceError."""
    event(f"outcome: {check_table(table, stream)}")


# -- other formats and directories -------------------------------------------


def _parquet() -> bytes:
    sink = io.BytesIO()
    pq.write_table(BASE, sink)
    return sink.getvalue()


def _csv() -> bytes:
    return sample().write_csv().encode()


def _feather_v1() -> bytes:
    return b"FEA1" + b"\x00" * 60 + b"FEA1"


OTHER_FORMATS: dict[str, Callable[[], bytes]] = {
    "parquet": _parquet,
    "csv": _csv,
    "json": lambda: sample().write_json().encode(),
    "feather v1": _feather_v1,
    "empty": lambda: b"",
    "text": lambda: "ARROW1 🔥\n".encode(),
}


def test_other_formats_named_arrow_are_refused() -> None:
    """GIVEN files of other formats named .arrow WHEN read THEN TraceError."""
    for name, make in OTHER_FORMATS.items():
        assert check_bytes(make()) == "refused (TraceError)", name


def _write(table: pa.Table, path: Path) -> None:
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


@FUZZ
@given(
    kinds=st.lists(st.sampled_from(sorted(ODD_TYPES)), min_size=2, max_size=3),
    bad_second=st.booleans(),
)
@example(kinds=["binary", "bool"], bad_second=False)  # polars SchemaError
@example(kinds=["list", "string"], bad_second=False)  # InvalidOperationError
def test_directory_of_mismatched_files_reads_or_is_refused(
    kinds: list[str], bad_second: bool
) -> None:
    """GIVEN files whose extra column ``mark`` has different types WHEN the
    directory is read THEN one trace, or a TraceError naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i, kind in enumerate(kinds):
            table = BASE.append_column("mark", ODD_TYPES[kind](BASE["task_id"]))
            _write(table, root / f"part-{i}.arrow")
        if bad_second:
            (root / "part-1.arrow").write_bytes(b"garbage")
        event(f"outcome: {check_read(root, named=root)}")
