"""What one polars operator costs on small frames (issue 15, stop 21).

Times a filter, a group-by, a join and a ``with_columns`` on a frame of 16
rows and one of 30,000 (the sizes of a window's summaries and of its
rows), each the median of 7 repeats of 200 calls. Run it on all cores and
on one, side by side:

    .venv/bin/python bench/polars_handoff.py
    taskset -c 0 .venv/bin/python bench/polars_handoff.py

An operator that hands its work to polars' thread pool costs more when the
pool's threads run on another core than the caller's (on this machine's
two vCPUs, 60-90 us more); ``with_columns`` runs inline and costs the same.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import polars as pl

CALLS, REPEATS = 200, 7


def median_ms(operation: Callable[[], object], calls: int = CALLS) -> float:
    """Median over :data:`REPEATS` of the mean time of ``calls`` calls, in ms."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(calls):
            operation()
        times.append((time.perf_counter() - start) / calls * 1e3)
    return statistics.median(times)


def frame(rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "a": range(rows),
            "b": [1.0] * rows,
            "s": [f"x{i % 16}" for i in range(rows)],
        }
    )


def main() -> int:
    print(f"polars {pl.__version__}, {pl.thread_pool_size()} pool threads\n")
    print("| operator | ms per call |")
    print("|---|---:|")
    for rows in (16, 30_000):
        df = frame(rows)
        operations = {
            "filter": lambda df=df: df.filter(pl.col("a") > 3),
            "group-by": lambda df=df: df.group_by("s").agg(pl.col("b").sum()),
            "join": lambda df=df: df.join(df, on="a"),
            "with_columns": lambda df=df: df.with_columns((pl.col("a") * 2).alias("c")),
        }
        if rows > 16:
            del operations["join"]
        for name, operation in operations.items():
            print(f"| {name}, {rows:,} rows | {median_ms(operation):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
