"""Collecting trace rows (DESIGN §3) as the model builds them.

The model adds rows one at a time from several places (a task's pieces, a
slot's gaps, the driver's timeline) and patches the driver's sequence
numbers in at the end, so rows go into a list of tuples and are turned
into columns once, then into a polars frame.

Assumptions
-----------
* Columns are the trace schema plus the tracer's extra columns
  (:data:`TASK_COLUMNS`, the work columns after ``records`` and ``bytes``
  in :data:`WORK_COLUMNS`) and ``settled_ns``, the time of the event that
  fixed the row (for ``--follow``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from sparktrail.pag.schemas import TASK_WORK_COLUMNS

from .fields import valid_text

__all__ = ["NO_WORK", "TASK_COLUMNS", "WORK_COLUMNS", "TraceRows"]

#: Columns that describe the task attempt a row belongs to (null otherwise).
#: ``executor_run_ns``, ``jvm_gc_ns`` and ``executor_cpu_ns`` are Spark's
#: own ``Executor Run Time``, ``JVM GC Time`` and ``Executor CPU Time`` of
#: the attempt (null when its ``TaskEnd`` had no metrics, and the CPU time
#: before Spark 2.1, which did not state it): the rows' pieces are fitted
#: to the task's slot time and cannot give them back (GC may even exceed
#: the run time Spark states).
TASK_COLUMNS = (
    "task_id",
    "partition",
    "attempt",
    "status",
    "speculative",
    "executor_id",
    "clipped_ns",
    "executor_run_ns",
    "jvm_gc_ns",
    "executor_cpu_ns",
)
_NO_TASK = (None,) * len(TASK_COLUMNS)
#: What a task did, on its ``processing`` row (null elsewhere): the pag's
#: :data:`~sparktrail.pag.schemas.TASK_WORK_COLUMNS`.
WORK_COLUMNS = TASK_WORK_COLUMNS
#: A row that carries no work.
NO_WORK: tuple[int | None, ...] = (None,) * len(WORK_COLUMNS)


class TraceRows:
    """Columnar accumulation of trace rows.

    >>> rows = TraceRows()
    >>> rows.add("driver", "driver", 0, 5, "driver", 0, 1)
    >>> rows.frame().select("src_worker", "end_ns", "settled_ns").rows()
    [('driver', 5, 5)]
    """

    COLUMNS = (
        "src_worker",
        "dst_worker",
        "start_ns",
        "end_ns",
        "activity",
        "src_seq",
        "dst_seq",
        "operator",
        "job_id",
        "stage_id",
        *WORK_COLUMNS,
        *TASK_COLUMNS,
        "settled_ns",
    )

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self._cols: dict[str, list[Any]] | None = None

    def add(
        self,
        src: str,
        dst: str,
        start: int,
        end: int,
        activity: str,
        src_seq: int,
        dst_seq: int,
        task: tuple[Any, ...] | None = None,
        job_stage: tuple[str | None, int | None, int | None] = (None, None, None),
        work: tuple[int | None, ...] = NO_WORK,
        settled: int | None = None,
    ) -> None:
        """Add one row; ``settled`` defaults to its end.

        ``task`` holds the :data:`TASK_COLUMNS` values, ``job_stage`` the
        operator, job and stage, ``work`` the :data:`WORK_COLUMNS` values.
        """
        self.rows.append(
            (
                src,
                dst,
                start,
                end,
                activity,
                src_seq,
                dst_seq,
                *job_stage,
                *work,
                *(task or _NO_TASK),
                end if settled is None else settled,
            )
        )

    @property
    def cols(self) -> dict[str, list[Any]]:
        """The rows as columns (transposed once, after the last ``add``)."""
        if self._cols is None:
            columns = (
                zip(*self.rows, strict=True) if self.rows else [()] * len(self.COLUMNS)
            )
            self._cols = {
                name: list(values)
                for name, values in zip(self.COLUMNS, columns, strict=True)
            }
        return self._cols

    def frame(self) -> pl.DataFrame:
        """The rows as a frame (strings, a boolean, the rest Int64)."""
        schema = {
            "src_worker": pl.String,
            "dst_worker": pl.String,
            "activity": pl.String,
            "operator": pl.String,
            "status": pl.String,
            "executor_id": pl.String,
            "speculative": pl.Boolean,
        }
        types = {c: schema.get(c, pl.Int64) for c in self.COLUMNS}
        try:
            return pl.DataFrame(self.cols, schema=types)
        except UnicodeEncodeError:
            # A lone surrogate in a label (say, an operator's plan text): only
            # then is every string looked at.
            cols = {
                name: [valid_text(v) if isinstance(v, str) else v for v in values]
                if types[name] == pl.String
                else values
                for name, values in self.cols.items()
            }
            return pl.DataFrame(cols, schema=types)
