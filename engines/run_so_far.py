"""The whole run of a live trace so far: what ``sparktrail profile`` would say now.

The online pipeline closes windows one by one and keeps each window's
summaries; the run's answers (its hints with their replayed savings, its
stage and executor tables) need the whole trace (task facts, driver gaps,
the replay model). :class:`RunSoFar` profiles the trace directory as it
stands, in a background thread, and hands out the newest result, so that a
live page leads with the run's verdict, not a one-second window's.

Assumptions
-----------
* The trace directory only grows, by whole files (the listener renames
  each file into place), so a profile of what is there is a profile of a
  prefix of the run; once the trace stops growing, the last result is
  ``sparktrail profile``'s of the same directory.
* A refresh costs about a profile of the trace so far. It starts no sooner
  than ``min_interval_s`` after the last one began, nor sooner than
  ``cost_factor`` times the last one's duration after it ended, so that
  the refreshes take at most about ``1 / (1 + cost_factor)`` of a core
  however long the run grows.
* The verdict leads with the first shown hint. Between two refreshes the
  leading hint stays first unless another saves ``LEAD_MARGIN`` more of
  the run (:func:`steady_lead`): a page refreshed every few seconds keeps
  its banner until the ranking really changes.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from sparktrail.pag.snapshot import SnapshotWarning
from sparktrail.summaries.hints import shown_hints

from .threads import background

if TYPE_CHECKING:
    from sparktrail.summaries import HintOptions, Summaries

    from .engine_choice import Engine

__all__ = ["LEAD_MARGIN", "RunResult", "RunSoFar", "lead_key", "steady_lead"]

#: How much more of the run (in ``saving_share``) another hint must save
#: to take the lead from the hint that led the last refresh.
LEAD_MARGIN = 0.05
#: The columns that, with its kind, name what a hint is about.
_TARGET = ("stage_id", "executor_id", "partition")


@dataclass(frozen=True)
class RunResult:
    """One refresh: the run's summaries over the trace as it stood, and
    ``seconds``, how long the profile took (the end of the trace it read is
    its windows' last end)."""

    summaries: Summaries
    seconds: float


def lead_key(hints: pl.DataFrame) -> tuple[object, ...] | None:
    """What names the first shown hint (its kind and target), ``None`` if none.

    >>> h = pl.DataFrame({"kind": ["spill", "gc"], "severity": ["info", "low"],
    ...     "stage_id": [3, 4], "executor_id": [None, "2"], "partition": [None, None]})
    >>> lead_key(h)
    ('gc', 4, '2', None)
    """
    shown = shown_hints(hints)
    if shown.is_empty():
        return None
    row = shown.row(0, named=True)
    return (row["kind"], *(row.get(column) for column in _TARGET))


def _key_expr(key: tuple[object, ...]) -> pl.Expr:
    expr: pl.Expr = pl.col("kind").eq(key[0])
    for column, value in zip(_TARGET, key[1:], strict=True):
        same = pl.col(column).is_null() if value is None else pl.col(column).eq(value)
        expr = expr & same
    return expr


def steady_lead(
    hints: pl.DataFrame,
    previous: tuple[object, ...] | None,
    margin: float = LEAD_MARGIN,
) -> pl.DataFrame:
    """``hints`` with the previous leader first again, unless it lost by ``margin``.

    The previous leader (a :func:`lead_key`) goes back to the front when it
    is still shown and the new first hint saves less than ``margin`` more
    of the run than it does; otherwise the order is the rules' own.

    Examples
    --------
    >>> h = pl.DataFrame({"kind": ["gc", "spill"], "severity": ["medium", "medium"],
    ...     "stage_id": [1, 2], "executor_id": [None, None], "partition": [None, None],
    ...     "saving_share": [0.12, 0.10]})
    >>> steady_lead(h, ("spill", 2, None, None))["kind"].to_list()
    ['spill', 'gc']
    >>> steady_lead(h, ("spill", 2, None, None), margin=0.01)["kind"].to_list()
    ['gc', 'spill']
    """
    if not isinstance(margin, float | int) or margin < 0:
        raise ValueError(f"margin {margin!r}: expected a share ≥ 0")
    if previous is None or hints.is_empty() or lead_key(hints) in (None, previous):
        return hints
    shown = shown_hints(hints)
    old = shown.filter(_key_expr(previous))
    if old.is_empty():
        return hints
    new_share = shown["saving_share"][0] or 0.0
    old_share = old["saving_share"][0] or 0.0
    if new_share - old_share >= margin:
        return hints
    return pl.concat([old, hints.filter(~_key_expr(previous))])


class RunSoFar:
    """Profiles a growing trace directory in the background, now and then.

    Parameters
    ----------
    trace_dir
        The live trace directory.
    engine
        The engine and window length the live pipeline runs
        (:func:`~sparktrail.engines.engine_choice.engine_for`).
    options
        Hint thresholds, as for ``profile``.
    min_interval_s, cost_factor
        When a refresh may start (see the module's assumptions).
    clock
        Seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        trace_dir: str | Path,
        engine: Engine,
        options: HintOptions | None = None,
        *,
        min_interval_s: float = 10.0,
        cost_factor: float = 4.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min_interval_s < 0 or cost_factor < 0:
            raise ValueError(
                f"min_interval_s={min_interval_s!r}, cost_factor={cost_factor!r}: "
                "expected both ≥ 0"
            )
        self.trace_dir = Path(trace_dir)
        self.engine = engine
        self.options = options
        self.min_interval_s = min_interval_s
        self.cost_factor = cost_factor
        self._clock = clock
        self._lock = threading.Lock()
        self._running: Future[None] | None = None
        self._latest: RunResult | None = None
        self._lead: tuple[object, ...] | None = None
        self._started_at = -float("inf")
        self._ended_at = -float("inf")
        self._last_cost = 0.0
        self._rows_asked = -1

    def latest(self) -> RunResult | None:
        """The newest finished refresh (``None`` before the first)."""
        return self._latest

    def offer(self, rows_read: int) -> bool:
        """Start a refresh in the background if one is due; ``True`` if started.

        Due: the pipeline has read rows the last refresh did not see, no
        refresh is running, and the intervals of the module's assumptions
        have passed.
        """
        now = self._clock()
        with self._lock:
            if self._running is not None and not self._running.done():
                return False
            if rows_read <= 0 or rows_read == self._rows_asked:
                return False
            if now - self._started_at < self.min_interval_s:
                return False
            if now - self._ended_at < self.cost_factor * self._last_cost:
                return False
            self._rows_asked = rows_read
            self._started_at = now
            self._running = background("sparktrail-run-so-far").submit(self._refresh)
            self._running.add_done_callback(_say_failure)
            return True

    def refresh(self) -> RunResult | None:
        """Profile the trace now, in this thread (what :meth:`offer` runs)."""
        self._refresh()
        return self._latest

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the running refresh, if any (tests, the end of a run)."""
        running = self._running
        if running is not None:
            running.result(timeout)

    def _refresh(self) -> None:
        began = self._clock()
        try:
            with warnings.catch_warnings():
                # A window still filling has no path yet; the live page
                # shows the pipeline's own warnings for closed windows.
                warnings.simplefilter("ignore", SnapshotWarning)
                summaries = self.engine.summarize(self.trace_dir, options=self.options)
        finally:  # on an error, the next offer retries; the page keeps the last
            self._ended_at = self._clock()
            self._last_cost = self._ended_at - began
        hints = steady_lead(summaries.hints, self._lead)
        summaries = dataclasses.replace(summaries, hints=hints)
        self._lead = lead_key(hints)
        self._latest = RunResult(summaries, self._last_cost)


_LOG = logging.getLogger(__name__)


def _say_failure(done: Future[None]) -> None:
    """Log a background refresh that failed (nobody reads its Future): the
    page keeps the last profile and the next offer retries."""
    err = None if done.cancelled() else done.exception()
    if err is not None:
        _LOG.warning(
            "profiling the run so far failed (%s: %s); the page keeps the last "
            "profile and tries again",
            type(err).__name__,
            err,
        )
