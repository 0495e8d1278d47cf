"""The CP table joined with the trace facts every summary needs.

:func:`enrich` adds to each CP row (one snapshot edge) the columns the
summaries group by: ``worker`` (the timeline an edge is charged to: its own
worker for a local activity, the receiving worker for a message, whose
progress the message holds), ``executor`` (parsed from the worker name
``exec-<id>/<slot>``; null for the ``driver`` timeline; any other worker
name is its own executor), ``cp_ns`` (critical time: CP x window length)
and the trace's task facts. Task facts that sit on one trace row
(``records``, ``bytes``) are *not* summed from the CP table, whose rows are
window-clipped pieces of trace rows; :func:`task_facts` reads them from the
trace instead.
"""

from __future__ import annotations

import functools
import re
from typing import TypeVar

import polars as pl

from sparktrail.pag.query_engine import collect
from sparktrail.pag.trace import Trace, load_trace
from sparktrail.whatif.replay import OVERHEAD_ACTIVITIES

from .frames import SPAN

__all__ = [
    "DRIVER",
    "EXECUTOR_PATTERN",
    "SPAN",
    "WINDOW",
    "Frame",
    "charge",
    "enrich",
    "executor_of",
    "executor_of_column",
    "n_path_windows",
    "path_windows",
    "task_facts",
    "whole_run",
    "window_span",
    "with_paths",
]

DRIVER = "driver"
#: A frame or a query: the partial sums run eagerly, or lazily so that
#: :meth:`~sparktrail.summaries.partials.Partials.of` collects them in one
#: batch (:func:`~sparktrail.pag.query_engine.collect_all`).
Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)
WINDOW = ["window_start_ns", "window_end_ns"]
#: ASCII digits (as Spark SQL's regex reads it in the Spark engine).
EXECUTOR_PATTERN = r"^exec-(.+)/[0-9]+$"
#: Trace columns copied onto CP rows when the trace has them.
_FACTS = ("job_id", "partition", "status", "speculative")
#: Task activities that do the task's own work (DS2's "useful time"):
#: everything but scheduler delay, shuffle fetch wait and result fetching.
USEFUL = (
    "deserialization",
    "processing",
    "gc",
    "shuffle_write",
    "serialization",
)
#: Task activities that tile Spark's ``Executor Run Time`` (DESIGN §5).
RUN = ("shuffle_read", "processing", "gc", "shuffle_write")
#: Work columns of a task's ``processing`` row, summed per task.
_WORK = (
    "records",
    "bytes",
    "shuffle_write_bytes",
    "memory_bytes_spilled",
    "disk_bytes_spilled",
    "state_rows",
    "state_memory_bytes",
)
#: Of those, the ones that stay null when none of the task's rows states
#: them (a failed attempt's records are unknown, not 0; a trace without
#: spill columns says nothing about spills).
_NULL_IF_UNSTATED = (
    "records",
    "memory_bytes_spilled",
    "disk_bytes_spilled",
    "state_rows",
    "state_memory_bytes",
)


#: A task's local activities (its time on its slot).
_LOCAL = pl.col("src_worker") == pl.col("dst_worker")
#: A task's control edges with the driver: its launch (driver -> slot, at
#: Spark's launch time) and its completion (slot -> driver, ending at
#: Spark's finish time, after the slot's end when the model clipped it).
_CONTROL = (pl.col("activity") == "control") & (
    (pl.col("src_worker") == DRIVER) | (pl.col("dst_worker") == DRIVER)
)
#: The trace rows a task's facts are read from: its local activities and
#: its control edges (which state its own launch and finish, and are all a
#: task has that took no time on its slot).
_TASK_ROWS = (
    pl.col("task_id").is_not_null()
    & (pl.col("activity") != "waiting")
    & (_LOCAL | _CONTROL)
)
#: Spark's own metrics of an attempt (trace columns of the tracer's task
#: rows, null when the attempt had none).
SPARK_METRICS = ("executor_run_ns", "jvm_gc_ns")
#: Task facts that are null for every task when their trace column is.
_ABSENT_IF_UNSTATED = (
    "stage_id",
    "operator",
    "job_id",
    "partition",
    "status",
    *_NULL_IF_UNSTATED,
)


def executor_of(worker: pl.Expr) -> pl.Expr:
    """The executor a worker belongs to (null for the driver timeline).

    >>> df = pl.DataFrame({"w": ["exec-7/1", "driver", "exec-driver/0", "a"]})
    >>> df.select(executor_of(pl.col("w"))).to_series().to_list()
    ['7', None, 'driver', 'a']
    """
    return (
        pl.when(worker == DRIVER)
        .then(pl.lit(None, dtype=pl.String))
        .otherwise(pl.coalesce(worker.str.extract(EXECUTOR_PATTERN, 1), worker))
    )


def executor_of_column(frame: pl.DataFrame, column: str) -> pl.Expr:
    """:func:`executor_of` of ``frame[column]``, parsed once per distinct name.

    The same values as ``executor_of(pl.col(column))`` on ``frame``; a
    frame has a few dozen worker names over 10^4-10^6 rows, and the regular
    expression per row was a large part of a window's summaries.

    >>> df = pl.DataFrame({"w": ["exec-7/1", "driver", "exec-7/1", "a", None]})
    >>> df.select(executor_of_column(df, "w")).to_series().to_list()
    ['7', None, '7', 'a', None]
    """
    names = frame.get_column(column).unique().to_list()
    # In Python: a few dozen names, where a query costs ~0.2 ms.
    executors = [_executor_of_name(name) for name in names]
    return pl.col(column).replace_strict(names, executors, return_dtype=pl.String)


_EXECUTOR_NAME = re.compile(EXECUTOR_PATTERN.removeprefix("^").removesuffix("$"))


def _executor_of_name(worker: str | None) -> str | None:
    """:func:`executor_of` of one name.

    >>> [_executor_of_name(w) for w in ["exec-7/1", "driver", "exec-a/b/2", None]]
    ['7', None, 'a/b', None]
    """
    if worker is None or worker == DRIVER:
        return None
    found = _EXECUTOR_NAME.fullmatch(worker)
    return worker if found is None else found[1]


def enrich(cp: pl.DataFrame, trace: pl.DataFrame) -> pl.DataFrame:
    """Add ``worker, executor, cp_ns`` and the trace's task facts to ``cp``.

    Idempotent: a table that already has ``worker`` is returned unchanged.
    """
    if "worker" in cp.columns:
        return cp
    facts = [c for c in _FACTS if c in trace.columns]
    out = cp.with_columns(pl.col("edge_index").cast(pl.Int64))
    if facts:
        copied = trace.select(facts)
        out = out.hstack(copied[out["edge_index"]] if len(cp) else copied.clear())
    return charge(out)


def charge(cp: pl.DataFrame) -> pl.DataFrame:
    """Add ``is_local, worker, executor, cp_ns``: what the summaries group by.

    :func:`enrich` without the task facts, which no summary reads from the
    CP table. Idempotent, like :func:`enrich`.

    >>> cp = pl.DataFrame({"window_start_ns": [0], "window_end_ns": [4],
    ...     "src_worker": ["exec-1/0"], "dst_worker": ["driver"], "cp": [0.5]})
    >>> charge(cp).select("is_local", "worker", "executor", "cp_ns").row(0)
    (False, 'driver', None, 2.0)
    """
    if "worker" in cp.columns:
        return cp
    local = pl.col("src_worker") == pl.col("dst_worker")
    worker = pl.when(local).then(pl.col("src_worker")).otherwise(pl.col("dst_worker"))
    charged = cp.with_columns(local.alias("is_local"), worker.alias("worker"))
    return charged.with_columns(
        executor_of_column(charged, "worker").alias("executor"),
        (pl.col("cp") * (pl.col("window_end_ns") - pl.col("window_start_ns")))
        .cast(pl.Float64)
        .alias("cp_ns"),
    )


def path_windows(cp: Frame) -> Frame:
    """Windows of the CP table, with ``has_paths`` (their CP sums to > 0)."""
    return (
        cp.group_by("window_start_ns", "window_end_ns")
        .agg(pl.len().alias("edges"), pl.col("cp").sum().alias("cp_total"))
        .with_columns((pl.col("cp_total") > 0).alias("has_paths"))
        .sort("window_start_ns")
    )


def window_span(windows: pl.DataFrame | pl.LazyFrame) -> pl.Expr:
    """Each window's :data:`SPAN` (1 in a frame saved without it)."""
    names = windows.collect_schema().names()
    return pl.col(SPAN) if SPAN in names else pl.lit(1, pl.Int64)


def n_path_windows(windows: pl.DataFrame) -> int:
    """How many windows of the run ``windows`` (:func:`path_windows`) with a
    path stand for (at least 1, to divide by): a merged stretch counts as
    the windows it merged.

    >>> n_path_windows(pl.DataFrame({"has_paths": [True, False, True],
    ...     "span": [1, 1, 40]}))
    41
    """
    span = window_span(windows)
    return max(1, int(windows.select(span.filter("has_paths").sum()).item()))


def with_paths(per_window: Frame, windows: Frame) -> Frame:
    """The rows of ``per_window`` in the windows that have a path."""
    starts = windows.filter("has_paths").select("window_start_ns")
    return per_window.join(starts, on="window_start_ns", how="semi")


def whole_run(
    per_window: Frame,
    keys: list[str],
    shares: list[str],
    windows: pl.DataFrame,
    counts: tuple[str, ...] = (),
) -> Frame:
    """Sum ``per_window`` over ``windows``; ``shares`` are a mean over the
    windows with a path (:func:`n_path_windows`).

    A row of a window that stands for several (its :data:`SPAN`) counts
    that many times in ``shares`` and ``counts`` (per-window numbers);
    every other non-key column except the window bounds is summed as it
    is (a total over the window's time, such as ``cp_ns``).
    """
    n_windows = n_path_windows(windows)
    skipped = {*keys, *shares, *counts, *WINDOW}
    summed = [c for c in per_window.collect_schema().names() if c not in skipped]
    spans = windows.select("window_start_ns", window_span(windows).alias(SPAN))
    weighted = per_window.join(
        spans.lazy() if isinstance(per_window, pl.LazyFrame) else spans,
        on="window_start_ns",
        how="left",
    ).with_columns(pl.col(SPAN).fill_null(1))
    return weighted.group_by(keys).agg(
        *[((pl.col(c) * pl.col(SPAN)).sum() / n_windows).alias(c) for c in shares],
        *[(pl.col(c) * pl.col(SPAN)).sum().alias(c) for c in counts],
        *[pl.col(c).sum() for c in summed],
    )


#: Trace rows per task-facts group-by (its hash tables and per-group
#: state take several times the rows' own size).
TASK_CHUNK_ROWS = 1000000


def task_facts(trace: pl.DataFrame | Trace) -> pl.DataFrame:
    """One row per task attempt (``task_id``) from its trace rows.

    Columns: ``task_id, stage_id, operator, job_id, partition, worker,
    executor, launch_ns, end_ns, finish_ns, duration_ns, useful_ns, run_ns,
    gc_ns, overhead_ns, executor_run_ns, jvm_gc_ns, records, bytes,
    shuffle_write_bytes, memory_bytes_spilled, disk_bytes_spilled,
    state_rows, state_memory_bytes, status``.

    Two views of a task's time sit side by side:

    * the PAG model's, from its local rows: ``end_ns`` is where it left
      its slot (clipped to the next launch there, DESIGN §5; its launch
      when it took no time on the slot), ``duration_ns`` is ``end_ns -
      launch_ns``, ``run_ns`` is Spark's executor run time as the rows
      tile it (:data:`RUN`: fetch wait, processing, GC and shuffle write),
      ``gc_ns`` the length of its ``gc`` rows, ``overhead_ns`` that of its
      scheduling and deserialization rows (the what-if replay's fixed cost
      of a task, :data:`~sparktrail.whatif.replay.OVERHEAD_ACTIVITIES`);
    * Spark's own: ``finish_ns`` is the finish Spark recorded (the end of
      its completion edge; unclipped, its rows' end plus ``clipped_ns``
      when the trace has no such edge), so Spark's task duration is
      ``finish_ns - launch_ns``; ``executor_run_ns`` and ``jvm_gc_ns`` are
      Spark's ``Executor Run Time`` and ``JVM GC Time`` (null for an
      attempt without metrics; ``run_ns`` and ``gc_ns`` for a trace
      without these columns).

    An attempt with no local rows (launched at the log's last event, or
    clipped to nothing, and carrying no work) is still a row, from its
    control edges. The work columns are sums over its rows (``records``
    and the spills null when no row states them).

    ``trace`` is validated unless it is a
    :class:`~sparktrail.pag.trace.Trace`. A long trace is aggregated in
    chunks of task ids (ranges of equal width, about
    :data:`TASK_CHUNK_ROWS` rows each when ids are dense), which bounds the
    group-by's memory at the cost of a scan of the trace per chunk.
    """
    optional = {
        "partition": pl.Int64,
        "status": pl.String,
        "shuffle_write_bytes": pl.Int64,
        "memory_bytes_spilled": pl.Int64,
        "disk_bytes_spilled": pl.Int64,
        "state_rows": pl.Int64,
        "state_memory_bytes": pl.Int64,
    }
    frame = load_trace(trace).frame
    frame = frame.with_columns(
        pl.lit(None, dtype=t).alias(c)
        for c, t in optional.items()
        if c not in frame.columns
    )
    # Lazy (only the columns the facts need are filtered) and with plain
    # aggregations only: a 10^7-row trace has millions of tasks, and
    # expressions such as ``drop_nulls().first()`` would materialize every
    # group.
    ids = frame.select(
        pl.col("task_id").min().alias("lo"), pl.col("task_id").max().alias("hi")
    ).row(0)
    # A fact whose trace column holds no value is null for every task: it is
    # added at the end as a constant column (no memory), not aggregated
    # into millions of nulls.
    absent = tuple(
        c for c in _ABSENT_IF_UNSTATED if frame[c].null_count() == frame.height
    )
    chunks = max(1, -(-len(frame) // TASK_CHUNK_ROWS))
    if ids[0] is None or chunks == 1:
        return _with_absent(_task_chunk(frame, absent), frame, absent)
    # Ranges of ids, not a modulo: each chunk comes out sorted by task id, so
    # their concatenation is too, without sorting (copying) the whole.
    lo, hi = int(ids[0]), int(ids[1]) + 1
    step = -(-(hi - lo) // chunks)
    starts = range(lo, hi, step)
    # The task rows are bucketed by chunk once (stable: each bucket keeps
    # the trace's row order, which ``first`` reads); filtering the whole
    # trace for each chunk would make this quadratic in rows.
    keyed = collect(
        frame.lazy()
        .with_row_index("row")
        .filter(_TASK_ROWS)
        .select(
            pl.col("row").cast(pl.Int64),
            ((pl.col("task_id") - lo) // step).alias("chunk"),
        )
        .sort("chunk", maintain_order=True),
        len(frame),
    )
    bounds = keyed["chunk"].search_sorted(pl.Series(range(len(starts) + 1))).to_list()
    rows = keyed["row"]
    del keyed
    parts = [
        _task_chunk(frame[rows[bounds[k] : bounds[k + 1]]], absent)
        for k in range(len(starts))
    ]
    return _with_absent(pl.concat(parts, rechunk=False), frame, absent)


def _with_absent(
    facts: pl.DataFrame, frame: pl.DataFrame, absent: tuple[str, ...]
) -> pl.DataFrame:
    """``facts`` with the ``absent`` facts back as null columns, in place."""
    if not absent:
        return facts
    schema = _facts_schema(tuple(frame.schema.items()))
    # A literal column is constant: polars keeps one value for all rows.
    return facts.with_columns(
        pl.lit(None, dtype=schema[c]).alias(c) for c in absent
    ).select(schema.names())


@functools.lru_cache(maxsize=16)
def _facts_schema(trace_schema: tuple[tuple[str, pl.DataType], ...]) -> pl.Schema:
    """The columns of the task facts of a trace of ``trace_schema``.

    Cached: every window the online pipeline closes has the same trace
    schema, and the facts of an empty trace still cost a query (0.5-0.8 ms).
    """
    return _task_chunk(pl.DataFrame(schema=dict(trace_schema)), ()).schema


def _task_chunk(frame: pl.DataFrame, absent: tuple[str, ...]) -> pl.DataFrame:
    span = pl.col("end_ns") - pl.col("start_ns")
    # Spark's metrics when the trace states them; else the rows' tiling,
    # the best a trace from another producer can tell.
    metrics = (
        [pl.col(c).first(ignore_nulls=True) for c in SPARK_METRICS]
        if all(c in frame.columns for c in SPARK_METRICS)
        else [
            pl.col("_run").sum().alias("executor_run_ns"),
            pl.col("_gc").sum().alias("jvm_gc_ns"),
        ]
    )
    # Where the task left its slot plus what the model clipped off there:
    # Spark's finish, for a trace whose completion edge is not at hand.
    unclipped = (
        [(pl.col("_end") + pl.col("clipped_ns")).max().alias("_unclipped")]
        if "clipped_ns" in frame.columns
        else []
    )
    facts = [
        pl.col("stage_id").first(ignore_nulls=True),
        pl.col("operator").first(ignore_nulls=True),
        pl.col("job_id").first(ignore_nulls=True),
        pl.col("partition").first(ignore_nulls=True),
        # The slot: of its first local row, else the one it was launched on.
        pl.col("_slot").first(ignore_nulls=True),
        pl.col("_launched_on").first(ignore_nulls=True),
        pl.col("start_ns").min().alias("launch_ns"),
        pl.col("_end").max().alias("end_ns"),
        pl.col("end_ns").max().alias("finish_ns"),
        *unclipped,
        pl.col("_useful").sum().alias("useful_ns"),
        pl.col("_run").sum().alias("run_ns"),
        pl.col("_gc").sum().alias("gc_ns"),
        pl.col("_overhead").sum().alias("overhead_ns"),
        *metrics,
        *[pl.col(c).sum() for c in _WORK],
        pl.col("status").first(ignore_nulls=True),
        *[pl.col(c).count().alias(f"_{c}_seen") for c in _NULL_IF_UNSTATED],
    ]
    stated = [c for c in _NULL_IF_UNSTATED if c not in absent]
    local = _LOCAL
    tasks = collect(
        frame.lazy()
        .filter(_TASK_ROWS)
        .with_columns(
            pl.when(local).then(pl.col("src_worker")).alias("_slot"),
            pl.when(pl.col("src_worker") == DRIVER)
            .then(pl.col("dst_worker"))
            .alias("_launched_on"),
            pl.when(local).then(pl.col("end_ns")).alias("_end"),
            pl.when(pl.col("activity").is_in(USEFUL)).then(span).alias("_useful"),
            pl.when(pl.col("activity").is_in(RUN)).then(span).alias("_run"),
            pl.when(pl.col("activity") == "gc").then(span).alias("_gc"),
            pl.when(pl.col("activity").is_in(OVERHEAD_ACTIVITIES))
            .then(span)
            .alias("_overhead"),
        )
        .group_by("task_id")
        .agg(
            f
            for f in facts
            if f.meta.output_name() not in absent
            and f.meta.output_name().removeprefix("_").removesuffix("_seen")
            not in absent
        ),
        len(frame),
    )
    # A task with no local rows left its slot when it was launched (in
    # place: the columns keep their order).
    tasks = (
        tasks.with_columns(
            pl.coalesce("_slot", "_launched_on").alias("_slot"),
            pl.col("end_ns").fill_null(pl.col("launch_ns")),
            pl.max_horizontal("finish_ns", *[e.meta.output_name() for e in unclipped]),
        )
        .drop("_launched_on", *[e.meta.output_name() for e in unclipped])
        .rename({"_slot": "worker"})
    )
    # Eager from here: the executor is parsed once per worker, not per task.
    return (
        tasks.with_columns(
            (pl.col("end_ns") - pl.col("launch_ns")).alias("duration_ns"),
            executor_of_column(tasks, "worker").alias("executor"),
            *[
                pl.when(pl.col(f"_{c}_seen") > 0).then(pl.col(c)).alias(c)
                for c in stated
            ],
        )
        .drop(*[f"_{c}_seen" for c in stated])
        .sort("task_id")
    )
