"""Implausible timestamps: found over a whole log, set aside before the model.

A clock jump, a hand-edited log or a corrupt field can put one event years
away from the rest of its application (issue 25: an ``ApplicationEnd`` 2.5
years after the last task made one ``driver`` row 80 million seconds long).
The profile's cost must follow the rows, never that span, so such times are
set aside here, before :class:`~sparktrail.tracer.spark_model.SparkModel`
sees them, and named in one warning.

:class:`TimeCensus` is built from the text of a log (a first pass that
finds the time fields by name, without decoding the JSON) and
:meth:`TimeCensus.sanitize` then rewrites each event of the second pass.

Rules
-----
* Every event time is read: ``Timestamp``, ``Submission Time``,
  ``Completion Time`` and ``time`` at the top, a ``Stage Info``'s
  submission and completion, a ``Task Info``'s launch and finish, a
  Structured Streaming event's or progress's ``timestamp``.
* Times are cut into clusters where two neighbours lie more than
  :data:`GAP_MS` (an hour) apart. A cluster is the application's when it
  holds a task launch and a job or stage submission (a job really ran
  then; one edited field cannot make both); if none does, the cluster
  with the most times is. Every time outside those clusters, and every
  time at or before the epoch, is *implausible*.
* A log still being written cannot be read ahead (:class:`GrowingCensus`):
  there a time is implausible when it is at or before the epoch, more than
  :data:`GAP_MS` after the wall clock, or before the first time read.
* An implausible time is removed from its event (the model then reads it
  as unknown), except a task's launch or finish when the other one is
  plausible: it is moved to the other one plus or minus the task's
  metrics (deserialization, run and result serialization time), so that
  the task keeps its place and its metrics. A task event with neither is
  dropped.

Assumptions
-----------
* Event times are epoch milliseconds (ISO-8601 text for the streaming
  ones); a finish time of 0 means "not finished" (``TaskStart``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

__all__ = [
    "GAP_MS",
    "GrowingCensus",
    "SetAside",
    "SetAsideWarning",
    "TimeCensus",
    "event_times",
]

#: Times further than this from every other time of the application's
#: clusters are implausible (one hour, in ms).
GAP_MS = 3_600_000
_TOP = ("Timestamp", "Submission Time", "Completion Time", "time")
_STAGE = ("Submission Time", "Completion Time")
_TASK = ("Launch Time", "Finish Time")
_TASK_METRICS = (
    "Executor Deserialize Time",
    "Executor Run Time",
    "Result Serialization Time",
)
#: Kinds of time a cluster needs to be the application's.
_LAUNCH, _SUBMIT, _OTHER = 0, 1, 2
#: The time fields of :func:`event_times` in a log's text (a finish of 0,
#: "not finished", is left out as there).
_TIME = re.compile(
    rb'"(Timestamp|Submission Time|Completion Time|time|Launch Time|Finish Time)"'
    rb"\s*:\s*(-?[0-9]{1,19})\b"
)
_ISO = re.compile(rb'"timestamp"\s*:\s*"([0-9][0-9T:.+\-Z]{9,40})"')
_KIND_OF = {b"Launch Time": _LAUNCH, b"Submission Time": _SUBMIT}


class SetAsideWarning(UserWarning):
    """Implausible timestamps were set aside (one per log, naming them).

    Not an :class:`~sparktrail.tracer.eventlog.EventLogWarning`: a caller
    that silences the per-line warnings of a file that may not be a log
    still shows this one.
    """


def _iso_ms(value: str) -> int | None:
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None  # the streaming reader reports it
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _ms(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or abs(value) >= 1 << 62:  # NaN, or beyond any clock
        return None
    return int(value)


def _progress(event: dict[str, Any]) -> dict[str, Any] | None:
    found = event.get("progress")
    return found if isinstance(found, dict) else None


def event_times(event: dict[str, Any]) -> list[tuple[str, int, int]]:
    """``(field, ms, kind)`` of every time in ``event`` (module docstring).

    >>> event_times({"Event": "SparkListenerTaskEnd", "Task Info":
    ...     {"Launch Time": 5, "Finish Time": 9}})
    [('Launch Time', 5, 0), ('Finish Time', 9, 2)]
    """
    found: list[tuple[str, int, int]] = []
    for key in _TOP:
        ms = _ms(event.get(key))
        if ms is not None:
            found.append((key, ms, _SUBMIT if key == "Submission Time" else _OTHER))
    stage = event.get("Stage Info")
    if isinstance(stage, dict):
        for key in _STAGE:
            ms = _ms(stage.get(key))
            if ms is not None:
                kind = _SUBMIT if key == "Submission Time" else _OTHER
                found.append((f"Stage Info.{key}", ms, kind))
    task = event.get("Task Info")
    if isinstance(task, dict):
        for key in _TASK:
            ms = _ms(task.get(key))
            if ms is not None and not (key == "Finish Time" and ms == 0):
                found.append((key, ms, _LAUNCH if key == "Launch Time" else _OTHER))
    for holder, prefix in ((event, ""), (_progress(event) or {}, "progress.")):
        stamp = holder.get("timestamp")
        ms = _iso_ms(stamp) if isinstance(stamp, str) else _ms(stamp)
        if ms is not None:
            found.append((f"{prefix}timestamp", ms, _OTHER))
    return found


@dataclass(frozen=True)
class SetAside:
    """One implausible time: where it was, and how far from the application."""

    event: str
    field: str
    ms: int
    gap_ms: int  # to the nearest time of the application (negative: before)
    where: str  # "file:line"

    def describe(self) -> str:
        """``file:line: Event 'Field' 2.5 years after ...``, for a warning."""
        side = "after" if self.gap_ms > 0 else "before"
        return (
            f"{self.where}: {self.event} {self.field!r} = {self.ms} is "
            f"{_duration(abs(self.gap_ms))} {side} the application's other events"
        )


def _duration(ms: int) -> str:
    """A gap in the largest unit that reads well.

    >>> _duration(80_000_000_000), _duration(90_000_000), _duration(5_400_000)
    ('2.5 years', '1.0 days', '1.5 hours')
    """
    for unit, size in (("years", 365.25 * 86_400_000), ("days", 86_400_000)):
        if ms >= size:
            return f"{ms / size:.1f} {unit}"
    return f"{ms / 3_600_000:.1f} hours"


@dataclass
class TimeCensus:
    """Every event time of a log, and the spans that are the application's.

    Examples
    --------
    A job at t = 1000 s and an ``ApplicationEnd`` a year later:

    >>> c = TimeCensus()
    >>> c.add_text(b'{"Event":"SparkListenerJobStart","Submission Time":1000000}')
    >>> c.add_text(b'{"Task Info":{"Launch Time":1000050}}')
    >>> c.add_text(b'{"Event":"SparkListenerApplicationEnd","Timestamp":32000000000}')
    >>> c.close()
    >>> c.plausible(1_000_020), c.plausible(32_000_000_000)
    (True, False)
    """

    _times: list[int] = field(default_factory=list)
    _kinds: list[int] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)

    def add_text(self, text: bytes) -> None:
        """Count the times in whole lines of a log's text, unparsed.

        The first pass over a log, without decoding its JSON (a third of
        the import's time when every event was decoded twice): the time
        fields of :func:`event_times` are found by name, in any event of
        the log.
        """
        for key, value in _TIME.findall(text):
            ms = int(value)
            if ms > 0 and ms < 1 << 62:
                self._times.append(ms)
                self._kinds.append(_KIND_OF.get(key, _OTHER))
        for stamp in _ISO.findall(text):
            iso = _iso_ms(stamp.decode("ascii", "replace"))
            if iso is not None and iso > 0:
                self._times.append(iso)
                self._kinds.append(_OTHER)

    def close(self) -> None:
        """Find the application's spans once every event was added."""
        if not self._times:
            return
        times = np.asarray(self._times, dtype=np.int64)
        kinds = np.asarray(self._kinds, dtype=np.int8)
        order = np.argsort(times, kind="stable")
        times, kinds = times[order], kinds[order]
        cuts = np.flatnonzero(np.diff(times) > GAP_MS) + 1
        bounds = [0, *cuts.tolist(), len(times)]
        clusters = list(itertools.pairwise(bounds))
        ran = [
            (a, b)
            for a, b in clusters
            if (kinds[a:b] == _LAUNCH).any() and (kinds[a:b] == _SUBMIT).any()
        ]
        if not ran:
            ran = [max(clusters, key=lambda ab: ab[1] - ab[0])]
        self.spans = [(int(times[a]), int(times[b - 1])) for a, b in ran]
        self._times, self._kinds = [], []

    def plausible(self, ms: int) -> bool:
        """Whether ``ms`` lies in one of the application's spans."""
        if ms <= 0:
            return False
        if not self.spans:  # nothing counted: only the epoch is refused
            return True
        return any(lo <= ms <= hi for lo, hi in self.spans)

    def _gap(self, ms: int) -> int:
        lo = min(s for s, _ in self.spans) if self.spans else 0
        hi = max(e for _, e in self.spans) if self.spans else 0
        if ms > hi:
            return ms - hi
        if ms < lo:
            return ms - lo
        return min((ms - e if ms > e else ms - s for s, e in self.spans), key=abs)

    def sanitize(self, event: dict[str, Any], where: str) -> dict[str, Any] | None:
        """``event`` without its implausible times (module docstring);
        ``None`` for a task event whose launch and finish are both.

        ``where`` (``file:line``) is recorded with each time set aside.
        """
        bad = [
            (key, ms)
            for key, ms, _ in event_times(event)
            if not (key == "Finish Time" and ms == 0) and not self.plausible(ms)
        ]
        if not bad:
            return event
        name = str(event.get("Event", "?")).rsplit(".", 1)[-1].rsplit("$", 1)[-1]
        for key, ms in bad:
            self.set_aside.append(SetAside(name, key, ms, self._gap(ms), where))
        fixed = dict(event)
        keys = {key for key, _ in bad}
        for key in keys & set(_TOP):
            fixed[key] = None
        if "timestamp" in keys:
            fixed["timestamp"] = None
        if "progress.timestamp" in keys:
            fixed["progress"] = {**(_progress(event) or {}), "timestamp": None}
        stage_keys = {k.removeprefix("Stage Info.") for k in keys if "Stage Info." in k}
        if stage_keys:
            fixed["Stage Info"] = {
                **event["Stage Info"],
                **dict.fromkeys(stage_keys, None),
            }
        task_keys = keys & set(_TASK)
        if task_keys:
            task = _moved_task(event, task_keys)
            if task is None:
                return None
            fixed["Task Info"] = task
        return fixed

    def warning(self, path: str) -> str | None:
        """One line naming what was set aside (``None`` if nothing was)."""
        if not self.set_aside:
            return None
        shown = "; ".join(s.describe() for s in self.set_aside[:3])
        more = len(self.set_aside) - 3
        tail = f"; and {more} more" if more > 0 else ""
        return (
            f"{path}: {len(self.set_aside)} implausible timestamp(s) set aside, "
            f"the run is profiled without them: {shown}{tail}"
        )


def _moved_task(event: dict[str, Any], bad: set[str]) -> dict[str, Any] | None:
    """The ``Task Info`` with an implausible launch or finish moved next to
    the plausible one by the task's own metrics (``None``: both are bad)."""
    info = dict(event["Task Info"])
    if bad >= set(_TASK) and _ms(info.get("Finish Time")) != 0:
        return None
    if "Launch Time" in bad and _ms(info.get("Finish Time")) in (None, 0):
        return None
    metrics = event.get("Task Metrics")
    took = 0
    if isinstance(metrics, dict):
        took = sum(max(0, _ms(metrics.get(k)) or 0) for k in _TASK_METRICS)
    if "Launch Time" in bad:
        info["Launch Time"] = int(info["Finish Time"]) - took
    else:
        info["Finish Time"] = int(info["Launch Time"]) + took
    return info


@dataclass
class GrowingCensus(TimeCensus):
    """The census of a log still being written, read as it grows.

    Its future is unknown, so only what cannot happen is set aside: a time
    at or before the epoch, more than :data:`GAP_MS` past the wall clock
    (``now_ms``), or more than :data:`GAP_MS` before the first plausible
    time read (an application's events do not precede its start).

    >>> c = GrowingCensus(now_ms=lambda: 10_000_000)
    >>> c.plausible(5_000_000), c.plausible(20_000_000)
    (True, False)
    >>> c.plausible(5_000_000 - GAP_MS - 1)
    False
    """

    now_ms: Callable[[], int] = field(
        default=lambda: int(datetime.now(UTC).timestamp() * 1000)
    )
    _first: int | None = None

    def plausible(self, ms: int) -> bool:
        if ms <= 0 or ms > self.now_ms() + GAP_MS:
            return False
        if self._first is None:
            self._first = ms
            return True
        if ms < self._first - GAP_MS:
            return False
        self._first = min(self._first, ms)
        return True
