"""Hints over a Structured Streaming query's micro-batches (DESIGN §6, §8).

The rules read the query's progress (:class:`~sparktrail.pag.streams.
StreamBatch` in the application's context), not CP: a micro-batch query
that falls behind shows it in Spark's own rates before any activity does.

* ``stream_backlog`` (DS2): the query falls behind over its batches after
  the first: the median processed rate below the median input rate, or
  batches each longer than the last and than the trigger interval (17,
  19, 21 s on a 1 s trigger). The true rate of one slot is the processed
  rate over the slots the query had; the cores or slots ``pi`` that keep
  up with the input at a target utilisation (0.7) are ``ceil(input rate /
  (0.7 x rate per slot))``, and the backlog (offsets behind latest where
  the source reports it, else estimated from input minus processed rows
  over the batches' time, else said to be unknown) drains in ``backlog /
  (pi x rate per slot - input rate)``.
* ``trigger_bound``: most batches run longer than the trigger interval,
  so the query starts each batch late. Spark's progress does not state
  the interval; it is inferred from the starts of the batches that waited
  for their trigger, which lie on its multiples (a processing-time trigger
  starts a batch at the next tick, or at once when its predecessor
  outlasted the interval). Batches that all run back to back do not show
  it, and get no ``trigger_bound``.
* ``planning_bound``: the trigger's time outside ``addBatch`` (query
  planning, getting the batch, offsets and the write-ahead log) is a large
  share of the median batch after the first, and long enough a batch
  (``planning_min_ms``) to act on.

Assumptions
-----------
* A query's batches are those of the context with its ``query_id``, in
  batch order; the first batch of each run is its start-up (the source's
  first offsets, the first plan) and every rule leaves it out
  (:func:`after_first`); numbers a progress lacks are ``None`` and the batch is left
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
from typing import Any

from sparktrail.pag.streams import StreamBatch
from sparktrail.units import duration, duration_s

from ..result import HintOptions
from .hint import Hint
from .inputs import Context

__all__ = [
    "Behind",
    "after_first",
    "falling_behind",
    "first_batch_ids",
    "planning_bound",
    "stream_backlog",
    "trigger_bound",
]

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


def first_batch_ids(batches: Sequence[StreamBatch]) -> set[tuple[str, int]]:
    """``(query_id, batch_id)`` of the first batch of each run of a query.

    A run's first batch pays its start-up once (the source's first offset
    fetch: 3.5 s of ``latestOffset`` on a Kafka word count, then 3-7 ms;
    the first plan, code generation, a state store's first load): a
    one-off, not a trend, so the rules leave it out.

    >>> sorted(first_batch_ids([StreamBatch("q", "r1", 0), StreamBatch("q", "r1", 1),
    ...     StreamBatch("q", "r2", 7), StreamBatch("q", "r2", 8)]))
    [('q', 0), ('q', 7)]
    """
    firsts: dict[tuple[str, str | None], int] = {}
    for b in batches:
        if b.batch_id is None:
            continue
        key = (b.query_id, b.run_id)
        firsts[key] = min(firsts.get(key, b.batch_id), b.batch_id)
    return {(query, batch) for (query, _), batch in firsts.items()}


def after_first(batches: Sequence[StreamBatch]) -> list[StreamBatch]:
    """``batches`` without the first batch of each run (:func:`first_batch_ids`)."""
    firsts = first_batch_ids(batches)
    return [b for b in batches if (b.query_id, b.batch_id) not in firsts]


def _rated(batches: Sequence[StreamBatch]) -> list[StreamBatch]:
    """Batches with input and positive processed rates."""
    return [
        b
        for b in batches
        if b.input_rows_per_second is not None
        and b.processed_rows_per_second
        and b.num_input_rows
    ]


def _trigger_ms(batch: StreamBatch) -> int | None:
    took = (batch.duration_ms or {}).get("triggerExecution")
    return took if took else None


@dataclass(frozen=True)
class Behind:
    """How a query falls behind over its batches after the first."""

    #: Median input and processed rows/s of the rated batches (``None``:
    #: no rates).
    input_rate: float | None
    processed_rate: float | None
    #: The batches looked at, and those whose processed rate was behind.
    batches: list[StreamBatch]
    behind: int
    #: The rates fell behind (median processed below median input).
    by_rate: bool
    #: The last batches, each longer than the one before (and than the
    #: trigger interval, or run back to back): ``(batch_id, ms)``.
    growing: list[tuple[int | None, int]]

    @property
    def share(self) -> float:
        """The share of the input the query does not keep up with."""
        if self.by_rate and self.input_rate and self.processed_rate is not None:
            return 1 - self.processed_rate / self.input_rate
        steps = [b / a for (_, a), (_, b) in itertools.pairwise(self.growing)]
        return 1 - 1 / statistics.median(steps) if steps else 0.0


def _growing(
    batches: Sequence[StreamBatch], interval_ns: int | None, min_batches: int
) -> list[tuple[int | None, int]]:
    """The last run of batches each longer than the one before: longer
    than the trigger interval where it is known, else started back to
    back (no wait for a tick between them), ``min_batches`` or more of
    them, growing by more than jitter (5% from first to last)."""

    def over(b: StreamBatch) -> bool:
        return interval_ns is None or (_trigger_ms(b) or 0) * MS > interval_ns

    timed = [b for b in batches if _trigger_ms(b)]
    run = [b for b in timed[-1:] if over(b)]
    for before in reversed(timed[:-1]):
        if not run or not over(before):
            break
        if (_trigger_ms(before) or 0) >= (_trigger_ms(run[0]) or 0):
            break
        run.insert(0, before)
    if len(run) < min_batches:
        return []
    ms = [_trigger_ms(b) or 0 for b in run]
    if ms[-1] < 1.05 * ms[0]:
        return []
    if interval_ns is None:
        for before, after in itertools.pairwise(run):
            end, start = before.trigger_end_ns, after.timestamp_ns
            if end is not None and start is not None and start - end > SPACING_SLACK_NS:
                return []  # it waited for its next trigger: not behind
    return [(b.batch_id, m) for b, m in zip(run, ms, strict=True)]


def falling_behind(
    batches: Sequence[StreamBatch], opts: HintOptions, interval_ns: int | None = None
) -> Behind | None:
    """How one query's batches fall behind (``None``: they keep up).

    Over its batches after the first (:func:`after_first`, the last
    ``stream_batches``): the median processed rate below the median input
    rate (by ``stream_behind_share``), or batch durations that grow batch
    after batch (:func:`_growing`).
    """
    later = after_first(batches)[-opts.stream_batches :]
    rated = _rated(later)
    input_rate = processed = None
    by_rate = False
    behind = 0
    if len(rated) >= opts.stream_min_batches:
        input_rate = statistics.median(b.input_rows_per_second or 0 for b in rated)
        processed = statistics.median(b.processed_rows_per_second or 0 for b in rated)
        keep = 1 - opts.stream_behind_share
        behind = sum(
            (b.processed_rows_per_second or 0) < keep * (b.input_rows_per_second or 0)
            for b in rated
        )
        by_rate = processed < keep * input_rate
    growing = _growing(later, interval_ns, opts.stream_min_batches)
    if not by_rate and not growing:
        return None
    return Behind(input_rate, processed, rated or later, behind, by_rate, growing)


def _backlog(batch: StreamBatch) -> int | None:
    known = [s.backlog for s in batch.sources or () if s.backlog is not None]
    return sum(known) if known else None


def _estimated_backlog(batches: Sequence[StreamBatch]) -> int | None:
    """Rows that arrived and were not processed over ``batches``: input
    minus processed rate times each batch's trigger time (``None``: the
    rates or times are unknown, or the sum is not positive)."""
    rows = 0.0
    known = False
    for b in batches:
        took = _trigger_ms(b)
        if took is None or b.input_rows_per_second is None:
            continue
        if b.processed_rows_per_second is None:
            continue
        known = True
        rows += (b.input_rows_per_second - b.processed_rows_per_second) * took / 1e3
    return round(rows) if known and rows >= 1 else None


def _backlog_text(
    backlog: int | None, estimated: bool, drain_s: float | None, cores: int
) -> str:
    """The sentence on the backlog: never "about 0 rows drain in 0 s".

    >>> _backlog_text(None, True, None, 4)
    ' The backlog is unknown: the source reports no offsets behind its latest.'
    >>> _backlog_text(5000, True, 2.0, 4).endswith(
    ...     "is about 5,000 rows; at 4 cores or slots it drains in 2 s.")
    True
    >>> _backlog_text(0, False, None, 4)
    ' The source was at its latest offset after the last batch.'
    """
    if backlog is None:
        return (
            " The backlog is unknown: the source reports no offsets behind its latest."
        )
    if backlog <= 0:
        return " The source was at its latest offset after the last batch."
    drain = (
        f"; at {cores} cores or slots it drains in {duration_s(drain_s)}"
        if drain_s is not None and drain_s > 0
        else ""
    )
    if estimated:
        return (
            " The backlog, estimated from the input and processed rates (the "
            "source reports no offsets behind its latest), is about "
            f"{backlog:,} rows{drain}."
        )
    return f" The source is {backlog:,} offsets behind its latest{drain}."


def stream_backlog(ctx: Context) -> list[Hint]:
    """``stream_backlog``: a query falls behind its input.

    Its batches after the first (:func:`falling_behind`) process fewer
    rows/s than arrive (medians), or take longer batch after batch.

    Examples
    --------
    See ``tests/summaries/test_streaming_hints.py``.
    """
    hints = []
    for query_id, batches in _by_query(ctx).items():
        interval = _trigger_interval_ns(batches)
        found = falling_behind(batches, ctx.options, interval)
        if found is not None and found.share > 0:
            hints.append(_backlog_hint(ctx, query_id, found, interval))
    return hints


def _rates(found: Behind) -> tuple[float | None, float | None]:
    """(input, processed) rows/s of a query found behind."""
    if found.by_rate and found.input_rate and found.processed_rate:
        return found.input_rate, found.processed_rate
    if found.input_rate and found.processed_rate:
        # The rates kept up on the median while batches grow: scale.
        return found.input_rate, found.input_rate * (1 - found.share)
    return None, None


def _backlog_hint(
    ctx: Context, query_id: str, found: Behind, interval: int | None
) -> Hint:
    share, slots = found.share, ctx.total_slots()
    target = ctx.options.stream_target_utilisation
    input_rate, processed = _rates(found)
    per_slot = processed / slots if processed else None
    # DS2: the slots that process the input at the target utilisation;
    # input / processed = 1 / (1 - share).
    pi = math.ceil(slots / ((1 - share) * target))
    backlog = _backlog(found.batches[-1]) if found.batches else None
    estimated = backlog is None
    if backlog is None:
        backlog = _estimated_backlog(found.batches)
    surplus = (
        pi * per_slot - input_rate
        if per_slot is not None and input_rate is not None
        else None
    )
    drain_s = (
        backlog / surplus if backlog and surplus is not None and surplus > 0 else None
    )
    evidence = {
        "query_id": query_id,
        "batches": len(found.batches),
        "batches_behind": found.behind,
        "first_batch": found.batches[0].batch_id,
        "last_batch": found.batches[-1].batch_id,
        "input_rate": input_rate,
        "processed_rate": processed,
        "behind_by_rate": found.by_rate,
        "growing_batches": [b for b, _ in found.growing],
        "growing_batch_ms": [m for _, m in found.growing],
        "trigger_interval_ns": interval,
        "slots": slots,
        "rate_per_slot": per_slot,
        "target_utilisation": target,
        "pi": pi,
        "backlog_rows": backlog,
        "backlog_estimated": estimated,
        "drain_s": drain_s,
    }
    said = _behind_text(found, input_rate, processed, interval)
    rate = f": {per_slot:,.0f} rows/s each" if per_slot else ""
    return Hint(
        "stream_backlog",
        share,
        evidence,
        f"{_name(ctx, query_id)} {said}: it falls behind "
        f"({share:.0%} of the input). Give it {pi} cores or slots "
        f"(DS2's pi = {pi}, {target:.0%} busy at the input rate; it had "
        f"{slots}{rate}) with more executors or cores, and as many "
        f"source and shuffle partitions (spark.sql.shuffle.partitions={pi} "
        "takes effect for a new checkpoint only); or cap the input "
        "with maxOffsetsPerTrigger / maxFilesPerTrigger."
        + _backlog_text(backlog, estimated, drain_s, pi),
        saving_share=share,
        share_of="input",
    )


def _behind_text(
    found: Behind,
    input_rate: float | None,
    processed: float | None,
    interval: int | None,
) -> str:
    """How the query fell behind, in a clause: its rates, its growing batches."""
    first, last = found.batches[0].batch_id, found.batches[-1].batch_id
    said = []
    if found.by_rate and input_rate is not None and processed is not None:
        said.append(
            f"processed a median {processed:,.0f} rows/s of {input_rate:,.0f} "
            f"rows/s arriving in batches {first}..{last} (the first batch "
            "left out)"
        )
    if found.growing:
        ids = [b for b, _ in found.growing]
        took = ", ".join(f"{m / 1e3:.3g}" for _, m in found.growing[-6:])
        against = (
            f" against a {duration(interval)} trigger"
            if interval is not None
            else ", back to back"
        )
        said.append(
            f"took {took} s in batches {ids[0]}..{ids[-1]}{against}, each "
            "longer than the last"
        )
    return " and ".join(said)


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
    so). Where the starts fit no interval, they are read again without
    each run's first batch: its successor starts whenever the start-up
    lets it.

    >>> b = lambda at_ms, took: StreamBatch("q", timestamp_ns=at_ms * 10**6,
    ...     duration_ms={"triggerExecution": took})
    >>> t = 1_795_000_000_000  # ms since the epoch, on a tick
    >>> _trigger_interval_ns([b(t, 400), b(t + 1_002, 2500), b(t + 3_507, 300),
    ...     b(t + 4_001, 200), b(t + 5_003, 100)])
    1000000000
    >>> _trigger_interval_ns([b(t, 400), b(t + 405, 400), b(t + 810, 400)]) is None
    True
    """
    found = _interval_of(_starts(batches))
    if found is None:
        # A run's first batch is its start-up: its successor may start when
        # the start-up lets it, on no tick.
        found = _interval_of(_starts(after_first(batches)))
    return found


def _interval_of(seen: _Starts) -> int | None:
    """:func:`_trigger_interval_ns` of the batches' starts."""
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


#: The share of a query's batches that may outlast its trigger interval
#: while it still keeps up (a late batch now and then is jitter).
KEEPS_UP_LATE_SHARE = 0.1


def _fit(timed: Sequence[dict[str, Any]], interval_ns: int) -> bool:
    """Whether the batches (their ``duration_ms``) end within the trigger
    interval, all but :data:`KEEPS_UP_LATE_SHARE` of them."""
    late = sum(int(d["triggerExecution"]) * 1_000_000 > interval_ns for d in timed)
    return bool(late <= KEEPS_UP_LATE_SHARE * len(timed))


def trigger_bound(ctx: Context) -> list[Hint]:
    """``trigger_bound``: most batches outlast the trigger interval."""
    opts = ctx.options
    hints = []
    for query_id, batches in _by_query(ctx).items():
        interval = _trigger_interval_ns(batches)
        timed = [b for b in after_first(batches) if b.trigger_end_ns is not None]
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
                f"{duration(interval)}; median batch {duration(median_ms * 1e6)}): "
                "each batch starts late and the latency grows. Make a batch "
                "cheaper (see the other hints), or set a trigger interval the "
                "batches fit in.",
                saving_share=max(0.0, share),
                share_of="trigger",
            )
        )
    return hints


def planning_bound(ctx: Context) -> list[Hint]:
    """``planning_bound``: the trigger's time outside its jobs is large.

    Per batch after the first (:func:`after_first`: a run's first offset
    fetch and planning are a start-up cost, 3.5 s of ``latestOffset`` once,
    then 3-7 ms): the median share of the trigger spent outside
    ``addBatch`` is ``planning_min_share`` or more, and the median time
    ``planning_min_ms`` or more (a few ms of planning a batch is not worth
    a change, whatever its share). One slow batch among many is no trend.
    """
    opts = ctx.options
    hints = []
    for query_id, batches in _by_query(ctx).items():
        timed = [
            b.duration_ms
            for b in after_first(batches)
            if b.duration_ms and b.duration_ms.get("triggerExecution")
        ]
        if len(timed) < opts.stream_min_batches:
            continue
        planned = [sum(d.get(k, 0) for k in PLANNING_KEYS) for d in timed]
        shares = [
            p / d["triggerExecution"] for p, d in zip(planned, timed, strict=True)
        ]
        share = statistics.median(shares)
        median_ms = statistics.median(planned)
        if share < opts.planning_min_share or median_ms < opts.planning_min_ms:
            continue
        total = sum(d["triggerExecution"] for d in timed)
        parts = {k: sum(d.get(k, 0) for d in timed) for k in PLANNING_KEYS}
        top = max(parts, key=lambda k: parts[k])
        top_ms = statistics.median(d.get(top, 0) for d in timed)
        saving_ns = float(sum(planned)) * 1e6  # ms: at most all of it
        interval = _trigger_interval_ns(batches)
        keeps_up = interval is not None and _fit(timed, interval)
        found = (
            f"{_name(ctx, query_id)} spends a median {share:.0%} of each "
            f"trigger ({median_ms:,.0f} ms of a batch, the first batch left "
            f"out) outside running its batches, most in {top} ({top_ms:,.0f} "
            "ms a batch)"
        )
        action = (
            f"{found}: fewer, larger batches (a longer trigger interval), a "
            "simpler plan, or for Kafka fewer partitions per topic or a cheaper "
            "latestOffset."
        )
        if keeps_up:
            action = (
                f"{found}, yet its batches end within its trigger interval "
                f"({duration(interval)}): the planning delays each batch's "
                "output, not the input. For lower latency, a simpler plan; a "
                "longer trigger would add latency, not remove it."
            )
        hints.append(
            Hint(
                "planning_bound",
                share,
                {
                    "query_id": query_id,
                    "batches": len(timed),
                    "planning_share": share,
                    "median_planning_ms": median_ms,
                    "trigger_ms": total,
                    **{f"{k}_ms": v for k, v in parts.items() if v},
                }
                | (
                    {"keeps_up": True, "trigger_interval_ns": interval}
                    if keeps_up
                    else {}
                ),
                action,
                predicted_saving_ns=saving_ns,
                share_of_ns=total * 1e6,
                share_of="query_batch_time",
            )
        )
    return hints
