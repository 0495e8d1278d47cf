"""Reading the fields of a Spark listener event, checked (DESIGN §5).

Every value the model takes from an event goes through one of these
readers, so a field of the wrong type or a number the trace's int64
columns cannot hold raises :class:`EventError` (which names the field)
instead of a stray ``TypeError`` or an overflow later.

Assumptions
-----------
* Events are decoded JSON: numbers are ``int`` or ``float``, objects
  ``dict``, arrays ``list``; a missing key and a JSON ``null`` mean the
  same (``None``).
* Timestamps are driver-clock milliseconds; the trace holds nanoseconds
  (:data:`MS` per millisecond) and :data:`INF` stands for "not finished".
"""

from __future__ import annotations

import re
from typing import Any

from sparktrail.errors import InputError

__all__ = [
    "COUNT_LIMIT",
    "INF",
    "MS",
    "TIME_LIMIT_MS",
    "EventError",
    "dict_field",
    "executor_id",
    "id_text",
    "int_field",
    "list_field",
    "opt_int",
    "str_field",
    "time_field",
    "valid_text",
]

#: Nanoseconds per millisecond (event times are ms, trace times ns).
MS = 1_000_000
#: The end (ns) of a task that has not finished while the log still grows.
INF = 1 << 62
#: Largest magnitude of a count, id or duration field: sums of a few such
#: values (input plus shuffle bytes) stay inside int64.
COUNT_LIMIT = 1 << 60
#: Largest magnitude of a timestamp (ms): in ns it stays below ``INF``, the
#: end of a task that has not finished (about the year 2116).
TIME_LIMIT_MS = INF // MS


class EventError(InputError):
    """An event has a field the model cannot use (the message names it)."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def opt_int(obj: dict[str, Any], key: str, limit: int = COUNT_LIMIT) -> int | None:
    """The integer at ``obj[key]`` (``None`` if missing or null).

    Raises
    ------
    EventError
        If the value is not a number, not finite, or ``limit`` or more away
        from 0 (it would overflow the trace's int64 columns).

    >>> opt_int({"Task ID": 7.0}, "Task ID"), opt_int({}, "Task ID")
    (7, None)
    >>> opt_int({"Task ID": "7"}, "Task ID")
    Traceback (most recent call last):
    ...
    sparktrail.tracer.fields.EventError: 'Task ID' is '7', expected an integer
    """
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or value != value:  # NaN != NaN
        raise EventError(f"{key!r} is {_shown(value)}, expected an integer")
    if not -limit < value < limit:
        raise EventError(
            f"{key!r} is {_shown(value)}, out of range (expected |x| < {limit})"
        )
    return int(value)


def int_field(obj: dict[str, Any], key: str) -> int:
    """The integer at ``obj[key]``, 0 if missing or null (checked as
    :func:`opt_int`)."""
    value = opt_int(obj, key)
    return 0 if value is None else value


def time_field(obj: dict[str, Any], key: str) -> int | None:
    """A timestamp (ms) at ``obj[key]``, in the range ns int64 can hold."""
    return opt_int(obj, key, TIME_LIMIT_MS)


#: Lone UTF-16 surrogates: JSON's ``\\ud800`` escapes decode to them, but
#: no UTF-8 text (nor an Arrow string column) can hold them.
_SURROGATES = re.compile("[\ud800-\udfff]")


def valid_text(value: str) -> str:
    """``value`` with each lone surrogate replaced by U+FFFD.

    >>> valid_text("exec-" + chr(0xD800)) == "exec-" + chr(0xFFFD)
    True
    """
    return _SURROGATES.sub("\ufffd", value)


def str_field(obj: dict[str, Any], key: str) -> str | None:
    """The string at ``obj[key]`` (``None`` if missing or null; a lone
    surrogate becomes U+FFFD, so that the trace can hold it)."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return valid_text(value)
    raise EventError(f"{key!r} is {_shown(value)}, expected a string")


def id_text(obj: dict[str, Any], key: str) -> str:
    """``obj[key]`` as text, whatever JSON type it has (Spark writes some
    ids as strings, some logs as numbers; a missing one is ``"None"``, as
    ``str`` gives), with lone surrogates replaced as by :func:`str_field`.

    >>> id_text({"Executor ID": 7}, "Executor ID"), id_text({}, "Executor ID")
    ('7', 'None')
    """
    return valid_text(str(obj.get(key)))


#: How Spark 1.x names the driver's block manager and local-mode executor;
#: later Spark (and the same application's single-file log) says ``driver``.
_OLD_DRIVER = "<driver>"


def executor_id(obj: dict[str, Any], key: str = "Executor ID") -> str:
    """An executor id (:func:`id_text` of ``obj[key]``), the driver as ``driver``.

    Every executor id the model reads goes through here, so the one
    executor of a Spark 1.2 log folder (``<driver>``) and that of the same
    application's single-file log (``driver``) get one name, which is also
    the name the local-mode rules (cores from the master) look for.

    >>> executor_id({"Executor ID": "<driver>"}), executor_id({"Executor ID": 3})
    ('driver', '3')
    """
    text = id_text(obj, key)
    return "driver" if text == _OLD_DRIVER else text


def dict_field(obj: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The JSON object at ``obj[key]`` (``None`` if missing or null)."""
    value = obj.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise EventError(f"{key!r} is {_shown(value)}, expected an object")


def list_field(obj: dict[str, Any], key: str) -> list[Any] | None:
    """The JSON array at ``obj[key]`` (``None`` if missing or null)."""
    value = obj.get(key)
    if value is None or isinstance(value, list):
        return value
    raise EventError(f"{key!r} is {_shown(value)}, expected a list")
