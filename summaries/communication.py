"""Communication summary: CP by ``src -> dst`` channel between executors.

Endpoints are ``driver`` (the driver timeline) and ``executor <id>``.

* ``control`` and ``data`` edges count on their own channel, CP as is.
* ``shuffle``: a reducer's ``shuffle_read`` (fetch wait) CP is split over
  the source executors in proportion to the shuffle bytes each wrote in the
  reading stage's parent stages (DESIGN §5). Spark reports no per-source
  sizes, and the trace has no parent stage ids, so parents are
  approximated: the stages that wrote shuffle output and whose last task
  ended no later than the reading stage's first launch, in the same job;
  if the job has none (a stage whose parents were skipped because an
  earlier job computed them), such stages of any job. With no writer known
  the source is null. The ``note`` column says this in every shuffle row.
"""

from __future__ import annotations

import polars as pl

from sparktrail.pag.query_engine import collect
from sparktrail.pag.trace import Trace, load_trace
from sparktrail.pag.workers import executor_of, executor_of_column

from .run_shares import WINDOW, Frame, path_windows, whole_run

__all__ = [
    "SHUFFLE_NOTE",
    "channel_partial",
    "channel_partial_of_sums",
    "communication_from_partial",
    "communication_summary",
    "read_partial_of_sums",
    "shuffle_sources",
]

SHUFFLE_NOTE = (
    "shuffle_read CP of the reducer split over source executors by the "
    "shuffle bytes each wrote in the parent stages (Spark reports no "
    "per-source sizes; parents = shuffle-writing stages that ended before "
    "the reading stage started, same job first)"
)
#: The columns of :func:`channel_partial`.
CHANNEL_PARTIAL_SCHEMA: dict[str, pl.DataType] = {
    "window_start_ns": pl.Int64(),
    "window_end_ns": pl.Int64(),
    "read": pl.Boolean(),
    "src_worker": pl.String(),
    "worker": pl.String(),
    "activity": pl.String(),
    "stage_id": pl.Int64(),
    "cp": pl.Float64(),
    "cp_ns": pl.Float64(),
    "edges": pl.Int64(),
}


def _endpoint(worker: pl.Expr) -> pl.Expr:
    return (
        pl.when(worker == "driver")
        .then(pl.lit("driver"))
        .otherwise(pl.lit("executor ") + executor_of(worker))
    )


def _stage_spans(trace: pl.DataFrame) -> pl.DataFrame:
    # Lazy: only the five columns read are filtered (an eager filter copies
    # every column of the task rows, gigabytes for 10^8 rows).
    return collect(
        trace.lazy()
        .filter(pl.col("stage_id").is_not_null() & pl.col("task_id").is_not_null())
        .group_by("stage_id")
        .agg(
            pl.col("job_id").drop_nulls().first(),
            pl.col("start_ns").min().alias("first_ns"),
            pl.col("end_ns").max().alias("last_ns"),
        ),
        len(trace),
    )


def shuffle_sources(trace: pl.DataFrame | Trace, stages: list[int]) -> pl.DataFrame:
    """Source weights of each reading stage: ``stage_id, src_executor, weight``.

    ``weight`` is the source's share of the bytes its parent stages wrote
    (see the module docstring); a stage with no known writer gets one row
    with a null source and weight 1. ``trace`` is validated unless it is a
    :class:`~sparktrail.pag.trace.Trace`.

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-2/0", "exec-2/0"],
    ...     "dst_worker": ["exec-1/0", "exec-2/0", "exec-2/0"],
    ...     "start_ns": [0, 0, 10], "end_ns": [5, 5, 20],
    ...     "activity": ["processing", "processing", "shuffle_read"],
    ...     "job_id": [0, 0, 0], "stage_id": [0, 0, 1], "task_id": [0, 1, 2],
    ...     "shuffle_write_bytes": [300, 100, None]})
    >>> shuffle_sources(t, [1]).rows()
    [(1, '1', 0.75), (1, '2', 0.25)]
    """
    frame = load_trace(trace).frame
    schema = {"stage_id": pl.Int64, "src_executor": pl.String, "weight": pl.Float64}
    if not stages:  # no shuffle read on the path: no writer to weigh
        return pl.DataFrame(schema=schema)
    spans = _stage_spans(frame)
    if "shuffle_write_bytes" in frame.columns:
        # Only the columns read: the writers of a big trace are millions.
        writing = frame.select("stage_id", "src_worker", "shuffle_write_bytes").filter(
            pl.col("shuffle_write_bytes") > 0
        )
        written = collect(
            writing.with_columns(
                executor_of_column(writing, "src_worker").alias("src_executor")
            )
            .lazy()
            .group_by("stage_id", "src_executor")
            .agg(pl.col("shuffle_write_bytes").sum().alias("written")),
            len(writing),
        )
    else:
        written = pl.DataFrame(
            schema={
                "stage_id": pl.Int64,
                "src_executor": pl.String,
                "written": pl.Int64,
            }
        )
    writers = spans.join(written.select("stage_id").unique(), on="stage_id")
    frames = [_weights(stage, spans, writers, written) for stage in stages]
    out = pl.concat([pl.DataFrame(schema=schema), *frames], how="vertical_relaxed")
    return out.sort("stage_id", "src_executor", nulls_last=True)


def _weights(
    stage: int, spans: pl.DataFrame, writers: pl.DataFrame, written: pl.DataFrame
) -> pl.DataFrame:
    me = spans.filter(pl.col("stage_id") == stage)
    none = pl.DataFrame({"stage_id": [stage], "src_executor": [None], "weight": [1.0]})
    if me.is_empty():
        return none
    first, job = me["first_ns"][0], me["job_id"][0]
    before = writers.filter(
        (pl.col("last_ns") <= first) & (pl.col("stage_id") != stage)
    )
    same_job = (
        before.filter(pl.col("job_id") == job) if job is not None else before.clear()
    )
    parents = same_job if len(same_job) else before
    bytes_by = (
        written.join(parents.select("stage_id"), on="stage_id")
        .group_by("src_executor")
        .agg(pl.col("written").sum())
    )
    total = bytes_by["written"].sum()
    if not total:
        return none
    return bytes_by.select(
        pl.lit(stage, dtype=pl.Int64).alias("stage_id"),
        "src_executor",
        (pl.col("written") / total).alias("weight"),
    )


def communication_summary(
    cp: pl.DataFrame, trace: pl.DataFrame | Trace, *, by_window: bool = False
) -> pl.DataFrame:
    """CP by executor-level channel: messages and attributed shuffle reads.

    Parameters
    ----------
    cp
        An enriched CP table (:func:`~sparktrail.summaries.enrich`).
    trace
        The trace it was computed from (for shuffle bytes written).
    by_window
        One row per (window, channel), with the window bounds.

    Returns
    -------
    polars.DataFrame
        ``src, dst, src_executor_id, dst_executor_id, kind`` ("control",
        "data", "shuffle") ``, cp_share, cp_ns, edges, note``, largest
        share first. Shares are of the whole critical path, so they sum to
        the CP of communication, not to 1.

    Examples
    --------
    >>> from sparktrail.pag import critical_participation
    >>> from sparktrail.summaries import enrich
    >>> t = pl.DataFrame({"src_worker": ["exec-1/0", "exec-1/0", "exec-2/0"],
    ...     "dst_worker": ["exec-1/0", "exec-2/0", "exec-2/0"],
    ...     "start_ns": [0, 2, 3], "end_ns": [2, 3, 4],
    ...     "activity": ["processing", "data", "processing"],
    ...     "src_seq": [0, 1, 0], "dst_seq": [1, 0, 1]})
    >>> c = communication_summary(enrich(critical_participation(t, 4), t), t)
    >>> c.select("src", "dst", "kind", "cp_share").row(0)
    ('executor 1', 'executor 2', 'data', 0.25)
    """
    return communication_from_partial(
        channel_partial(cp), path_windows(cp), trace, by_window=by_window
    )


def channel_partial(cp: Frame) -> Frame:
    """Per (window, worker pair) sums of an enriched CP table.

    Columns :data:`CHANNEL_PARTIAL_SCHEMA`: messages (``read`` false) by
    ``src_worker``, receiving ``worker`` and ``activity``; shuffle fetch
    waits (``read`` true) by reading ``stage_id`` and ``worker``, to be
    split over their sources. Partials of disjoint sets of windows
    concatenate into the partial of their union.
    """
    edges = pl.len().cast(pl.Int64).alias("edges")
    return pl.concat([_message_partial(cp, edges), _read_partial(cp, edges)])


def channel_partial_of_sums(fine: Frame) -> Frame:
    """:func:`channel_partial` from the fine sums of a CP table.

    ``fine``: :func:`~sparktrail.summaries.partials.fine_sums` grouped by
    ``src_worker`` too, whose ``edges`` count its groups' rows.
    """
    edges = pl.col("edges").sum()
    return pl.concat([_message_partial(fine, edges), _read_partial(fine, edges)])


def read_partial_of_sums(fine: Frame) -> Frame:
    """The shuffle-read rows of :func:`channel_partial_of_sums` alone (fine
    sums without ``src_worker`` determine them)."""
    return _read_partial(fine, pl.col("edges").sum())


def _message_partial(frame: Frame, edges: pl.Expr) -> Frame:
    return (
        frame.filter(~pl.col("is_local"))
        .group_by(*WINDOW, "src_worker", "worker", "activity")
        .agg(pl.col("cp").sum(), pl.col("cp_ns").sum(), edges)
        .with_columns(pl.lit(False).alias("read"), pl.lit(None).alias("stage_id"))
        .select(list(CHANNEL_PARTIAL_SCHEMA))
        .cast(CHANNEL_PARTIAL_SCHEMA)  # type: ignore[arg-type]
    )


def _read_partial(frame: Frame, edges: pl.Expr) -> Frame:
    return (
        frame.filter(pl.col("activity") == "shuffle_read")
        .group_by(*WINDOW, "stage_id", "worker")
        .agg(pl.col("cp").sum(), pl.col("cp_ns").sum(), edges)
        .with_columns(
            pl.lit(True).alias("read"),
            pl.lit(None).alias("src_worker"),
            pl.lit("shuffle").alias("activity"),
        )
        .select(list(CHANNEL_PARTIAL_SCHEMA))
        .cast(CHANNEL_PARTIAL_SCHEMA)  # type: ignore[arg-type]
    )


def communication_from_partial(
    partial: pl.DataFrame,
    windows: pl.DataFrame,
    trace: pl.DataFrame | Trace,
    *,
    by_window: bool = False,
) -> pl.DataFrame:
    """The communication summary from :func:`channel_partial` and the windows.

    ``trace`` gives the shuffle bytes each source wrote
    (:func:`shuffle_sources`).
    """
    reads = partial.filter(pl.col("read"))
    stages = reads["stage_id"].drop_nulls().unique().to_list()
    sources = shuffle_sources(trace, [int(s) for s in stages])
    # One query from here, collected at the end (each eager step would be
    # one).
    messages = (
        partial.lazy()
        .filter(~pl.col("read"))
        .select(
            *WINDOW,
            _endpoint(pl.col("src_worker")).alias("src"),
            pl.col("activity").alias("kind"),
            "worker",
            "cp",
            "cp_ns",
            "edges",
            executor_of(pl.col("src_worker")).alias("src_executor_id"),
        )
    )
    shuffled = (
        reads.lazy()
        .join(sources.lazy(), on="stage_id", how="left")
        .with_columns(pl.col("weight").fill_null(1.0))
        .select(
            *WINDOW,
            pl.when(pl.col("src_executor").is_null())
            .then(pl.lit(None, dtype=pl.String))
            .otherwise(pl.lit("executor ") + pl.col("src_executor"))
            .alias("src"),
            pl.lit("shuffle").alias("kind"),
            "worker",
            pl.col("cp") * pl.col("weight"),
            pl.col("cp_ns") * pl.col("weight"),
            "edges",
            pl.col("src_executor").alias("src_executor_id"),
        )
    )
    rows = pl.concat([messages, shuffled], how="vertical_relaxed").with_columns(
        _endpoint(pl.col("worker")).alias("dst"),
        executor_of(pl.col("worker")).alias("dst_executor_id"),
    )
    keys = ["src", "dst", "src_executor_id", "dst_executor_id", "kind"]
    per = rows.group_by(*WINDOW, *keys).agg(
        pl.col("cp").sum().alias("cp_share"),
        pl.col("cp_ns").sum(),
        pl.col("edges").sum(),
    )
    if not by_window:
        per = whole_run(per, keys, ["cp_share"], windows)
    message = pl.lit("CP of ") + pl.col("kind") + pl.lit(" messages")
    note = pl.when(pl.col("kind") == "shuffle").then(pl.lit(SHUFFLE_NOTE))
    window = WINDOW if by_window else []
    query = (
        per.with_columns(note.otherwise(message).alias("note"))
        .select(*window, *keys, "cp_share", "cp_ns", "edges", "note")
        .sort(
            # Shares equal to 1e-9 are ties (sums in another order differ in
            # their last bits): by channel, so every engine lists them alike.
            [*window, pl.col("cp_share").round(9), "src", "dst"],
            descending=[False] * len(window) + [True, False, False],
            nulls_last=True,
        )
    )
    return collect(query, len(partial))
