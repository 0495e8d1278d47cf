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
    "streaming_join",
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


def skewed_join(
    spark: Any, rows: int = 2_000_000, hot_key: int = 0, hot_per_8: int = 4
) -> None:
    """A join where ``hot_key`` holds ``hot_per_8`` eighths of the rows (half,
    by default): one hot shuffle partition.

    Run it with adaptive execution off (as ``sparktrail demo`` does): AQE's
    skew-join handling would split the hot partition itself. A join, not a
    group-by: map-side combining would shrink a hot group-by key to one row.
    """
    from pyspark.sql import functions as F

    big = spark.range(0, rows, numPartitions=8).select(
        F.when(F.col("id") % 8 < hot_per_8, F.lit(hot_key))
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
    partition (and the task that straggles) moves too. The hot key holds
    seven eighths of the rows, so its partition outlasts the other seven on
    any number of cores (on ``local[2]`` half the rows would keep both cores
    busy, and the skew would cost nothing). Returns the hot key.
    """
    hot_key = (round_ // rounds_per_key) % 5
    skewed_join(spark, rows=4_000_000, hot_key=hot_key, hot_per_8=7)
    return hot_key


def streaming_join(
    spark: Any,
    checkpoint: str,
    *,
    rows_per_second: int = 2000,
    hot_share: float = 0.5,
    seconds_per_key: int | None = 10,
    trigger_seconds: float = 1.0,
    name: str = "sparktrail_streaming_demo",
    state_partitions: int | None = None,
) -> Any:
    """Start a Structured Streaming query whose hot key moves; returns it.

    Two rate sources joined on a key within 2 s of event time (a
    stream-stream join: its state keeps every row of the last seconds, by
    key). On the first, ``hot_share`` of the rows carry one hot key and the
    rest spread over 97 keys; the hot key is ``(epoch seconds //
    seconds_per_key) % 5``, so it moves every ``seconds_per_key`` seconds
    (``None``: always key 0). The second source (a tenth of the rate) has
    every key. The join's state partition of the hot key holds about
    ``hot_share`` of the state rows and does that share of the work; unlike
    a group-by, whose map-side partial aggregation shrinks a hot key to one
    row per map task, nothing evens it out. The sink is ``noop``, triggered
    every ``trigger_seconds``; its shuffle (and state) partitions are
    ``state_partitions``, or the session's ``spark.sql.shuffle.partitions``
    when ``None`` (a query takes the setting when it starts and keeps it in
    its checkpoint). Stop it with ``query.stop()``.
    """
    from pyspark.sql import functions as F

    def rate(rows: int) -> Any:
        return (
            spark.readStream.format("rate")
            .option("rowsPerSecond", rows)
            .option("numPartitions", 2)
            .load()
        )

    hot = (
        F.lit(0)
        if seconds_per_key is None
        else (F.floor(F.unix_timestamp("timestamp") / seconds_per_key) % 5)
    )
    spread = F.col("value") % 97 + 5  # keys 5..101 never collide with a hot one
    left = rate(rows_per_second).select(
        F.when(F.rand(seed=7) < hot_share, hot).otherwise(spread).alias("key"),
        F.col("timestamp").alias("left_time"),
    )
    right = rate(max(1, rows_per_second // 10)).select(
        (F.col("value") % 102).alias("right_key"),
        F.col("timestamp").alias("right_time"),
    )
    joined = left.withWatermark("left_time", "2 seconds").join(
        right.withWatermark("right_time", "2 seconds"),
        F.expr(
            "key = right_key AND right_time BETWEEN left_time - INTERVAL 2 SECONDS "
            "AND left_time + INTERVAL 2 SECONDS"
        ),
    )
    writer = (
        joined.writeStream.format("noop")
        .queryName(name)
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_seconds} seconds")
    )
    if state_partitions is None:
        return writer.start()
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    spark.conf.set(key, str(state_partitions))
    try:  # the query clones the session's settings as it starts
        return writer.start()
    finally:
        spark.conf.set(key, before)


#: Name -> workload, in the order ``sparktrail demo`` runs them.
WORKLOADS: dict[str, Callable[[Any], None]] = {
    "balanced_groupby": balanced_groupby,
    "straggler_partition": straggler_partition,
    "skewed_join": skewed_join,
}
