"""Fuzzing the event-log importer with mutated lines of a real Spark log.

The contract (robustness issue, deliverable 1): every input either imports
as a valid trace, with each line it dropped reported by an
:class:`EventLogWarning` that names the file and the line, or is refused
with an :class:`EventLogError` that names the file. Any other exception is a
bug.

The mutations start from the lines of the shared Spark 2.3 log: drop a
(nested) field, give a field a value of the wrong type, huge or negative
numbers, odd unicode (emoji, control characters, lone surrogates, invalid
UTF-8), cut a line or the file at a byte, splice random bytes, duplicate,
swap or delete lines. ``SPARKTRAIL_FUZZ_EXAMPLES`` sets the examples per
test (default 150; e.g. 2000 for a long run).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from sparktrail.pag.trace import validate_trace
from sparktrail.tracer import (
    EventLogError,
    EventLogWarning,
    ImportStats,
    SetAsideWarning,
    import_eventlog,
)
from sparktrail.tracer.eventlog import MAX_LINE_WARNINGS, USED_EVENTS
from sparktrail.tracer.fields import EventError
from sparktrail.tracer.spark_model import SparkModel
from sparktrail.tracer.trace_rows import TraceRows
from tests.paths import SHARED_LOG

LOG = SHARED_LOG
LINES = LOG.read_bytes().splitlines(keepends=True)
EVENTS = [orjson.loads(line) for line in LINES]
EXAMPLES = int(os.environ.get("SPARKTRAIL_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Field names the model reads; mutations aim at them half of the time.
READ_FIELDS = frozenset(
    {
        "Event",
        "Spark Version",
        "Timestamp",
        "App ID",
        "App Name",
        "Spark Properties",
        "spark.master",
        "Executor ID",
        "Executor Info",
        "Total Cores",
        "Job ID",
        "Submission Time",
        "Completion Time",
        "Stage IDs",
        "Stage Infos",
        "Stage Info",
        "Stage ID",
        "Stage Attempt ID",
        "Stage Name",
        "Number of Tasks",
        "Task Info",
        "Task ID",
        "Index",
        "Partition ID",
        "Attempt",
        "Launch Time",
        "Finish Time",
        "Getting Result Time",
        "Speculative",
        "Killed",
        "Failed",
        "Task End Reason",
        "Reason",
        "Task Metrics",
        "Executor Deserialize Time",
        "Executor Run Time",
        "JVM GC Time",
        "Result Serialization Time",
        "Shuffle Read Metrics",
        "Fetch Wait Time",
        "Total Records Read",
        "Records Read",
        "Remote Bytes Read",
        "Local Bytes Read",
        "Shuffle Write Metrics",
        "Shuffle Write Time",
        "Shuffle Bytes Written",
        "Input Metrics",
        "Bytes Read",
    }
)

# -- values ------------------------------------------------------------------

HUGE_INTS = st.one_of(
    st.sampled_from(
        [2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30, -(2**63), -(2**63) - 1, -1]
    ),
    st.integers(min_value=2**62, max_value=2**70),
    st.integers(min_value=-(2**70), max_value=-1),
)
ODD_TEXT = st.one_of(
    st.text(st.characters(codec=None), max_size=12),  # surrogates included
    st.sampled_from(["", "🔥💥", "\x00", "\u202e", "a\nb", "٣.٠", "\ud800", "x\udfff"]),
    st.integers(4300, 5000).map(lambda n: "9" * n),  # beyond int()'s digit limit
)
WRONG_TYPES = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(),  # nan and inf are written as NaN/Infinity: not JSON
    st.floats(min_value=-1e300, max_value=1e300),
    HUGE_INTS,
    ODD_TEXT,
    st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(-5, 5), max_size=2),
)

# -- mutations ---------------------------------------------------------------


@dataclass
class Line:
    """One entry of a mutated log: its bytes, and whether a mutation hit it."""

    data: bytes
    mutated: bool = False
    what: str = ""

    def __repr__(self) -> str:
        if not self.mutated and self.data in LINES:
            return f"Line(LINES[{LINES.index(self.data)}])"
        return f"Line({self.data[:300]!r}..., mutated={self.mutated}, {self.what!r})"


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a node of a JSON value (dict keys and list indices)."""
    out: list[tuple[Any, ...]] = [prefix] if prefix else []
    items: Any = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, child in items:
        out.extend(paths(child, (*prefix, key)))
    return out


def with_change(value: Any, path: tuple[Any, ...], new: Any, drop: bool) -> Any:
    """A copy of ``value`` with the node at ``path`` replaced (or dropped)."""
    if not path:
        return new
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    head, rest = path[0], path[1:]
    if rest:
        copy[head] = with_change(copy[head], rest, new, drop)
    elif drop:
        del copy[head]
    else:
        copy[head] = new
    return copy


def dump(value: Any, raw_unicode: bool) -> bytes:
    """Spark's compact JSON; ``raw_unicode`` writes surrogates as raw bytes."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=not raw_unicode)
    return text.encode("utf-8", "surrogatepass") + b"\n"


@st.composite
def field_mutation(draw: st.DrawFn, line: Line) -> Line:
    """Drop a field, or give it a wrong-typed, huge or odd-unicode value."""
    try:
        value = orjson.loads(line.data)
    except orjson.JSONDecodeError:
        return line
    candidates = paths(value)
    if not candidates:
        return line
    aimed = [p for p in candidates if p[-1] in READ_FIELDS]
    pool = aimed if aimed and draw(st.booleans()) else candidates
    path = draw(st.sampled_from(pool))
    kind = draw(st.sampled_from(["drop", "retype", "huge", "unicode"]))
    if kind == "drop" and isinstance(path[-1], int):
        kind = "retype"  # a list element: no key to drop
    new = {
        "drop": None,
        "retype": draw(WRONG_TYPES) if kind == "retype" else None,
        "huge": draw(HUGE_INTS) if kind == "huge" else None,
        "unicode": draw(ODD_TEXT) if kind == "unicode" else None,
    }[kind]
    data = dump(with_change(value, path, new, kind == "drop"), draw(st.booleans()))
    return Line(data, True, f"{kind} {'/'.join(map(str, path))}")


@st.composite
def byte_mutation(draw: st.DrawFn, line: Line) -> Line:
    """Cut a line at a byte, or splice random bytes (invalid UTF-8) into it."""
    data = line.data
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if draw(st.booleans()):
        keep_newline = draw(st.booleans())
        return Line(data[:at] + (b"\n" if keep_newline else b""), True, f"cut {at}")
    junk = draw(
        st.one_of(
            st.binary(min_size=1, max_size=8),
            st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b'"', b"}"]),
        )
    )
    return Line(data[:at] + junk + data[at:], True, f"splice {junk!r} at {at}")


@st.composite
def mutated_logs(draw: st.DrawFn) -> list[Line]:
    """The shared log (or a slice of it) with one to four mutations."""
    lines = [Line(data) for data in LINES]
    if draw(st.integers(0, 4)) == 0:  # sometimes a short slice: may read nothing
        start = draw(st.integers(0, len(lines) - 1))
        lines = lines[start : start + draw(st.integers(1, 4))]
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(
            st.sampled_from(
                ["field"] * 4 + ["bytes"] * 2 + ["duplicate", "swap", "delete", "end"]
            )
        )
        if kind == "field":
            lines[i] = draw(field_mutation(lines[i]))
        elif kind == "bytes":
            lines[i] = draw(byte_mutation(lines[i]))
        elif kind == "duplicate":
            lines.insert(i, Line(lines[i].data, lines[i].mutated, "duplicate"))
        elif kind == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "delete":
            del lines[i]
        else:  # cut the file: the last line loses its end
            cut = draw(st.integers(0, len(lines[-1].data)))
            lines[-1] = Line(lines[-1].data[:cut], True, f"file cut at {cut}")
        event(f"mutation: {kind}")
    return lines


def file_lines(lines: list[Line]) -> list[tuple[bytes, bool]]:
    """The lines of the written file, each marked if a mutation touched it.

    A mutation can split a line (a spliced newline) or join it with the next
    one (a cut newline), so numbering follows the bytes, not the entries.
    """
    out: list[tuple[bytes, bool]] = []
    current, touched = b"", False
    for line in lines:
        parts = line.data.split(b"\n")
        for k, part in enumerate(parts):
            last = k == len(parts) - 1
            current += part
            if part or not last:
                touched |= line.mutated
            if not last:
                out.append((current, touched))
                current, touched = b"", False
    if current:
        out.append((current, touched))
    return out


# -- the contract ------------------------------------------------------------

_WARNING = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<what>.*)$", re.DOTALL)
_PREFIX = b'{"Event":"'


def must_be_reported(data: bytes) -> bool:
    """Whether a line can only be dropped with a warning (not a used event).

    Blank lines are ignored and events the importer does not use are
    skipped unparsed (only unknown *task* events warn), as documented.
    """
    if not data.strip():
        return False
    if data.startswith(_PREFIX):
        end = data.find(b'"', len(_PREFIX))
        name = data[len(_PREFIX) : end].decode("utf-8", "replace")
        if end > 0 and name not in USED_EVENTS:
            return name.startswith("SparkListenerTask")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return True
    return not isinstance(value, dict) or not isinstance(value.get("Event"), str)


def check_import(lines: list[Line]) -> str:
    """Import the mutated log and check the contract; return the outcome."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "local-1532512550423"
        target.write_bytes(b"".join(line.data for line in lines))
        expected = file_lines(lines)
        stats = ImportStats()
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                trace = import_eventlog(target, stats=stats)
            except EventLogError as err:
                assert str(target) in str(err)
                outcome = "reported (EventLogError)"
            else:
                validate_trace(trace, target)
                outcome = "imported"
        messages = [str(w.message) for w in record if w.category is EventLogWarning]
        # Besides its lines' warnings, one naming the times set aside.
        aside = [w for w in record if w.category is SetAsideWarning]
        assert len(messages) + len(aside) == len(record), [
            str(w.message) for w in record
        ]
        assert len(aside) <= 1
        warned: dict[int, str] = {}
        for message in messages:
            if (
                message
                == f"{target}: more problems; only counting skipped lines from here"
            ):
                continue
            match = _WARNING.match(message)
            assert match and match["path"] == str(target), message
            number = int(match["line"])
            if number == 0:  # the whole file
                assert match["what"] == "empty event file" and not expected
                continue
            assert 1 <= number <= len(expected), message
            data, touched = expected[number - 1]
            # THEN only lines a mutation touched are warned about
            assert touched, f"untouched line {number} warned: {message}"
            assert "internal error" not in message, message
            warned[number] = message
        # AND every line that cannot be an event is reported at its number
        if len(messages) <= MAX_LINE_WARNINGS:
            for number, (data, _) in enumerate(expected, 1):
                if must_be_reported(data):
                    assert number in warned, f"line {number} not reported: {data!r}"
            skipped = [m for m in warned.values() if ": skipped: " in m]
            if outcome == "imported":
                assert stats.skipped_lines == len(skipped)
        if outcome == "imported" and stats.skipped_lines:
            event("imported, some lines skipped")
        return outcome


def line_with(index: int, path: tuple[Any, ...], new: Any, drop: bool = False) -> Line:
    """Line ``index`` of the shared log with one field changed (for examples)."""
    return Line(dump(with_change(EVENTS[index], path, new, drop), False), True)


def log_with(index: int, *changes: Line) -> list[Line]:
    lines = [Line(data) for data in LINES]
    lines[index : index + len(changes)] = changes
    return lines


# Regressions: each of these crashed the importer before it was fixed.
TASK_START, TASK_END, JOB_START, STAGE_SUBMITTED, ENVIRONMENT = 7, 11, 5, 6, 3
STAGE_COMPLETED, APP_END = 15, 29


@FUZZ
@given(lines=mutated_logs())
@example(  # Launch Time beyond int64 ns: polars overflow when building rows
    lines=log_with(TASK_END, line_with(TASK_END, ("Task Info", "Launch Time"), 2**63))
)
@example(  # a huge metric: overflow in the int64 records column
    lines=log_with(
        TASK_END,
        line_with(
            TASK_END, ("Task Metrics", "Input Metrics", "Records Read"), 2**64 - 1
        ),
    )
)
@example(  # negative huge timestamp as a float (orjson: > 64 bits)
    lines=log_with(TASK_END, line_with(TASK_END, ("Task Info", "Finish Time"), -1e300))
)
@example(  # Stage IDs not a list: TypeError iterating an int
    lines=log_with(JOB_START, line_with(JOB_START, ("Stage IDs",), 7))
)
@example(  # Stage Infos not a list
    lines=log_with(JOB_START, line_with(JOB_START, ("Stage Infos",), 1.5))
)
@example(  # Stage Info a list: AttributeError on .get
    lines=log_with(STAGE_SUBMITTED, line_with(STAGE_SUBMITTED, ("Stage Info",), [1]))
)
@example(  # spark.master not a string: AttributeError in master_cores
    lines=log_with(
        ENVIRONMENT,
        line_with(ENVIRONMENT, ("Spark Properties", "spark.master"), 4),
    )
)
@example(  # Spark Version with more digits than int() takes
    lines=log_with(0, line_with(0, ("Spark Version",), "9" * 5000))
)
@example(  # a huge negative Task ID: overflow in the int64 task_id column
    lines=log_with(
        TASK_START, line_with(TASK_START, ("Task Info", "Task ID"), -(2**70))
    )
)
@example(  # a huge Stage ID: overflow in the int64 stage_id column
    lines=log_with(TASK_START, line_with(TASK_START, ("Stage ID",), 10**30))
)
@example(  # an application end at int64 max ms: overflow of its ns
    lines=log_with(APP_END, line_with(APP_END, ("Timestamp",), 2**63 - 1))
)
@example(  # Stage Info a string: AttributeError on .get (found by the fuzzer)
    lines=log_with(
        STAGE_COMPLETED, line_with(STAGE_COMPLETED, ("Stage Info",), "\u00c4")
    )
)
@example(  # an accumulable's Name a list: unhashable in a set lookup
    lines=log_with(
        TASK_END, line_with(TASK_END, ("Task Info", "Accumulables", 0, "Name"), [1])
    )
)
def test_mutated_log_imports_or_is_reported(lines: list[Line]) -> None:
    """GIVEN a mutated real log WHEN imported THEN a trace, or file:line reports."""
    event(f"outcome: {check_import(lines)}")


# -- the model alone ---------------------------------------------------------

JSON = st.recursive(
    WRONG_TYPES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(sorted(READ_FIELDS)), inner, max_size=3)
    ),
    max_leaves=6,
)
USED = [e for e in EVENTS if e["Event"] in USED_EVENTS]


@st.composite
def odd_events(draw: st.DrawFn) -> dict[str, Any]:
    """A used event of the shared log with fields given arbitrary JSON."""
    value: Any = draw(st.sampled_from(USED))
    for _ in range(draw(st.integers(1, 3))):
        aimed = [p for p in paths(value) if p[-1] in READ_FIELDS and p != ("Event",)]
        if not aimed:
            break
        path = draw(st.sampled_from(aimed))
        drop = isinstance(path[-1], str) and draw(st.integers(0, 4)) == 0
        value = with_change(value, path, draw(JSON), drop)
    return dict(value)


@FUZZ
@given(events=st.lists(odd_events(), min_size=1, max_size=6))
@example(
    events=[
        {
            "Event": "SparkListenerEnvironmentUpdate",
            "Spark Properties": [["spark.master"]],
        }
    ]
)
@example(
    events=[{"Event": "SparkListenerApplicationStart", "Timestamp": 0, "App ID": [1]}]
)
@example(  # OverflowError: int(inf) (orjson never makes inf; other producers may)
    events=[{"Event": "SparkListenerJobStart", "Job ID": float("inf")}]
)
@example(  # ValueError: int(nan)
    events=[
        {
            "Event": "SparkListenerTaskStart",
            "Stage ID": 0,
            "Task Info": {"Task ID": 99, "Launch Time": float("nan")},
        }
    ]
)
def test_model_takes_an_event_or_raises_event_error(
    events: list[dict[str, Any]],
) -> None:
    """GIVEN odd events WHEN fed THEN each is taken or refused with EventError,
    and the rows built from those taken form a valid trace."""
    model = SparkModel()
    for one in [*USED[:8], *events, *USED[8:]]:
        try:
            model.feed(one)
        except EventError as err:
            assert str(err), "an EventError says what was expected"
            event("an event refused")
    validate_trace(model.build(final=True))
    validate_trace(model.build(final=False, settled=True).drop("settled_ns"))


def test_bad_field_is_skipped_with_file_and_line(tmp_path: Path) -> None:
    """GIVEN a task whose launch time overflows int64 ns WHEN imported THEN
    that line is skipped with a warning naming file, line and field."""
    lines = [*LINES]
    lines[TASK_END] = dump(
        with_change(EVENTS[TASK_END], ("Task Info", "Launch Time"), 10**19, False),
        False,
    )
    target = tmp_path / "app-1"
    target.write_bytes(b"".join(lines))
    stats = ImportStats()
    with pytest.warns(EventLogWarning) as record:
        trace = import_eventlog(target, stats=stats)
    messages = [str(w.message) for w in record]
    assert len(messages) == 1
    assert messages[0].startswith(f"{target}:{TASK_END + 1}: skipped: ")
    assert "Launch Time" in messages[0]
    assert stats.skipped_lines == 1
    # the task still has its TaskStart, so it stays in the trace (unfinished)
    assert stats.tasks == 8 and trace.height > 0


def test_wrong_typed_app_id_is_refused() -> None:
    """GIVEN an App ID that is a list WHEN fed THEN EventError names the field
    (it used to become the app id, and so the name of the trace file)."""
    model = SparkModel()
    with pytest.raises(EventError, match="'App ID' is \\[1\\], expected a string"):
        model.feed({"Event": "SparkListenerApplicationStart", "App ID": [1]})
    assert model.stats.app_id is None and model.app_start_ms is None


def test_lone_surrogate_in_an_executor_id_becomes_a_replacement_character() -> None:
    """GIVEN a task whose executor id holds a lone surrogate (JSON's
    ``\\ud800`` escape decodes to one; no UTF-8 text can hold it) WHEN fed
    THEN the trace builds and names the executor with U+FFFD (found by
    the fuzz test above: the trace frame refused the string)."""
    bad = "1" + chr(0xD800)
    model = SparkModel()
    for one in USED:
        if one["Event"] in ("SparkListenerTaskStart", "SparkListenerTaskEnd"):
            one = with_change(one, ("Task Info", "Executor ID"), bad, False)
        model.feed(one)
    workers = set(validate_trace(model.build(final=True))["src_worker"].to_list())
    assert any("1" + chr(0xFFFD) in w for w in workers), workers
    assert not any(chr(0xD800) in w for w in workers)


def test_lone_surrogate_in_a_label_becomes_a_replacement_character() -> None:
    """GIVEN trace rows whose operator label holds a lone surrogate WHEN made
    a frame THEN it holds U+FFFD there and every other value unchanged."""
    rows = TraceRows()
    rows.add("driver", "driver", 0, 5, "driver", 0, 1, job_stage=("a", 1, 2))
    rows.add(
        "driver", "driver", 5, 9, "driver", 1, 2, job_stage=("b" + chr(0xD800), 1, 3)
    )
    frame = rows.frame()
    assert frame["operator"].to_list() == ["a", "b" + chr(0xFFFD)]
    assert frame["stage_id"].to_list() == [2, 3]
    assert frame["end_ns"].to_list() == [5, 9]
