"""DStream applications (Spark Streaming): batches against their interval.

A DStream application runs one job (or a few) per batch, every batch
interval; each job carries its batch's time
(``spark.streaming.internal.batchTime``, :attr:`~sparktrail.pag.context.
JobSpan.batch_time_ns`). Spark does not log the ``StreamingListener``
events, so a batch is read off its jobs:

* its *processing time*: first job start to last job end;
* its *scheduling delay*: first job start minus its batch time (how long
  it waited for the batches before it);
* the interval: the most common gap between batch times
  (:attr:`~.facts.RunFacts.dstream_interval_ns`).

``stream_backlog`` fires when the batches after the first take longer
than the interval (median) or the scheduling delay grows to more than an
interval: the stream falls behind its input, and the delay grows without
bound. DS2's slot count for it: the slots it had times processing /
interval, at the target utilisation. The waits between batches are the
stream idling, never driver code (:func:`dstream_waits`).

Assumptions
-----------
* Every job of a batch names its batch time; jobs without one (the
  receivers' long-running jobs, the program's own set-up) are not batches.
* Batches are the jobs' batch times in order; the first is left out of the
  medians (its jobs start the executors' code cold).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

from sparktrail.pag.context import AppContext
from sparktrail.units import duration

from .hint import Hint
from .inputs import Context

__all__ = ["DStreamBatch", "dstream_backlog", "dstream_batches", "dstream_waits"]


@dataclass(frozen=True)
class DStreamBatch:
    """One DStream batch: its time and its jobs' start and end (ns)."""

    batch_time_ns: int
    start_ns: int
    end_ns: int
    jobs: int

    @property
    def processing_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def delay_ns(self) -> int:
        return max(0, self.start_ns - self.batch_time_ns)


def dstream_batches(app: AppContext) -> list[DStreamBatch]:
    """The batches of a DStream application, by batch time.

    >>> from sparktrail.pag.context import JobSpan
    >>> app = AppContext(jobs=(JobSpan(0, 10, 30, batch_time_ns=10),
    ...     JobSpan(1, 30, 45, batch_time_ns=10), JobSpan(2, 50, 60)))
    >>> [(b.processing_ns, b.jobs) for b in dstream_batches(app)]
    [(35, 2)]
    """
    spans: dict[int, list[tuple[int, int]]] = {}
    for job in app.jobs:
        if job.batch_time_ns is None or job.start_ns is None:
            continue
        end = job.end_ns if job.end_ns is not None else job.start_ns
        spans.setdefault(job.batch_time_ns, []).append((job.start_ns, end))
    return [
        DStreamBatch(t, min(a for a, _ in s), max(b for _, b in s), len(s))
        for t, s in sorted(spans.items())
    ]


def dstream_waits(app: AppContext) -> list[tuple[int, int]]:
    """The spans between a DStream application's batches (the end of one
    batch's jobs to the start of the next's): the stream waiting for its
    next batch, which no rule may call driver code."""
    batches = dstream_batches(app)
    return [
        (a.end_ns, b.start_ns)
        for a, b in itertools.pairwise(batches)
        if b.start_ns > a.end_ns
    ]


#: Batches needed after the first to judge a stream.
MIN_BATCHES = 3


def dstream_backlog(ctx: Context) -> list[Hint]:
    """``stream_backlog`` for a DStream application that falls behind (see
    the module notes)."""
    facts = ctx.facts
    if facts.kind != "dstream" or not facts.dstream_interval_ns:
        return []
    batches = dstream_batches(ctx.app)[1:]  # the first starts cold
    if len(batches) < MIN_BATCHES:
        return []
    interval = facts.dstream_interval_ns
    processing = [b.processing_ns for b in batches]
    median = statistics.median(processing)
    delays = [b.delay_ns for b in batches]
    growing = delays[-1] > delays[0] + interval and delays[-1] > interval
    if median <= interval and not growing:
        return []
    share = max(0.0, 1 - interval / median) if median > 0 else 0.0
    if share <= 0 and growing:
        share = min(
            1.0,
            (delays[-1] - delays[0]) / max(1, batches[-1].end_ns - batches[0].start_ns),
        )
    slots = ctx.total_slots()
    target = ctx.options.stream_target_utilisation
    pi = math.ceil(slots * median / interval / target)
    longer = max(interval, int(median / target))
    evidence = {
        "engine": "dstream",
        "batches": len(batches),
        "batch_interval_ns": interval,
        "median_processing_ns": median,
        "max_processing_ns": max(processing),
        "first_delay_ns": delays[0],
        "last_delay_ns": delays[-1],
        "delay_growing": growing,
        "slots": slots,
        "pi": pi,
    }
    action = (
        f"the DStream's batches take {duration(min(processing))} to "
        f"{duration(max(processing))} (median {duration(median)}) for a "
        f"{duration(interval)} batch interval: the stream falls behind its input, "
        f"its scheduling delay {duration(delays[0])} at batch 2 and "
        f"{duration(delays[-1])} at the last ({len(batches) + 1} batches)"
        + (", and growing" if growing else "")
        + f". It needs about {pi} cores or slots ({slots} now, {target:.0%} busy "
        "at the input rate): more executors or cores, and as many partitions "
        "per batch (repartition the input stream); or a batch interval of "
        f"{duration(longer)} or more; or less work per batch. With receivers, "
        "spark.streaming.backpressure.enabled=true bounds what they take in."
    )
    return [
        Hint(
            "stream_backlog",
            share,
            evidence,
            action,
            saving_share=share,
            share_of="input",
        )
    ]
