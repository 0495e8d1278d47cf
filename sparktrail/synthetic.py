"""Synthetic traces for benchmarks and tests: worker chains joined by barriers."""

from __future__ import annotations

import numpy as np
import polars as pl

__all__ = [
    "ACTIVITY_CYCLE",
    "barrier_trace",
    "profile_trace",
    "span_ns",
    "window_cp_rows",
]

ACTIVITY_CYCLE = ("processing", "gc", "processing", "shuffle_write", "scheduling")


def barrier_trace(n_rows: int, workers: int = 16, seed: int = 0) -> pl.DataFrame:
    """A trace of about ``n_rows`` edges (3 per worker and round).

    Per round, every worker runs one local activity of random length, then
    sends a control message to the next worker.

    Each round ends at a common barrier time, so every edge is on some
    start-to-end path and path counts grow with the number of rounds.
    """
    rng = np.random.default_rng(seed)
    rounds = max(1, n_rows // (3 * workers))
    durations = rng.integers(1_000, 100_000, size=(rounds, workers))
    barrier = np.cumsum(durations.max(axis=1) + 1_000)
    round_start = np.concatenate([[0], barrier[:-1]])
    w = np.arange(workers)
    local_start = np.repeat(round_start, workers)
    local_end = local_start + durations.ravel()
    names = np.array([f"exec-{i // 4}/{i % 4}" for i in range(workers)])
    src = np.tile(names, rounds)
    dst_idx = (np.tile(w, rounds) + 1) % workers
    activity = np.array(ACTIVITY_CYCLE)[
        rng.integers(0, len(ACTIVITY_CYCLE), rounds * workers)
    ]
    r = np.repeat(np.arange(rounds), workers)
    local = pl.DataFrame(
        {
            "src_worker": src,
            "dst_worker": src,
            "start_ns": local_start,
            "end_ns": local_end,
            "activity": activity,
            "src_seq": 0,
            "dst_seq": 0,
        }
    )
    # The message leaves when the local activity ends and arrives at the
    # barrier; the receiver's next round starts at the barrier.
    messages = pl.DataFrame(
        {
            "src_worker": src,
            "dst_worker": names[dst_idx],
            "start_ns": local_end,
            "end_ns": np.repeat(barrier, workers),
            "activity": np.where(r % 3 == 0, "data", "control"),
            "src_seq": 0,
            "dst_seq": 0,
        }
    )
    # A waiting row covers each worker's idle time until the barrier.
    waiting = local.with_columns(
        pl.col("end_ns").alias("start_ns"),
        pl.Series("end_ns", np.repeat(barrier, workers)),
        pl.lit("waiting").alias("activity"),
    )
    frame = pl.concat([local, messages, waiting]).with_columns(
        pl.lit(None, dtype=pl.String).alias("operator"),
        pl.lit(1, dtype=pl.Int64).alias("stage_id"),
        pl.lit(None, dtype=pl.Int64).alias("task_id"),
    )
    return frame


def span_ns(trace: pl.DataFrame) -> int:
    """The window that covers a barrier trace exactly: [0, last barrier]."""
    return int(trace["end_ns"].max())  # type: ignore[arg-type]


def profile_trace(n_rows: int, workers: int = 16) -> pl.DataFrame:
    """A barrier trace of about ``n_rows`` rows, with task ids and a stage.

    Each local activity is its own task (``task_id``) of stage 1
    (``operator`` ``stage 1: barrier at synthetic.py:1``); messages and
    waiting rows have no task.
    """
    trace = barrier_trace(n_rows, workers=workers)
    n_local = (len(trace) // 3) if len(trace) else 0
    task = np.full(len(trace), -1, dtype=np.int64)
    task[:n_local] = np.arange(n_local)
    return trace.with_columns(
        pl.Series("task_id", task).replace(-1, None),
        pl.lit("stage 1: barrier at synthetic.py:1").alias("operator"),
    )


def window_cp_rows(
    n_edges: int, workers: int = 64, window_ns: int = 1_000_000_000, seed: int = 0
) -> pl.DataFrame:
    """CP rows of one window of ``n_edges`` local activities (for drawing).

    Each of ``workers`` slots runs about ``n_edges / workers`` consecutive
    activities of random length tiling ``[0, window_ns)``; one in 500 has a
    random CP > 0, the rest 0. The columns are those of a window's CP table
    that the timeline reads; the numbers are not a kernel's result.

    >>> rows = window_cp_rows(1000, workers=4)
    >>> len(rows), rows["src_worker"].n_unique(), int(rows["end_ns"].max())
    (1000, 4, 1000000000)
    """
    rng = np.random.default_rng(seed)
    per = max(1, n_edges // workers)
    n = per * workers
    starts = np.sort(rng.integers(0, window_ns, size=(workers, per)), axis=1)
    starts[:, 0] = 0
    ends = np.concatenate([starts[:, 1:], np.full((workers, 1), window_ns)], axis=1)
    names = np.array([f"exec-{i // 4}/{i % 4}" for i in range(workers)])
    worker = np.repeat(names, per)
    cp = np.where(rng.random(n) < 0.002, rng.random(n), 0.0)
    activity = np.where(rng.random(n) < 0.8, "processing", "scheduling")
    return pl.DataFrame(
        {
            "window_start_ns": np.zeros(n, dtype=np.int64),
            "window_end_ns": np.full(n, window_ns, dtype=np.int64),
            "src_worker": worker,
            "dst_worker": worker,
            "start_ns": starts.ravel(),
            "end_ns": ends.ravel(),
            "activity": activity,
            "operator": np.full(n, "stage 1: count at synthetic.py:1"),
            "stage_id": np.ones(n, dtype=np.int64),
            "task_id": np.arange(n, dtype=np.int64),
            "cp": cp,
        }
    )
