"""Structured Streaming events -> the context's queries and batches (DESIGN §8).

:class:`StreamRecords` takes the ``StreamingQueryListener`` events of an
event log (:data:`STREAM_EVENTS`) and keeps one
:class:`~sparktrail.pag.streams.StreamQuery` per run of a query and one
:class:`~sparktrail.pag.streams.StreamBatch` per progress event. It also
says when the driver waited for a query's next trigger (:meth:`~StreamRecords.waits`)
and when that became known (:meth:`~StreamRecords.settled`), for the
driver's timeline (:mod:`~sparktrail.tracer.timelines`).

Three generations of events are read:

* Spark 2.1+: ``QueryStartedEvent`` (``id``, ``runId``, ``name``,
  ``timestamp`` from 3.1, ISO-8601), ``QueryProgressEvent`` (``progress``:
  Spark's ``StreamingQueryProgress``), ``QueryTerminatedEvent`` (``id``,
  ``runId``, ``exception``; Spark stamps no time, so its end is the latest
  event time seen when it arrives) and ``QueryIdleEvent`` (3.5+).
* Spark 2.0.2: the same names with a ``queryStatus`` (integer id, no run
  id; rates, and a ``triggerDetails`` map of strings whose ``latency.*``
  entries become ``duration_ms`` under the later names).
* Spark 2.0.0/2.0.1: ``QueryProgress``/``QueryTerminated`` with a
  ``queryInfo`` (names and offsets only).

Assumptions
-----------
* The log's progress JSON is Spark's event-log form: the top-level
  ``numInputRows`` and rates are absent (Jackson skips Spark's derived
  fields) and are the sums over the sources, as Spark defines them.
* A field the event lacks is ``None`` and its name goes into
  :attr:`StreamRecords.missing` (reported once per log); ``null`` and
  ``"NaN"`` values (no previous trigger to measure a rate from) are
  ``None`` without a report.
* A trigger wait is the time between the end of one trigger of a query
  (batch timestamp + ``triggerExecution``, or an idle trigger's time) and
  the start of its next, less any time another query's trigger ran.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sparktrail.pag.streams import (
    StateOperator,
    StreamBatch,
    StreamQuery,
    StreamSink,
    StreamSource,
)

from .fields import INF, MS, EventError, dict_field, list_field, opt_int, str_field

__all__ = [
    "STREAM_EVENTS",
    "StreamRecords",
    "backlog",
    "progress_batch",
]

_PREFIX = "org.apache.spark.sql.streaming.StreamingQueryListener$"
_STARTED = ("QueryStartedEvent", "QueryStarted")
_PROGRESS = ("QueryProgressEvent", "QueryProgress")
_TERMINATED = ("QueryTerminatedEvent", "QueryTerminated")
_IDLE = ("QueryIdleEvent",)
#: Event names of every Structured Streaming listener event the model reads.
STREAM_EVENTS = frozenset(
    _PREFIX + name for name in (*_STARTED, *_PROGRESS, *_TERMINATED, *_IDLE)
)
#: Spark 2.0.2 ``triggerDetails`` latencies, under Spark 2.1's ``durationMs`` keys.
_LEGACY_DURATIONS = {
    "latency.fullTrigger": "triggerExecution",
    "latency.getOffset.total": "getOffset",
    "latency.getBatch.total": "getBatch",
    "latency.offsetLogWrite": "walCommit",
    "latency.optimizer": "queryPlanning",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - _EPOCH

#: A query run's key: (query id, run id).
Key = tuple[str, str | None]


def _time_ns(obj: dict[str, Any], key: str) -> int | None:
    """A timestamp: ISO-8601 text (Spark 3) or epoch ms (Spark 2.0)."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as err:
            raise EventError(
                f"{key!r} is {value!r}, expected an ISO-8601 time"
            ) from err
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return (when - _EPOCH) // _US * 1000
    ms = opt_int(obj, key, INF // MS)
    return None if ms is None else ms * MS


#: Characters of a query's exception kept (Spark appends the stack trace).
EXCEPTION_CHARS = 2000


def _shortened(text: str | None) -> str | None:
    """An exception's message, cut to :data:`EXCEPTION_CHARS`.

    >>> _shortened("x" * 3000)[-3:], _shortened(None)
    ('...', None)
    """
    if text is None or len(text) <= EXCEPTION_CHARS:
        return text
    return text[: EXCEPTION_CHARS - 3] + "..."


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _rate(value: Any) -> float | None:
    """A rate: a finite number, else ``None`` (Spark writes NaN as ``"NaN"``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _offset(value: Any) -> str | None:
    """An offset as JSON text (Spark writes it as text; tolerate JSON values)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _behind(end: Any, latest: Any) -> int | None:
    if isinstance(end, bool) or isinstance(latest, bool):
        return None
    if isinstance(end, int) and isinstance(latest, int):
        return latest - end
    if isinstance(end, dict) and isinstance(latest, dict):
        parts = [_behind(end[k], latest[k]) for k in latest if k in end]
        known = [p for p in parts if p is not None]
        return sum(known) if known else None
    return None


def backlog(end: str | None, latest: str | None) -> int | None:
    """Offsets a source was behind its latest offset (``None``: not numeric).

    Numbers subtract; objects (Kafka's ``{topic: {partition: offset}}``)
    add up over the keys both have.

    >>> backlog('{"t":{"0":10,"1":5}}', '{"t":{"0":12,"1":9}}'), backlog("7", "9")
    (6, 2)
    >>> backlog('{"logOffset":3}', None), backlog("#0", "#1")
    (None, None)
    """
    if end is None or latest is None:
        return None
    try:
        return _behind(json.loads(end), json.loads(latest))
    except ValueError:
        return None


class _Fields:
    """Reads an event's fields, noting the names of those it lacks."""

    def __init__(self, missing: set[str]) -> None:
        self.missing = missing

    def get(self, obj: dict[str, Any], key: str, name: str | None = None) -> Any:
        if key not in obj:
            self.missing.add(name or key)
        return obj.get(key)

    def int(self, obj: dict[str, Any], key: str, name: str | None = None) -> int | None:
        self.get(obj, key, name)
        return opt_int(obj, key)

    def rate(
        self, obj: dict[str, Any], key: str, name: str | None = None
    ) -> float | None:
        return _rate(self.get(obj, key, name))


def _source(raw: Any, f: _Fields) -> StreamSource:
    s = raw if isinstance(raw, dict) else {}
    end = _offset(f.get(s, "endOffset", "sources.endOffset"))
    latest = _offset(f.get(s, "latestOffset", "sources.latestOffset"))
    return StreamSource(
        description=_text(f.get(s, "description", "sources.description")),
        start_offset=_offset(f.get(s, "startOffset", "sources.startOffset")),
        end_offset=end,
        latest_offset=latest,
        num_input_rows=f.int(s, "numInputRows", "sources.numInputRows"),
        input_rows_per_second=f.rate(
            s, "inputRowsPerSecond", "sources.inputRowsPerSecond"
        ),
        processed_rows_per_second=f.rate(
            s, "processedRowsPerSecond", "sources.processedRowsPerSecond"
        ),
        backlog=backlog(end, latest),
    )


def _state(raw: Any, f: _Fields) -> StateOperator:
    s = raw if isinstance(raw, dict) else {}
    custom = f.get(s, "customMetrics", "stateOperators.customMetrics")
    return StateOperator(
        operator_name=_text(f.get(s, "operatorName", "stateOperators.operatorName")),
        num_rows_total=f.int(s, "numRowsTotal", "stateOperators.numRowsTotal"),
        num_rows_updated=f.int(s, "numRowsUpdated", "stateOperators.numRowsUpdated"),
        memory_used_bytes=f.int(s, "memoryUsedBytes", "stateOperators.memoryUsedBytes"),
        custom_metrics=(
            {
                str(k): v
                for k, v in custom.items()
                if _rate(v) is not None  # finite numbers, ints kept as ints
            }
            if isinstance(custom, dict)
            else None
        ),
    )


def _total(values: list[Any]) -> Any:
    """Spark's sum over sources; ``None`` if any is unknown or none exist."""
    if not values or any(v is None for v in values):
        return None
    return sum(values)


def progress_batch(progress: dict[str, Any], missing: set[str]) -> StreamBatch:
    """A Spark 2.1+ ``StreamingQueryProgress`` (event-log JSON) as a batch.

    Names of the fields it lacks are added to ``missing``.

    >>> gaps = set()
    >>> b = progress_batch({"id": "q", "runId": "r", "batchId": 2,
    ...     "timestamp": "2020-07-29T10:57:03.168Z",
    ...     "durationMs": {"triggerExecution": 622},
    ...     "sources": [{"numInputRows": 363, "inputRowsPerSecond": "NaN"}]}, gaps)
    >>> b.batch_id, b.num_input_rows, b.input_rows_per_second, b.trigger_end_ns
    (2, 363, None, 1596020223790000000)
    >>> sorted(gaps)[:3]
    ['sink', 'sources.description', 'sources.endOffset']
    """
    f = _Fields(missing)
    raw_sources = f.get(progress, "sources")
    sources = (
        tuple(_source(s, f) for s in raw_sources)
        if isinstance(raw_sources, list)
        else None
    )
    states = f.get(progress, "stateOperators")
    durations = f.get(progress, "durationMs")
    sink = f.get(progress, "sink")
    per_source = sources or ()

    def top(key: str, values: list[Any]) -> Any:
        # The log's JSON lacks Spark's derived totals: sum the sources.
        if key in progress:
            return progress[key]
        if sources is None:
            missing.add(key)
        return _total(values)

    return StreamBatch(
        query_id=str(f.get(progress, "id")),
        run_id=_text(f.get(progress, "runId")),
        batch_id=f.int(progress, "batchId"),
        timestamp_ns=_time_ns(progress, "timestamp")
        if "timestamp" in progress
        else f.get(progress, "timestamp"),
        num_input_rows=_int_or_none(
            top("numInputRows", [s.num_input_rows for s in per_source])
        ),
        input_rows_per_second=_rate(
            top("inputRowsPerSecond", [s.input_rows_per_second for s in per_source])
        ),
        processed_rows_per_second=_rate(
            top(
                "processedRowsPerSecond",
                [s.processed_rows_per_second for s in per_source],
            )
        ),
        duration_ms=_durations(durations),
        sources=sources,
        state_operators=(
            tuple(_state(s, f) for s in states) if isinstance(states, list) else None
        ),
        sink=(
            StreamSink(
                _text(f.get(sink, "description", "sink.description")),
                f.int(sink, "numOutputRows", "sink.numOutputRows"),
            )
            if isinstance(sink, dict)
            else None
        ),
    )


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if math.isfinite(value) else None


def _durations(raw: Any) -> dict[str, int] | None:
    if not isinstance(raw, dict):
        return None
    return {str(k): v for k in raw if (v := opt_int(raw, k)) is not None}


def _detail(details: dict[str, Any], key: str) -> int | None:
    """A Spark 2.0 ``triggerDetails`` number (they are strings there)."""
    value = details.get(key)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def legacy_batch(status: dict[str, Any], missing: set[str]) -> StreamBatch:
    """A Spark 2.0 ``queryStatus``/``queryInfo`` as a batch (mostly ``None``).

    >>> gaps = set()
    >>> b = legacy_batch({"id": 1, "inputRate": 83.3, "triggerDetails":
    ...     {"triggerId": "0", "latency.fullTrigger": "1732"}}, gaps)
    >>> b.query_id, b.batch_id, b.duration_ms, b.processed_rows_per_second
    ('1', 0, {'triggerExecution': 1732}, None)
    >>> "runId" in gaps and "stateOperators" in gaps
    True
    """
    f = _Fields(missing)
    details = status.get("triggerDetails")
    if not isinstance(details, dict):
        details = {}
        missing.update(("batchId", "timestamp", "durationMs", "numInputRows"))
    missing.update(("runId", "stateOperators", "sink.numOutputRows"))
    missing.update(("sources.startOffset", "sources.latestOffset"))
    batch_id = _detail(details, "triggerId")
    start = _detail(details, "timestamp.triggerStart")
    rows = _detail(details, "numRows.input.total")
    for key, name in (
        (batch_id, "batchId"),
        (start, "timestamp"),
        (rows, "numInputRows"),
    ):
        if key is None:
            missing.add(name)
    durations = {
        later: value
        for key, later in _LEGACY_DURATIONS.items()
        if (value := _detail(details, key)) is not None
    }
    if not durations:
        missing.add("durationMs")
    sources = []
    for raw in list_field(status, "sourceStatuses") or []:
        s = raw if isinstance(raw, dict) else {}
        source_details = s.get("triggerDetails")
        at = s.get("offsetDesc")
        sources.append(
            StreamSource(
                description=str_field(s, "description"),
                # Spark 2.0 states the offset reached, as text ("#0", "-": none).
                end_offset=at if isinstance(at, str) and at != "-" else None,
                num_input_rows=_detail(
                    source_details if isinstance(source_details, dict) else {},
                    "numRows.input.source",
                ),
                input_rows_per_second=f.rate(
                    s, "inputRate", "sources.inputRowsPerSecond"
                ),
                processed_rows_per_second=f.rate(
                    s, "processingRate", "sources.processedRowsPerSecond"
                ),
            )
        )
    sink = dict_field(status, "sinkStatus")
    return StreamBatch(
        query_id=str(status.get("id")),
        batch_id=batch_id,
        timestamp_ns=None if start is None else start * MS,
        num_input_rows=rows,
        input_rows_per_second=f.rate(status, "inputRate", "inputRowsPerSecond"),
        processed_rows_per_second=f.rate(
            status, "processingRate", "processedRowsPerSecond"
        ),
        duration_ms=durations or None,
        sources=tuple(sources) if "sourceStatuses" in status else None,
        sink=None if sink is None else StreamSink(str_field(sink, "description")),
    )


@dataclass
class _Run:
    """What the events say so far about one run of a query."""

    query_id: str
    run_id: str | None
    name: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    exception: str | None = None
    idle_ns: list[int] | None = None

    def record(self) -> StreamQuery:
        return StreamQuery(
            self.query_id,
            self.run_id,
            self.name,
            self.start_ns,
            self.end_ns,
            self.exception,
            len(self.idle_ns or ()),
        )


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, stop in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def _minus(
    spans: list[tuple[int, int]], cut: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, stop in spans:
        at = start
        for lo, hi in cut:
            if hi <= at or lo >= stop:
                continue
            if lo > at:
                out.append((at, lo))
            at = max(at, hi)
        if at < stop:
            out.append((at, stop))
    return out


class StreamRecords:
    """The Structured Streaming events of one application, as they arrive.

    Examples
    --------
    >>> r = StreamRecords()
    >>> q = _PREFIX + "QueryProgressEvent"
    >>> for ts, took in (("00:00:01", 200), ("00:00:02", 300)):
    ...     r.feed({"Event": q, "progress": {"id": "q", "runId": "r",
    ...         "timestamp": f"1970-01-01T{ts}Z", "durationMs":
    ...         {"triggerExecution": took}}}, now_ms=0) // 1000
    1
    2
    >>> [(a // MS, b // MS) for a, b in r.waits()]
    [(1200, 2000)]
    >>> r.settled(1300 * MS, 1900 * MS) // MS, r.settled(2400 * MS, 2500 * MS) == INF
    (2300, True)
    """

    def __init__(self) -> None:
        self.runs: dict[Key, _Run] = {}
        self.batches: list[StreamBatch] = []
        #: Names of fields some event lacked (reported once per log).
        self.missing: set[str] = set()
        self._marks: dict[Key, list[tuple[int, int]]] | None = None
        self._ends: dict[Key, list[int]] = {}  # each run's trigger ends, sorted

    def feed(self, event: dict[str, Any], now_ms: int | None) -> int | None:
        """Take one streaming event; returns the time (ms) it states, if any.

        ``now_ms`` is the latest event time seen (a termination's time;
        ``None``: no time seen yet).
        """
        name = str(event.get("Event", "")).removeprefix(_PREFIX)
        self._marks = None
        if name in _PROGRESS:
            return self._progress(event)
        if name in _STARTED:
            return self._started(event)
        if name in _TERMINATED:
            return self._terminated(event, now_ms)
        if name in _IDLE:
            return self._idle(event)
        return None

    def _run(self, query_id: Any, run_id: Any) -> _Run:
        key = (str(query_id), None if run_id is None else str(run_id))
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = _Run(*key)
        return run

    def _status(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """Spark 2.0's ``queryStatus`` (2.0.2) or ``queryInfo``, if any."""
        status = dict_field(event, "queryStatus")
        return status if status is not None else dict_field(event, "queryInfo")

    def _progress(self, event: dict[str, Any]) -> int | None:
        progress = dict_field(event, "progress")
        if progress is not None:
            batch = progress_batch(progress, self.missing)
        else:
            batch = legacy_batch(self._status(event) or {}, self.missing)
        run = self._run(batch.query_id, batch.run_id)
        named = (progress if progress is not None else self._status(event)) or {}
        run.name = run.name or _text(named.get("name"))
        if run.start_ns is None and batch.timestamp_ns is not None:
            run.start_ns = batch.timestamp_ns
        self.batches.append(batch)
        end = batch.trigger_end_ns
        return None if end is None else end // MS

    def _started(self, event: dict[str, Any]) -> int | None:
        status = self._status(event)
        raw = status if status is not None else event
        if "timestamp" not in raw:
            self.missing.add("QueryStartedEvent.timestamp")
        run = self._run(raw.get("id"), raw.get("runId"))
        run.name = str_field(raw, "name")
        run.start_ns = _time_ns(raw, "timestamp")
        return None if run.start_ns is None else run.start_ns // MS

    def _terminated(self, event: dict[str, Any], now_ms: int | None) -> int | None:
        status = self._status(event)
        raw = status if status is not None else event
        run = self._run(raw.get("id"), raw.get("runId"))
        run.name = run.name or _text(raw.get("name"))
        stamped = _time_ns(raw, "timestamp") if status is not None else None
        if stamped is None and now_ms is not None:
            stamped = now_ms * MS
        run.end_ns = stamped
        run.exception = _shortened(str_field(event, "exception"))
        return None if stamped is None else stamped // MS

    def _idle(self, event: dict[str, Any]) -> int | None:
        run = self._run(event.get("id"), event.get("runId"))
        at = _time_ns(event, "timestamp")
        if at is None:
            return None
        run.idle_ns = [*(run.idle_ns or []), at]
        return at // MS

    # -- what the context and the driver timeline need ------------------------

    def queries(self) -> tuple[StreamQuery, ...]:
        """One record per query run, in the order they were first seen."""
        return tuple(run.record() for run in self.runs.values())

    def _trigger_marks(self) -> dict[Key, list[tuple[int, int]]]:
        """Each run's triggers (start, end ns) in time order; an idle trigger
        is an instant."""
        if self._marks is None:
            marks: dict[Key, list[tuple[int, int]]] = {}
            for b in self.batches:
                end = b.trigger_end_ns
                if b.timestamp_ns is not None and end is not None:
                    key = (b.query_id, b.run_id)
                    marks.setdefault(key, []).append((b.timestamp_ns, end))
            for key, run in self.runs.items():
                for at in run.idle_ns or ():
                    marks.setdefault(key, []).append((at, at))
            self._marks = {k: sorted(v) for k, v in marks.items()}
            self._ends = {k: sorted(e for _, e in v) for k, v in self._marks.items()}
        return self._marks

    def waits(self) -> list[tuple[int, int]]:
        """When some query waited for its next trigger and none ran one (ns)."""
        marks = self._trigger_marks()
        gaps = [
            (a[1], b[0])
            for spans in marks.values()
            for a, b in itertools.pairwise(spans)
        ]
        busy = _merge([s for spans in marks.values() for s in spans])
        return _minus(_merge(gaps), busy)

    def settled(self, start: int, end: int) -> int:
        """When it was known whether driver time ``[start, end]`` waited (ns).

        A run's triggers up to ``end`` are known once one ending at or after
        ``end`` is (a progress event is posted at its trigger's end); before
        that, a run that had a trigger earlier may still be waiting
        (``INF``), unless it terminated.
        """
        known = end
        for key, spans in self._trigger_marks().items():
            if spans[0][1] >= end:
                continue  # its first trigger is not over: no wait so far
            run = self.runs.get(key)
            if run is not None and run.end_ns is not None and run.end_ns < start:
                continue
            ends = self._ends[key]
            k = bisect.bisect_left(ends, end)
            if k < len(ends):
                known = max(known, ends[k])
            elif run is not None and run.end_ns is not None:
                known = max(known, run.end_ns)
            else:
                return INF
        return known
