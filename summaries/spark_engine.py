"""The Spark engine: the summaries of a trace with CP computed on PySpark.

``sparktrail profile --engine spark`` runs :func:`summarize_spark`, which
gives the same :class:`~sparktrail.summaries.Summaries` as
:func:`~sparktrail.summaries.summarize` (to 1e-9) but spreads the expensive
part, cutting the trace into windows and counting their paths, over Spark:

1. The validated trace, with its row number as ``edge_index``, is written
   to a staging Parquet file and read by Spark (no driver-side pandas).
2. Spark SQL gives each row the range of windows it lies in, exactly as
   :mod:`~sparktrail.pag.snapshot` does (floor divisions in int64; an
   interval is a local row of positive length, any other row an instant),
   and whether it *anchors* each of them (an interval anchors every window
   it lies in, an instant only its earliest one), then explodes the range:
   one row per (trace row, window).
3. ``groupBy("window").applyInArrow`` hands each window the trace rows that
   touch it. A window that no row anchors is not listed (an instant on its
   start boundary only) and yields nothing. Otherwise the rows are clipped
   to the window (a clipped start becomes an event before every other one
   of its worker at ``ts``, a clipped end one after every other at ``te``,
   as the snapshot builder does) and the same numba kernel,
   :func:`~sparktrail.pag.critical_participation` with ``extent_ns`` set to
   the whole trace's first and last event, computes that window's CP,
   which is the window's CP in the whole trace.
4. The CP rows (``window, edge_index, start_ns, end_ns, weight_ns, cp``)
   come back through a staging Parquet file (not ``toArrow()``, which
   would hold a table as long as the trace in the driver's JVM heap), are
   joined with their trace rows by
   ``edge_index`` and run through the same summary transforms as the
   polars engine (:func:`~sparktrail.summaries.pipeline.summaries_from_cp`),
   so both engines share one definition of every summary and hint.

The trace still passes through the driver (it is validated there and the
task facts of the operator summary and the hints are read from it); what
Spark takes over is the per-window PAG work, which dominates the run time.

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
import warnings
from typing import TYPE_CHECKING, Any

import polars as pl

from sparktrail.pag import critical_participation
from sparktrail.pag.snapshot import SnapshotWarning, default_origin
from sparktrail.pag.trace import read_trace, validate_trace

from .model import HintOptions, Summaries
from .pipeline import summaries_from_cp

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["cp_spark", "spark_session", "summarize_spark"]

#: JVM heap of a session this module starts (local mode: driver = executor).
DRIVER_MEMORY = "2g"
#: The trace columns the CP kernel reads (plus ``edge_index``).
_KERNEL_COLUMNS = (
    "src_worker",
    "dst_worker",
    "start_ns",
    "end_ns",
    "activity",
    "src_seq",
    "dst_seq",
)
#: What each window's Arrow function returns.
_RESULT_SCHEMA = (
    "window_start_ns long, edge_index long, start_ns long, end_ns long, "
    "weight_ns long, cp double"
)
_RESULT_TYPES: dict[str, pl.DataType] = {
    "window_start_ns": pl.Int64(),
    "edge_index": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "weight_ns": pl.Int64(),
    "cp": pl.Float64(),
}


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


def _pieces(rows: DataFrame, window_ns: int, origin_ns: int) -> DataFrame:
    """One row per (trace row, window it lies in), with ``anchors``.

    The window range of :func:`sparktrail.pag.snapshot._window_ranges`:
    an interval ``[s, e)`` lies in windows ``s // W .. (e - 1) // W``, an
    instant in those whose closed span holds both its ends; windows before
    ``origin_ns`` do not exist.
    """
    from pyspark.sql import functions as F

    s = f"(start_ns - {origin_ns})"
    e = f"(end_ns - {origin_ns})"
    interval = "(src_worker = dst_worker AND end_ns > start_ns)"
    lo = (
        f"CASE WHEN {interval} THEN {_floor_div(s, window_ns)} "
        f"ELSE {_floor_div(f'greatest({s}, {e}) - 1', window_ns)} END"
    )
    hi = (
        f"CASE WHEN {interval} THEN {_floor_div(f'{e} - 1', window_ns)} "
        f"ELSE {_floor_div(f'least({s}, {e})', window_ns)} END"
    )
    ranged = rows.withColumn("_first", F.expr(f"greatest({lo}, 0)")).withColumn(
        "_last", F.expr(hi)
    )
    ranged = ranged.withColumn(
        "_anchor_last", F.expr(f"CASE WHEN {interval} THEN _last ELSE _first END")
    ).filter(F.col("_last") >= F.col("_first"))
    exploded = ranged.withColumn(
        "window", F.explode(F.sequence(F.col("_first"), F.col("_last")))
    )
    return exploded.withColumn(
        "anchors", F.col("window") <= F.col("_anchor_last")
    ).select("window", "edge_index", *_KERNEL_COLUMNS, "anchors")


def _window_cp(
    window_ns: int,
    origin_ns: int,
    extent_ns: tuple[int, int],
    key: tuple[pa.Scalar[Any], ...],
    table: pa.Table,
) -> pa.Table:
    """CP of one window from the trace rows that touch it (runs on executors).

    Returns the window's CP rows with ``edge_index`` the row of the whole
    trace, or no rows when the window is not listed.
    """
    k = int(key[0].as_py())
    rows = pl.from_arrow(table)
    assert isinstance(rows, pl.DataFrame)
    if not rows["anchors"].any():
        return pl.DataFrame(schema=_RESULT_TYPES).to_arrow()
    ts = origin_ns + k * window_ns
    te = ts + window_ns
    rows = rows.sort("edge_index")
    seqs = rows.select(
        pl.min_horizontal(pl.col("src_seq").min(), pl.col("dst_seq").min()).alias("lo"),
        pl.max_horizontal(pl.col("src_seq").max(), pl.col("dst_seq").max()).alias("hi"),
    ).row(0)
    seq_lo, seq_hi = int(seqs[0]) - 1, int(seqs[1]) + 1
    interval = (pl.col("src_worker") == pl.col("dst_worker")) & (
        pl.col("end_ns") > pl.col("start_ns")
    )
    early = interval & (pl.col("start_ns") < ts)
    late = interval & (pl.col("end_ns") > te)
    clipped = rows.select(
        pl.col("src_worker", "dst_worker"),
        pl.when(early).then(ts).otherwise(pl.col("start_ns")).alias("start_ns"),
        pl.when(late).then(te).otherwise(pl.col("end_ns")).alias("end_ns"),
        "activity",
        pl.when(early).then(seq_lo).otherwise(pl.col("src_seq")).alias("src_seq"),
        pl.when(late).then(seq_hi).otherwise(pl.col("dst_seq")).alias("dst_seq"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SnapshotWarning)
        cp = critical_participation(clipped, window_ns, ts, extent_ns=extent_ns)
    cp = cp.filter(pl.col("window_start_ns") == ts)
    return pl.DataFrame(
        {
            "window_start_ns": cp["window_start_ns"],
            "edge_index": rows["edge_index"].gather(cp["edge_index"]),
            "start_ns": cp["start_ns"],
            "end_ns": cp["end_ns"],
            "weight_ns": cp["weight_ns"],
            "cp": cp["cp"],
        },
        schema=_RESULT_TYPES,
    ).to_arrow()


def cp_spark(
    trace: pl.DataFrame,
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
        A validated trace frame.
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
    if isinstance(window_ns, bool) or not isinstance(window_ns, int) or window_ns <= 0:
        raise ValueError(f"window_ns must be a positive integer, got {window_ns!r}")
    frame = validate_trace(trace)
    if origin_ns is None:
        first = frame["start_ns"].min()
        origin_ns = default_origin(int(first), window_ns) if first is not None else 0  # type: ignore[arg-type]
    if frame.is_empty():
        return critical_participation(frame, window_ns, origin_ns)
    bounds = frame.select(
        pl.min_horizontal(pl.col("start_ns").min(), pl.col("end_ns").min()).alias(
            "first"
        ),
        pl.max_horizontal(pl.col("start_ns").max(), pl.col("end_ns").max()).alias(
            "last"
        ),
    ).row(0)
    extent = (int(bounds[0]), int(bounds[1]))
    origin = origin_ns
    session, created = spark_session(spark)
    try:
        with tempfile.TemporaryDirectory(dir=staging_dir) as tmp:
            path = os.path.join(tmp, "trace.parquet")
            frame.select(_KERNEL_COLUMNS).with_row_index("edge_index").with_columns(
                pl.col("edge_index").cast(pl.Int64)
            ).write_parquet(path)
            pieces = _pieces(session.read.parquet(path), window_ns, origin_ns)
            # A lambda, not a functools.partial: pyspark infers the UDF kind
            # from the function's signature, and fails on a partial's.
            result = pieces.groupBy("window").applyInArrow(
                lambda key, table: _window_cp(window_ns, origin, extent, key, table),
                _RESULT_SCHEMA,
            )
            # Through Parquet, not toArrow(): the CP table is as long as the
            # trace, and collecting it would hold it all in the driver's JVM.
            out = os.path.join(tmp, "cp.parquet")
            result.write.parquet(out)
            parts = sorted(glob.glob(os.path.join(out, "*.parquet")))
            table = (
                pl.read_parquet(parts, schema=_RESULT_TYPES)
                if parts
                else pl.DataFrame(schema=_RESULT_TYPES)
            )
    finally:
        if created:
            session.stop()
    assert isinstance(table, pl.DataFrame)
    table = table.cast(_RESULT_TYPES).sort("window_start_ns", "edge_index")  # type: ignore[arg-type]
    copied = frame.select(
        "src_worker", "dst_worker", "activity", "operator", "stage_id", "task_id"
    )[table["edge_index"]]
    cp = pl.DataFrame(
        {
            "window_start_ns": table["window_start_ns"],
            "window_end_ns": table["window_start_ns"] + window_ns,
            "edge_index": table["edge_index"],
            "src_worker": copied["src_worker"],
            "dst_worker": copied["dst_worker"],
            "start_ns": table["start_ns"],
            "end_ns": table["end_ns"],
            "activity": copied["activity"],
            "operator": copied["operator"],
            "stage_id": copied["stage_id"],
            "task_id": copied["task_id"],
            "weight_ns": table["weight_ns"],
            "cp": table["cp"],
        }
    )
    _warn_pathless(cp)
    return cp


def _warn_pathless(cp: pl.DataFrame) -> None:
    totals = cp.group_by("window_start_ns").agg(pl.col("cp").sum())
    empty = totals.filter(pl.col("cp") == 0.0)
    if len(empty):
        first = int(empty["window_start_ns"].min())  # type: ignore[arg-type]
        warnings.warn(
            f"{len(empty)} of {len(totals)} windows have no path from start to "
            f"end (first at window_start_ns={first}); their CP is 0",
            SnapshotWarning,
            stacklevel=3,
        )


def summarize_spark(
    trace: pl.DataFrame | str | os.PathLike[str],
    window_ns: int,
    origin_ns: int | None = None,
    options: HintOptions | None = None,
    *,
    spark: SparkSession | None = None,
    staging_dir: str | os.PathLike[str] | None = None,
) -> Summaries:
    """Compute every summary and hint of a trace, with CP computed on Spark.

    Parameters
    ----------
    trace
        A trace frame, or a path to a trace file or directory.
    window_ns, origin_ns, options
        As for :func:`~sparktrail.summaries.summarize`.
    spark
        The SparkSession; default: the active one, else a new ``local[*]``
        session, stopped afterwards.
    staging_dir
        Where the trace is staged as Parquet (see :func:`cp_spark`).

    Returns
    -------
    Summaries
        The same summaries as :func:`~sparktrail.summaries.summarize`.
    """
    frame = (
        validate_trace(trace) if isinstance(trace, pl.DataFrame) else read_trace(trace)
    )
    cp = cp_spark(frame, window_ns, origin_ns, spark=spark, staging_dir=staging_dir)
    return summaries_from_cp(cp, frame, window_ns, origin_ns, options)
