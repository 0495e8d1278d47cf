"""How sparktrail prints a duration, a size, a share: one way, everywhere.

Every stage that writes a number for people (a hint's words, the verdict,
the report, the dashboard, ``compare``, ``whatif``) formats it here, so the
same value reads alike on every page: three significant digits, never
scientific notation, the unit a Spark user reads in the History Server
(``ms``, ``s``, ``min``; sizes in binary units written ``KB``/``MB``/``GB``
as Spark writes them).

Assumptions
-----------
* Durations are nanoseconds (the trace's unit) unless a name says seconds.
* A value that is not finite prints as an en dash: unknown, not zero.

>>> duration(1.5e9), duration(125e9), duration(12e6), duration(4e12)
('1.5 s', '2 min 5 s', '12 ms', '1 h 6 min')
>>> size(64_835_336), percent(0.1234)
('61.8 MB', '12%')
"""

from __future__ import annotations

import datetime as dt
import math

__all__ = [
    "UNKNOWN",
    "clock",
    "count",
    "duration",
    "duration_s",
    "percent",
    "significant",
    "size",
]

#: What a value that is not known prints as.
UNKNOWN = "–"

_SIZES = ("bytes", "KB", "MB", "GB", "TB", "PB")


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, without an exponent, with
    thousands separators and no trailing zeros.

    >>> significant(125754.527163), significant(0.012345), significant(90.0)
    ('126,000', '0.0123', '90')
    >>> significant(float("nan"))
    '–'
    """
    if not math.isfinite(value):
        return UNKNOWN
    if value == 0:
        return "0"
    places = digits - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, places)
    if places <= 0:
        return f"{rounded:,.0f}"
    return f"{rounded:,.{places}f}".rstrip("0").rstrip(".")


def duration(ns: float | None) -> str:
    """A duration in nanoseconds for people: ``850 µs``, ``120 ms``,
    ``1.5 s``, ``2 min 5 s``, ``1 h 6 min`` (``None``: unknown).

    >>> duration(1.7e9), duration(0.25e9), duration(None), duration(-2e9), duration(0)
    ('1.7 s', '250 ms', '–', '-2 s', '0 s')
    >>> duration(59.99e9), duration(3599.6e9)
    ('60 s', '1 h 0 min')
    """
    if ns is None or not math.isfinite(ns):
        return UNKNOWN
    if ns < 0:
        return "-" + duration(-ns)
    if ns == 0:
        return "0 s"
    seconds = ns / 1e9
    if seconds >= 60:
        minutes, rest = divmod(round(seconds), 60)
        if minutes < 60:
            return f"{minutes} min {rest} s"
        hours, minutes = divmod(minutes, 60)
        return f"{hours} h {minutes} min"
    if seconds >= 1:
        return f"{significant(seconds)} s"
    if seconds >= 1e-3:
        return f"{significant(ns / 1e6)} ms"
    return f"{significant(ns / 1e3)} µs"


def duration_s(seconds: float | None) -> str:
    """:func:`duration` of a value in seconds.

    >>> duration_s(1.5), duration_s(None)
    ('1.5 s', '–')
    """
    return duration(None if seconds is None else seconds * 1e9)


def size(nbytes: float | None) -> str:
    """A size in bytes, in binary units as Spark's UI writes them
    (``KB`` = 1024 bytes).

    >>> size(512), size(1536), size(64_835_336), size(3.2 * 2**40)
    ('512 bytes', '1.5 KB', '61.8 MB', '3.2 TB')
    """
    if nbytes is None or not math.isfinite(nbytes):
        return UNKNOWN
    value, unit = float(nbytes), 0
    while abs(value) >= 1024 and unit < len(_SIZES) - 1:
        value, unit = value / 1024, unit + 1
    if unit == 0:
        return f"{value:,.0f} bytes"
    return f"{significant(value)} {_SIZES[unit]}"


def count(n: float | None) -> str:
    """A count or a rate for a sentence: ``950``, ``12.3 k``, ``11.4 M``,
    ``3.5`` (a rate below one thousand keeps its digits).

    >>> count(950), count(12_345), count(11.4e6), count(3.5), count(2.1e9)
    ('950', '12.3 k', '11.4 M', '3.5', '2.1 G')
    """
    if n is None or not math.isfinite(n):
        return UNKNOWN
    for scale, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(n) >= scale:
            return f"{significant(n / scale)}{unit}"
    return significant(n)


def percent(share: float | None) -> str:
    """A share (0..1) as a whole percentage; under 1% with one significant
    digit, so a small share does not read as none.

    >>> percent(0.4), percent(0.004), percent(0.0), percent(None)
    ('40%', '0.4%', '0%', '–')
    """
    if share is None or not math.isfinite(share):
        return UNKNOWN
    if 0 < abs(share) < 0.01:
        return f"{significant(share * 100, 1)}%"
    return f"{share:.0%}"


def clock(ns: float | None, millis: bool = False) -> str:
    """A moment (ns since the epoch) as a time of day in UTC, as Spark's
    logs and UI list them: ``HH:MM:SS`` (``millis``: ``HH:MM:SS.mmm``).

    >>> clock(1795463597412000000), clock(1795463597412000000, millis=True)
    ('19:53:17', '19:53:17.412')
    >>> clock(None)
    '–'
    """
    if ns is None or not math.isfinite(ns):
        return UNKNOWN
    moment = dt.datetime.fromtimestamp(int(ns) // 1000 / 1e6, tz=dt.UTC)
    return moment.strftime("%H:%M:%S.%f")[:-3] if millis else f"{moment:%H:%M:%S}"
