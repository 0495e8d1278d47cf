"""Hints over a Structured Streaming query's micro-batches (DESIGN §6, §8).

The rules read the query's progress (:class:`~sparktrail.pag.streams.
StreamBatch` in the application's context), not CP: a micro-batch query
that falls behind shows it in Spark's own rates before any activity does.

* ``stream_backlog`` (DS2): the processed rate stays below the input rate
  over several batches. The true rate of one slot is the processed rate
  over the slots the query had; the slots ``pi`` that keep up with the
  input at a target utilisation (0.7) are ``ceil(input rate / (0.7 x rate
  per slot))``, and the backlog (offsets behind latest where the source
  reports it, else the rows that arrived and were not processed) drains
  in ``backlog / (pi x rate per slot - input rate)``.
* ``trigger_bound``: most batches run longer than the trigger interval,
  so the query starts each batch late. Spark's progress does not state
  the interval; it is inferred from the starts of the batches that waited
  for their trigger, which lie on its multiples (a processing-time trigger
  starts a batch at the next tick, or at once when its predecessor
  outlasted the interval). Batches that all run back to back do not show
  it, and get no ``trigger_bound``.
* ``planning_bound``: the trigger's time outside ``addBatch`` (query
  planning, getting the batch, offsets and the write-ahead log) is a large
  share of each trigger.

Assumptions
-----------
* A query's batches are those of the context with its ``query_id``, in
  batch order; numbers a progress lacks are ``None`` and the batch is left
  out of the rule that needs them.
* The slots are the application's (:meth:`Context.total_slots`): a query
  shares them with whatever else the application runs.
* ``stream_backlog`` and ``trigger_bound`` save no wall time of the run
  (a streaming query runs until stopped): their ``saving_share`` is the
  share of the input the query fails to keep up with, or by which its
  batches outlast the trigger, and severity follows from it.
  ``planning_bound``'s saving is the planning time itself, at most.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sparktrail.pag.streams import StreamBatch

from ._common import Context, Hint, saving_severity

__all__ = ["planning_bound", "stream_backlog", "trigger_bound"]

MS = 1_000_000
#: How far a batch may start after its trigger's tick (scheduling jitter).
SPACING_SLACK_NS = 50_000_000
#: The most trigger ticks one start spacing is taken to span.
MAX_TICKS = 64
#: Batches that waited for a tick needed to infer the interval.
MIN_WAITED = 3
#: Trigger intervals inferred are multiples of this many ms.
ROUND_MS = 50
#: The shortest trigger interval inferred: shorter ones fit any start.
MIN_INTERVAL_NS = 10 * SPACING_SLACK_NS
#: ``durationMs`` keys spent outside running the batch's jobs.
PLANNING_KEYS = (
    "queryPlanning",
    "getBatch",
    "latestOffset",
    "getOffset",
    "walCommit",
    "commitOffsets",
    "setOffsetRange",
)


def _by_query(ctx: Context) -> dict[str, list[StreamBatch]]:
    queries: dict[str, list[StreamBatch]] = defaultdict(list)
    for batch in ctx.app.batches:
        queries[batch.query_id].append(batch)
    for batches in queries.values():
        batches.sort(key=lambda b: (b.batch_id is None, b.batch_id or 0))
    return dict(queries)


def _name(ctx: Context, query_id: str) -> str:
    for query in ctx.app.queries:
        if query.query_id == query_id and query.name:
            return f"query {query.name!r}"
    return f"query {query_id[:8]}"


def _rated(batches: Sequence[StreamBatch]) -> list[StreamBatch]:
    """Batches with input and positive processed rates."""
    return [
        b
        for b in batches
        if b.input_rows_per_second is not None
        and b.processed_rows_per_second
        and b.num_input_rows
    ]


def _backlog(batch: StreamBatch) -> int | None:
    known = [s.backlog for s in batch.sources or () if s.backlog is not None]
    return sum(known) if known else None


def stream_backlog(ctx: Context) -> list[Hint]:
    """``stream_backlog``: a query processes fewer rows/s than arrive.

    Examples
    --------
    See ``tests/summaries/test_streaming_hints.py``.
    """
    opts = ctx.options
    hints = []
    for query_id, batches in _by_query(ctx).items():
        rated = _rated(batches)[-opts.stream_batches :]
        behind = [
            b
            for b in rated
            if (b.processed_rows_per_second or 0)
            < (1 - opts.stream_behind_share) * (b.input_rows_per_second or 0)
        ]
        if len(rated) < opts.stream_min_batches or len(behind) * 2 < len(rated):
            continue
        input_rate = statistics.fmean(b.input_rows_per_second or 0 for b in rated)
        processed = statistics.fmean(b.processed_rows_per_second or 0 for b in rated)
        if processed >= (1 - opts.stream_behind_share) * input_rate:
            continue
        slots = ctx.total_slots()
        per_slot = processed / slots
        target = opts.stream_target_utilisation
        pi = math.ceil(input_rate / (target * per_slot))
        backlog = _backlog(rated[-1])
        estimated = backlog is None
        if backlog is None:  # rows that arrived and were not processed
            backlog = round(
                sum(
                    (b.input_rows_per_second or 0) - (b.processed_rows_per_second or 0)
                    for b in behind
                )
            )
        surplus = pi * per_slot - input_rate
        drain_s = backlog / surplus if surplus > 0 else None
        share = 1 - processed / input_rate
        first, last = rated[0].batch_id, rated[-1].batch_id
        evidence = {
            "query_id": query_id,
            "batches": len(rated),
            "batches_behind": len(behind),
            "first_batch": first,
            "last_batch": last,
            "input_rate": input_rate,
            "processed_rate": processed,
            "slots": slots,
            "rate_per_slot": per_slot,
            "target_utilisation": target,
            "pi": pi,
            "backlog_rows": backlog,
            "backlog_estimated": estimated,
            "drain_s": drain_s,
        }
        drain = (
            f"; at {pi} slots the backlog of about {backlog:,} rows drains in "
            f"{drain_s:.3g} s"
            if drain_s is not None
            else ""
        )
        hints.append(
            Hint(
                "stream_backlog",
                saving_severity(share),
                share,
                evidence,
                f"{_name(ctx, query_id)} processed {processed:,.0f} rows/s of "
                f"{input_rate:,.0f} rows/s arriving in batches {first}..{last}: "
                f"it falls behind. Give it pi = {pi} slots (it had {slots}: "
                f"{per_slot:,.0f} rows/s each, {target:.0%} busy at the "
                "input rate) with more executors or cores, and as many source and "
                f"shuffle partitions (spark.sql.shuffle.partitions={pi} takes "
                "effect for a new checkpoint only); or cap the input with "
                f"maxOffsetsPerTrigger / maxFilesPerTrigger{drain}.",
                saving_share=share,
            )
        )
    return hints


@dataclass(frozen=True)
class _Starts:
    """How a query's batches started, as the trigger interval shows in it."""

    #: Starts of the batches that waited for a tick after their
    #: predecessor ended.
    waited: list[int]
    #: The longest of those waits.
    longest_wait: int
    #: (start, end) of each batch the next one started right after: the
    #: next tick after its start had passed when it ended.
    outlasted: list[tuple[int, int]]


def _starts(batches: Sequence[StreamBatch]) -> _Starts:
    waited, outlasted, longest = [], [], 0
    for before, after in itertools.pairwise(batches):
        end = before.trigger_end_ns
        if end is None or before.timestamp_ns is None or after.timestamp_ns is None:
            continue
        wait = after.timestamp_ns - end
        if wait > SPACING_SLACK_NS:
            waited.append(after.timestamp_ns)
            longest = max(longest, wait)
        else:
            outlasted.append((before.timestamp_ns, end))
    return _Starts(waited, longest, outlasted)


def _ticks_off(times: Sequence[int], interval: int) -> int:
    """How far the farthest of ``times`` lies from a multiple of ``interval``."""
    return max(min(t % interval, interval - t % interval) for t in times)


def _on_ticks(starts: Sequence[int], estimate_ns: float) -> int | None:
    """The interval (a multiple of :data:`ROUND_MS`) within the slack of
    ``estimate_ns`` whose multiples ``starts`` lie nearest (Spark's ticks
    are multiples of the interval since the epoch), if they lie within the
    slack of them. Intervals are taken to be round: two or three starts
    lie near the multiples of some length within the slack by chance."""
    centre = round(estimate_ns / MS)
    span = SPACING_SLACK_NS // MS
    low = -(-(centre - span) // ROUND_MS) * ROUND_MS
    candidates = [ms for ms in range(low, centre + span + 1, ROUND_MS) if ms > 0]
    if not candidates:
        return None
    off, _, best = min(
        (_ticks_off(starts, ms * MS), abs(ms - centre), ms) for ms in candidates
    )
    return best * MS if off <= SPACING_SLACK_NS else None


def _trigger_interval_ns(batches: Sequence[StreamBatch]) -> int | None:
    """The processing-time trigger interval the batches' starts fit, or
    ``None`` when they do not show it.

    Spark starts a batch at the first multiple of the interval (since the
    epoch) after its predecessor's start, or at once when its predecessor
    outlasted the interval. So the batches that waited after their
    predecessor ended start on ticks: the interval is the longest whose
    multiples all of them lie on (to :data:`SPACING_SLACK_NS`, Spark's
    start jitter), that is longer than every such wait, and whose next
    tick had passed when each batch followed at once ended. Batches that
    all run back to back do not show it (Spark's default trigger runs them
    so).

    >>> b = lambda at_ms, took: StreamBatch("q", timestamp_ns=at_ms * 10**6,
    ...     duration_ms={"triggerExecution": took})
    >>> t = 1_795_000_000_000  # ms since the epoch, on a tick
    >>> _trigger_interval_ns([b(t, 400), b(t + 1_002, 2500), b(t + 3_507, 300),
    ...     b(t + 4_001, 200), b(t + 5_003, 100)])
    1000000000
    >>> _trigger_interval_ns([b(t, 400), b(t + 405, 400), b(t + 810, 400)]) is None
    True
    """
    seen = _starts(batches)
    if len(seen.waited) < MIN_WAITED:
        return None
    gaps = [b - a for a, b in itertools.pairwise(seen.waited)]
    for ticks in range(1, MAX_TICKS + 1):
        guess = min(gaps) / ticks
        if guess < MIN_INTERVAL_NS or guess < seen.longest_wait - SPACING_SLACK_NS:
            break
        counted = [(g, max(1, round(g / guess))) for g in gaps]
        if any(abs(g - n * guess) > 2 * SPACING_SLACK_NS for g, n in counted):
            continue
        found = _on_ticks(seen.waited, statistics.median([g / n for g, n in counted]))
        if found is not None and all(
            (start // found + 1) * found <= end + SPACING_SLACK_NS
            for start, end in seen.outlasted
        ):
            return found
    return None


def trigger_bound(ctx: Context) -> list[Hint]:
    """``trigger_bound``: most batches outlast the trigger interval."""
    opts = ctx.options
    hints = []
    for query_id, batches in _by_query(ctx).items():
        interval = _trigger_interval_ns(batches)
        timed = [b for b in batches if b.trigger_end_ns is not None]
        if interval is None or len(timed) < opts.stream_min_batches:
            continue
        ms = [(b.duration_ms or {})["triggerExecution"] for b in timed]
        late = [m for m in ms if m * 1_000_000 > interval]
        if len(late) * 2 < len(timed):
            continue
        median_ms = statistics.median(ms)
        share = 1 - interval / (median_ms * 1_000_000)
        hints.append(
            Hint(
                "trigger_bound",
                saving_severity(share),
                max(0.0, share),
                {
                    "query_id": query_id,
                    "trigger_interval_ns": interval,
                    "median_batch_ns": median_ms * 1_000_000,
                    "batches": len(timed),
                    "batches_late": len(late),
                },
                f"{len(late)} of {len(timed)} batches of {_name(ctx, query_id)} "
                f"took longer than its trigger interval (about "
                f"{interval / 1e9:.3g} s; median batch {median_ms / 1e3:.3g} s): "
                "each batch starts late and the latency grows. Make a batch "
                "cheaper (see the other hints), or set a trigger interval the "
                "batches fit in.",
                saving_share=max(0.0, share),
            )
        )
    return hints


def planning_bound(ctx: Context) -> list[Hint]:
    """``planning_bound``: the trigger's time outside its jobs is large.

    Batch 0 is left out: its first offset fetch and planning are a start-up
    cost (3.5 s of ``latestOffset`` once, then 3-7 ms), not a trend.
    """
    opts = ctx.options
    hints = []
    for query_id, batches in _by_query(ctx).items():
        timed = [
            b.duration_ms
            for b in batches
            if b.duration_ms
            and b.duration_ms.get("triggerExecution")
            and b.batch_id != 0
        ]
        if len(timed) < opts.stream_min_batches:
            continue
        total = sum(d["triggerExecution"] for d in timed)
        parts = {k: sum(d.get(k, 0) for d in timed) for k in PLANNING_KEYS}
        planning = sum(parts.values())
        share = planning / total
        if share < opts.planning_min_share:
            continue
        top = max(parts, key=lambda k: parts[k])
        saving_ns = float(planning) * 1e6  # ms: at most all of it
        hints.append(
            Hint(
                "planning_bound",
                saving_severity(share),
                share,
                {
                    "query_id": query_id,
                    "batches": len(timed),
                    "planning_share": share,
                    "trigger_ms": total,
                    **{f"{k}_ms": v for k, v in parts.items() if v},
                },
                f"{share:.0%} of {_name(ctx, query_id)}'s trigger time is spent "
                f"outside running its batches, most in {top} "
                f"({parts[top] / max(1, len(timed)):,.0f} ms a batch): fewer, "
                "larger batches (a longer trigger interval), a simpler plan, or "
                "for Kafka fewer partitions per topic or a cheaper latestOffset.",
                predicted_saving_ns=saving_ns,
            )
        )
    return hints
