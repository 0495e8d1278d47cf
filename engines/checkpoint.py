"""The live engines' checkpoint: the fields both write, and the checks on reading.

Both live engines keep their state in the store's checkpoint file
(:data:`~sparktrail.engines.store.CHECKPOINT`, written and read by
:meth:`~sparktrail.engines.store.WindowStore.write_checkpoint` and
:meth:`~sparktrail.engines.store.WindowStore.read_checkpoint`).
:class:`PipelineCounters` holds what they keep alike (the window, the
lateness, the event range seen, the end of the closed windows and the
counters) and writes and reads those fields; each engine adds what it read
(files, or Spark's micro-batches) and gives its own ``version``, so that
each refuses the other's store (:func:`check_checkpoint`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparktrail.errors import InputError

from .engine_choice import MICRO_BATCHES
from .watermark import open_from, watermark

__all__ = ["PipelineCounters", "check_checkpoint", "windows_text"]


def windows_text(window_ns: object) -> str:
    """What a checkpoint's ``window_ns`` means, for a message.

    >>> windows_text(1_000_000_000), windows_text("batch")
    ('windows of 1000000000 ns', 'a window per micro-batch')
    """
    if window_ns == MICRO_BATCHES:
        return "a window per micro-batch"
    return f"windows of {window_ns} ns"


def _engine(version: object) -> str:
    """The engine a checkpoint version belongs to (the Spark engine's say so)."""
    return "spark" if str(version).startswith("spark") else "polars"


def check_checkpoint(
    data: dict[str, Any], path: Path, version: int | str, window_ns: int | str
) -> None:
    """Refuse a checkpoint this engine cannot continue from.

    Raises
    ------
    InputError
        If it was written by the other engine, has an unknown version, or
        holds other windows than ``window_ns``: each names the file and says
        to remove the store (the checkpoint's folder) to start afresh.

    >>> try:
    ...     check_checkpoint({"version": 1, "window_ns": 5}, Path("c"), "spark-1", 5)
    ... except InputError as err:
    ...     print(err)
    c: written by the polars engine (version 1); use --engine polars or remove .
    """
    root = path.parent
    found = data.get("version")
    if found != version:
        theirs = _engine(found)
        if theirs != _engine(version):
            raise InputError(
                f"{path}: written by the {theirs} engine (version {found!r}); "
                f"use --engine {theirs} or remove {root}"
            )
        raise InputError(f"{path}: unknown checkpoint version {found}")
    if data["window_ns"] != window_ns:
        raise InputError(
            f"{path}: the store holds {windows_text(data['window_ns'])}, not "
            f"{windows_text(window_ns)}; use that window or remove {root}"
        )


class PipelineCounters:
    """What both live engines keep and report the same way (see their
    ``__init__``), and its checkpoint fields."""

    window_ns: int | str  # ns, or MICRO_BATCHES (polars engine only)
    lateness_ns: int
    late_rows: int
    failed_windows: int
    _corrupt: dict[str, Any]  # unreadable file -> what marks it (its size)
    _closed_until: int | None
    _first: int | None
    _last: int | None
    _next_row: int

    @property
    def corrupt_files(self) -> int:
        """How many trace files were skipped as unreadable."""
        return len(self._corrupt)

    @property
    def closed_until_ns(self) -> int | None:
        """End of the last closed window (every window before it is closed)."""
        return self._closed_until

    @property
    def watermark_ns(self) -> int | None:
        """Latest event time seen minus the lateness (None before any row)."""
        return watermark(self._last, self.lateness_ns)

    @property
    def rows_read(self) -> int:
        """Trace rows read so far (over restarts: the checkpoint counts them)."""
        return self._next_row

    @property
    def fixed_ns(self) -> int | None:
        """The fixed window length, or ``None`` for micro-batch windows."""
        return None if self.window_ns == MICRO_BATCHES else int(self.window_ns)

    def _open_from(self) -> int:
        """Start of the first window not closed yet (once a row was read)."""
        assert self._first is not None or self._closed_until is not None
        return open_from(self._closed_until, self._first or 0, self.fixed_ns)

    def _observe(self, first: int, last: int) -> None:
        """Widen the event range seen to a new file's ``first .. last``."""
        self._first = first if self._first is None else min(self._first, first)
        self._last = last if self._last is None else max(self._last, last)

    def _checkpoint_fields(self, version: int | str) -> dict[str, Any]:
        """The checkpoint fields both engines write alike (each adds what
        it read: files, or Spark's micro-batches)."""
        return {
            "version": version,
            "window_ns": self.window_ns,
            "lateness_ns": self.lateness_ns,
            "closed_until_ns": self._closed_until,
            "first_event_ns": self._first,
            "last_event_ns": self._last,
            "next_row": self._next_row,
            "late_rows": self.late_rows,
            "failed_windows": self.failed_windows,
            "corrupt": self._corrupt,
        }

    def _load_checkpoint_fields(self, data: dict[str, Any]) -> None:
        """Take a checkpoint's :meth:`_checkpoint_fields` back (once
        :func:`check_checkpoint` passed)."""
        self._corrupt = dict(data["corrupt"])
        self._next_row = int(data["next_row"])
        self._first = data["first_event_ns"]
        self._last = data["last_event_ns"]
        self._closed_until = data["closed_until_ns"]
        self.late_rows = int(data["late_rows"])
        self.failed_windows = int(data["failed_windows"])
