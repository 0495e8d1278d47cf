"""Small real Spark workloads with known bottlenecks, for demos and tests.

Each workload is a function of a running SparkSession. They run in local
mode in seconds and have a known answer: which stage, partition or
activity holds the job back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "WORKLOADS",
    "balanced_groupby",
    "many_tiny_tasks",
    "moving_hotspot",
    "skewed_join",
    "straggler_partition",
    "warm_python_workers",
]

#: The partition of :func:`straggler_partition` that sleeps.
SLOW_PARTITION = 5
SLOW_SECONDS = 2.0


def balanced_groupby(spark: Any) -> None:
    """A shuffle of evenly spread keys: no straggler, no hotspot."""
    from pyspark.sql import functions as F

    frame = spark.range(0, 400_000, numPartitions=8)
    frame.groupBy((F.col("id") % 64).alias("key")).count().collect()


def warm_python_workers(spark: Any) -> None:
    """Start the executors' Python workers, whose first start costs ~2 s a slot.

    Without it, the first task of every slot in a Python stage looks like a
    straggler (which it is, but not the one a workload means to show).
    """
    slots = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(slots), slots).map(lambda x: x).collect()


def straggler_partition(spark: Any) -> None:
    """16 short tasks, one of which (partition 5) sleeps 2 s: a time straggler."""

    def work(index: int, rows: Any) -> Any:
        time.sleep(SLOW_SECONDS if index == SLOW_PARTITION else 0.05)
        return [sum(1 for _ in rows)]

    warm_python_workers(spark)
    spark.sparkContext.parallelize(range(1600), 16).mapPartitionsWithIndex(
        work
    ).collect()


def skewed_join(spark: Any, rows: int = 2_000_000, hot_key: int = 0) -> None:
    """A join where ``hot_key`` holds half the rows: one hot shuffle partition.

    Run it with adaptive execution off (as ``sparktrail demo`` does): AQE's
    skew-join handling would split the hot partition itself. A join, not a
    group-by: map-side combining would shrink a hot group-by key to one row.
    """
    from pyspark.sql import functions as F

    big = spark.range(0, rows, numPartitions=8).select(
        F.when(F.col("id") % 2 == 0, F.lit(hot_key))
        .otherwise(F.col("id") % 997)
        .alias("key"),
        F.col("id").alias("value"),
    )
    small = spark.range(0, 997).select(F.col("id").alias("key"))
    big.join(small.hint("shuffle_hash"), "key").groupBy("key").count().collect()


def many_tiny_tasks(spark: Any, tasks: int = 20_000) -> None:
    """A sum over ``tasks`` one-row partitions: scheduling-bound."""
    spark.range(0, tasks, 1, tasks).selectExpr("sum(id)").collect()


def moving_hotspot(spark: Any, round_: int, rounds_per_key: int = 3) -> int:
    """One round of a skewed join whose hot key moves every few rounds.

    Keys 0, 1, 2, ... land in different shuffle partitions, so the hot
    partition (and the task that straggles) moves too. Returns the hot key.
    """
    hot_key = (round_ // rounds_per_key) % 5
    skewed_join(spark, rows=1_000_000, hot_key=hot_key)
    return hot_key


#: Name -> workload, in the order ``sparktrail demo`` runs them.
WORKLOADS: dict[str, Callable[[Any], None]] = {
    "balanced_groupby": balanced_groupby,
    "straggler_partition": straggler_partition,
    "skewed_join": skewed_join,
}
