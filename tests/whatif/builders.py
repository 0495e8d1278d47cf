"""Tiny hand-made traces for the what-if tests: tasks on slots, driver gaps."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from sparktrail.pag.trace import Trace, load_trace

#: (worker, stage, task, partition, launch, end[, overhead]); a task's first
#: ``overhead`` ns are its ``scheduling`` row.
Task = tuple[int | str, ...]


def trace_of(
    tasks: Iterable[Task],
    driver: Iterable[tuple[int, int, str]] = (),
    jobs: dict[int, int] | None = None,
) -> Trace:
    """A trace of ``tasks`` and driver rows ``(start, end, activity)``.

    ``jobs`` maps a stage to its job (default: the stage id).
    """
    rows: list[dict[str, object]] = []
    for task in tasks:
        worker, stage, task_id, part, launch, end, *rest = task
        overhead = int(rest[0]) if rest else 0
        assert isinstance(launch, int) and isinstance(end, int)
        pieces = [(launch, launch + overhead, "scheduling")] if overhead else []
        pieces.append((launch + overhead, end, "processing"))
        for start, stop, activity in pieces:
            rows.append(
                {
                    "src_worker": worker,
                    "dst_worker": worker,
                    "start_ns": start,
                    "end_ns": stop,
                    "activity": activity,
                    "job_id": (jobs or {}).get(int(stage), int(stage)),
                    "stage_id": stage,
                    "task_id": task_id,
                    "partition": part,
                }
            )
    for start, stop, activity in driver:
        rows.append(
            {
                "src_worker": "driver",
                "dst_worker": "driver",
                "start_ns": start,
                "end_ns": stop,
                "activity": activity,
                "job_id": None,
                "stage_id": None,
                "task_id": None,
                "partition": None,
            }
        )
    schema = {
        "src_worker": pl.String,
        "dst_worker": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "activity": pl.String,
        "job_id": pl.Int64,
        "stage_id": pl.Int64,
        "task_id": pl.Int64,
        "partition": pl.Int64,
    }
    return load_trace(pl.DataFrame(rows, schema=schema))


#: One executor, two slots: t1 is the straggler (0-40), t2 follows t0.
TWO_SLOTS = trace_of(
    [
        ("exec-1/0", 0, 0, 0, 0, 10),
        ("exec-1/1", 0, 1, 1, 0, 40),
        ("exec-1/0", 0, 2, 2, 10, 20),
    ]
)

#: startup 0-5, job 0 (stage 0) 5-15, driver 15-25, job 1 (stage 1) launched
#: 2 ns after the gap, 27-30, driver 30-32.
GAPS = trace_of(
    [("exec-1/0", 0, 0, 0, 5, 15), ("exec-1/0", 1, 1, 0, 27, 30)],
    driver=[(0, 5, "startup"), (15, 25, "driver"), (30, 32, "driver")],
)
