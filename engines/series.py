"""A series of runs of one application: where did a regression begin?

:func:`run_series` takes the profiles of several runs of one application
(in any order), orders them by start time and returns a :class:`RunSeries`:
per run its name, application id, start and wall time; per operator
(matched by :func:`~sparktrail.engines.comparison.operator_key`, as
``sparktrail compare`` matches two runs) its critical seconds and input
records in each run, and the run its regression began in.
:meth:`RunSeries.to_json` is the ``sparktrail compare DIR --json`` contract.

Definitions
-----------
* A run's **start** is its context's ``start_ns`` (the application's start
  in the event log); a run without one is placed by its first window, and
  runs of one start by name.
* An operator's **critical seconds** in a run are its ``cp_ns`` in that
  run's whole-run operator frame (0 when the run did not run it), its
  **records** the input records of its stages (``None``: not known, or
  not run). :data:`~sparktrail.engines.comparison.UNATTRIBUTED` is the
  last row: wall time minus every operator's critical seconds (driver,
  idle, no path), its records unknown.
* A **regression begins** at run ``i`` (:func:`regression_start`) when, with
  ``m`` the median of the critical seconds of the runs before it, run
  ``i`` exceeds ``m`` by more than max(10% of ``m``, 1 s) while its records
  grew less than 10% over the median records of the runs before it (an
  unknown input does not excuse it), and the next run, if there is one,
  also exceeds ``m`` by that much (one slow run is not a regression). The
  first such run of an operator is its ``regression_from``.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag.schemas import WINDOW_START_NS

from .comparison import (
    NS,
    REGRESSION_S,
    REGRESSION_SHARE,
    UNATTRIBUTED,
    VOLUME_SHARE,
    _operator_side,
    wall_ns,
)
from .profiler import Profile

__all__ = ["RunSeries", "regression_start", "run_series", "start_text"]

_RUNS_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.String(),
    "app_id": pl.String(),
    "start_ns": pl.Int64(),
    "wall_s": pl.Float64(),
}
_OPERATORS_SCHEMA: dict[str, pl.DataType] = {
    "operator": pl.String(),
    "critical_s": pl.List(pl.Float64()),
    "records": pl.List(pl.Int64()),
    "regression_from": pl.String(),
}


@dataclass(frozen=True)
class RunSeries:
    """Runs of one application in start order (module docstring).

    Attributes
    ----------
    runs
        One row per run, in start order: ``run`` (its name), ``app_id``,
        ``start_ns`` (``None``: not known), ``wall_s``.
    operators
        One row per operator label of any run, the most critical first and
        :data:`~sparktrail.engines.comparison.UNATTRIBUTED` last:
        ``critical_s`` and ``records`` (lists, one item per run) and
        ``regression_from`` (the run a regression began in, or ``None``).
    warnings
        What makes the series doubtful (other application names).
    """

    runs: pl.DataFrame
    operators: pl.DataFrame
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def names(self) -> list[str]:
        """The runs' names in start order."""
        return [str(n) for n in self.runs["run"]]

    def regressions(self) -> pl.DataFrame:
        """The operators whose regression began in some run."""
        return self.operators.filter(pl.col("regression_from").is_not_null())

    def to_json(self) -> dict[str, Any]:
        """The ``sparktrail compare DIR --json`` contract (README)."""
        runs = [
            {
                "run": r["run"],
                "app_id": r["app_id"],
                "start": start_text(r["start_ns"]),
                "wall_s": r["wall_s"],
            }
            for r in self.runs.iter_rows(named=True)
        ]
        return {
            "runs": runs,
            "operators": self.operators.to_dicts(),
            "warnings": list(self.warnings),
        }


def start_text(start_ns: int | None) -> str | None:
    """A start time as ISO 8601 UTC with milliseconds (``None`` stays).

    >>> start_text(1430917380880000000)
    '2015-05-06T13:03:00.880Z'
    """
    if start_ns is None:
        return None
    when = dt.datetime.fromtimestamp(start_ns / NS, tz=dt.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _up(seconds: float, base: float) -> bool:
    return seconds - base > max(REGRESSION_SHARE * base, REGRESSION_S)


def _input_grew(before: Sequence[int | None], now: int | None) -> bool:
    known = [r for r in before if r is not None]
    if now is None or not known:
        return False
    base = statistics.median(known)
    if base == 0:
        return now > 0
    return now / base - 1.0 >= VOLUME_SHARE


def regression_start(
    seconds: Sequence[float], records: Sequence[int | None]
) -> int | None:
    """The index of the run a regression began in, or ``None``.

    Run ``i`` exceeds the median of the runs before it by more than
    max(10%, 1 s), its records grew less than 10% over their median before
    it, and run ``i + 1`` (if any) still exceeds that median as much.

    >>> regression_start([10, 10, 14, 14], [100, 100, 100, 100])
    2
    >>> regression_start([10, 10, 20, 20], [100, 100, 200, 200])  # input doubled
    >>> regression_start([10, 10, 14, 10], [100, 100, 100, 100])  # one slow run
    >>> regression_start([10, 10, 14], [100, 100, 100])  # the last run counts
    2
    """
    for i in range(1, len(seconds)):
        base = statistics.median(seconds[:i])
        if not _up(seconds[i], base) or _input_grew(records[:i], records[i]):
            continue
        if i + 1 < len(seconds) and not _up(seconds[i + 1], base):
            continue
        return i
    return None


def _start_key(p: Profile) -> tuple[int, int, str]:
    start = p.summaries.context.start_ns
    if start is None:
        windows = p.summaries.windows
        if not windows.is_empty():
            start = int(windows[WINDOW_START_NS].min())  # type: ignore[arg-type]
    return (start is None, start or 0, p.name)


def run_series(profiles: Sequence[Profile]) -> RunSeries:
    """The runs of ``profiles`` in start order, their operators' critical
    seconds and records per run, and where each operator's regression began.
    Each profile's ``name`` names its run.

    Raises
    ------
    InputError
        If fewer than two profiles are given.

    Examples
    --------
    >>> from sparktrail.engines.profiler import profile
    >>> def run(ms, name):
    ...     return profile(pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...         "start_ns": [0], "end_ns": [ms * 1_000_000], "activity": ["processing"],
    ...         "operator": ["count at app.py:3"]}), 100_000_000, name=name)
    >>> s = run_series([run(1000, "a"), run(1000, "b"), run(3000, "c")])
    >>> s.operators.row(0)
    ('count at app.py:3', [1.0, 1.0, 3.0], [None, None, None], 'c')
    """
    if len(profiles) < 2:
        raise InputError(f"a series needs at least two runs, not {len(profiles)}")
    ordered = sorted(profiles, key=_start_key)
    names = [p.name for p in ordered]
    runs = pl.DataFrame(
        [
            (
                p.name,
                p.summaries.context.app_id,
                p.summaries.context.start_ns,
                wall_ns(p) / NS,
            )
            for p in ordered
        ],
        schema=_RUNS_SCHEMA,
        orient="row",
    )
    sides = [_operator_side(p) for p in ordered]
    labels = sorted({str(op) for side in sides for op in side["operator"]})
    seconds: dict[str, list[float]] = {op: [0.0] * len(ordered) for op in labels}
    records: dict[str, list[int | None]] = {op: [None] * len(ordered) for op in labels}
    for i, side in enumerate(sides):
        for row in side.iter_rows(named=True):
            seconds[row["operator"]][i] = float(row["s"])
            records[row["operator"]][i] = row["records"]
    walls = [float(w) for w in runs["wall_s"]]
    rest = [w - sum(seconds[op][i] for op in labels) for i, w in enumerate(walls)]
    rows = [
        (op, seconds[op], records[op], _named(names, seconds[op], records[op]))
        for op in sorted(labels, key=lambda op: (-max(seconds[op]), op))
    ]
    unknown: list[int | None] = [None] * len(ordered)
    rows.append((UNATTRIBUTED, rest, unknown, _named(names, rest, unknown)))
    operators = pl.DataFrame(rows, schema=_OPERATORS_SCHEMA, orient="row")
    app_names = sorted(
        {p.summaries.context.app_name for p in ordered if p.summaries.context.app_name}
    )
    warnings = []
    if len(app_names) > 1:
        warnings.append(
            "several applications ("
            + ", ".join(repr(n) for n in app_names)
            + "): operators are matched by label where they agree"
        )
    window_lengths = {p.summaries.window_ns for p in ordered}
    if len(window_lengths) > 1:
        warnings.append(
            "the runs' windows differ: wall times are rounded up to whole "
            "windows differently"
        )
    return RunSeries(runs=runs, operators=operators, warnings=tuple(warnings))


def _named(
    names: list[str], seconds: list[float], records: list[int | None]
) -> str | None:
    found = regression_start(seconds, records)
    return None if found is None else names[found]
