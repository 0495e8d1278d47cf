"""The tables the pag stage owns, declared once: the trace and the CP table.

A schema is a mapping ``column -> polars dtype`` in column order. Every
other spelling of a table (an Arrow schema, a Spark SQL DDL string, a
select list) is derived from it with :func:`arrow_schema`,
:func:`spark_ddl` or ``list(schema)``, and :func:`check_frame` checks a
frame against it where the frame crosses a stage boundary.

Assumptions
-----------
* A check compares schemas only (names and dtypes), never the data: it
  costs the same for an empty frame and for 10^8 rows, so it may run on
  every window the online pipeline closes.
* The trace schema (:data:`TRACE`) is what
  :func:`~sparktrail.pag.trace.validate_trace` gives a trace: it accepts
  more (narrower integers, categoricals, missing optional columns) and
  casts; the CP table (:data:`CP_TABLE`) is produced by
  :func:`~sparktrail.pag.critical_participation` and checked exactly.

Examples
--------
>>> list(CP_TABLE)[:3]
['window_start_ns', 'window_end_ns', 'edge_index']
>>> spark_ddl({"cp": pl.Float64(), "activity": pl.String()})
'cp double, activity string'
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl
import pyarrow as pa

from sparktrail.errors import InputError

__all__ = [
    "ACTIVITY",
    "CP",
    "CP_INPUT_COLUMNS",
    "CP_TABLE",
    "EDGE_INDEX",
    "END_NS",
    "KERNEL_COLUMNS",
    "REQUIRED_COLUMNS",
    "START_NS",
    "TASK_WORK_COLUMNS",
    "TRACE",
    "WEIGHT_NS",
    "WINDOW_END_NS",
    "WINDOW_START_NS",
    "Schema",
    "SchemaError",
    "arrow_schema",
    "arrow_type",
    "check_frame",
    "spark_ddl",
]

#: A table's columns and their polars dtypes, in column order.
Schema = Mapping[str, pl.DataType]

# Column names that more than one stage reads.
START_NS = "start_ns"
END_NS = "end_ns"
ACTIVITY = "activity"
WINDOW_START_NS = "window_start_ns"
WINDOW_END_NS = "window_end_ns"
EDGE_INDEX = "edge_index"
WEIGHT_NS = "weight_ns"
CP = "cp"

#: The trace (DESIGN §3), one row per PAG edge, as
#: :func:`~sparktrail.pag.trace.validate_trace` returns it (columns beyond
#: these pass through).
TRACE: Schema = {
    "src_worker": pl.String(),
    "dst_worker": pl.String(),
    START_NS: pl.Int64(),
    END_NS: pl.Int64(),
    ACTIVITY: pl.String(),
    "operator": pl.String(),
    "job_id": pl.Int64(),
    "stage_id": pl.Int64(),
    "task_id": pl.Int64(),
    "partition": pl.Int64(),
    "records": pl.Int64(),
    "bytes": pl.Int64(),
    "src_seq": pl.Int64(),
    "dst_seq": pl.Int64(),
}
#: What a task did, on its ``processing`` row (null elsewhere): the trace
#: schema's ``records`` and ``bytes``, then the tracer's extra columns. The
#: one list: the tracer writes these (:mod:`~sparktrail.tracer.trace_rows`)
#: and the summaries sum them per task (:mod:`~sparktrail.summaries.task_table`).
TASK_WORK_COLUMNS = (
    "records",
    "bytes",
    "shuffle_write_bytes",
    "memory_bytes_spilled",
    "disk_bytes_spilled",
    "state_rows",
    "state_updated_rows",
    "state_memory_bytes",
)
#: The trace columns the CP kernel reads: a window's PAG is built from these.
KERNEL_COLUMNS = (
    "src_worker",
    "dst_worker",
    START_NS,
    END_NS,
    ACTIVITY,
    "src_seq",
    "dst_seq",
)
#: Trace columns a producer must write (the others default to null or 0).
REQUIRED_COLUMNS = ("src_worker", "dst_worker", START_NS, END_NS, ACTIVITY)

#: The CP table of :func:`~sparktrail.pag.critical_participation`: one row
#: per snapshot edge (a trace row clipped to a window), ``edge_index`` the
#: trace row, ``start_ns, end_ns`` clipped, ``weight_ns`` the clipped
#: length of a local activity (0 for a message).
CP_TABLE: Schema = {
    WINDOW_START_NS: pl.Int64(),
    WINDOW_END_NS: pl.Int64(),
    EDGE_INDEX: pl.Int64(),
    "src_worker": pl.String(),
    "dst_worker": pl.String(),
    START_NS: pl.Int64(),
    END_NS: pl.Int64(),
    ACTIVITY: pl.String(),
    "operator": pl.String(),
    "stage_id": pl.Int64(),
    "task_id": pl.Int64(),
    WEIGHT_NS: pl.Int64(),
    CP: pl.Float64(),
}

#: The trace columns a CP table is computed from: the kernel's and those the
#: CP table copies from each row. A batch of windows gathers only these
#: (:func:`~sparktrail.engines.batch.cp_chunks`): the trace's other columns
#: were a fifth of each batch's copy of its rows.
CP_INPUT_COLUMNS = tuple(
    dict.fromkeys((*KERNEL_COLUMNS, *(c for c in CP_TABLE if c in TRACE)))
)


class SchemaError(InputError):
    """A frame whose columns do not follow its table's declared schema.

    ``table`` names the table, ``column`` the first column at fault;
    ``expected`` and ``found`` are its dtypes (``None`` for a column that
    is missing, or not declared).
    """

    def __init__(
        self,
        message: str,
        *,
        table: str,
        column: str,
        expected: pl.DataType | None,
        found: pl.DataType | None,
    ) -> None:
        super().__init__(message)
        self.table = table
        self.column = column
        self.expected = expected
        self.found = found


def check_frame(
    frame: pl.DataFrame, schema: Schema, what: str, *, extra: bool = False
) -> pl.DataFrame:
    """Check that ``frame`` has the columns and dtypes of ``schema``.

    Only the schemas are compared (no data is read). Column order is not
    checked.

    Parameters
    ----------
    frame
        The frame to check.
    schema
        Its declared schema.
    what
        The table's name, for the message (e.g. ``"CP table"``).
    extra
        Whether columns beyond ``schema`` are allowed.

    Returns
    -------
    polars.DataFrame
        ``frame`` itself, so a check can wrap a return value.

    Raises
    ------
    SchemaError
        Naming the table, the column, and the dtype expected and found.

    Examples
    --------
    >>> check_frame(pl.DataFrame({"cp": [0.5]}), {"cp": pl.Float64()}, "t").shape
    (1, 1)
    >>> check_frame(pl.DataFrame({"cp": [1]}), {"cp": pl.Float64()}, "t")
    Traceback (most recent call last):
    ...
    sparktrail.pag.schemas.SchemaError: t: column 'cp' has dtype Int64, expected Float64
    """
    found = frame.schema
    for name, dtype in schema.items():
        have = found.get(name)
        if have is None:
            raise SchemaError(
                f"{what}: missing column {name!r} of dtype {dtype} "
                f"(columns: {', '.join(frame.columns)})",
                table=what,
                column=name,
                expected=dtype,
                found=None,
            )
        if have != dtype:
            raise SchemaError(
                f"{what}: column {name!r} has dtype {have}, expected {dtype}",
                table=what,
                column=name,
                expected=dtype,
                found=have,
            )
    if not extra and len(found) != len(schema):
        name = next(c for c in frame.columns if c not in schema)
        raise SchemaError(
            f"{what}: unexpected column {name!r} of dtype {found[name]} "
            f"(expected: {', '.join(schema)})",
            table=what,
            column=name,
            expected=None,
            found=found[name],
        )
    return frame


#: Arrow types of the polars dtypes the schemas use; strings are plain
#: ``string`` (what Spark's Arrow exchange has), not polars' ``large_string``.
_ARROW: dict[type[pl.DataType], pa.DataType] = {
    pl.Int64: pa.int64(),
    pl.Int32: pa.int32(),
    pl.UInt32: pa.uint32(),
    pl.Float64: pa.float64(),
    pl.Boolean: pa.bool_(),
    pl.String: pa.string(),
}
#: Spark SQL types of the same dtypes (Spark has no unsigned integers: a
#: UInt32 widens to ``long``).
_SPARK: dict[type[pl.DataType], str] = {
    pl.Int64: "long",
    pl.Int32: "int",
    pl.UInt32: "long",
    pl.Float64: "double",
    pl.Boolean: "boolean",
    pl.String: "string",
}


def _lookup(table: Mapping[type[pl.DataType], object], dtype: pl.DataType) -> object:
    try:
        return table[type(dtype)]
    except KeyError:
        known = ", ".join(sorted(t.__name__ for t in table))
        raise TypeError(f"no conversion of dtype {dtype} (known: {known})") from None


def arrow_type(dtype: pl.DataType) -> pa.DataType:
    """The Arrow type of a polars dtype of a schema.

    >>> arrow_type(pl.String())
    DataType(string)
    """
    found = _lookup(_ARROW, dtype)
    assert isinstance(found, pa.DataType)
    return found


def arrow_schema(schema: Schema) -> pa.Schema:
    """``schema`` as an Arrow schema (strings as plain ``string``).

    >>> arrow_schema({"cp": pl.Float64()}).names
    ['cp']
    """
    return pa.schema([pa.field(name, arrow_type(t)) for name, t in schema.items()])


def spark_ddl(schema: Schema) -> str:
    """``schema`` as a Spark SQL DDL string (``"name type, ..."``).

    >>> spark_ddl({"edge_index": pl.Int64()})
    'edge_index long'
    """
    return ", ".join(f"{name} {_lookup(_SPARK, t)}" for name, t in schema.items())
