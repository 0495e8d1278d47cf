"""Parsing of durations given on the command line (``1s``, ``250ms``)."""

from __future__ import annotations

import argparse
import re

__all__ = ["parse_duration_ns", "parse_lateness_ns"]

_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")


def parse_duration_ns(text: str) -> int:
    """Parse a positive duration with a unit into nanoseconds.

    >>> parse_duration_ns("250ms")
    250000000
    >>> parse_duration_ns("10")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '10' is not a duration: give a number and a unit...
    """
    match = _DURATION.match(text.lower())
    if match is None or match.group(2) not in _UNITS_NS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: give a number and a unit "
            f"({', '.join(_UNITS_NS)}), e.g. 1s"
        )
    value = round(float(match.group(1)) * _UNITS_NS[match.group(2)])
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration must be positive")
    return value


def parse_lateness_ns(text: str) -> int:
    """A duration like ``2s``, or ``0`` for no lateness.

    >>> parse_lateness_ns("0"), parse_lateness_ns("500ms")
    (0, 500000000)
    """
    if text.strip() in {"0", "0s", "0ms"}:
        return 0
    return parse_duration_ns(text)
