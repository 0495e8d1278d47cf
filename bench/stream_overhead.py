"""Per-batch overhead of live tracing on a Structured Streaming query (issue 12).

Runs the demo's streaming query (:func:`sparktrail.workloads.streaming_join`,
a stream-stream join of two rate sources) on one local Spark session,
alternately untraced and traced live (:func:`sparktrail.tracer.attach`; in
the order ABBA...), for
``--batches`` micro-batches each, ``--pairs`` times, and reports the median
``triggerExecution`` (Spark's own batch duration) of each mode over the
batches after the first two of each run (they compile), and their ratio.

On a loaded 2-core machine that ratio is mostly noise, so the traced runs
also report what tracing costs directly over the same batches: the time the
listener spent serializing events on Spark's listener-bus thread
(``serializeNanos``) and the CPU time of the follower process (the raw log
→ Arrow rebuild, at nice 19), each as a share of the batches' time. The
first batches are left out here too: the listener's first events pay for
the JVM's class loading and JIT (about a second).

    .venv/bin/python bench/stream_overhead.py --pairs 2 --batches 12
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from sparktrail.tracer import attach
from sparktrail.workloads import streaming_join

WARM = 2


@dataclass
class Cost:
    """What tracing took during one traced run."""

    batches_ms: float = 0.0  # triggerExecution of the batches measured, summed
    serialize_ms: float = 0.0  # listener-bus thread, serializing events
    follower_cpu_ms: float = 0.0  # the follower process, user + system
    events: int = 0


def _cpu_ms(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return (times.user + times.system) * 1e3


def _spent(handle: Any, follower: int | None) -> Cost | None:
    """Tracing's time so far (``None`` untraced)."""
    if handle is None:
        return None
    return Cost(
        serialize_ms=handle._listener.serializeNanos() / 1e6,
        follower_cpu_ms=_cpu_ms(follower),
        events=int(handle._listener.eventsReceived()),
    )


def _run(
    spark: Any, root: Path, batches: int, traced: bool
) -> tuple[list[int], Cost | None]:
    handle = attach(spark, root / "trace", flush_seconds=0.5) if traced else None
    follower = None if handle is None or handle._proc is None else handle._proc.pid
    query = streaming_join(spark, str(root / "checkpoint"), rows_per_second=2000)
    cost = warm = None
    try:
        while True:
            progress = query.lastProgress
            if progress and progress["batchId"] >= batches:
                break
            if warm is None and progress and progress["batchId"] >= WARM - 1:
                warm = _spent(handle, follower)  # JIT and class loading done
            time.sleep(0.2)
        durations = [
            p["durationMs"]["triggerExecution"]
            for p in query.recentProgress
            if p["batchId"] >= WARM
        ]
        if warm is not None:
            # Read before the detach: it stops the follower.
            end = _spent(handle, follower)
            cost = Cost(
                batches_ms=float(sum(durations)),
                serialize_ms=end.serialize_ms - warm.serialize_ms,
                follower_cpu_ms=end.follower_cpu_ms - warm.follower_cpu_ms,
                events=end.events - warm.events,
            )
    finally:
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
        spark.sparkContext.setLogLevel("ERROR")
        if handle is not None:
            handle.detach()
    return durations, cost


def local_session() -> Any:
    """The streaming benchmarks' Spark: local[2], no UI, 4 shuffle partitions."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--batches", type=int, default=12)
    args = parser.parse_args(argv)
    spark = local_session()
    runs: dict[bool, list[int]] = {False: [], True: []}
    costs: list[Cost] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for pair in range(args.pairs):
                # ABBA: warm-up from run to run favours neither mode.
                for traced in (False, True) if pair % 2 == 0 else (True, False):
                    root = Path(tmp) / f"{pair}-{traced}"
                    got, cost = _run(spark, root, args.batches, traced)
                    runs[traced] += got
                    costs += [cost] if cost is not None else []
                    print(
                        f"pair {pair} {'traced' if traced else 'untraced'}: "
                        f"median batch {statistics.median(got):.0f} ms "
                        f"over {len(got)} batches",
                        flush=True,
                    )
    finally:
        spark.stop()
    plain, traced = statistics.median(runs[False]), statistics.median(runs[True])
    print("\n| mode | batches | median triggerExecution (ms) |")
    print("|---|---:|---:|")
    print(f"| untraced | {len(runs[False])} | {plain:.0f} |")
    print(f"| traced live | {len(runs[True])} | {traced:.0f} |")
    print(f"\nratio traced / untraced: {traced / plain:.3f}")
    print(direct_costs(costs))
    return 0


def direct_costs(costs: list[Cost]) -> str:
    """Tracing's own time over the traced runs, as a Markdown table."""
    batches = sum(c.batches_ms for c in costs)
    serialize = sum(c.serialize_ms for c in costs)
    follower = sum(c.follower_cpu_ms for c in costs)
    events = sum(c.events for c in costs)
    return "\n".join(
        [
            "\n| traced runs' cost | total | share of the batches' time |",
            "|---|---:|---:|",
            f"| batches' triggerExecution | {batches:,.0f} ms | 100% |",
            f"| listener-bus thread, serializing {events:,} events | "
            f"{serialize:,.0f} ms | {serialize / batches:.2%} |",
            f"| follower process CPU (nice 19) | {follower:,.0f} ms | "
            f"{follower / batches:.2%} |",
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
