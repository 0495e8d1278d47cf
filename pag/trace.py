"""Activity traces: the Arrow schema that sits between the tracer and the PAG.

A trace has one row per PAG edge (DESIGN §3). Producers (the live listener
bridge, the event-log importer, tests) write Arrow IPC files with
:func:`write_trace`; every later stage reads them with :func:`read_trace`,
so the PAG, the summaries and the dashboard never need Spark.

Assumptions
-----------
* Times are int64 nanoseconds since the Unix epoch.
* ``src_seq``/``dst_seq`` are optional; a file without them gets 0.
* Columns beyond the schema are kept (producers may add marks such as a
  task's status) and pass through untouched.
* A file carries ``sparktrail.schema_version`` in its Arrow metadata; a file
  without it is read as version 1, a newer one is refused.
* A damaged file (cut short, bytes changed, another format) is refused with
  a :class:`TraceError` naming it: its buffers are validated before polars
  sees them, as polars trusts Arrow offsets and crashes on bad ones.
* Written strings are Arrow ``string_view`` (polars' own layout: a file
  read through a memory map is not copied); ``string`` and
  ``large_string`` files, from older writers or other producers, are read
  too (their strings are converted, 16 bytes a value). A file of many
  record batches is read as many chunks, not copied into one.
* A trace is validated once, where it enters the pipeline: the public
  entry points take a frame, a path or a :class:`Trace` and call
  :func:`load_trace`, which validates only what is not a :class:`Trace`
  already; inner stages pass the :class:`Trace` on.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from sparktrail.errors import InputError, SparktrailError

from .context import CONTEXT_KEY, AppContext, ContextError
from .query_engine import collect
from .schemas import REQUIRED_COLUMNS, TRACE

__all__ = [
    "ACTIVITIES",
    "COMMUNICATION_ACTIVITIES",
    "IDLE_ACTIVITIES",
    "LOCAL_ACTIVITIES",
    "SCHEMA_VERSION",
    "SLICE_ROWS",
    "TRACE_COLUMNS",
    "TRACE_SUFFIX",
    "Trace",
    "TraceError",
    "TraceLike",
    "collect_slices",
    "decode_trace",
    "empty_trace",
    "load_trace",
    "mapped_array",
    "mapped_concat",
    "maps_in_place",
    "read_context",
    "read_trace",
    "release_if_long",
    "release_mapped_pages",
    "slices_group_by",
    "slices_query",
    "trace_file_names",
    "trace_files",
    "trace_slices",
    "validate_trace",
    "write_trace",
    "write_trace_batches",
]

SCHEMA_VERSION = 1
SCHEMA_VERSION_KEY = b"sparktrail.schema_version"
TRACE_SUFFIX = ".arrow"

LOCAL_ACTIVITIES = (
    "processing",
    "scheduling",
    "deserialization",
    "serialization",
    "shuffle_read",
    "shuffle_write",
    "result",
    "gc",
    "driver",
    "startup",
    "waiting",
    "trigger_wait",
)
COMMUNICATION_ACTIVITIES = ("control", "data")
ACTIVITIES = LOCAL_ACTIVITIES + COMMUNICATION_ACTIVITIES
#: Activities in which a worker does no work. ``waiting`` (for another
#: worker) lies on no path; ``trigger_wait``, the driver's wait for a
#: streaming query's next trigger while no job runs, does: then the whole
#: application waits on a timer, and a window of a query that keeps up
#: has its critical path through that wait (ARCHITECTURE, departures).
IDLE_ACTIVITIES = ("waiting", "trigger_wait")

#: Column name -> polars dtype, in file order: the trace schema of
#: :mod:`~sparktrail.pag.schemas` (``REQUIRED_COLUMNS`` must be present).
TRACE_COLUMNS = TRACE
NOT_NULL_COLUMNS = REQUIRED_COLUMNS
_DEFAULT_ZERO = ("src_seq", "dst_seq")
_STRING_TYPES = (pl.String, pl.Categorical, pl.Enum, pl.Null)
_INT_TYPES = (
    pl.Int8,
    pl.Int16,
    pl.Int32,
    pl.Int64,
    pl.UInt8,
    pl.UInt16,
    pl.UInt32,
    pl.Null,
)


class TraceError(InputError):
    """A trace file (or frame) that does not follow the sparktrail schema.

    Attributes name what is wrong so callers can report it: ``path`` (the
    file, or ``None`` for an in-memory frame), ``column`` and ``value``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        column: str | None = None,
        value: object = None,
    ) -> None:
        where = f"{path}: " if path is not None else ""
        super().__init__(where + message)
        self.path = None if path is None else str(path)
        self.column = column
        self.value = value


@dataclass(frozen=True)
class Trace:
    """A trace frame that follows the schema: validated, so never again.

    Make one with :func:`load_trace`. The constructor trusts its frame: it
    is for frames made from a ``Trace``'s by steps that keep the schema and
    its rules (a filter of rows, local activities clipped to a window,
    extra columns added), not for frames from outside.

    Examples
    --------
    >>> t = load_trace(pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [5], "activity": ["gc"]}))
    >>> t.frame["src_seq"].to_list(), load_trace(t) is t
    ([0], True)
    """

    #: The validated frame (:func:`validate_trace`'s canonical types).
    frame: pl.DataFrame
    #: What the application ran with (empty when the producer did not say).
    context: AppContext = field(default_factory=AppContext)

    def with_frame(self, frame: pl.DataFrame) -> Trace:
        """The same application's trace with other rows (see the class note)."""
        return Trace(frame, self.context)


#: What the public entry points take as a trace: a frame (validated on the
#: way in), a trace file or directory (read), or a :class:`Trace` (as is).
TraceLike = pl.DataFrame | Trace | str | os.PathLike[str]


def load_trace(trace: TraceLike) -> Trace:
    """``trace`` as a :class:`Trace`, validated unless it is one already.

    Parameters
    ----------
    trace
        A trace frame (validated with :func:`validate_trace`), a path to a
        trace file or directory (read with :func:`read_trace`), or a
        :class:`Trace` (returned as is).

    Raises
    ------
    FileNotFoundError
        If a path does not exist.
    TraceError
        If the frame or a file breaks the schema.
    """
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, pl.DataFrame):
        return Trace(validate_trace(trace))
    return Trace(read_trace(trace), read_context(trace))


def empty_trace() -> pl.DataFrame:
    """Return a trace with no rows and every schema column.

    >>> empty_trace().columns[:4]
    ['src_worker', 'dst_worker', 'start_ns', 'end_ns']
    """
    return pl.DataFrame(schema=TRACE_COLUMNS)


def validate_trace(
    df: pl.DataFrame, path: str | os.PathLike[str] | None = None
) -> pl.DataFrame:
    """Check ``df`` against the trace schema and return it with canonical types.

    Missing optional columns are added (nulls, or 0 for the seq columns),
    integer and string columns are cast to int64 and plain strings.

    Raises
    ------
    TraceError
        For a missing required column, a column of the wrong type, a null in
        a required column, an unknown activity, or a local activity that ends
        before it starts. The message names ``path``, the column and the
        first bad value with its row number.

    Examples
    --------
    >>> df = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [5], "activity": ["processing"]})
    >>> validate_trace(df)["dst_seq"].to_list()
    [0]
    """
    df = _coerce_columns(df, path)
    _check_not_null(df, path)
    # A slice at a time: the checks read the activity and time columns of
    # every row, whose mapped pages would all stay resident (DESIGN §10).
    for at, part in trace_slices(df):
        _check_activities(part, path, at)
        _check_local_durations(part, path, at)
    return df


def _coerce_columns(
    df: pl.DataFrame, path: str | os.PathLike[str] | None
) -> pl.DataFrame:
    for name in REQUIRED_COLUMNS:
        if name not in df.columns:
            raise TraceError(
                f"missing required column {name!r} (columns: {', '.join(df.columns)})",
                path=path,
                column=name,
            )
    casts: list[pl.Expr] = []
    for name, dtype in TRACE_COLUMNS.items():
        if name not in df.columns:
            fill = 0 if name in _DEFAULT_ZERO else None
            casts.append(pl.lit(fill, dtype=dtype).alias(name))
            continue
        found = df.schema[name]
        allowed = _STRING_TYPES if dtype == pl.String() else _INT_TYPES
        if not isinstance(found, allowed):
            raise TraceError(
                f"column {name!r} has type {found}, expected {dtype}",
                path=path,
                column=name,
                value=found,
            )
        expr = pl.col(name).cast(dtype)
        if name in _DEFAULT_ZERO:
            expr = expr.fill_null(0)
        casts.append(expr)
    # Extra columns by value: pl.col would read a name like "*" or "^a.*$"
    # as a wildcard or a pattern.
    extras = [df.get_column(c) for c in df.columns if c not in TRACE_COLUMNS]
    return df.select(casts).hstack(extras)


def _first_bad_row(mask: pl.Series) -> int:
    return int(mask.arg_true()[0])


def _check_not_null(df: pl.DataFrame, path: str | os.PathLike[str] | None) -> None:
    for name in NOT_NULL_COLUMNS:
        if df[name].null_count():  # known without a scan: the mask when needed
            row = _first_bad_row(df[name].is_null())
            raise TraceError(
                f"column {name!r} is null at row {row}", path=path, column=name
            )


def _check_activities(
    df: pl.DataFrame, path: str | os.PathLike[str] | None, at: int = 0
) -> None:
    """``df`` holds rows ``at`` on of the trace (rows are named by that)."""
    unknown = ~df["activity"].is_in(ACTIVITIES)
    if unknown.any():
        local = _first_bad_row(unknown)
        value, row = df["activity"][local], at + local
        raise TraceError(
            f"column 'activity' has unknown value {value!r} at row {row} "
            f"(expected one of {', '.join(ACTIVITIES)})",
            path=path,
            column="activity",
            value=value,
        )


def _check_local_durations(
    df: pl.DataFrame, path: str | os.PathLike[str] | None, at: int = 0
) -> None:
    """As :func:`_check_activities`."""
    # Times first: the workers (strings) are compared only where a row ends
    # before it starts, which a message may, and a file rarely has.
    earlier = df["end_ns"] < df["start_ns"]
    if not earlier.any():
        return
    backwards = earlier & (df["src_worker"] == df["dst_worker"])
    if backwards.any():
        local = _first_bad_row(backwards)
        start, end = df["start_ns"][local], df["end_ns"][local]
        row = at + local
        raise TraceError(
            f"column 'end_ns' is {end} < start_ns {start} at row {row} "
            "(a local activity cannot end before it starts)",
            path=path,
            column="end_ns",
            value=end,
        )


def write_trace(
    df: pl.DataFrame | Trace,
    path: str | os.PathLike[str],
    context: AppContext | None = None,
) -> Path:
    """Validate ``df`` and write it as one Arrow IPC file at ``path``.

    The file is written under a hidden temporary name in the same directory
    and renamed into place, so a reader never sees half a file. The
    application's ``context`` (by default a :class:`Trace`'s own) goes into
    the file's metadata, where :func:`read_context` finds it. Strings are
    stored as Arrow ``string_view``, polars' own layout, so that a reader
    maps them from the file instead of copying them.

    Returns
    -------
    Path
        The path written.

    Examples
    --------
    >>> import tempfile
    >>> df = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [5], "activity": ["gc"]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     read_trace(write_trace(df, Path(d) / "t.arrow"))["activity"].to_list()
    ['gc']
    """
    if isinstance(df, Trace):
        context = df.context if context is None else context
        df = df.frame
    return write_trace_batches([df], path, context)


def write_trace_batches(
    frames: Iterable[pl.DataFrame],
    path: str | os.PathLike[str],
    context: AppContext | None = None,
) -> Path:
    """Write ``frames`` one after another as one trace file at ``path``.

    Each frame is validated (:func:`validate_trace`) and written as the
    file's next record batches as it comes, so a trace longer than memory
    can be written from an iterator of chunks; the file reads back as the
    frames concatenated. One frame: :func:`write_trace`. The file appears
    at ``path`` (renamed into place) only when every frame is written.

    Parameters
    ----------
    frames
        Trace frames with the same columns (no frame: an empty trace).
    path
        The file to write.
    context
        The application's context, for the file's metadata.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    TraceError
        If a frame breaks the schema (a row number counts within its
        frame), or its columns or types differ from the first frame's.

    Examples
    --------
    >>> import tempfile
    >>> df = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [5], "activity": ["gc"]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = write_trace_batches([df, df.with_columns(end_ns=6)], Path(d) / "t")
    ...     read_trace(p)["end_ns"].to_list()
    [5, 6]
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    metadata = {SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode()}
    if context is not None and context.known:
        metadata[CONTEXT_KEY] = context.to_json().encode()
    try:
        with pa.OSFile(str(temporary), "wb") as sink:
            writer: ipc.RecordBatchFileWriter | None = None
            schema: pa.Schema | None = None
            for k, frame in enumerate(frames):
                table = _arrow(validate_trace(frame, target))
                if schema is None:
                    schema = table.schema.with_metadata(metadata)
                    writer = ipc.new_file(sink, schema)
                elif not table.schema.equals(schema, check_metadata=False):
                    raise TraceError(
                        f"frame {k} has columns {table.schema.names} of other "
                        f"types than frame 0's ({schema.names})",
                        path=target,
                    )
                assert writer is not None
                writer.write_table(table.replace_schema_metadata(metadata))
            if writer is None:
                schema = _arrow(empty_trace()).schema.with_metadata(metadata)
                writer = ipc.new_file(sink, schema)
            writer.close()
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


def _arrow(frame: pl.DataFrame) -> pa.Table:
    # string_view is polars' own string layout: read back from a memory
    # map it needs no copy (large_string is converted, 16 bytes a value).
    return frame.to_arrow(compat_level=pl.CompatLevel.newest())


def trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """List the complete trace files at ``path`` (a file or a directory).

    Hidden files (temporary names of files being written) and everything in
    hidden directories (such as the live store, ``.sparktrail``) are
    skipped; a directory's files come in path order, which producers keep
    in time order.

    >>> trace_files("/nonexistent")
    Traceback (most recent call last):
    ...
    FileNotFoundError: trace path does not exist: /nonexistent
    """
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.exists():
        raise FileNotFoundError(f"trace path does not exist: {root}")
    return sorted(root / name for name in trace_file_names(root))


def trace_file_names(root: str | os.PathLike[str]) -> list[str]:
    """The complete trace files under the directory ``root``, as :func:`trace_files`
    lists them, but as names relative to ``root`` (``/``-separated), unsorted.

    For a poll that looks for new files among thousands it has read: a
    :class:`~pathlib.Path` per file, sorted, took 5.5 ms a poll once 600
    files had landed.

    >>> trace_file_names("/nonexistent")
    []
    """
    found: list[str] = []
    # Hidden directories are pruned, not filtered after the walk: the live
    # store holds a directory per window, and walking 10,000 of them on
    # every poll kept the online pipeline's update loop busy.
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        inside = os.path.relpath(folder, root)
        prefix = "" if inside == "." else Path(inside).as_posix() + "/"
        found.extend(
            prefix + f
            for f in files
            if f.endswith(TRACE_SUFFIX) and not f.startswith(".")
        )
    return found


#: The trace files read, mapped: their frames' columns point into them.
_MAPPED: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()


def release_mapped_pages() -> None:
    """Unmap the pages of the trace files read so far from this process.

    A frame read by :func:`read_trace` points into its file's memory map
    (no copy), and every page a pass touched stays resident, counted in
    the process's RSS: a pass over the whole trace would leave the whole
    file resident. The pages stay in the kernel's page cache; a later read
    maps them back in (a minor fault), so a caller that works through the
    trace a part at a time (:func:`~sparktrail.engines.batch.summarize`)
    calls this between parts and keeps RSS to the part it works on
    (DESIGN §10).
    """
    for mapped in list(_MAPPED):
        _release(mapped)


#: Trace rows a whole-trace pass reads between two releases of the file's
#: pages (:func:`trace_slices`): ~150 MB of a 10^7-row file's pages at most,
#: and each release is one ``madvise`` call.
SLICE_ROWS = 1_000_000


def trace_slices(
    frame: pl.DataFrame, rows: int | None = None
) -> Iterator[tuple[int, pl.DataFrame]]:
    """``(offset, slice)``: ``frame`` ``rows`` rows at a time, the trace
    file's pages released after each slice (:func:`release_mapped_pages`).

    For a pass over the whole trace whose result adds up over slices
    (filtered rows concatenated, sums, distinct values): one query over
    the whole frame would leave every page of the columns it read
    resident (~600 MB at 10^7 rows, DESIGN §10). A frame of at most
    ``rows`` rows is one slice, the frame itself, without a release (a
    window's rows in the online pipeline: no system call per window).

    >>> t = pl.DataFrame({"a": [1, 2, 3]})
    >>> [(at, part["a"].to_list()) for at, part in trace_slices(t, 2)]
    [(0, [1, 2]), (2, [3])]
    """
    rows = SLICE_ROWS if rows is None else rows
    if frame.height <= rows:
        yield 0, frame
        return
    for start in range(0, frame.height, rows):
        yield start, frame.slice(start, rows)
        release_mapped_pages()


def collect_slices(
    frame: pl.DataFrame, query: Callable[[int, pl.DataFrame], pl.LazyFrame]
) -> pl.DataFrame:
    """``query(offset, slice)`` over each of :func:`trace_slices`, collected
    and concatenated: a pass over the whole trace whose result adds up over
    slices (rows filtered, per-slice minima or sums to combine again).

    >>> t = pl.DataFrame({"a": [1, 2, 3]})
    >>> numbered = lambda at, part: part.lazy().with_row_index("row", at)
    >>> collect_slices(t, numbered).filter(pl.col("a") != 2)["row"].to_list()
    [0, 2]
    """
    parts = [collect(query(at, part), len(part)) for at, part in trace_slices(frame)]
    return parts[0] if len(parts) == 1 else pl.concat(parts)


def slices_query(
    frame: pl.DataFrame, query: Callable[[int, pl.DataFrame], pl.LazyFrame]
) -> pl.LazyFrame:
    """:func:`collect_slices` as a query to go on with: a frame of one
    slice is ``query(0, frame)`` itself, not collected (a window's rows:
    one query with what follows it), a longer frame its slices' results.

    >>> t = pl.DataFrame({"a": [1, 2, 3]})
    >>> whole = slices_query(t, lambda _, part: part.lazy())
    >>> whole.select(pl.sum("a")).collect().item()
    6
    """
    if frame.height <= SLICE_ROWS:
        return query(0, frame)
    return collect_slices(frame, query).lazy()


def slices_group_by(
    frame: pl.DataFrame,
    keys: list[str],
    partial: list[pl.Expr],
    whole: list[pl.Expr],
    where: pl.Expr | None = None,
) -> pl.LazyFrame:
    """``whole`` per group of ``keys`` of ``frame``'s rows (those ``where``
    holds), from the ``partial`` aggregates of a slice at a time
    (:func:`slices_query`): for aggregates that add up over slices (sums,
    counts, firsts, extremes), not medians.

    Groups come in the order the rows first hold them, and each group's
    partial rows in slice order, so a first of the partials is the
    group's first.

    >>> t = pl.DataFrame({"k": [1, 2, 1, None], "v": [3, 4, 5, 6]})
    >>> q = slices_group_by(t, ["k"], [pl.col("v").sum()], [pl.col("v").sum()],
    ...     where=pl.col("k").is_not_null())
    >>> q.collect().rows()
    [(1, 8), (2, 4)]
    """

    def per_slice(_: int, part: pl.DataFrame) -> pl.LazyFrame:
        rows = part.lazy() if where is None else part.lazy().filter(where)
        return rows.group_by(keys, maintain_order=True).agg(partial)

    parts = slices_query(frame, per_slice)
    return parts.group_by(keys, maintain_order=True).agg(whole)


def release_if_long(rows: int) -> None:
    """:func:`release_mapped_pages` after a step that read a table of
    ``rows`` rows, when that is longer than a slice: the pages of a
    window's rows stay (no system call per window, as in
    :func:`trace_slices`).

    >>> release_if_long(10)
    """
    if rows > SLICE_ROWS:
        release_mapped_pages()


def maps_in_place(rows: int) -> bool:
    """Whether a per-task table of ``rows`` rows that a whole run keeps
    goes to a mapped file (:func:`mapped_concat`): when it is longer than a
    slice of :func:`trace_slices`.

    >>> maps_in_place(10), maps_in_place(SLICE_ROWS + 1)
    (False, True)
    """
    return rows > SLICE_ROWS


def mapped_concat(parts: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """``parts`` (frames of one schema) concatenated, as a frame whose
    columns point into a memory-mapped temporary file, as a trace file's do.

    For a table of millions of rows that a whole run needs but each step
    reads a few columns of (the task facts of a long trace, DESIGN §10):
    each part is written out as it comes, so the whole never sits in
    memory, and a column's pages are resident only while a step reads
    them, until :func:`release_mapped_pages`. The file has no name
    (removed once mapped): it goes with the frame, or the process.
    Categorical and string columns are written as codes and read back as
    categoricals (their codes then in memory, 4 bytes a row) and strings
    (one value for the column when every row holds it); other constant
    columns are written like any other.

    >>> parts = [pl.DataFrame({"a": [1, 2], "w": ["x", "y"]},
    ...     schema_overrides={"w": pl.Categorical})] * 2
    >>> frame = mapped_concat(parts)
    >>> frame["a"].to_list(), frame["w"].cast(pl.String).to_list()
    ([1, 2, 1, 2], ['x', 'y', 'x', 'y'])
    >>> frame.schema == parts[0].schema
    True
    """
    coded = _CategoricalCodes()
    schema: pl.Schema | None = None
    try:
        with tempfile.TemporaryFile(prefix="sparktrail-") as file:
            writer = None
            for part in parts:
                if schema is None:
                    schema = part.schema
                table = coded.encode(part).to_arrow()
                if writer is None:
                    writer = ipc.new_file(file, table.schema)
                writer.write_table(table)
                del table
            if writer is None or schema is None:
                raise InputError("mapped_concat needs at least one frame")
            writer.close()
            file.flush()
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as err:
        raise _no_room(err) from err
    _MAPPED.add(mapped)
    table = ipc.open_file(pa.BufferReader(pa.py_buffer(mapped))).read_all()
    read = pl.from_arrow(table, rechunk=False)
    assert isinstance(read, pl.DataFrame)  # a table reads as a frame
    frame = coded.decode(read, schema)
    _release(mapped)
    return frame


def mapped_array(length: int, dtype: np.typing.DTypeLike) -> np.ndarray:
    """A writable array of ``length`` items of ``dtype`` in a memory-mapped
    temporary file, its pages released with a trace file's
    (:func:`release_mapped_pages`): for a per-row or per-task array that a
    step fills or reads a slice at a time (DESIGN §10). A released page
    keeps what was written to it (the mapping is shared: the page goes
    back to the file, not away). Its initial items are zero.

    >>> a = mapped_array(3, np.int32)
    >>> a[1] = 7
    >>> release_mapped_pages()
    >>> a.tolist()
    [0, 7, 0]
    """
    dtype = np.dtype(dtype)
    size = length * dtype.itemsize
    if size == 0:
        return np.zeros(length, dtype)
    try:
        with tempfile.TemporaryFile(prefix="sparktrail-") as file:
            # Reserved, not only sized: a write to a page the disk has no
            # room for would kill the process (SIGBUS), not raise.
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(file.fileno(), 0, size)
            else:
                file.truncate(size)
            mapped = mmap.mmap(file.fileno(), size)
    except OSError as err:
        raise _no_room(err) from err
    _MAPPED.add(mapped)
    return np.frombuffer(mapped, dtype=dtype)


def _no_room(err: OSError) -> SparktrailError:
    """What to do when a mapped temporary file cannot be written."""
    return SparktrailError(
        f"could not write a temporary file in {tempfile.gettempdir()} "
        f"({err}); point TMPDIR at a disk with room (a long trace's "
        "profile maps ~150 bytes a task there at once)"
    )


class _CategoricalCodes:
    """Categorical and string columns as dense codes (UInt32) into names
    gathered part by part, and back: a file of record batches holds one
    dictionary per column, and each part's categorical brings its own.

    A string column is read back as its one value when every row holds the
    same one (polars keeps a single value for the column), else as the
    strings gathered from its names: read from the file as strings, every
    row's bytes would be copied out of it (the operator of each of 3.3·10^7
    tasks: ~430 MB, and 1.3 GB of the file's pages touched, measured).
    """

    def __init__(self) -> None:
        self.names: dict[str, list[str]] = {}
        self.index: dict[str, dict[str, int]] = {}
        self.nulls: dict[str, int] = {}

    def encode(self, part: pl.DataFrame) -> pl.DataFrame:
        columns = [
            c for c, t in part.schema.items() if t in (pl.Categorical, pl.String)
        ]
        return part.with_columns(self._codes(part[c]) for c in columns)

    def _codes(self, column: pl.Series) -> pl.Series:
        names = self.names.setdefault(column.name, [])
        index = self.index.setdefault(column.name, {})
        self.nulls[column.name] = self.nulls.get(column.name, 0) + column.null_count()
        distinct = column.drop_nulls().unique()
        for name in distinct.cast(pl.String).to_list():
            if name not in index:
                index[name] = len(names)
                names.append(name)
        # The part's own codes mapped through its distinct ones (a few
        # dozen names over a million rows); a null stays null.
        dense = [index[name] for name in distinct.cast(pl.String).to_list()]
        # (Cast: a column of nulls only comes back as it went in.)
        return (
            column.to_physical()
            .replace_strict(distinct.to_physical(), pl.Series(dense, dtype=pl.UInt32))
            .cast(pl.UInt32)
        )

    def decode(self, frame: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
        decoded: list[pl.Series | pl.Expr] = []
        for name, names in self.names.items():
            if schema[name] == pl.String and len(names) == 1 and not self.nulls[name]:
                decoded.append(pl.lit(names[0], dtype=pl.String).alias(name))
                continue
            # The names gathered by the codes: 4 bytes a row for a
            # categorical, where an Arrow dictionary of them cast to one
            # kept ~10. Chunk by chunk: a column of other chunks than its
            # neighbours' would make polars copy every column of the frame
            # into one.
            values = pl.Series(name, names, dtype=schema[name])
            chunks = [values.gather(codes) for codes in frame[name].get_chunks()]
            decoded.append(pl.concat(chunks, rechunk=False))
        return frame.with_columns(decoded).select(schema.names())


def _release(mapped: mmap.mmap) -> None:
    """Unmap ``mapped``'s resident pages (where the platform can: not on
    Windows, whose ``mmap`` has no ``madvise``)."""
    dontneed = getattr(mmap, "MADV_DONTNEED", None)
    if dontneed is not None and not mapped.closed:
        mapped.madvise(dontneed)


def _read_file(path: Path) -> pl.DataFrame:
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:  # mmap refuses it
                return _read_source(pa.BufferReader(b""), path)
            # Python's map (not pyarrow's): its pages can be given back.
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as err:
        raise TraceError(f"not an Arrow IPC trace file ({err})", path=path) from err
    _MAPPED.add(mapped)
    frame = _read_source(pa.BufferReader(pa.py_buffer(mapped)), path)
    _release(mapped)  # the validation read every page
    return frame


def decode_trace(
    data: bytes, path: str | os.PathLike[str] | None = None
) -> pl.DataFrame:
    """A trace file's bytes as a validated trace frame, as :func:`read_trace`
    reads the file (for readers that hold the bytes, such as Spark's
    ``binaryFile`` source).

    Raises
    ------
    TraceError
        As :func:`read_trace`; the message names ``path``.

    Examples
    --------
    >>> import io
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [5], "activity": ["gc"]})
    >>> sink = io.BytesIO(); t.write_ipc(sink)
    >>> decode_trace(sink.getvalue())["end_ns"].to_list()
    [5]
    """
    with pa.BufferReader(data) as source:
        return _read_source(source, path)


def _read_source(
    source: pa.NativeFile, path: str | os.PathLike[str] | None
) -> pl.DataFrame:
    """The validated trace of an Arrow IPC file or stream open as ``source``."""
    try:
        try:
            table = ipc.open_file(source).read_all()
        except pa.ArrowInvalid:
            source.seek(0)
            table = ipc.open_stream(source).read_all()
        # Damaged bytes can still parse: bad offsets, names or metadata
        # that are not UTF-8 would crash polars.
        _check_utf8(table.schema, path)
        _validate_batches(table)
    except (pa.ArrowException, OSError) as err:
        raise TraceError(f"not an Arrow IPC trace file ({err})", path=path) from err
    _check_schema_version(table.schema, path)
    try:
        # Not rechunked: a file of many record batches (a trace written in
        # chunks) would be copied whole out of its memory map.
        frame = pl.from_arrow(table, rechunk=False)
    except (
        pl.exceptions.PolarsError,
        pl.exceptions.PanicException,  # a BaseException: a last line of defence
        pa.ArrowException,
        TypeError,
    ) as err:
        raise TraceError(
            f"Arrow columns polars cannot read ({type(err).__name__}: {err})",
            path=path,
        ) from err
    assert isinstance(frame, pl.DataFrame)  # from_arrow of a Table
    return validate_trace(frame, path)


def _validate_batches(table: pa.Table) -> None:
    """Arrow's full validation of ``table``, a record batch at a time, the
    file's pages released every :data:`SLICE_ROWS` rows: validating reads
    every byte, which would all stay resident (DESIGN §10)."""
    table.validate()  # the structure; each batch's data below
    since = 0
    for batch in table.to_batches():
        batch.validate(full=True)
        since += batch.num_rows
        if since >= SLICE_ROWS:
            release_mapped_pages()
            since = 0


def _check_utf8(schema: pa.Schema, path: str | os.PathLike[str] | None) -> None:
    """Refuse names and metadata (of the schema, or of any column or nested
    field) that are not UTF-8: pyarrow raises on them only when asked for a
    name, and polars panics."""
    try:
        for key, value in (schema.metadata or {}).items():
            key.decode(), value.decode()
        _check_fields(schema)
    except UnicodeDecodeError as err:
        raise TraceError(
            f"a column name or metadata is not UTF-8 ({err})", path=path
        ) from err


def _check_fields(fields: Iterable[pa.Field]) -> None:
    for column in fields:
        column.name  # noqa: B018 - decoding the name is the check
        for key, value in (column.metadata or {}).items():
            key.decode(), value.decode()
        kind = column.type
        if isinstance(kind, pa.DictionaryType):
            kind = kind.value_type
        _check_fields(kind.field(i) for i in range(kind.num_fields))


def _check_schema_version(
    schema: pa.Schema, path: str | os.PathLike[str] | None
) -> None:
    raw = (schema.metadata or {}).get(SCHEMA_VERSION_KEY, b"1")
    try:
        version = int(raw)
    except ValueError as err:
        raise TraceError(
            f"schema version {raw!r} is not an integer", path=path, value=raw
        ) from err
    if version > SCHEMA_VERSION:
        raise TraceError(
            f"schema version {version} is newer than this sparktrail reads "
            f"({SCHEMA_VERSION}); upgrade sparktrail",
            path=path,
            value=version,
        )


def read_trace(path: str | os.PathLike[str]) -> pl.DataFrame:
    """Read a trace file, or every trace file under a directory, as one frame.

    Parameters
    ----------
    path
        An Arrow IPC file, or a directory holding ``*.arrow`` files.

    Returns
    -------
    polars.DataFrame
        The DESIGN §3 columns with canonical types, rows in file order.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    TraceError
        If a file is not Arrow IPC or breaks the schema (see
        :func:`validate_trace`).
    """
    files = trace_files(path)
    frames = [_read_file(p) for p in files]
    try:
        return concat_traces(frames)
    except pl.exceptions.PolarsError:
        pass
    # Name the first file whose extra columns clash with those before it.
    for k in range(1, len(frames)):
        try:
            concat_traces(frames[: k + 1])
        except pl.exceptions.PolarsError as err:
            before = (
                files[0].name if k == 1 else f"{files[0].name} .. {files[k - 1].name}"
            )
            raise TraceError(
                f"its extra columns do not fit those of {before} "
                f"({type(err).__name__}: {err})",
                path=files[k],
            ) from err
    raise AssertionError("unreachable: the frames concatenated one by one")


def read_context(path: str | os.PathLike[str]) -> AppContext:
    """The application context of the trace at ``path`` (a file or directory).

    Only the files' metadata is read. A live trace rewrites the context with
    every file as it learns more (executors come and go, jobs end), so the
    last file (in name order) that has one is the whole; a trace without
    any gets an empty :class:`AppContext`.

    Raises
    ------
    TraceError
        If a file's context is not the JSON :class:`AppContext` writes.
    """
    for file in reversed(trace_files(path)):
        raw = (_file_schema(file).metadata or {}).get(CONTEXT_KEY)
        if raw is not None:
            try:
                return AppContext.from_json(raw)
            except ContextError as err:
                raise TraceError(str(err), path=file) from err
    return AppContext()


def _file_schema(path: Path) -> pa.Schema:
    try:
        with pa.memory_map(str(path), "r") as source:
            try:
                return ipc.open_file(source).schema
            except pa.ArrowInvalid:
                source.seek(0)
                return ipc.open_stream(source).schema
    except (pa.ArrowException, OSError) as err:
        raise TraceError(f"not an Arrow IPC trace file ({err})", path=path) from err


def concat_traces(frames: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """Concatenate validated traces, keeping extra columns of any of them."""
    frames = list(frames)
    if not frames:
        return empty_trace()
    return pl.concat(frames, how="diagonal_relaxed")
