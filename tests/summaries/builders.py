"""Tiny Spark-like traces with known answers, built task by task (times in ms)."""

from __future__ import annotations

from typing import Any

import polars as pl

MS = 1_000_000
SCHEMA = {
    "src_worker": pl.String,
    "dst_worker": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "activity": pl.String,
    "operator": pl.String,
    "job_id": pl.Int64,
    "stage_id": pl.Int64,
    "task_id": pl.Int64,
    "partition": pl.Int64,
    "records": pl.Int64,
    "bytes": pl.Int64,
    "shuffle_write_bytes": pl.Int64,
    "src_seq": pl.Int64,
    "dst_seq": pl.Int64,
}


class Trace:
    """Append rows worker by worker; each worker's seq counts its events."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.seq: dict[str, int] = {}
        self.next_task = 0

    def local(
        self, worker: str, start_ms: float, end_ms: float, activity: str, **kw: Any
    ) -> None:
        seq = self.seq.get(worker, 0)
        self.rows.append(
            {
                "src_worker": worker,
                "dst_worker": worker,
                "start_ns": int(start_ms * MS),
                "end_ns": int(end_ms * MS),
                "activity": activity,
                "src_seq": seq,
                "dst_seq": seq + 1,
                **kw,
            }
        )
        self.seq[worker] = seq + 1

    def message(
        self, src: str, dst: str, at_ms: float, activity: str = "control"
    ) -> None:
        """A zero-length message between the current last events of two workers."""
        self.rows.append(
            {
                "src_worker": src,
                "dst_worker": dst,
                "start_ns": int(at_ms * MS),
                "end_ns": int(at_ms * MS),
                "activity": activity,
                "src_seq": self.seq.get(src, 0),
                "dst_seq": self.seq.get(dst, 0),
            }
        )

    def task(
        self,
        worker: str,
        start_ms: float,
        pieces: list[tuple[str, float]],
        *,
        stage: int = 0,
        job: int = 0,
        records: int | None = 100,
        nbytes: int | None = 1000,
        written: int | None = None,
        partition: int | None = None,
        name: str = "count at App.scala:10",
    ) -> int:
        """A task's consecutive pieces; records/bytes on its processing row."""
        task_id = self.next_task
        self.next_task += 1
        ident = {
            "operator": f"stage {stage}: {name}",
            "job_id": job,
            "stage_id": stage,
            "task_id": task_id,
            "partition": task_id if partition is None else partition,
        }
        t = start_ms
        for activity, length in pieces:
            work = (
                {"records": records, "bytes": nbytes, "shuffle_write_bytes": written}
                if activity == "processing"
                else {}
            )
            self.local(worker, t, t + length, activity, **ident, **work)
            t += length
        return task_id

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows, schema=SCHEMA)


def with_cpu_shares(frame: pl.DataFrame, share: pl.Expr) -> pl.DataFrame:
    """``frame``'s tasks on executor "1" with Spark's run time (each task's
    span, launch to finish) and CPU time (``share`` of it, an expression
    over the task's rows), as the tracer's task columns hold them."""
    span = pl.col("end_ns").max().over("task_id") - pl.col("start_ns").min().over(
        "task_id"
    )
    return frame.with_columns(
        pl.lit("1").alias("executor_id"),
        span.alias("executor_run_ns"),
        (span * share).cast(pl.Int64).alias("executor_cpu_ns"),
    )


def balanced(n_executors: int = 2, slots: int = 2, ms: float = 100) -> pl.DataFrame:
    """Every slot of every executor runs one equal task for the whole window."""
    t = Trace()
    for e in range(1, n_executors + 1):
        for s in range(slots):
            t.task(f"exec-{e}/{s}", 0, [("processing", ms)])
    return t.frame()


def shuffle_join() -> pl.DataFrame:
    """Stages 0 (exec-1, 300 B) and 1 (exec-2, 100 B) feed stage 2 on exec-3.

    Window [0, 10 ms): two paths (through exec-1 or exec-2, then exec-3).
    CP: each writer 0.25, exec-3 shuffle_read 0.3, processing 0.2.
    """
    t = Trace()
    t.task("exec-1/0", 0, [("processing", 5)], stage=0, written=300, records=10)
    t.task("exec-2/0", 0, [("processing", 5)], stage=1, written=100, records=10)
    t.message("exec-1/0", "exec-3/0", 5)
    t.message("exec-2/0", "exec-3/0", 5)
    t.task(
        "exec-3/0",
        5,
        [("shuffle_read", 3), ("processing", 2)],
        stage=2,
        records=20,
        name="join at App.scala:20",
    )
    return t.frame()
