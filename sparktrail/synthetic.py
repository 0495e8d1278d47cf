"""Synthetic traces for benchmarks and tests: worker chains joined by barriers.

Assumptions
-----------
* A trace is a function of its size, worker count and seed: made whole
  (:func:`profile_trace`) or written in chunks (:func:`write_profile_trace`)
  it has the same rows in the same order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag.trace import write_trace_batches
from sparktrail.pag.workers import worker_name

__all__ = [
    "ACTIVITY_CYCLE",
    "barrier_trace",
    "driver_gap_trace",
    "profile_trace",
    "span_ns",
    "window_cp_rows",
    "write_profile_trace",
]

ACTIVITY_CYCLE = ("processing", "gc", "processing", "shuffle_write", "scheduling")
#: The operator (stage 1) of :func:`profile_trace`'s tasks.
OPERATOR = "stage 1: barrier at synthetic.py:1"
#: Trace rows per chunk of :func:`write_profile_trace` (an Arrow record batch).
CHUNK_ROWS = 4_000_000


def barrier_trace(n_rows: int, workers: int = 16, seed: int = 0) -> pl.DataFrame:
    """A trace of about ``n_rows`` edges (3 per worker and round).

    Per round, every worker runs one local activity of random length, then
    sends a control message to the next worker.

    Each round ends at a common barrier time, so every edge is on some
    start-to-end path and path counts grow with the number of rounds.

    >>> t = barrier_trace(96, workers=4)
    >>> len(t), t["activity"].is_in(["control", "data"]).sum()
    (96, 32)
    """
    draws = _Draws.of(n_rows, workers, seed)
    return pl.concat(draws.parts(0, draws.rounds, tasks=False))


def span_ns(trace: pl.DataFrame) -> int:
    """The window that covers a barrier trace exactly: [0, last barrier]."""
    return int(trace["end_ns"].max())  # type: ignore[arg-type]


def profile_trace(n_rows: int, workers: int = 16) -> pl.DataFrame:
    """A barrier trace of about ``n_rows`` rows, with task ids and a stage.

    Each local activity is its own task (``task_id``) of stage 1
    (``operator`` ``stage 1: barrier at synthetic.py:1``); messages and
    waiting rows have no task.

    >>> t = profile_trace(96, workers=4)
    >>> t["task_id"].drop_nulls().to_list() == list(range(32))
    True
    """
    draws = _Draws.of(n_rows, workers, seed=0)
    return pl.concat(draws.parts(0, draws.rounds, tasks=True))


def write_profile_trace(
    n_rows: int,
    path: str | os.PathLike[str],
    workers: int = 16,
    chunk_rows: int = CHUNK_ROWS,
) -> Path:
    """Write :func:`profile_trace` ``(n_rows, workers)`` to a trace file, in chunks.

    The rows are made and written about ``chunk_rows`` at a time (an Arrow
    record batch each, :func:`~sparktrail.pag.trace.write_trace_batches`),
    so a trace of 10^8 rows is written holding only its random draws
    (16 bytes a local row) and one chunk. The file reads back as the frame
    :func:`profile_trace` returns (validated), row for row.

    Parameters
    ----------
    n_rows, workers
        As for :func:`profile_trace`.
    path
        The trace file to write.
    chunk_rows
        Trace rows per chunk (> 0; whole rounds, so at least ``workers``).

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    InputError
        If ``chunk_rows`` is not a positive integer.

    Examples
    --------
    >>> import tempfile
    >>> from sparktrail.pag.trace import read_trace, validate_trace
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = read_trace(write_profile_trace(96, Path(d) / "t.arrow", 4, 10))
    >>> f.equals(validate_trace(profile_trace(96, workers=4)))
    True
    """
    if (
        not isinstance(chunk_rows, int)
        or isinstance(chunk_rows, bool)
        or chunk_rows < 1
    ):
        raise InputError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    draws = _Draws.of(n_rows, workers, seed=0)
    rounds_per_chunk = max(1, chunk_rows // workers)

    def chunks() -> Iterator[pl.DataFrame]:
        # Row order is the one-shot frame's: every local row, then every
        # message, then every waiting row; each part in runs of rounds.
        for part in range(3):
            for a in range(0, draws.rounds, rounds_per_chunk):
                b = min(draws.rounds, a + rounds_per_chunk)
                yield draws.parts(a, b, tasks=True)[part]

    return write_trace_batches(chunks(), path)


@dataclass(frozen=True)
class _Draws:
    """The random draws of a barrier trace, from which any rounds' rows follow.

    Drawn at once (durations, then activities, from one generator), so a
    trace made in chunks of rounds has the values of the one made whole.
    """

    workers: int
    #: Local activity length per round and worker, ``(rounds, workers)``.
    durations: np.ndarray
    #: Each round's barrier (its end), cumulative.
    barrier: np.ndarray
    #: Index into :data:`ACTIVITY_CYCLE` per local row (round-major).
    activity: np.ndarray

    @classmethod
    def of(cls, n_rows: int, workers: int, seed: int) -> _Draws:
        rng = np.random.default_rng(seed)
        rounds = max(1, n_rows // (3 * workers))
        durations = rng.integers(1_000, 100_000, size=(rounds, workers))
        barrier = np.cumsum(durations.max(axis=1) + 1_000)
        activity = rng.integers(0, len(ACTIVITY_CYCLE), rounds * workers)
        return cls(workers, durations, barrier, activity)

    @property
    def rounds(self) -> int:
        return len(self.barrier)

    def parts(self, a: int, b: int, *, tasks: bool) -> list[pl.DataFrame]:
        """The local, message and waiting rows of rounds ``[a, b)``.

        ``tasks``: each local row its own task (numbered over the whole
        trace) of stage 1's operator, as :func:`profile_trace` has them.
        """
        workers = self.workers
        names = np.array([worker_name(i // 4, i % 4) for i in range(workers)])
        w = np.arange(workers)
        barrier = self.barrier[a:b]
        round_start = np.concatenate([[0], self.barrier[:-1]])[a:b]
        local_start = np.repeat(round_start, workers)
        local_end = local_start + self.durations[a:b].ravel()
        src = np.tile(names, b - a)
        dst_idx = (np.tile(w, b - a) + 1) % workers
        activity = np.array(ACTIVITY_CYCLE)[self.activity[a * workers : b * workers]]
        r = np.repeat(np.arange(a, b), workers)
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
        n_local = len(local)
        operator = OPERATOR if tasks else None
        out = []
        for k, frame in enumerate((local, messages, waiting)):
            task = None
            if tasks and k == 0:
                task = pl.Series(
                    "task_id", np.arange(a * workers, a * workers + n_local)
                )
            out.append(
                frame.with_columns(
                    pl.lit(operator, dtype=pl.String).alias("operator"),
                    pl.lit(1, dtype=pl.Int64).alias("stage_id"),
                    pl.lit(None, dtype=pl.Int64).alias("task_id")
                    if task is None
                    else task,
                )
            )
        return out


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
    names = np.array([worker_name(i // 4, i % 4) for i in range(workers)])
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


#: A second in ns (driver_gap_trace).
_S = 1_000_000_000


def driver_gap_trace(gap_s: int) -> pl.DataFrame:
    """A run whose driver waits ``gap_s`` seconds between two jobs.

    Two slots run three rounds of tasks (each launched by the driver), the
    driver waits, and one slot runs three more: the plain stretch of
    :func:`~sparktrail.pag.windows.plain_stretches` (DESIGN §10).

    >>> driver_gap_trace(10).filter(pl.col("activity") == "driver")["end_ns"].item()
    13000000000
    """
    rows: list[tuple[str, str, int, int, str, int | None]] = []

    def round_(t0: int, stage: int, slots: int) -> None:
        for k in range(3):
            start = t0 + k * _S
            rows.append(
                ("driver", "driver", start, start + _S // 10, "scheduling", None)
            )
            for slot in range(slots):
                worker = worker_name(1, slot)
                end = start + (_S if slot == 0 else _S // 2)
                rows.append(
                    (
                        "driver",
                        worker,
                        start + _S // 10,
                        start + _S // 10,
                        "control",
                        None,
                    )
                )
                rows.append(
                    (worker, worker, start + _S // 10, end, "processing", stage)
                )
                rows.append((worker, "driver", end, end, "control", None))

    round_(0, 0, 2)
    rows.append(("driver", "driver", 3 * _S, (3 + gap_s) * _S, "driver", None))
    round_((3 + gap_s) * _S, 1, 1)
    return pl.DataFrame(
        rows,
        schema=[
            "src_worker",
            "dst_worker",
            "start_ns",
            "end_ns",
            "activity",
            "stage_id",
        ],
        orient="row",
    )
