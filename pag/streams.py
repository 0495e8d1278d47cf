"""Structured Streaming records of an application's context (DESIGN §8).

A streaming query's runs and micro-batches travel with the trace in its
:class:`~sparktrail.pag.context.AppContext`: one :class:`StreamQuery` per
run of a query (``QueryStartedEvent`` .. ``QueryTerminatedEvent``) and one
:class:`StreamBatch` per ``QueryProgressEvent``, with its sources
(:class:`StreamSource`), state operators (:class:`StateOperator`) and sink
(:class:`StreamSink`). The tracer builds them; this module only declares
them and reads them back from the context's JSON (:func:`queries_of`,
:func:`batches_of`).

Assumptions
-----------
* A field the event did not state is ``None``, never 0 (Spark 2.0 logs
  lack most numbers); a collection that is ``None`` was not stated either,
  while an empty one was stated empty (a stateless query has no state
  operators).
* Times are ns on the driver's clock; durations (``duration_ms``) stay in
  ms, with Spark's keys (``triggerExecution``, ``addBatch``, ...).
* Offsets are kept as Spark's JSON text; ``backlog`` is how many offsets
  the source was behind its latest offset at the batch's end, where both
  are numbers (summed over Kafka partitions), else ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "StateOperator",
    "StreamBatch",
    "StreamQuery",
    "StreamSink",
    "StreamSource",
    "batches_of",
    "queries_of",
]

#: ns per ms (batch timestamps are ns, ``duration_ms`` values ms).
_MS = 1_000_000


@dataclass(frozen=True)
class StreamQuery:
    """One run of a streaming query (a restart gets a new ``run_id``).

    ``end_ns`` is when it terminated, ``exception`` why if it failed;
    ``idle_triggers`` counts its triggers that found no new data
    (``QueryIdleEvent``, Spark 3.5+).
    """

    query_id: str
    run_id: str | None = None
    name: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    exception: str | None = None
    idle_triggers: int = 0


@dataclass(frozen=True)
class StreamSource:
    """What one source read in a micro-batch."""

    description: str | None = None
    start_offset: str | None = None
    end_offset: str | None = None
    latest_offset: str | None = None
    num_input_rows: int | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    backlog: int | None = None


@dataclass(frozen=True)
class StateOperator:
    """A stateful operator's state after a micro-batch."""

    operator_name: str | None = None
    num_rows_total: int | None = None
    num_rows_updated: int | None = None
    memory_used_bytes: int | None = None
    custom_metrics: dict[str, int | float] | None = None


@dataclass(frozen=True)
class StreamSink:
    """Where a micro-batch wrote."""

    description: str | None = None
    num_output_rows: int | None = None


@dataclass(frozen=True)
class StreamBatch:
    """One micro-batch (one ``QueryProgressEvent``).

    ``timestamp_ns`` is the trigger's start; ``duration_ms`` Spark's
    breakdown of the trigger (``triggerExecution`` is all of it).

    >>> b = StreamBatch("q", timestamp_ns=5_000_000,
    ...     duration_ms={"triggerExecution": 2})
    >>> b.trigger_end_ns
    7000000
    """

    query_id: str
    run_id: str | None = None
    batch_id: int | None = None
    timestamp_ns: int | None = None
    num_input_rows: int | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    duration_ms: dict[str, int] | None = None
    sources: tuple[StreamSource, ...] | None = None
    state_operators: tuple[StateOperator, ...] | None = None
    sink: StreamSink | None = None

    @property
    def trigger_end_ns(self) -> int | None:
        """When the trigger ended (its start plus ``triggerExecution``)."""
        took = (self.duration_ms or {}).get("triggerExecution")
        if self.timestamp_ns is None or took is None:
            return None
        return self.timestamp_ns + took * _MS


# -- reading the context's JSON back ------------------------------------------


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, found {value!r}")
    return value


def _num(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, found {value!r}")
    return float(value)


def _str(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"expected a string, found {value!r}")


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object, found {type(value).__name__}")
    return value


def _numbers(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    return {str(k): v for k, v in _obj(value, what).items()}


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list, found {type(value).__name__}")
    return value


def queries_of(raw: Any) -> tuple[StreamQuery, ...]:
    """The ``queries`` of a context's JSON (``None``: none).

    >>> queries_of([{"query_id": "q", "start_ns": 1}])[0].start_ns
    1
    """
    out = []
    for item in _list(raw or [], "queries"):
        q = _obj(item, "a query")
        out.append(
            StreamQuery(
                query_id=str(q["query_id"]),
                run_id=_str(q.get("run_id")),
                name=_str(q.get("name")),
                start_ns=_int(q.get("start_ns")),
                end_ns=_int(q.get("end_ns")),
                exception=_str(q.get("exception")),
                idle_triggers=_int(q.get("idle_triggers")) or 0,
            )
        )
    return tuple(out)


def _source(raw: Any) -> StreamSource:
    s = _obj(raw, "a source")
    return StreamSource(
        description=_str(s.get("description")),
        start_offset=_str(s.get("start_offset")),
        end_offset=_str(s.get("end_offset")),
        latest_offset=_str(s.get("latest_offset")),
        num_input_rows=_int(s.get("num_input_rows")),
        input_rows_per_second=_num(s.get("input_rows_per_second")),
        processed_rows_per_second=_num(s.get("processed_rows_per_second")),
        backlog=_int(s.get("backlog")),
    )


def _state(raw: Any) -> StateOperator:
    s = _obj(raw, "a state operator")
    return StateOperator(
        operator_name=_str(s.get("operator_name")),
        num_rows_total=_int(s.get("num_rows_total")),
        num_rows_updated=_int(s.get("num_rows_updated")),
        memory_used_bytes=_int(s.get("memory_used_bytes")),
        custom_metrics=_numbers(s.get("custom_metrics"), "custom_metrics"),
    )


def _batch(raw: Any) -> StreamBatch:
    b = _obj(raw, "a batch")
    sources, states, sink = b.get("sources"), b.get("state_operators"), b.get("sink")
    sink_obj = None if sink is None else _obj(sink, "a sink")
    durations = _numbers(b.get("duration_ms"), "duration_ms")
    return StreamBatch(
        query_id=str(b["query_id"]),
        run_id=_str(b.get("run_id")),
        batch_id=_int(b.get("batch_id")),
        timestamp_ns=_int(b.get("timestamp_ns")),
        num_input_rows=_int(b.get("num_input_rows")),
        input_rows_per_second=_num(b.get("input_rows_per_second")),
        processed_rows_per_second=_num(b.get("processed_rows_per_second")),
        duration_ms=(
            None
            if durations is None
            else {k: n for k, v in durations.items() if (n := _int(v)) is not None}
        ),
        sources=(
            None
            if sources is None
            else tuple(_source(s) for s in _list(sources, "sources"))
        ),
        state_operators=(
            None
            if states is None
            else tuple(_state(s) for s in _list(states, "state_operators"))
        ),
        sink=(
            None
            if sink_obj is None
            else StreamSink(
                _str(sink_obj.get("description")),
                _int(sink_obj.get("num_output_rows")),
            )
        ),
    )


def batches_of(raw: Any) -> tuple[StreamBatch, ...]:
    """The ``batches`` of a context's JSON (``None``: none).

    >>> batches_of([{"query_id": "q", "batch_id": 3, "sources": []}])[0].sources
    ()
    """
    return tuple(_batch(item) for item in _list(raw or [], "batches"))
