"""The live engines' buffer: the trace rows of windows not closed yet.

The polars live engine (:class:`~sparktrail.engines.online.OnlinePipeline`)
keeps them in memory as :class:`OpenRows`, one part per trace file; the
Spark one (:class:`~sparktrail.engines.spark_live.SparkLivePipeline`)
stages them as Parquet, one folder per micro-batch. Both drop a part once
the windows are closed up to past its last event (:func:`still_open`), and
both number a row by its position in the files in the order consumed
(:data:`ROW`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from sparktrail.pag.windows import first_event, last_event

__all__ = ["ROW", "OpenRows", "Part", "WindowBuckets", "still_open"]

ROW = "_row"  # global row number, carried through as an extra trace column


def still_open(last_ns: int, closed_until: int | None) -> bool:
    """Whether rows whose last event is ``last_ns`` may touch a window not
    closed yet (the windows are closed up to ``closed_until``).

    >>> still_open(10, None), still_open(10, 10), still_open(9, 10)
    (True, True, False)
    """
    return closed_until is None or last_ns >= closed_until


@dataclass(frozen=True)
class Part:
    """One file's buffered rows, their first event (a lower bound once
    filtered) and the range of their last events."""

    rows: pl.DataFrame
    starts_from: int
    ends_from: int
    ends_to: int

    def ending_from(self, until: int) -> Part | None:
        """The rows ending at or after ``until`` (None: no row does).

        Only a file whose rows straddle ``until`` is filtered: the buffer
        was one frame, and filtering all of it after each close copied
        every column of some 90,000 rows (3 ms a poll at 30,000 rows/s).
        """
        if self.ends_from >= until:
            return self
        if not still_open(self.ends_to, until):
            return None
        rest = self.rows.filter(last_event >= until)
        return (
            Part(rest, self.starts_from, until, self.ends_to) if rest.height else None
        )


def stacked(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Buffered files' rows one after another, as chunks (not copied)."""
    return pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]


class WindowBuckets:
    """The buffered rows cut once by window, for a close of several windows.

    A pipeline that fell behind closes many windows in one poll; filtering
    the whole buffer for each of them took time quadratic in the backlog.
    :meth:`around` gives a superset of the rows touching a window (those
    whose first and last events lie in windows around it), in buffer order,
    which :func:`~sparktrail.pag.chunk_cp.chunk_cp` then filters exactly.
    Only row numbers are bucketed: a window's rows are gathered when it is
    closed (cutting copies of every column took 55 ms for 8 windows of
    30,000 rows, a third of the poll's time outside the windows' own work).
    """

    def __init__(self, rows: pl.DataFrame, window_ns: int) -> None:
        self.window_ns = window_ns
        self._rows = rows
        ends = rows.select(
            (first_event // window_ns).alias("first"),
            (last_event // window_ns).alias("last"),
        )
        first, last = ends["first"].to_numpy(), ends["last"].to_numpy()
        # Most rows are shorter than a window: one bucket each, by window
        # and then buffer order (a stable sort).
        short = np.flatnonzero(first == last)
        by_window = np.argsort(first[short], kind="stable")
        self._short = short[by_window]
        self._short_window = first[short][by_window]
        self._long = np.flatnonzero(first != last)
        self._long_first, self._long_last = first[self._long], last[self._long]

    def around(self, ts: int) -> pl.DataFrame:
        """Rows whose events lie around the window starting at ``ts``.

        Every row touching ``[ts, ts + window_ns)`` is among them (its
        first event is at most the window's end, its last at least its
        start), in the buffer's order.
        """
        k = ts // self.window_ns
        lo, hi = np.searchsorted(self._short_window, [k, k + 1])
        picked = self._short[lo:hi]
        spanning = self._long[(self._long_first <= k) & (self._long_last >= k)]
        if spanning.size:
            picked = np.sort(np.concatenate([picked, spanning]))
        return self._rows[picked]


class OpenRows:
    """The buffered rows, one :class:`Part` per file, and their concatenation
    (chunks, not copied) while no part changes."""

    def __init__(self) -> None:
        self._parts: list[Part] = []
        self._rows: pl.DataFrame | None = None

    def add(self, part: Part | None) -> None:
        """Buffer a file's rows (``None``: none of them is still open)."""
        if part is not None:
            self._parts.append(part)
            self._rows = None

    def rows(self) -> pl.DataFrame | None:
        """The buffered rows (None: none), the parts' chunks concatenated."""
        if self._rows is None and self._parts:
            self._rows = stacked([part.rows for part in self._parts])
        return self._rows

    def __len__(self) -> int:
        rows = self.rows()
        return 0 if rows is None else len(rows)

    def before(self, until: int) -> pl.DataFrame:
        """The buffered rows of the files with an event before ``until``.

        A row whose first event is at ``until`` or later touches no window
        before it: the files of the lateness are left out, not filtered
        (two thirds of the buffer at 30,000 rows/s and 2 s of lateness).
        """
        frames = [part.rows for part in self._parts if part.starts_from < until]
        if not frames:
            return pl.DataFrame()
        if len(frames) < len(self._parts):
            return stacked(frames)
        whole = self.rows()  # every part: the concatenation kept
        assert whole is not None
        return whole

    def drop_closed(self, until: int) -> None:
        """Drop the buffered rows that end before ``until``."""
        parts = (part.ending_from(until) for part in self._parts)
        self._parts = [part for part in parts if part is not None]
        self._rows = None
