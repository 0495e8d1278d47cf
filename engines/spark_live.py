"""The live pipeline on Spark: Structured Streaming over a trace directory.

``sparktrail live --engine spark`` runs :class:`SparkLivePipeline`, which
offers :class:`~sparktrail.engines.online.OnlinePipeline`'s interface
(``poll``, ``store`` and the counters) and writes the same store
(:mod:`~sparktrail.engines.store`: one folder per closed window, the same
frames), but runs the reading, the per-window CP and its sums on Spark:

1. Each :meth:`~SparkLivePipeline.poll` runs a Structured Streaming query
   over the trace directory with the ``AvailableNow`` trigger: a
   ``binaryFile`` file source (``pathGlobFilter`` ``*.arrow``, recursive)
   hands every file not consumed yet to ``foreachBatch``; Spark's
   checkpoint (``checkpointLocation`` under the store) records which files
   were consumed.
2. A micro-batch decodes its files on the executors (``mapInArrow`` of
   :func:`~sparktrail.pag.trace.decode_trace`, the reader ``read_trace``
   uses) into trace rows, staged as Parquet: the *open rows*, the state
   the polars engine keeps in memory. The driver reads each file's
   numbers from the staged rows (rows, first and last event, late rows;
   a Spark job for them would cost more than the reading), numbers the
   rows (files in name order, as the polars engine consumes them) and
   moves the watermark.
3. The windows the watermark passed are closed: the open rows are
   exploded over their coarse window range
   (:func:`~sparktrail.pag.windows.coarse_range`, in SQL), and
   ``groupBy(window).applyInArrow`` runs
   :func:`~sparktrail.pag.chunk_cp.one_window_cp` of each window, the
   polars engine's own call (``extent_ns`` the first and latest event
   seen), on the executors.
4. Spark SQL sums the CP rows per window to the
   :class:`~sparktrail.summaries.partials.Partials` of each window (the
   batch Spark engine's aggregations, :mod:`~sparktrail.engines.spark`,
   grouped by window); the driver finishes each window with
   :func:`~sparktrail.summaries.finish.summaries_from_partials` and writes
   it with :class:`~sparktrail.engines.store.WindowStore`.

``poll(final=True)`` then closes every window up to the last event, as
the polars engine's does.

Each poll pays for a query start, and each micro-batch that closes
windows for six Spark jobs (decode, CP, four sums, the sums submitted
together): about 10 s on a loaded 2-core machine, against the polars
engine's 0.1–0.2 s a window (``bench/live_engines.py``, BENCHMARKS.md).
The Spark engine is for when the windows' CP outgrows one machine, not
for latency.

Assumptions
-----------
* As :mod:`~sparktrail.engines.online` (windows ``[k * w, (k + 1) * w)``,
  lateness, files complete when they appear under their final name and
  unchanged afterwards), and as :mod:`~sparktrail.engines.spark` (Python
  workers import ``sparktrail``; the store is on a file system the driver
  and every executor share, which local mode gives).
* A micro-batch's files are numbered in name order; across micro-batches
  Spark offers files in modification-time order. With file names sorting
  in arrival order (as ``write_trace``'s producers name them) both orders
  agree, and one poll that reads every file gives the polars engine's
  windows, CP rows and summaries (``tests/engines/test_spark_live.py``).
* The driver still reads the rows of the windows it closes (the task facts
  of the summaries and hints come from the trace rows, as in the Spark
  batch engine) and the closed windows' CP rows (the store holds them);
  Spark takes the decoding, the state, the CP kernel and the sums.

Differences from the polars engine
----------------------------------
* Spark's file source skips names starting with ``_`` as well as ``.``.
* A file that cannot be read is skipped for good (counted in
  ``corrupt_files``, with a :class:`TraceFileWarning`): Spark's file
  source offers a path once, so a rewrite is not read again.
* Columns beyond the trace schema are not carried.
* The store is this engine's: its checkpoint is not the polars engine's,
  and each engine refuses the other's store (remove it to switch).

Restart
-------
``checkpoint.json`` (written at the end of every micro-batch and close)
holds the driver's state: the last micro-batch applied, the staged open
rows with their numbering, the end of the closed windows and the counters.
A killed run leaves Spark's offset log ahead of its commit log; the
restarted query runs the same micro-batch again on the same files, which
rebuilds the same state, so the windows it closes are those the killed
run would have written: the ones already in the store are kept, the others
written. A micro-batch already in the checkpoint is skipped. A store with
windows but no checkpoint is started afresh, as the polars engine does.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag import CycleError, critical_participation
from sparktrail.pag.context import AppContext
from sparktrail.pag.participation import check_window
from sparktrail.pag.schemas import (
    CP_TABLE,
    EDGE_INDEX,
    KERNEL_COLUMNS,
    TRACE,
    WINDOW_END_NS,
    WINDOW_START_NS,
    arrow_schema,
    spark_ddl,
)
from sparktrail.pag.trace import (
    TRACE_SUFFIX,
    Trace,
    TraceError,
    decode_trace,
    empty_trace,
    read_context,
)
from sparktrail.pag.windows import (
    TRACE_ROW,
    first_event,
    last_event,
    touches,
)
from sparktrail.summaries.communication import read_partial_of_sums
from sparktrail.summaries.finish import summaries_from_partials
from sparktrail.summaries.frames import HAS_PATHS
from sparktrail.summaries.partials import Partials, partials_of_sums
from sparktrail.summaries.result import HintOptions

from .checkpoint import PipelineCounters, check_checkpoint
from .online import ClosedWindow, TraceFileWarning
from .open_rows import ROW, still_open
from .spark import (
    _RESULT_TYPES,
    _SUMMARY_COLUMNS,
    _charged,
    _coarse_sql,
    _fetch,
    _fine_query,
    spark_session,
    window_group_cp,
)
from .store import WindowStore, store_dir
from .watermark import close_until

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CHECKPOINT_VERSION", "SparkLivePipeline"]

#: The checkpoint's version: not the polars engine's, which refuses it.
CHECKPOINT_VERSION = "spark-1"
#: Under the store: Spark's stream checkpoint and the staged rows.
SPARK_DIR = "spark"
#: What Spark's ``binaryFile`` source gives (a streaming source needs it).
_BINARY_DDL = "path string, modificationTime timestamp, length long, content binary"
FILE = "_path"  # the file a decoded row came from (Spark's URI)
FILE_ROW = "_file_row"  # its row in that file; null on a file's marker row
ERROR = "_error"  # why a file could not be read, on its marker row
#: A decoded row: the trace columns, then where it came from.
_DECODED: dict[str, pl.DataType] = {
    **TRACE,
    FILE: pl.String(),
    FILE_ROW: pl.Int64(),
    ERROR: pl.String(),
}
FAILED = "_failed"  # a window's CycleError, on its one result row
_RESULT: dict[str, pl.DataType] = {**_RESULT_TYPES, FAILED: pl.String()}


def _decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Trace rows of the files in ``batches`` (``path, content``; executors).

    A file gives its rows, or one marker row (no ``_file_row``) when it has
    none or cannot be read (``_error`` says why), so that every file is
    counted.
    """
    schema = arrow_schema(_DECODED)
    for batch in batches:
        paths = batch.column("path").to_pylist()
        contents = batch.column("content").to_pylist()
        for path, content in zip(paths, contents, strict=True):
            try:
                frame = decode_trace(content, path).select(*TRACE)
                error = None
            except TraceError as err:
                frame, error = pl.DataFrame(schema=TRACE), str(err)
            if frame.is_empty():
                marker: dict[str, list[Any]] = {FILE: [path], ERROR: [error]}
                frame = pl.DataFrame(
                    {c: marker.get(c, [None]) for c in _DECODED}, schema=_DECODED
                )
            else:
                frame = frame.with_columns(
                    pl.lit(path, pl.String).alias(FILE),
                    pl.int_range(pl.len(), dtype=pl.Int64).alias(FILE_ROW),
                    pl.lit(None, pl.String).alias(ERROR),
                )
            yield from frame.to_arrow().cast(schema).to_batches()


def _spark_closing_cp(
    window_ns: int,
    extent_ns: tuple[int, int],
    key: tuple[pa.Scalar[Any], ...],
    table: pa.Table,
) -> pa.Table:
    """CP rows of one closing window from the open rows that may touch it.

    Runs on the executors: the batch Spark engine's
    :func:`~sparktrail.engines.spark.window_group_cp` on the windows
    ``[k * w, (k + 1) * w)`` (the live engines' grid), ``edge_index`` the
    trace row (``_row``). A window whose PAG has a cycle gives one row
    naming the error in ``_failed``.
    """
    try:
        cp = window_group_cp(window_ns, 0, extent_ns, ROW, key, table)
    except CycleError as err:
        ts = int(key[0].as_py()) * window_ns
        cp = pl.DataFrame(
            {WINDOW_START_NS: [ts], FAILED: [str(err)]},
            schema={WINDOW_START_NS: pl.Int64, FAILED: pl.String},
        )
    result = pl.concat([pl.DataFrame(schema=_RESULT), cp], how="diagonal")
    return result.to_arrow().cast(arrow_schema(_RESULT))


def _local(uri: str) -> Path:
    """The local path of a ``file:`` URI (Spark's ``path`` column)."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme in ("", "file") else Path(uri)


def _parts(folder: Path) -> list[str]:
    """The Parquet part files Spark wrote to ``folder``."""
    return sorted(glob.glob(os.path.join(folder, "*.parquet")))


class SparkLivePipeline(PipelineCounters):
    """Follow a trace directory with Spark Structured Streaming; store windows.

    Parameters
    ----------
    trace_dir, window_ns, lateness_ns, options
        As for :class:`~sparktrail.engines.online.OnlinePipeline`.
    spark
        The session (default: the active one, else a new local one, see
        :func:`~sparktrail.engines.spark.spark_session`; :meth:`stop`
        stops a session this pipeline created).
    max_files_per_trigger
        At most this many files per micro-batch (default: all new files).

    Attributes
    ----------
    corrupt_files, late_rows, failed_windows : int
        As for :class:`~sparktrail.engines.online.OnlinePipeline`.
    batches : int
        Micro-batches applied (in this process).
    phase_s : dict of str to float
        Wall seconds spent so far, by phase: ``stream`` (every poll's
        streaming query, start to end, which holds the others), ``decode``
        (the micro-batches' decode jobs), ``cp`` (the CP jobs), ``sums``
        (the aggregation jobs) and ``finish`` (the driver's summaries and
        store writes); for the benchmark's breakdown.
    """

    window_ns: int  # fixed windows only (micro-batch windows are refused)

    def __init__(
        self,
        trace_dir: str | os.PathLike[str],
        window_ns: int,
        lateness_ns: int,
        options: HintOptions | None = None,
        *,
        spark: SparkSession | None = None,
        max_files_per_trigger: int | None = None,
    ) -> None:
        window_ns, _ = check_window(window_ns, None)
        if lateness_ns < 0:
            raise InputError(f"lateness_ns must be >= 0, got {lateness_ns!r}")
        if max_files_per_trigger is not None and max_files_per_trigger < 1:
            raise InputError(
                f"max_files_per_trigger must be >= 1, got {max_files_per_trigger!r}"
            )
        self.trace_dir = Path(trace_dir)
        self.window_ns = window_ns
        self.lateness_ns = lateness_ns
        self.options = options
        self.max_files_per_trigger = max_files_per_trigger
        self.store = WindowStore(store_dir(trace_dir))
        self.spark_dir = self.store.root / SPARK_DIR
        self._context = AppContext()
        self._next_row = 0
        self._first: int | None = None
        self._last: int | None = None
        self._closed_until: int | None = None
        self._last_batch = -1
        # Staged open rows: micro-batch -> latest event and file offsets.
        self._batches: dict[int, dict[str, Any]] = {}
        self._corrupt: dict[str, str] = {}
        self.late_rows = 0
        self.failed_windows = 0
        self.batches = 0
        self.phase_s: dict[str, float] = {}
        self._closed: list[ClosedWindow] = []
        self._resume()
        self.spark, self._created = spark_session(spark)
        # Empty partials give every frame its polars schema (as partials_spark).
        self._empty = Partials.of(
            critical_participation(Trace(empty_trace()), window_ns, 0)
        )

    # -- state -------------------------------------------------------------

    @property
    def open_window_ns(self) -> int:
        """The length of the first window not closed yet (windows are fixed)."""
        return self.window_ns

    @property
    def buffered_rows(self) -> int:
        """Rows staged for the windows still open (whole micro-batches)."""
        return sum(int(b["rows"]) for b in self._batches.values())

    def _rows_dir(self, batch: int) -> Path:
        return self.spark_dir / "rows" / f"b{batch}"

    def checkpoint(self) -> dict[str, Any]:
        """The state a restart needs, as JSON-ready data."""
        return self._checkpoint_fields(CHECKPOINT_VERSION) | {
            "last_batch": self._last_batch,
            "batches": {str(k): v for k, v in self._batches.items()},
        }

    def _resume(self) -> None:
        self.store.remove_temporaries()
        data = self.store.read_checkpoint()
        if data is None:  # windows of unknown making, rows of a killed run
            for start in self.store.window_starts():
                self.store.remove_window(start)
            shutil.rmtree(self.spark_dir, ignore_errors=True)
            return
        path = self.store.checkpoint_path
        check_checkpoint(data, path, CHECKPOINT_VERSION, self.window_ns)
        if int(data["last_batch"]) >= 0 and not (self.spark_dir / "stream").is_dir():
            # Spark would offer every file again as batch 0, which the
            # checkpoint says is applied: nothing new would ever be read.
            raise InputError(
                f"{path}: Spark's stream checkpoint {self.spark_dir / 'stream'} is "
                f"gone; remove {self.store.root} to start afresh"
            )
        self._load_checkpoint_fields(data)
        self._last_batch = int(data["last_batch"])
        self._batches = {int(k): v for k, v in data["batches"].items()}
        # Staged rows the checkpoint does not name: a killed micro-batch's
        # (it runs again) or a pruned one's.
        rows = self.spark_dir / "rows"
        if rows.is_dir():
            for entry in rows.iterdir():
                if entry.name not in {f"b{k}" for k in self._batches}:
                    shutil.rmtree(entry, ignore_errors=True)

    @contextlib.contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            self.phase_s[phase] = self.phase_s.get(phase, 0.0) + spent

    # -- the stream --------------------------------------------------------

    def poll(self, *, final: bool = False) -> list[ClosedWindow]:
        """Consume the new trace files and close every window the watermark passed.

        Runs the stream until every file there now is consumed
        (``AvailableNow``), one or more micro-batches.

        Parameters
        ----------
        final
            The trace is complete: then close every window up to the last
            event.

        Returns
        -------
        list of ClosedWindow
            The windows closed by this call, in time order (already in the
            store).
        """
        self._closed = []
        if self.trace_dir.is_dir():
            with self._timed("stream"):
                self._run_stream()
        if final and self._last is not None:
            until = close_until(
                self._last, self.lateness_ns, self.window_ns, final=True
            )
            if until > self._open_from():
                self._close_range(until)
                self._save()
        closed, self._closed = self._closed, []
        return closed

    def stop(self) -> None:
        """Stop the Spark session if this pipeline started it."""
        if self._created:
            self.spark.stop()
            self._created = False

    def _run_stream(self) -> None:
        reader = (
            self.spark.readStream.format("binaryFile")
            .schema(_BINARY_DDL)
            .option("pathGlobFilter", f"*{TRACE_SUFFIX}")
            .option("recursiveFileLookup", "true")
            # Files are offered once whatever their age (default 7 days).
            .option("maxFileAge", "36500d")
        )
        if self.max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", self.max_files_per_trigger)
        query = (
            reader.load(str(self.trace_dir))
            .writeStream.foreachBatch(self._on_batch)
            .option("checkpointLocation", str(self.spark_dir / "stream"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    def _on_batch(self, files: DataFrame, batch_id: int) -> None:
        """One micro-batch: decode its files, then close what the watermark passed."""
        if batch_id <= self._last_batch:  # applied before a restart
            return
        folder = self._rows_dir(batch_id)
        with self._timed("decode"):
            files.select("path", "content").mapInArrow(
                _decode, spark_ddl(_DECODED)
            ).write.mode("overwrite").parquet(str(folder))
        # Read back by the driver, not summed by a Spark job: a file's few
        # numbers cost a job's overhead on Spark, and the driver reads
        # these rows for the windows' summaries anyway.
        late = (
            pl.lit(0)
            if self._closed_until is None
            else (first_event < self._closed_until).cast(pl.Int64)
        )
        parts = _parts(folder)
        stats = (
            pl.scan_parquet(parts)
            .group_by(FILE)
            .agg(
                pl.col(FILE_ROW).count().alias("rows"),
                first_event.min().alias("lo"),
                last_event.max().alias("hi"),
                late.sum().alias("late"),
                pl.col(ERROR).max().alias("error"),
            )
            .collect()
            if parts
            else pl.DataFrame()
        )
        self._apply(stats, batch_id)
        if self._last is not None:
            until = close_until(
                self._last, self.lateness_ns, self.window_ns, final=False
            )
            if until > self._open_from():
                self._close_range(until)
        self._last_batch = batch_id
        self.batches += 1
        self._save()

    def _apply(self, stats: pl.DataFrame, batch_id: int) -> None:
        """Number the batch's rows (files in name order), move the watermark."""
        offsets: dict[str, int] = {}
        rows = 0
        if stats.is_empty():  # a micro-batch of no file (Spark writes no part)
            return
        for row in stats.sort(FILE).iter_rows(named=True):
            uri = row[FILE]
            if row["error"] is not None:
                self._corrupt[uri] = row["error"]
                warnings.warn(
                    f"skipped trace file {row['error']}", TraceFileWarning, stacklevel=2
                )
                continue
            try:
                context = read_context(_local(uri))
                self._context = context if context.known else self._context
            except (TraceError, FileNotFoundError):
                pass
            if not row["rows"]:
                continue
            offsets[uri] = self._next_row
            self._next_row += int(row["rows"])
            rows += int(row["rows"])
            lo, hi = int(row["lo"]), int(row["hi"])
            self._observe(lo, hi)
            self.late_rows += int(row["late"] or 0)
        if offsets:
            top = max(int(h) for h in stats["hi"].drop_nulls())
            self._batches[batch_id] = {"max_ns": top, "rows": rows, "files": offsets}
        else:
            shutil.rmtree(self._rows_dir(batch_id), ignore_errors=True)

    def _save(self) -> None:
        """Write the checkpoint, then drop staged rows no open window needs."""
        self.store.write_checkpoint(self.checkpoint())
        if self._closed_until is None:
            return
        # After the checkpoint: a rerun of this batch needs the rows before it.
        for batch, entry in list(self._batches.items()):
            if not still_open(entry["max_ns"], self._closed_until):
                del self._batches[batch]
                shutil.rmtree(self._rows_dir(batch), ignore_errors=True)
        self.store.write_checkpoint(self.checkpoint())

    # -- closing -----------------------------------------------------------

    def _offsets(self) -> pl.DataFrame:
        return pl.DataFrame(
            [
                (uri, off)
                for b in self._batches.values()
                for uri, off in b["files"].items()
            ],
            schema={FILE: pl.String, "_offset": pl.Int64},
            orient="row",
        )

    def _open_rows(self) -> DataFrame:
        """The staged rows of open windows on Spark, numbered as ``_row``."""
        from pyspark.sql import functions as F

        paths = [str(self._rows_dir(b)) for b in sorted(self._batches)]
        offsets = self.spark.createDataFrame(
            self._offsets().rows(), f"{FILE} string, _offset long"
        )
        return (
            self.spark.read.schema(spark_ddl(_DECODED))
            .parquet(*paths)
            .filter(F.col(FILE_ROW).isNotNull())
            .join(F.broadcast(offsets), on=FILE)
            .withColumn(ROW, F.col("_offset") + F.col(FILE_ROW))
        )

    def _near_rows(self, lo: int, hi: int) -> pl.DataFrame:
        """The staged rows that may touch ``[lo, hi)`` on the driver, by ``_row``.

        Columns as the polars engine's buffer (``_row``, then the trace).
        """
        parts = [p for b in sorted(self._batches) for p in _parts(self._rows_dir(b))]
        if not parts:
            return pl.DataFrame(schema={ROW: pl.Int64, **TRACE})
        return (
            pl.scan_parquet(parts)
            .filter(pl.col(FILE_ROW).is_not_null())
            .filter((last_event >= lo) & (first_event <= hi))
            .join(self._offsets().lazy(), on=FILE)
            .with_columns((pl.col("_offset") + pl.col(FILE_ROW)).alias(ROW))
            .select(ROW, *TRACE)
            .sort(ROW)
            .collect()
        )

    def _close_range(self, until: int) -> None:
        """Close every window in ``[open_from, until)``; see "Restart"."""
        from pyspark.sql import functions as F

        w = self.window_ns
        start = self._open_from()
        if self._batches:
            assert self._first is not None and self._last is not None
            extent = (self._first, self._last)
            lo, hi = _coarse_sql(w, 0)
            k0, k1 = start // w, until // w - 1
            pieces = (
                self._open_rows()
                .withColumn("_lo", F.greatest(F.expr(lo), F.lit(k0)))
                .withColumn("_hi", F.least(F.expr(hi), F.lit(k1)))
                .filter(F.col("_hi") >= F.col("_lo"))
                .withColumn("window", F.explode(F.sequence("_lo", "_hi")))
                .select("window", ROW, *KERNEL_COLUMNS, *_SUMMARY_COLUMNS)
            )
            staged = self.spark_dir / "cp"
            with self._timed("cp"):
                pieces.groupBy("window").applyInArrow(
                    lambda key, table: _spark_closing_cp(w, extent, key, table),
                    spark_ddl(_RESULT),
                ).write.mode("overwrite").parquet(str(staged))
            self._store_windows(staged, start, until)
            shutil.rmtree(staged, ignore_errors=True)
        self._closed_until = until

    def _store_windows(self, staged: Path, start: int, until: int) -> None:
        """Sum the staged CP rows on Spark; finish and store each window."""
        parts = _parts(staged)
        rows = pl.read_parquet(parts) if parts else pl.DataFrame(schema=_RESULT)
        failed = rows.filter(pl.col(FAILED).is_not_null())
        for ts, message in (
            failed.select(WINDOW_START_NS, FAILED).sort(WINDOW_START_NS).iter_rows()
        ):
            self.failed_windows += 1
            warnings.warn(
                f"skipped window at {ts}: {message}", TraceFileWarning, stacklevel=4
            )
        cp_rows = rows.filter(pl.col(FAILED).is_null()).drop(FAILED)
        starts = sorted(set(cp_rows[WINDOW_START_NS].to_list()))
        todo = [ts for ts in starts if not self.store.has_window(ts)]
        if not todo:
            return
        with self._timed("sums"):
            sums = _window_sums(self.spark, staged, self.window_ns)
        with self._timed("finish"):
            self._finish(cp_rows, sums, self._near_rows(start, until), todo)

    def _finish(
        self,
        cp_rows: pl.DataFrame,
        sums: dict[str, pl.DataFrame],
        near_rows: pl.DataFrame,
        todo: list[int],
    ) -> None:
        """Finish each window of ``todo`` on the driver and store it."""
        end = (pl.col(WINDOW_START_NS) + self.window_ns).alias(WINDOW_END_NS)
        for ts in todo:
            te = ts + self.window_ns
            cp = (
                cp_rows.filter(pl.col(WINDOW_START_NS) == ts)
                .sort(EDGE_INDEX)
                .select(end if c == WINDOW_END_NS else c for c in CP_TABLE)
                .cast(dict(CP_TABLE))  # type: ignore[arg-type]
            )
            near = near_rows.filter(touches(ts, te)).with_columns(
                pl.col(ROW).alias(TRACE_ROW)
            )
            summaries = summaries_from_partials(
                _window_partials(sums, near, ts, self._empty),
                Trace(near, self._context),
                self.window_ns,
                ts,
                self.options,
            )
            window = ClosedWindow(start_ns=ts, end_ns=te, cp=cp, summaries=summaries)
            self.store.write_window(window)
            self._closed.append(window)


def _window_sums(
    spark: SparkSession, staged: Path, window_ns: int
) -> dict[str, pl.DataFrame]:
    """The per-window sums of the staged CP rows, from Spark aggregations.

    The batch Spark engine's queries (:mod:`~sparktrail.engines.spark`)
    grouped by window as well: the fine grouping, messages by sender,
    CP per (window, task) and per (window, driver row).
    """
    from pyspark.sql import functions as F

    window = [WINDOW_START_NS, WINDOW_END_NS]
    cp = _charged(
        spark.read.schema(spark_ddl(_RESULT))
        .parquet(str(staged))
        .filter(F.col(FAILED).isNull()),
        window_ns,
    )
    messages = cp.filter("NOT is_local").groupBy(
        *window, "src_worker", "worker", "activity"
    )
    queries = {
        "fine": _fine_query(cp),
        "messages": messages.agg(
            F.sum("cp").alias("cp"),
            F.sum("cp_ns").alias("cp_ns"),
            F.count(F.lit(1)).alias("edges"),
        ),
        "tasks": cp.filter("task_id IS NOT NULL")
        .groupBy(WINDOW_START_NS, "task_id")
        .agg(F.sum("cp").alias("cp")),
        "driver": cp.filter("activity = 'driver' AND cp > 0")
        .groupBy(WINDOW_START_NS, EDGE_INDEX)
        .agg(F.sum("cp").alias("cp")),
    }
    # Submitted together: each is a small job, and their scheduling
    # overheads overlap (Spark runs jobs of several threads at once).
    with ThreadPoolExecutor(len(queries)) as pool:
        futures = {name: pool.submit(_fetch, q) for name, q in queries.items()}
        return {name: f.result() for name, f in futures.items()}


def _window_partials(
    sums: dict[str, pl.DataFrame], near: pl.DataFrame, ts: int, empty: Partials
) -> Partials:
    """The :class:`Partials` of window ``ts`` from the Spark sums.

    ``near`` is the window's rows: a driver row's ``edge_index`` becomes
    its position there, since ``near`` is the trace its summaries read.
    """
    this = pl.col(WINDOW_START_NS) == ts
    fine = sums["fine"].filter(this)
    derived = partials_of_sums(fine)
    reads = read_partial_of_sums(fine)
    messages = (
        sums["messages"]
        .filter(this)
        .with_columns(
            pl.lit(False).alias("read"), pl.lit(None, pl.Int64).alias("stage_id")
        )
    )
    has_paths = bool(derived["windows"][HAS_PATHS].any())
    tasks = (
        sums["tasks"]
        .filter(this & pl.lit(has_paths))
        .select("task_id", "cp", pl.lit(1, pl.Int64).alias("windows"))
    )
    position = near.select(
        pl.col(TRACE_ROW).alias(EDGE_INDEX),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_position"),
    )
    driver = (
        sums["driver"]
        .filter(this)
        .join(position, on=EDGE_INDEX)
        .select(pl.col("_position").alias(EDGE_INDEX), "cp")
    )
    frames = {
        **derived,
        "channels": pl.concat([messages, reads], how="diagonal_relaxed"),
        "tasks": tasks,
        "driver": driver,
    }
    collected = {
        name: pl.concat(
            [like, frames[name].select(like.columns).cast(like.schema)]  # type: ignore[arg-type]
        )
        for name, like in ((f, getattr(empty, f)) for f in frames)
    }
    return Partials(**collected)
