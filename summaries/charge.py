"""CP rows charged to the worker whose progress they hold, with the trace's task facts.

:func:`enrich` adds to each CP row (one snapshot edge) the columns the
summaries group by: ``worker`` (the timeline an edge is charged to: its own
worker for a local activity, the receiving worker for a message, whose
progress the message holds), ``executor`` (:func:`~sparktrail.pag.workers.
executor_of`), ``cp_ns`` (critical time: CP x window length) and the
trace's task facts. Task facts that sit on one trace row (``records``,
``bytes``) are *not* summed from the CP table, whose rows are window-clipped
pieces of trace rows; :func:`~sparktrail.summaries.task_table.task_facts`
reads them from the trace instead.
"""

from __future__ import annotations

import polars as pl

from sparktrail.pag.workers import executor_of_column

__all__ = [
    "charge",
    "enrich",
]


#: Trace columns copied onto CP rows when the trace has them.
_FACTS = ("job_id", "partition", "status", "speculative")


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
