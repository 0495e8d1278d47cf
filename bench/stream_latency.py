"""Latency from a micro-batch's end to its window on the dashboard (issue 12).

Runs the demo's streaming query (:func:`sparktrail.workloads.streaming_join`)
on a local[2] session traced live, with the dashboard's loader
(:class:`~sparktrail.dashboard.live_view.LiveLoader`, ``--window 1s
--lateness 2s``, stepped by an ``UpdateThread`` as ``sparktrail serve``
does) in the same process, for ``--seconds``. Every 50 ms it notes the end
of the newest closed window of the published snapshot. For each batch
(Spark's progress: trigger start plus ``triggerExecution``, driver clock =
this machine's clock), the latency is the wall time when a published
window first covered the batch's end, minus that end; the lateness (2 s) is
the floor any window pays. Prints the median and 90th percentile, and
those beyond the lateness.

    PYTHONPATH=. .venv/bin/python bench/stream_latency.py --seconds 60
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import tempfile
import time
from pathlib import Path

from bench.stream_overhead import local_session
from sparktrail.cli.serve import live_loader
from sparktrail.dashboard.live_view import UpdateThread
from sparktrail.pag.trace import read_context
from sparktrail.tracer import attach, detach
from sparktrail.workloads import streaming_join

S = 1_000_000_000
LATENESS = 2 * S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    spark = local_session()
    seen: list[tuple[int, int]] = []  # (wall ns, newest closed window end)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace"
        attach(spark, out)
        query = streaming_join(spark, str(Path(tmp) / "checkpoint"))
        updates = UpdateThread(live_loader(out, S, LATENESS).step, source=str(out))
        updates.start()
        stop = time.monotonic() + args.seconds
        try:
            while time.monotonic() < stop:
                windows = updates.latest().windows
                if windows and (not seen or windows[-1].end_ns > seen[-1][1]):
                    seen.append((time.time_ns(), windows[-1].end_ns))
                time.sleep(0.05)
        finally:
            spark.sparkContext.setLogLevel("OFF")
            query.stop()
            spark.sparkContext.setLogLevel("ERROR")
            detach(spark)
            updates.stop()
            spark.stop()
        batches = read_context(out).batches
    ends = [end for _, end in seen]
    latencies = []
    for batch in batches:
        end = batch.trigger_end_ns
        if end is None:
            continue
        i = bisect.bisect_left(ends, end)  # the first window covering it
        if i < len(seen):
            latencies.append((seen[i][0] - end) / S)
    if not latencies:
        print("no batch was covered by a published window")
        return 1
    q = statistics.quantiles(latencies, n=10)
    print(f"{len(latencies)} of {len(batches)} batches published; seconds from")
    print("a batch's end to the first published window covering it:")
    print("\n| | median | p90 |")
    print("|---|---:|---:|")
    print(
        f"| batch end → published | {statistics.median(latencies):.2f} | {q[-1]:.2f} |"
    )
    beyond = [x - LATENESS / S for x in latencies]
    print(
        f"| beyond the 2 s lateness | {statistics.median(beyond):.2f} | "
        f"{statistics.quantiles(beyond, n=10)[-1]:.2f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
