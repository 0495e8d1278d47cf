"""One row per task attempt, read from the trace: what every summary and rule
needs to know of a task.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import polars as pl

from sparktrail.pag.buckets import bucketed_rows
from sparktrail.pag.query_engine import collect
from sparktrail.pag.schemas import TASK_WORK_COLUMNS
from sparktrail.pag.trace import (
    Trace,
    collect_slices,
    load_trace,
    mapped_concat,
    release_mapped_pages,
    trace_slices,
)
from sparktrail.pag.workers import DRIVER, executor_of_column
from sparktrail.whatif.replay import OVERHEAD_ACTIVITIES

__all__ = [
    "RUN",
    "SPARK_METRICS",
    "TASK_CHUNK_ROWS",
    "USEFUL",
    "task_facts",
    "task_id_range",
]


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


#: Work columns of a task's ``processing`` row
#: (:data:`~sparktrail.pag.schemas.TASK_WORK_COLUMNS`), summed per task; all
#: but the updated state rows, which no summary or rule reads.
_WORK = tuple(c for c in TASK_WORK_COLUMNS if c != "state_updated_rows")


#: Of those, the ones that stay null when none of the task's rows states
#: them (a failed attempt's records are unknown, not 0; a trace without
#: spill columns says nothing about spills); bytes read and written are 0.
_NULL_IF_UNSTATED = tuple(c for c in _WORK if c not in ("bytes", "shuffle_write_bytes"))


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


#: The trace columns :func:`task_facts` reads.
_READ = frozenset(
    (
        "task_id",
        "src_worker",
        "dst_worker",
        "start_ns",
        "end_ns",
        "activity",
        "clipped_ns",
        *SPARK_METRICS,
        *_ABSENT_IF_UNSTATED,
        *_WORK,
    )
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
    state_rows, state_memory_bytes, status``; ``worker`` and ``executor``
    are categoricals (a few dozen names over millions of tasks).

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
    group-by's memory at the cost of a scan of the trace per chunk; each
    chunk's facts go to a memory-mapped temporary file as they come
    (:func:`~sparktrail.pag.trace.mapped_concat`), so the facts of a long
    trace are pages of a file, resident while a step reads them.
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
    ids = task_id_range(frame)
    # A fact whose trace column holds no value is null for every task: it is
    # added at the end as a constant column (no memory), not aggregated
    # into millions of nulls.
    absent = tuple(
        c for c in _ABSENT_IF_UNSTATED if frame[c].null_count() == frame.height
    )
    chunks = max(1, -(-len(frame) // TASK_CHUNK_ROWS))
    if ids is None or chunks == 1:
        return _with_absent(_task_chunk(frame, absent), frame, absent)
    # Ranges of ids, not a modulo: each chunk comes out sorted by task id, so
    # their concatenation is too, without sorting (copying) the whole.
    lo, hi = ids[0], ids[1] + 1
    step = -(-(hi - lo) // chunks)
    starts = range(lo, hi, step)
    # The task rows are bucketed by chunk once (stable: each bucket keeps
    # the trace's row order, which ``first`` reads); filtering the whole
    # trace for each chunk would make this quadratic in rows. A slice of
    # the trace at a time, by a counting sort into a mapped file
    # (:func:`~sparktrail.pag.buckets.bucketed_rows`): a sort of every task
    # row's chunk kept 8 bytes a task row in memory, twice (DESIGN §10).
    chunk = (
        pl.when(_TASK_ROWS)
        .then((pl.col("task_id") - lo) // step)
        .otherwise(-1)
        .cast(pl.Int32)
    )
    rows, bounds = bucketed_rows(
        (part.select(chunk).to_series().to_numpy() for _, part in trace_slices(frame)),
        len(frame),
        len(starts),
    )
    # Only the columns the facts read are gathered, and the rows are task
    # rows already: the gather and the filter of a chunk each copied every
    # column of its ~10^6 rows.
    read = frame.select(c for c in frame.columns if c in _READ and c not in absent)

    def parts() -> Iterator[pl.DataFrame]:
        for k in range(len(starts)):
            mine = pl.Series(rows[bounds[k] : bounds[k + 1]])
            part = _task_chunk(read[mine], absent, task_rows=True)
            del mine
            release_mapped_pages()
            yield part

    # A trace too long for one group-by has too many tasks to hold their
    # facts in memory (~90 bytes a task while the tables and rules read
    # them): each chunk's go to a mapped file as they come (DESIGN §10),
    # where each step's columns are resident only while it reads them.
    # A value that is the same for every task is then kept once, and equal
    # columns share their pages.
    facts = _stored_once(mapped_concat(parts()))
    release_mapped_pages()
    return _with_absent(facts, frame, absent)


def _stored_once(facts: pl.DataFrame) -> pl.DataFrame:
    """``facts`` with each integer column that holds one value (or only
    nulls) for every task kept as that value once, and each integer column
    equal to an earlier one sharing its memory: the same columns with the
    same values.

    Many facts are the same for every task of a trace (no job, partition,
    records, spills or state; one stage; no shuffle), and some equal others
    (Spark's finish is the end on the slot when nothing was clipped): at
    3.3·10^6 tasks each is 26 MB, for every rule that reads the table.
    A literal column stays one value through polars' filters, gathers and
    slices, but ``facts[name]`` spells it out for every task, and polars
    keeps that in the frame for good (8 bytes a task): a step reads such a
    column with a query (``facts.select(...)``). A mapped frame's pages
    (:func:`~sparktrail.pag.trace.mapped_concat`) are released after each
    column is read. String
    columns are left as they are: :func:`~sparktrail.pag.trace.
    mapped_concat` reads one of a single value back as that value, and
    reading the column here would spell it out for every task.

    >>> facts = pl.DataFrame({"task_id": [1, 2], "a": [3, 3], "b": [4, 5],
    ...     "c": [4, 5], "d": [None, None], "e": ["x", "x"]},
    ...     schema_overrides={"d": pl.Int64})
    >>> out = _stored_once(facts)
    >>> out.equals(facts), out.schema == facts.schema
    (True, True)
    """
    stored: list[pl.Series | pl.Expr] = []
    # Integer columns by (dtype, nulls, min, max): only those can be equal.
    earlier: dict[tuple[object, ...], list[pl.Series]] = {}
    for name, dtype in facts.schema.items():
        if name == "task_id" or not dtype.is_integer():
            continue
        # The pages the last column's checks read, whichever way it went.
        release_mapped_pages()
        column = facts[name]
        nulls = column.null_count()
        if nulls == len(column):
            stored.append(pl.lit(None, dtype=dtype).alias(name))
            continue
        lo, hi = column.min(), column.max()
        if nulls == 0 and lo == hi:
            stored.append(pl.lit(lo, dtype=dtype).alias(name))
            continue
        alike = earlier.setdefault((dtype, nulls, lo, hi), [])
        twin = next((t for t in alike if t.equals(column)), None)
        if twin is None:
            alike.append(column)
        else:
            stored.append(twin.alias(name))
    release_mapped_pages()
    return facts.with_columns(stored) if stored else facts


def task_id_range(frame: pl.DataFrame) -> tuple[int, int] | None:
    """The lowest and highest task id of ``frame`` (None without one), a
    slice at a time (:func:`~sparktrail.pag.trace.collect_slices`).

    >>> task_id_range(pl.DataFrame({"task_id": [4, None, 2]}))
    (2, 4)
    """
    ends_of = (pl.col("task_id").min().alias("lo"), pl.col("task_id").max().alias("hi"))
    ends = collect_slices(frame, lambda _, part: part.lazy().select(ends_of))
    lo, hi = ends["lo"].min(), ends["hi"].max()
    return None if lo is None else (int(lo), int(hi))  # type: ignore[arg-type]


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


def _task_chunk(
    frame: pl.DataFrame, absent: tuple[str, ...], *, task_rows: bool = False
) -> pl.DataFrame:
    """The facts of the tasks of ``frame`` (``task_rows``: its rows are
    task rows already, :data:`_TASK_ROWS`)."""
    span = pl.col("end_ns") - pl.col("start_ns")
    # Spark's metrics when the trace states them; else the rows' tiling,
    # the best a trace from another producer can tell.
    tiled = not all(c in frame.columns for c in SPARK_METRICS)
    metrics = (
        [] if tiled else [pl.col(c).first(ignore_nulls=True) for c in SPARK_METRICS]
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
    rows = frame.lazy() if task_rows else frame.lazy().filter(_TASK_ROWS)
    tasks = collect(
        rows.with_columns(
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
    tasks = (
        tasks.with_columns(
            (pl.col("end_ns") - pl.col("launch_ns")).alias("duration_ns"),
            executor_of_column(tasks, "worker").alias("executor"),
            *[
                pl.when(pl.col(f"_{c}_seen") > 0).then(pl.col(c)).alias(c)
                for c in stated
            ],
        )
        .drop(*[f"_{c}_seen" for c in stated])
        # A few dozen names over millions of tasks: 4-byte codes, not
        # 16-byte string views (~0.8 GB less at 3.3·10^7 tasks).
        .with_columns(pl.col("worker", "executor").cast(pl.Categorical))
        .sort("task_id")
    )
    return _with_tiled_metrics(tasks) if tiled else tasks


def _with_tiled_metrics(tasks: pl.DataFrame) -> pl.DataFrame:
    """``tasks`` with Spark's metrics taken from their rows' tiling: the
    ``run_ns`` and ``gc_ns`` columns themselves (not equal sums: 50 MB more
    at 3.3·10^6 tasks), after ``overhead_ns`` (in place)."""
    at = tasks.get_column_index("overhead_ns") + 1
    tasks.insert_column(at, tasks.get_column("run_ns").alias("executor_run_ns"))
    return tasks.insert_column(at + 1, tasks.get_column("gc_ns").alias("jvm_gc_ns"))
