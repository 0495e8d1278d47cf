"""What-if replay error on every public event log (issue 11).

For each log of ``eventlogs/public`` (a file, a legacy ``EVENT_LOG_1``
folder or a rolling ``eventlog_v2_*`` folder) that imports: the traced
wall time, the unchanged replay's wall time and its error (replayed /
traced - 1), the error with every launch lag set to 0 (tasks launched as
soon as their stage is released and a slot is free, as sparklens' estimator
does: how much of the run the measured lags carry), the time to build and
run the replay, and the predicted wall time at half and double the
executors. Logs that fail to import are listed
as skipped. Prints a table, then the median and max absolute error.

    .venv/bin/python bench/whatif.py [EVENTLOG_ROOT]
    .venv/bin/python bench/whatif.py --tasks 1000000   # model and replay time
"""

from __future__ import annotations

import dataclasses
import heapq
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl

from sparktrail.pag.trace import load_trace
from sparktrail.tracer import import_trace
from sparktrail.whatif import Executors, Replay, SplitPartition, StagePartitions

PUBLIC = Path(__file__).resolve().parents[2] / "shared" / "eventlogs" / "public"


def event_logs(root: Path) -> list[Path]:
    """Every log under ``root``: non-empty files outside log folders, and the
    folders that are one log each."""
    logs: list[Path] = []
    folders: list[Path] = []
    for path in sorted(root.rglob("*")):
        if any(path.is_relative_to(f) for f in folders):
            continue
        if path.is_dir() and (
            path.name.startswith("eventlog_v2_") or (path / "EVENT_LOG_1").exists()
        ):
            folders.append(path)
            logs.append(path)
        elif path.is_file() and path.stat().st_size > 0 and path.suffix != ".md":
            logs.append(path)
    return logs


def main(root: Path = PUBLIC) -> int:
    rows = []
    skipped = []
    for log in event_logs(root):
        name = str(log.relative_to(root))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trace = import_trace(log, progress=False)
        except Exception as err:  # a log that does not import yet
            skipped.append((name, f"{type(err).__name__}: {err}"[:70]))
            continue
        began = time.perf_counter()
        try:
            replay = Replay.of(trace)
        except Exception as err:
            skipped.append((name, f"replay: {type(err).__name__}: {err}"[:70]))
            continue
        wall = replay.run().wall_ns
        seconds = time.perf_counter() - began
        eager = (
            dataclasses.replace(
                replay,
                tasks=replay.tasks.with_columns(lag_release=0, lag_slot=0),
            )
            .run()
            .wall_ns
        )
        half = replay.run(Executors(max(1, round(replay.executors / 2)))).wall_ns
        double = replay.run(Executors(2 * replay.executors)).wall_ns
        traced = replay.traced_wall_ns
        error = wall / traced - 1 if traced else 0.0
        rows.append(
            (
                name,
                replay.tasks.height,
                replay.slots,
                traced,
                wall,
                error,
                eager / traced - 1 if traced else 0.0,
                half,
                double,
                seconds,
            )
        )
    print(
        f"{'log':64} {'tasks':>6} {'slots':>5} {'traced s':>9} {'replay s':>9} "
        f"{'error':>8} {'no lags':>8} {'½ exec s':>9} {'2× exec s':>9} {'model s':>8}"
    )
    for name, tasks, slots, traced, wall, error, eager, half, double, sec in rows:
        print(
            f"{name[-64:]:64} {tasks:6d} {slots:5d} {traced / 1e9:9.2f} "
            f"{wall / 1e9:9.2f} {error:8.2%} {eager:8.2%} {half / 1e9:9.2f} "
            f"{double / 1e9:9.2f} {sec:8.3f}"
        )
    errors = [abs(r[5]) for r in rows]
    if errors:
        print(
            f"\n{len(rows)} logs replayed; |error| median "
            f"{statistics.median(errors):.2%}, max {max(errors):.2%}; "
            "without lags: median "
            f"{statistics.median(abs(r[6]) for r in rows):.2%}, "
            f"max {max(abs(r[6]) for r in rows):.2%}"
        )
    for name, why in skipped:
        print(f"skipped {name}: {why}")
    return 0


def scale(n: int, slots: int = 1000, stages: int = 100) -> int:
    """Time the model and a few replays of ``n`` tasks scheduled greedily on
    ``slots`` slots (8 per executor), ``stages`` stages one after another."""
    rng = np.random.default_rng(0)
    dur = rng.integers(1_000, 100_000, n).tolist()
    per = n // stages
    launch, worker = [0] * n, [0] * n
    free = [(0, k) for k in range(slots)]
    now = 0
    for s in range(stages):
        release, last = now + 500, now
        for i in range(s * per, (s + 1) * per):
            f, k = heapq.heappop(free)
            launch[i], worker[i] = max(release, f), k
            heapq.heappush(free, (launch[i] + dur[i], k))
            last = max(last, launch[i] + dur[i])
        now = last
    names = [f"exec-{k // 8}/{k % 8}" for k in worker]
    trace = load_trace(
        pl.DataFrame(
            {
                "src_worker": names,
                "dst_worker": names,
                "start_ns": launch,
                "end_ns": [a + d for a, d in zip(launch, dur, strict=True)],
                "activity": ["processing"] * n,
                "stage_id": np.repeat(np.arange(stages), per),
                "task_id": np.arange(n),
                "partition": np.tile(np.arange(per), stages),
            }
        )
    )
    Replay.of(trace.with_frame(trace.frame.head(1000))).run()  # compile once
    began = time.perf_counter()
    replay = Replay.of(trace)
    print(f"{n} tasks: model {time.perf_counter() - began:.2f} s")
    for change in (
        None,
        Executors(62),
        SplitPartition(3, 5, 4),
        StagePartitions(3, 500),
    ):
        began = time.perf_counter()
        wall = replay.run(change).wall_ns
        error = wall / replay.traced_wall_ns - 1
        print(
            f"  run {change}: {time.perf_counter() - began:.2f} s "
            f"(wall {error:+.2%} against the trace)"
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--tasks":
        sys.exit(scale(int(sys.argv[2])))
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else PUBLIC))
