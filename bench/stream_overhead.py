"""Per-batch overhead of live tracing on a Structured Streaming query (issue 12).

Runs the demo's streaming query (:func:`sparktrail.workloads.streaming_join`,
a stream-stream join of two rate sources) on one local Spark session,
alternately untraced and traced live (:func:`sparktrail.tracer.attach`), for
``--batches`` micro-batches each, ``--pairs`` times, and reports the median
``triggerExecution`` (Spark's own batch duration) of each mode over the
batches after the first two of each run (they compile), and their ratio.

    .venv/bin/python bench/stream_overhead.py --pairs 2 --batches 12
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sparktrail.tracer import attach
from sparktrail.workloads import streaming_join

WARM = 2


def _run(spark: Any, root: Path, batches: int, traced: bool) -> list[int]:
    handle = attach(spark, root / "trace", flush_seconds=0.5) if traced else None
    query = streaming_join(spark, str(root / "checkpoint"), rows_per_second=2000)
    try:
        while True:
            progress = query.lastProgress
            if progress and progress["batchId"] >= batches:
                break
            time.sleep(0.2)
        durations = [
            p["durationMs"]["triggerExecution"]
            for p in query.recentProgress
            if p["batchId"] >= WARM
        ]
    finally:
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
        spark.sparkContext.setLogLevel("ERROR")
        if handle is not None:
            handle.detach()
    return durations


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
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for pair in range(args.pairs):
                for traced in (False, True):
                    root = Path(tmp) / f"{pair}-{traced}"
                    got = _run(spark, root, args.batches, traced)
                    runs[traced] += got
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
