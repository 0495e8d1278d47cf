"""The Spark engine: the summaries of a trace with CP computed on PySpark.

``sparktrail profile --engine spark`` runs :func:`summarize_spark`, which
gives the same :class:`~sparktrail.summaries.Summaries` as
:func:`~sparktrail.engines.summarize` (to 1e-9) but spreads the expensive
part, cutting the trace into windows and counting their paths, over Spark:

1. The validated trace, with its row number as ``edge_index``, is written
   to a staging Parquet file and read by Spark (no driver-side pandas).
2. Spark SQL gives each row the coarse range of windows it may lie in,
   :func:`~sparktrail.pag.windows.coarse_range` (floor divisions of its
   event times in int64), and explodes it: one row per (trace row, window).
3. ``groupBy("window").applyInArrow`` hands each window those rows, and
   :func:`~sparktrail.pag.chunk_cp.one_window_cp` (:func:`window_group_cp`), the
   polars path the other engines take, keeps the rows the pag rules put in
   it (:mod:`~sparktrail.pag.windows`), clips them, and runs the numba
   kernel with ``extent_ns`` set to the whole trace's first and last event:
   the window's CP in the whole trace. A window that no row anchors is not
   listed (an instant on its start boundary only) and yields nothing.
4. The CP rows (``window, edge_index, weight_ns, cp`` with the trace
   columns the summaries group by) are written to a staging Parquet file
   and Spark SQL reduces them, in four aggregations, to the sums of
   :class:`~sparktrail.summaries.partials.Partials`: one fine grouping (by
   window, worker, locality, activity and stage, from which the window,
   activity, worker, stage and shuffle-read partials follow by summing
   further), messages by sender, CP per task over the windows with paths,
   and CP per driver row. Only those sums, a few rows per window (and one
   per task), come back to the driver, through Arrow.
5. :func:`~sparktrail.summaries.finish.summaries_from_partials` finishes
   the summaries and hints from them, as the polars engine does, so both
   engines share one definition of every summary and hint.

The trace still passes through the driver: it is validated there, and the
task facts of the operator summary and the hints (one row per task, from
the trace, not the CP) and the shuffle sources are read from it. What Spark
takes over is the per-window PAG work and every aggregation of CP rows,
which dominate the run time; the CP table, as long as the trace, never
reaches the driver.

PySpark is imported only inside functions: the rest of
:mod:`sparktrail.summaries` works without it.

Assumptions
-----------
* Spark's Python workers can import ``sparktrail`` (and its numba kernel):
  true in local mode, where they run the driver's interpreter; on a cluster
  the package must be installed on every node, and ``staging_dir`` must be
  a path every node can read.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
import tempfile
from typing import TYPE_CHECKING, Any

import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag import critical_participation
from sparktrail.pag.chunk_cp import one_window_cp, trace_extent
from sparktrail.pag.participation import check_window
from sparktrail.pag.schemas import (
    CP,
    CP_TABLE,
    EDGE_INDEX,
    END_NS,
    KERNEL_COLUMNS,
    START_NS,
    WEIGHT_NS,
    WINDOW_END_NS,
    WINDOW_START_NS,
    arrow_schema,
    check_frame,
    spark_ddl,
)
from sparktrail.pag.snapshot import trace_origin
from sparktrail.pag.trace import Trace, TraceLike, load_trace
from sparktrail.pag.windows import to_trace_rows
from sparktrail.pag.workers import EXECUTOR_PATTERN
from sparktrail.summaries import path_windows
from sparktrail.summaries.communication import read_partial_of_sums
from sparktrail.summaries.finish import summaries_from_partials, warn_pathless
from sparktrail.summaries.frames import CP_NS, HAS_PATHS
from sparktrail.summaries.partials import FINE_KEYS, Partials, partials_of_sums
from sparktrail.summaries.result import HintOptions, Summaries

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["cp_spark", "partials_spark", "spark_session", "summarize_spark"]

#: JVM heap of a session this module starts (local mode: driver = executor).
DRIVER_MEMORY = "2g"
#: Trace columns the summaries group CP rows by, carried through the kernel.
_SUMMARY_COLUMNS = ("operator", "stage_id", "task_id")
#: What each window's Arrow function returns: the CP table's columns but
#: ``window_end_ns`` (added on the driver), in this order.
_RESULT_TYPES: dict[str, pl.DataType] = {
    name: CP_TABLE[name]
    for name in (
        WINDOW_START_NS,
        EDGE_INDEX,
        START_NS,
        END_NS,
        WEIGHT_NS,
        CP,
        "src_worker",
        "dst_worker",
        "activity",
        *_SUMMARY_COLUMNS,
    )
}
_RESULT_SCHEMA = spark_ddl(_RESULT_TYPES)


def _require() -> None:
    """Raise ImportError naming what the engine misses (pyspark, pandas, pyarrow).

    PySpark's Arrow UDFs (``applyInArrow``) import pandas, though the data
    never becomes a pandas frame here.
    """
    missing = [
        name
        for name in ("pyspark", "pandas", "pyarrow")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise ImportError(
            f"the spark engine needs {', '.join(missing)}: "
            "pip install 'sparktrail[spark]' (pyspark[sql])"
        )


def spark_session(spark: SparkSession | None = None) -> tuple[SparkSession, bool]:
    """The session to run on, and whether this call created it.

    ``spark`` if given, else the active session, else a new ``local[*]``
    one (for the CLI) whose Python workers run this interpreter. Arrow
    transfers are switched on. In local mode, a session whose Python
    workers would run the bare default ``python3`` (``PYSPARK_PYTHON``
    unset) is pointed at this interpreter instead, which is the one that
    has ``sparktrail`` installed.
    """
    _require()
    from pyspark.sql import SparkSession

    created = False
    if spark is None:
        spark = SparkSession.getActiveSession()
    if spark is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (
            SparkSession.builder.master("local[*]")
            .appName("sparktrail-profile")
            .config("spark.ui.enabled", "false")
            # Its stage progress bars would break into profile's own output.
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", DRIVER_MEMORY)
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        created = True
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    context = spark.sparkContext
    if (
        "PYSPARK_PYTHON" not in os.environ
        and (context.master or "").startswith("local")
        and context.pythonExec == "python3"
    ):
        context.pythonExec = sys.executable
    return spark, created


def _floor_div(expr: str, window_ns: int) -> str:
    """SQL for ``floor(expr / window_ns)`` in exact int64 arithmetic."""
    return f"(({expr}) - pmod({expr}, {window_ns})) div {window_ns}"


def _coarse_sql(window_ns: int, origin_ns: int) -> tuple[str, str]:
    """:func:`sparktrail.pag.windows.coarse_range` as Spark SQL (``lo``, ``hi``).

    Floor divisions of the event times in int64; checked against the polars
    expressions in ``tests/engines/test_spark.py``.
    """
    first = f"(least(start_ns, end_ns) - {origin_ns})"
    last = f"(greatest(start_ns, end_ns) - {origin_ns})"
    lo = f"greatest({_floor_div(f'{first} - 1', window_ns)}, 0)"
    return lo, _floor_div(last, window_ns)


def _pieces(rows: DataFrame, window_ns: int, origin_ns: int) -> DataFrame:
    """One row per (trace row, window of its coarse range).

    The range is :func:`sparktrail.pag.windows.coarse_range`, which holds
    every window the row lies in and reads only its times; each window's
    function then keeps exactly the rows the pag rules put there
    (:func:`window_group_cp`). Windows before ``origin_ns`` do not exist.
    """
    from pyspark.sql import functions as F

    lo, hi = _coarse_sql(window_ns, origin_ns)
    ranged = (
        rows.withColumn("_lo", F.expr(lo))
        .withColumn("_hi", F.expr(hi))
        .filter(F.col("_hi") >= F.col("_lo"))
    )
    exploded = ranged.withColumn(
        "window", F.explode(F.sequence(F.col("_lo"), F.col("_hi")))
    )
    return exploded.select("window", "edge_index", *KERNEL_COLUMNS, *_SUMMARY_COLUMNS)


def window_group_cp(
    window_ns: int,
    origin_ns: int,
    extent_ns: tuple[int, int],
    row_column: str,
    key: tuple[pa.Scalar[Any], ...],
    table: pa.Table,
) -> pl.DataFrame:
    """CP of one window from the trace rows that may touch it (runs on
    executors, in both Spark engines' ``groupBy(window).applyInArrow``).

    ``key`` is the window's index in the windows of ``window_ns`` from
    ``origin_ns``; ``table`` its exploded rows, ``row_column`` their row in
    the whole trace. :func:`~sparktrail.pag.chunk_cp.one_window_cp` with the
    grid's origin keeps the rows that lie in the window, clips them and
    computes its CP (so a window that no row anchors gets no rows, as in
    the whole trace). Returns the window's CP rows (of :data:`_RESULT_TYPES`)
    with ``edge_index`` the row of the whole trace.

    Raises
    ------
    CycleError
        As :func:`~sparktrail.pag.chunk_cp.one_window_cp`.
    """
    ts = origin_ns + int(key[0].as_py()) * window_ns
    rows = pl.from_arrow(table)
    assert isinstance(rows, pl.DataFrame)
    rows = rows.drop("window").sort(row_column)
    cp, near = one_window_cp(
        rows,
        ts,
        ts + window_ns,
        extent_ns,
        origin_ns=origin_ns,
        row_column=row_column,
    )
    edge = cp[EDGE_INDEX]
    return pl.DataFrame(
        {
            WINDOW_START_NS: cp[WINDOW_START_NS],
            EDGE_INDEX: to_trace_rows(cp, near)[EDGE_INDEX],
            **{c: cp[c] for c in (START_NS, END_NS, WEIGHT_NS, CP)},
            **{
                c: near[c].gather(edge)
                for c in ("src_worker", "dst_worker", "activity", *_SUMMARY_COLUMNS)
            },
        },
        schema=_RESULT_TYPES,
    )


#: The Spark engine builds every window of the span (it explodes each row
#: over its windows): more windows than this many per trace row (and than
#: :data:`_MIN_WINDOW_LIMIT`) are refused rather than exploded.
_WINDOWS_PER_ROW = 10
_MIN_WINDOW_LIMIT = 1_000_000


def _window(
    frame: pl.DataFrame, window_ns: object, origin_ns: object
) -> tuple[int, int]:
    """The window length and origin, checked as every engine checks them.

    Raises
    ------
    InputError
        When the trace spans far more windows than it has rows (DESIGN
        §10): the polars engine computes a stretch of windows without
        events as one window; this engine would build each.
    """
    window, origin = check_window(window_ns, origin_ns)
    origin = trace_origin(frame, window) if origin is None else origin
    if not frame.is_empty():
        _, last = trace_extent(frame)
        windows = (last - origin) // window + 1
        if windows > max(_MIN_WINDOW_LIMIT, _WINDOWS_PER_ROW * frame.height):
            raise InputError(
                f"the trace spans {windows:,} windows of {window:,} ns for "
                f"{frame.height:,} rows: the Spark engine builds every window; "
                "use --engine polars (it computes a stretch without events as "
                "one window) or a longer --window"
            )
    return window, origin


def _cp_rows(
    session: SparkSession, frame: pl.DataFrame, window_ns: int, origin_ns: int, tmp: str
) -> DataFrame:
    """The CP rows of every window, computed by Spark and staged as Parquet.

    Columns of :data:`_RESULT_SCHEMA`; ``edge_index`` is the trace row.
    """
    extent = trace_extent(frame)
    path = os.path.join(tmp, "trace.parquet")
    frame.select(*KERNEL_COLUMNS, *_SUMMARY_COLUMNS).with_row_index(
        EDGE_INDEX
    ).with_columns(pl.col(EDGE_INDEX).cast(pl.Int64)).write_parquet(path)
    pieces = _pieces(session.read.parquet(path), window_ns, origin_ns)
    # A lambda, not a functools.partial: pyspark infers the UDF kind from
    # the function's signature, and fails on a partial's.
    result = pieces.groupBy("window").applyInArrow(
        lambda key, table: _arrow(
            window_group_cp(window_ns, origin_ns, extent, EDGE_INDEX, key, table)
        ),
        _RESULT_SCHEMA,
    )
    # Staged, not cached: the rows are read by several queries, and the
    # table is as long as the trace (the JVM heap would not hold it).
    out = os.path.join(tmp, "cp.parquet")
    result.write.parquet(out)
    return session.read.schema(_RESULT_SCHEMA).parquet(out)


def _arrow(frame: pl.DataFrame) -> pa.Table:
    """``frame`` (of :data:`_RESULT_TYPES`) as Arrow with the plain
    ``string`` type Spark's schema has (polars exports strings as
    ``large_string``)."""
    return frame.to_arrow().cast(arrow_schema(_RESULT_TYPES))


def cp_spark(
    trace: pl.DataFrame | Trace,
    window_ns: int,
    origin_ns: int | None = None,
    *,
    spark: SparkSession | None = None,
    staging_dir: str | os.PathLike[str] | None = None,
) -> pl.DataFrame:
    """:func:`~sparktrail.pag.critical_participation`, computed on Spark.

    Parameters
    ----------
    trace
        A trace frame (validated unless it is a :class:`Trace`).
    window_ns, origin_ns
        As for :func:`~sparktrail.pag.critical_participation`.
    spark
        The session (default: see :func:`spark_session`).
    staging_dir
        Where the trace is staged as Parquet for Spark to read (default: a
        temporary directory, removed afterwards; on a cluster it must be
        readable by every node).

    Returns
    -------
    polars.DataFrame
        The CP table, equal to the polars engine's (same rows and order).
    """
    valid = load_trace(trace)
    frame = valid.frame
    window_ns, origin = _window(frame, window_ns, origin_ns)
    if frame.is_empty():
        return critical_participation(valid, window_ns, origin)
    session, created = spark_session(spark)
    try:
        with tempfile.TemporaryDirectory(dir=staging_dir) as tmp:
            _cp_rows(session, frame, window_ns, origin, tmp)
            # Through Parquet, not toArrow(): the CP table is as long as the
            # trace, and collecting it would hold it all in the driver's JVM.
            parts = sorted(glob.glob(os.path.join(tmp, "cp.parquet", "*.parquet")))
            table = (
                pl.read_parquet(parts, schema=_RESULT_TYPES)
                if parts
                else pl.DataFrame(schema=_RESULT_TYPES)
            )
    finally:
        if created:
            session.stop()
    assert isinstance(table, pl.DataFrame)
    table = table.cast(_RESULT_TYPES).sort(WINDOW_START_NS, EDGE_INDEX)  # type: ignore[arg-type]
    end = (pl.col(WINDOW_START_NS) + window_ns).alias(WINDOW_END_NS)
    cp = table.select(end if name == WINDOW_END_NS else name for name in CP_TABLE)
    check_frame(cp, CP_TABLE, "CP table (spark)")
    warn_pathless(path_windows(cp), stacklevel=2)
    return cp


#: Spark SQL for the columns :func:`~sparktrail.summaries.charge.charge` adds.
_CHARGE = {
    "is_local": "src_worker = dst_worker",
    "worker": "CASE WHEN src_worker = dst_worker THEN src_worker ELSE dst_worker END",
}
_EXECUTOR_SQL = (
    "CASE WHEN worker = 'driver' THEN CAST(NULL AS STRING) "
    f"WHEN worker RLIKE '{EXECUTOR_PATTERN}' "
    f"THEN regexp_extract(worker, '{EXECUTOR_PATTERN}', 1) ELSE worker END"
)


def _charged(rows: DataFrame, window_ns: int) -> DataFrame:
    from pyspark.sql import functions as F

    out = rows.withColumn(WINDOW_END_NS, F.col(WINDOW_START_NS) + F.lit(window_ns))
    for name, sql in _CHARGE.items():
        out = out.withColumn(name, F.expr(sql))
    return out.withColumn("executor", F.expr(_EXECUTOR_SQL)).withColumn(
        CP_NS, F.expr(f"cp * {window_ns}D")
    )


def _fine_query(cp: DataFrame) -> DataFrame:
    """:func:`~sparktrail.summaries.partials.fine_sums` in Spark.

    The one scan most partials are derived from
    (:func:`~sparktrail.summaries.partials.partials_of_sums`): grouping by
    all their keys at once reads the staged CP rows once instead of once
    per partial.
    """
    from pyspark.sql import functions as F

    return cp.groupBy(*FINE_KEYS).agg(
        F.max("executor").alias("executor"),
        F.sum("cp").alias("cp"),
        F.sum(CP_NS).alias(CP_NS),
        F.sum(WEIGHT_NS).alias(WEIGHT_NS),
        F.count(F.lit(1)).alias("edges"),
    )


def _spark_partials(session: SparkSession, cp: DataFrame) -> dict[str, pl.DataFrame]:
    """Every :class:`Partials` frame, from four Spark aggregations of ``cp``.

    One fine grouping (:func:`_fine_query`) gives the window, activity,
    worker, stage and shuffle-read partials; messages (by sender), tasks
    (over the windows with paths) and driver rows have a query each.
    """
    from pyspark.sql import functions as F

    window = [WINDOW_START_NS, WINDOW_END_NS]
    fine = _fetch(_fine_query(cp))
    derived = partials_of_sums(fine)
    messages = _fetch(
        cp.filter("NOT is_local")
        .groupBy(*window, "src_worker", "worker", "activity")
        .agg(
            F.sum("cp").alias("cp"),
            F.sum(CP_NS).alias(CP_NS),
            F.count(F.lit(1)).alias("edges"),
        )
    ).with_columns(
        pl.lit(False).alias("read"), pl.lit(None, pl.Int64).alias("stage_id")
    )
    starts = derived["windows"].filter(HAS_PATHS)[WINDOW_START_NS].to_list()
    with_paths = session.createDataFrame(
        [(int(start),) for start in starts], "window_start_ns long"
    )
    tasks = (
        cp.filter("task_id IS NOT NULL")
        .join(F.broadcast(with_paths), on=WINDOW_START_NS, how="left_semi")
        .groupBy("task_id")
        .agg(
            F.sum("cp").alias("cp"),
            F.countDistinct(WINDOW_START_NS).alias("windows"),
        )
    )
    driver = (
        cp.filter("activity = 'driver' AND cp > 0")
        .groupBy(EDGE_INDEX)
        .agg(F.sum("cp").alias("cp"))
    )
    reads = read_partial_of_sums(fine)
    return {
        **derived,
        "channels": pl.concat([messages, reads], how="diagonal_relaxed"),
        "tasks": _fetch(tasks),
        "driver": _fetch(driver),
    }


def _fetch(query: DataFrame) -> pl.DataFrame:
    """A (small) Spark result as a polars frame, through Arrow."""
    got = pl.from_arrow(query.toArrow())
    assert isinstance(got, pl.DataFrame)
    return got


def partials_spark(
    trace: pl.DataFrame | Trace,
    window_ns: int,
    origin_ns: int | None = None,
    *,
    spark: SparkSession | None = None,
    staging_dir: str | os.PathLike[str] | None = None,
) -> Partials:
    """The :class:`Partials` of a trace, computed and aggregated by Spark.

    Parameters
    ----------
    trace
        A trace frame (validated unless it is a :class:`Trace`).
    window_ns, origin_ns, spark, staging_dir
        As for :func:`cp_spark`.

    Returns
    -------
    Partials
        Equal (to float rounding) to ``Partials.of`` of the whole CP table.
    """
    frame = load_trace(trace).frame
    window_ns, origin = _window(frame, window_ns, origin_ns)
    # The schemas every frame must have, from the polars definition.
    empty = Partials.of(critical_participation(Trace(frame.clear()), window_ns, origin))
    if frame.is_empty():
        return empty
    session, created = spark_session(spark)
    try:
        with tempfile.TemporaryDirectory(dir=staging_dir) as tmp:
            cp = _charged(_cp_rows(session, frame, window_ns, origin, tmp), window_ns)
            sums = _spark_partials(session, cp)
    finally:
        if created:
            session.stop()
    # Each frame in the schema Partials.of gives it in polars.
    collected = {
        name: pl.concat(
            [like, sums[name].select(like.columns).cast(like.schema)]  # type: ignore[arg-type]
        )
        for name, like in ((f, getattr(empty, f)) for f in sums)
    }
    collected["windows"] = collected["windows"].sort(WINDOW_START_NS)
    return Partials(**collected)


def summarize_spark(
    trace: TraceLike,
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
    *,
    spark: SparkSession | None = None,
    staging_dir: str | os.PathLike[str] | None = None,
) -> Summaries:
    """Every summary and hint of a trace, CP and its sums computed by Spark.

    Parameters
    ----------
    trace
        A trace frame, a path to a trace file or directory, or a
        :class:`~sparktrail.pag.trace.Trace`; validated once, here.
    window_ns, origin_ns, options
        As for :func:`~sparktrail.engines.summarize`.
    spark
        The SparkSession; default: the active one, else a new ``local[*]``
        session, stopped afterwards.
    staging_dir
        Where the trace is staged as Parquet (see :func:`cp_spark`).

    Returns
    -------
    Summaries
        The same summaries as :func:`~sparktrail.engines.summarize`.
    """
    window, origin = check_window(window_ns, origin_ns)
    valid = load_trace(trace)
    partials = partials_spark(
        valid, window, origin, spark=spark, staging_dir=staging_dir
    )
    warn_pathless(partials.windows, stacklevel=2)
    return summaries_from_partials(partials, valid, window, origin, options)
