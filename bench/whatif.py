"""What-if replay error on every public event log (issue 11).

For each log of ``eventlogs/public`` (a file, a legacy ``EVENT_LOG_1``
folder or a rolling ``eventlog_v2_*`` folder) that imports: the traced
wall time, the unchanged replay's wall time and its error (replayed /
traced - 1), the time to build and run the replay, and the predicted wall
time at half and double the executors. Logs that fail to import are listed
as skipped. Prints a table, then the median and max absolute error.

    .venv/bin/python bench/whatif.py [EVENTLOG_ROOT]
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path

from sparktrail.tracer import import_trace
from sparktrail.whatif import Executors, Replay

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
                half,
                double,
                seconds,
            )
        )
    print(
        f"{'log':64} {'tasks':>6} {'slots':>5} {'traced s':>9} {'replay s':>9} "
        f"{'error':>8} {'½ exec s':>9} {'2× exec s':>9} {'model s':>8}"
    )
    for name, tasks, slots, traced, wall, error, half, double, seconds in rows:
        print(
            f"{name[-64:]:64} {tasks:6d} {slots:5d} {traced / 1e9:9.2f} "
            f"{wall / 1e9:9.2f} {error:8.2%} {half / 1e9:9.2f} {double / 1e9:9.2f} "
            f"{seconds:8.3f}"
        )
    errors = [abs(r[5]) for r in rows]
    if errors:
        print(
            f"\n{len(rows)} logs replayed; |error| median "
            f"{statistics.median(errors):.2%}, max {max(errors):.2%}"
        )
    for name, why in skipped:
        print(f"skipped {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else PUBLIC))
