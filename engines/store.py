"""The summaries store of a live trace: closed windows and a checkpoint.

Layout under a trace directory (hidden, so trace readers skip it)::

    TRACE_DIR/.sparktrail/store/
        checkpoint.json            what the online pipeline has consumed
        .lock                      held by the one process that writes
        windows/<ts>/                  one directory per closed window
            cp.feather                 its CP rows (an Arrow IPC file, LZ4)
            summaries.arrows           every summary frame, in one file

A window's directory holds its CP rows (``cp``) and every frame of its
:class:`~sparktrail.summaries.Summaries` (:data:`WINDOW_FRAMES`; the
files are :data:`WINDOW_FILES`, read with :meth:`WindowStore.read_window`
and :meth:`WindowStore.read_frame`). A store written before the frames
were bundled (a Parquet file per frame), or with its CP rows as
``cp.parquet``, still reads.

Crash consistency
-----------------
The store is meant to survive its writer being killed (``kill -9``) at any
instruction:

* A window is written under a hidden temporary name and renamed into
  place, so a reader sees it whole or not at all; a window is written once
  and never replaced (:meth:`WindowStore.write_window` refuses). Its CP
  rows are written by a background thread (:class:`WindowWrite`), and the
  rename waits for them.
* The checkpoint is written the same way, so it is always one whole
  checkpoint, the old one or the new one.
* Temporaries of a killed writer stay behind;
  :meth:`WindowStore.remove_temporaries` removes them on restart.
* One process writes a store at a time (:meth:`WindowStore.lock`), so a
  writer that starts may take every temporary for a dead one's.

The order of the writes, and how a restart reads them, is the online
pipeline's (:mod:`~sparktrail.engines.online`, "Restart"). Nothing is
flushed to disk (``fsync``): the store survives its process, not the
machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from sparktrail.errors import InputError
from sparktrail.summaries.frames import SUMMARY_FRAMES
from sparktrail.summaries.result import (
    BUNDLE_FILE,
    Summaries,
    load_frame,
    saved_window,
)

from .threads import background

__all__ = [
    "CP_FILE",
    "PARQUET_CP_FILE",
    "STORE_DIR",
    "SUMMARY_FRAMES",
    "WINDOW_FILES",
    "WINDOW_FRAMES",
    "StoredWindow",
    "WindowStore",
    "WindowWrite",
    "store_dir",
]

#: Store location relative to the trace directory.
STORE_DIR = Path(".sparktrail") / "store"
#: Files of one window's directory: its CP rows, then the summary frames
#: (:data:`~sparktrail.summaries.frames.SUMMARY_FRAMES`, written and read
#: by :meth:`Summaries.save` and :meth:`Summaries.load`).
WINDOW_FRAMES = ("cp", *SUMMARY_FRAMES)
#: A window's CP rows: an Arrow IPC file, LZ4-compressed, not named
#: ``.arrow`` (the trace files' suffix, which tools may glob for). For a
#: window of 30,000 rows it takes 2.7 ms to write (:func:`_write_cp`)
#: against 6.5 ms as LZ4 Parquet, and is 15% larger (0.74 against 0.64 MB).
CP_FILE = "cp.feather"
#: Where stores written before held a window's CP rows.
PARQUET_CP_FILE = "cp.parquet"
#: The files of one window's directory.
WINDOW_FILES = (CP_FILE, BUNDLE_FILE)
CHECKPOINT = "checkpoint.json"
LOCK = ".lock"
TEMPORARY = ".tmp"  # suffix of the hidden names things are written under


def _write_cp(path: Path, cp: pl.DataFrame) -> None:
    """Write a window's CP rows to ``path`` as an LZ4 Arrow IPC file.

    With pyarrow's writer and polars' own string views: 2.7 ms on a window
    of 30,000 rows, against 4.2 ms with polars' ``write_ipc``. Compressed
    on the calling thread (the store's background one): pyarrow's own pool
    keeps the mask of whichever thread started it, which may have been a
    poll pinned to one core (:mod:`~sparktrail.engines.threads`).
    """
    table = cp.to_arrow(compat_level=pl.CompatLevel.newest())
    options = ipc.IpcWriteOptions(compression="lz4", use_threads=False)
    with (
        pa.OSFile(str(path), "wb") as sink,
        ipc.new_file(sink, table.schema, options=options) as writer,
    ):
        writer.write_table(table)


def _read_cp(folder: Path) -> pl.DataFrame:
    """A stored window's CP rows, from either file they were written to."""
    path, before = folder / CP_FILE, folder / PARQUET_CP_FILE
    if not path.is_file() and before.is_file():
        return pl.read_parquet(before)
    return pl.read_ipc(path)  # FileNotFoundError names the file of today


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


def _temporary(folder: Path, name: str) -> Path:
    return folder / f".{name}.{os.getpid()}{TEMPORARY}"


def _rename(source: Path, target: Path) -> None:
    """Rename atomically; the one step that makes a write visible."""
    os.replace(source, target)


def _background() -> ThreadPoolExecutor:
    """The one thread that writes CP rows (:meth:`WindowStore.begin_window`)."""
    return background("sparktrail-store")


class WindowWrite:
    """A window being written (:meth:`WindowStore.begin_window`).

    Its CP rows are being written under the window's hidden temporary name
    by a background thread; :meth:`finish` writes the summaries beside
    them, waits for the CP rows and renames the window into place. Left as
    a context manager without :meth:`finish` (an error while computing the
    summaries), it waits for the CP rows and removes the temporary.

    Why: on the online pipeline's windows of 30,000 rows, the CP rows
    (2.7 ms to write) are then written while the summaries are computed, on
    the core the computation leaves free: a live poll took 58 instead of
    62 ms (medians of 8 runs of 20 files, alternating, written inline or in
    the background).
    """

    def __init__(self, temporary: Path, target: Path, cp_written: Future[None]) -> None:
        self._temporary = temporary
        self._target = target
        self._cp_written = cp_written

    def finish(self, summaries: Summaries) -> Path:
        """Write ``summaries`` and make the window visible; returns its directory.

        Raises
        ------
        OSError
            Also when writing the CP rows failed (raised here).
        """
        summaries.save(self._temporary, fast=True)
        self._cp_written.result()
        _rename(self._temporary, self._target)
        return self._target

    def __enter__(self) -> WindowWrite:
        return self

    def __exit__(self, *exc: object) -> None:
        # The CP rows' thread may still be writing into the temporary.
        with contextlib.suppress(Exception):
            self._cp_written.result()
        shutil.rmtree(self._temporary, ignore_errors=True)


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
        self._lock: IO[str] | None = None

    # -- the writer --------------------------------------------------------

    def lock(self) -> None:
        """Become the store's one writer, creating the store if need be.

        The lock is a POSIX record lock on ``.lock``: the kernel drops it
        when the process ends, however it ends. It belongs to the process:
        several stores on one directory in one process share it, and the
        first of them to be closed (garbage-collected) drops it, so a
        process should keep one writer per store.

        Raises
        ------
        ValueError
            If another process holds the lock.
        """
        if self._lock is not None:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.root / LOCK, "a+", encoding="utf-8")  # noqa: SIM115
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise InputError(
                f"{self.root} is being written by another process (pid {holder}); "
                "stop it first"
            ) from err
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock = handle

    def remove_temporaries(self) -> int:
        """Remove what a killed writer left half-written; returns how many.

        Takes the lock first, so no live writer's temporaries are removed.
        """
        if not self.root.is_dir():
            return 0
        self.lock()
        found = [
            path
            for folder in (self.root, self.windows_dir)
            if folder.is_dir()
            for path in folder.iterdir()
            if path.name.startswith(".") and path.name.endswith(TEMPORARY)
        ]
        for path in found:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        return len(found)

    def write_window(self, window: StoredWindow) -> Path:
        """Write ``window`` atomically; returns its directory.

        Raises
        ------
        FileExistsError
            If the store holds that window already (windows are written once).
        """
        with self.begin_window(window.start_ns, window.cp) as write:
            return write.finish(window.summaries)

    def begin_window(self, start_ns: int, cp: pl.DataFrame) -> WindowWrite:
        """Start writing the window at ``start_ns``: its CP rows are written
        by a background thread while the caller computes its summaries,
        which :meth:`WindowWrite.finish` writes before the window is renamed
        into place (use the result as a context manager: leaving it without
        ``finish`` drops the window).

        Raises
        ------
        FileExistsError
            If the store holds that window already (windows are written once).
        """
        self.lock()
        self.windows_dir.mkdir(parents=True, exist_ok=True)
        target = self.windows_dir / str(start_ns)
        if target.exists():
            raise FileExistsError(f"{target}: the window is stored already")
        temporary = _temporary(self.windows_dir, str(start_ns))
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir()
        return WindowWrite(
            temporary, target, _background().submit(_write_cp, temporary / CP_FILE, cp)
        )

    def remove_window(self, start_ns: int) -> None:
        """Remove a stored window; readers see it whole until it is gone."""
        self.lock()
        target = self.windows_dir / str(start_ns)
        hidden = _temporary(self.windows_dir, str(start_ns))
        shutil.rmtree(hidden, ignore_errors=True)
        _rename(target, hidden)
        shutil.rmtree(hidden)

    def write_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        """Write the checkpoint atomically (temporary name, then rename).

        ``checkpoint`` is JSON-ready data, or its JSON text already.
        """
        self.lock()
        target = self.checkpoint_path
        temporary = _temporary(self.root, CHECKPOINT)
        # Compact: json's C encoder (indented, it runs in Python), and the
        # checkpoint lists every file read, thousands in a long run.
        text = checkpoint if isinstance(checkpoint, str) else json.dumps(checkpoint)
        temporary.write_text(text, encoding="utf-8")
        _rename(temporary, target)

    # -- readers -----------------------------------------------------------

    def has_window(self, start_ns: int) -> bool:
        """Whether the window starting at ``start_ns`` is stored."""
        return (self.windows_dir / str(start_ns)).is_dir()

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

    def read_window(self, start_ns: int, window_ns: int | None = None) -> StoredWindow:
        """Read the window starting at ``start_ns``.

        ``window_ns`` is its length; by default the length it was stored
        with (windows of ``--window batch`` differ in length).
        """
        folder = self.windows_dir / str(start_ns)
        summaries = Summaries.load(folder, window_ns=window_ns, origin_ns=start_ns)
        return StoredWindow(
            start_ns=start_ns,
            end_ns=start_ns + summaries.window_ns,
            cp=_read_cp(folder),
            summaries=summaries,
        )

    def read_frame(self, start_ns: int, name: str) -> pl.DataFrame:
        """The frame ``name`` (of :data:`WINDOW_FRAMES`) of a stored window,
        alone.

        Raises
        ------
        FileNotFoundError
            If there is no such window, or it holds no such frame.
        """
        folder = self.windows_dir / str(start_ns)
        if name == "cp":
            return _read_cp(folder)
        return load_frame(folder, name)

    def window_end(self, start_ns: int) -> int:
        """The end of the stored window starting at ``start_ns``.

        Reads only what the window was stored with, not its frames.
        """
        folder = self.windows_dir / str(start_ns)
        return start_ns + saved_window(folder)[0]

    @property
    def checkpoint_path(self) -> Path:
        """The live engines' checkpoint file (:mod:`~sparktrail.engines.checkpoint`)."""
        return self.root / CHECKPOINT

    def read_checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint as a dict, or ``None`` when there is none yet."""
        path = self.checkpoint_path
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data: dict[str, Any] = json.loads(text)
        except ValueError as err:
            raise InputError(f"{path}: not a sparktrail checkpoint ({err})") from err
        return data
