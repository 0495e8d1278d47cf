"""The summaries store of a live trace: closed windows and a checkpoint.

Layout under a trace directory (hidden, so trace readers skip it)::

    TRACE_DIR/.sparktrail/store/
        checkpoint.json            what the online pipeline has consumed
        windows/<ts>/<frame>.parquet   one directory per closed window

A window's directory holds its CP rows (``cp``) and every frame of its
:class:`~sparktrail.summaries.Summaries` (:data:`WINDOW_FRAMES`). It is
written under a hidden temporary name and renamed into place, so a reader
sees a window whole or not at all; the checkpoint is written (the same way)
after the windows it counts.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from .model import Summaries

__all__ = [
    "STORE_DIR",
    "SUMMARY_FRAMES",
    "WINDOW_FRAMES",
    "StoredWindow",
    "WindowStore",
    "store_dir",
]

#: Store location relative to the trace directory.
STORE_DIR = Path(".sparktrail") / "store"
#: Frames of :class:`Summaries`, in the order ``sparktrail profile`` writes them.
SUMMARY_FRAMES = (
    "activity",
    "activity_by_window",
    "straggler",
    "executor",
    "operator",
    "communication",
    "hints",
    "windows",
)
#: Files of one window's directory: its CP rows, then the summary frames.
WINDOW_FRAMES = ("cp", *SUMMARY_FRAMES)
CHECKPOINT = "checkpoint.json"


def store_dir(trace_dir: str | os.PathLike[str]) -> Path:
    """The store directory of a trace directory.

    >>> store_dir("/data/trace").as_posix()
    '/data/trace/.sparktrail/store'
    """
    return Path(trace_dir) / STORE_DIR


@dataclass(frozen=True)
class StoredWindow:
    """One closed window: its bounds, CP rows and summaries."""

    start_ns: int
    end_ns: int
    cp: pl.DataFrame
    summaries: Summaries


def _replace_atomically(temporary: Path, target: Path) -> None:
    if target.exists():  # a window rewritten after a crash before the checkpoint
        shutil.rmtree(target)
    os.replace(temporary, target)


class WindowStore:
    """Read and write the closed windows and the checkpoint of one store.

    Parameters
    ----------
    root
        The store directory (see :func:`store_dir`); created on first write.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.windows_dir = self.root / "windows"

    def write_window(self, window: StoredWindow) -> Path:
        """Write ``window`` atomically; returns its directory."""
        self.windows_dir.mkdir(parents=True, exist_ok=True)
        target = self.windows_dir / str(window.start_ns)
        temporary = self.windows_dir / f".{window.start_ns}.{os.getpid()}.tmp"
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir()
        try:
            window.cp.write_parquet(temporary / "cp.parquet")
            for name in SUMMARY_FRAMES:
                frame: pl.DataFrame = getattr(window.summaries, name)
                frame.write_parquet(temporary / f"{name}.parquet")
            _replace_atomically(temporary, target)
        finally:
            shutil.rmtree(temporary, ignore_errors=True)
        return target

    def window_starts(self) -> list[int]:
        """Start times of the windows in the store, in time order."""
        if not self.windows_dir.is_dir():
            return []
        starts = []
        for entry in self.windows_dir.iterdir():
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            try:
                starts.append(int(entry.name))
            except ValueError:
                continue
        return sorted(starts)

    def read_window(self, start_ns: int, window_ns: int) -> StoredWindow:
        """Read the window starting at ``start_ns`` (``window_ns`` long)."""
        folder = self.windows_dir / str(start_ns)
        frames = {
            name: pl.read_parquet(folder / f"{name}.parquet") for name in WINDOW_FRAMES
        }
        cp = frames.pop("cp")
        return StoredWindow(
            start_ns=start_ns,
            end_ns=start_ns + window_ns,
            cp=cp,
            summaries=Summaries(**frames, window_ns=window_ns, origin_ns=start_ns),
        )

    def read_checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint as a dict, or ``None`` when there is none yet."""
        path = self.root / CHECKPOINT
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data: dict[str, Any] = json.loads(text)
        except ValueError as err:
            raise ValueError(f"{path}: not a sparktrail checkpoint ({err})") from err
        return data

    def write_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Write the checkpoint atomically (temporary name, then rename)."""
        self.root.mkdir(parents=True, exist_ok=True)
        target = self.root / CHECKPOINT
        temporary = self.root / f".{CHECKPOINT}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(checkpoint, indent=1), encoding="utf-8")
        os.replace(temporary, target)
