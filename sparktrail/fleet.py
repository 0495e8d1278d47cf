"""A fleet view: every application of an event-log directory, profiled once.

:func:`scan` takes a History Server's log directory
(``spark.history.fs.logDirectory``, local or a URI such as
``s3://bucket/spark-events/``), finds its event logs (:func:`find_logs`:
each entry a log file or a log directory; folders that are neither are
searched, a few levels deep), and profiles each one in a process pool of
``jobs`` workers (each worker holds one log at a time, so memory stays
within ``jobs`` logs' worth). Each application's profile, report and row
live in the cache under ``out``::

    out/index.html                    the fleet page (dashboard/fleet_page.py)
    out/apps/<name>-<hash>/entry.json the log, its size and mtime, its row
    out/apps/<name>-<hash>/report.html
    out/apps/<name>-<hash>/summaries/ (Profile.save)

A log is profiled again only when its path, total size or newest
modification time changed (an in-progress log grows; a new log is new).
One that cannot be imported or profiled becomes a row with its error,
cached the same way, so one bad log never stops a scan; a worker that
dies (out of memory) gives a row that is retried on the next scan.
Entries of logs no longer in the directory are removed.
"""

from __future__ import annotations

import concurrent.futures as futures
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparktrail.tracer.eventlog import (
    EventLogError,
    LogPath,
    SeveralLogsError,
    resolve,
)
from sparktrail.tracer.remote import RemotePath, log_name, log_path

__all__ = ["APPS_DIR", "ENTRY_FILE", "NOT_A_LOG", "FleetScan", "find_logs", "scan"]

#: The cache's folder of applications, and each one's record in it.
APPS_DIR = "apps"
ENTRY_FILE = "entry.json"
#: How deep :func:`find_logs` looks into folders that are not logs.
MAX_DEPTH = 3
ENTRY_FORMAT = 1


#: A row's ``error_kind`` for a file with no Spark event in it.
NOT_A_LOG = "not_a_log"


@dataclass
class FleetScan:
    """What one :func:`scan` found and did.

    Attributes
    ----------
    rows
        One row per application (:func:`~sparktrail.dashboard.fleet_page.
        fleet_row`, plus ``log`` and ``error``), ranked by what can be saved.
    page
        The fleet page written.
    profiled
        Logs profiled by this scan (new or changed).
    reused
        Logs whose cached row was kept (unchanged).
    failed
        Rows with an error.
    skipped
        Files that hold no Spark event: not applications, not in ``rows``.
    """

    rows: list[dict[str, Any]]
    page: Path
    profiled: int = 0
    reused: int = 0
    failed: int = 0
    skipped: int = 0
    profiled_logs: list[str] = field(default_factory=list)


def find_logs(
    root: str | os.PathLike[str] | RemotePath, skip: Path | None = None
) -> list[LogPath]:
    """The event logs in a log directory, sorted by name.

    Each entry is a log file or a log directory (rolling ``eventlog_v2_*``,
    Spark 1.x, Databricks); a folder that is neither is searched, up to
    :data:`MAX_DEPTH` levels. Hidden entries, README files and ``skip``
    (the cache, when it lies inside ``root``) are left out.
    """
    top = log_path(root)
    if not top.exists():
        raise FileNotFoundError(f"{top}: no such event-log directory")
    if not top.is_dir():
        raise NotADirectoryError(
            f"{top}: not a directory; `sparktrail history` takes a folder of "
            "event logs (use `sparktrail profile` for one log)"
        )
    found: list[LogPath] = []
    skipped = skip.resolve() if skip is not None else None

    def walk(folder: LogPath, depth: int) -> None:
        children: list[LogPath] = list(folder.iterdir())
        for child in sorted(children, key=lambda p: p.name):
            name = child.name
            if name.startswith(".") or name.lower().startswith("readme"):
                continue
            if isinstance(child, Path) and child.resolve() == skipped:
                continue
            if child.is_dir():
                try:
                    resolve(child)
                except SeveralLogsError:
                    if depth < MAX_DEPTH:
                        walk(child, depth + 1)
                except EventLogError:
                    if depth < MAX_DEPTH:
                        walk(child, depth + 1)
                else:
                    found.append(child)
            elif child.is_file():
                found.append(child)

    walk(top, 0)
    return found


def _signature(log: LogPath) -> tuple[int, float]:
    """``(total size, newest mtime)`` of a log's files."""
    try:
        files = resolve(log).files
    except (EventLogError, OSError):
        files = [log]
    size, mtime = 0, 0.0
    for file in files:
        stat = file.stat()
        size += int(stat.st_size)
        mtime = max(mtime, float(stat.st_mtime))
    return size, mtime


def _folder_name(log: str) -> str:
    """A cache folder name for a log: its name, made safe, and a hash of
    its whole path (two logs of one name in different folders differ).

    >>> _folder_name("s3://b/logs/app-1.zstd")[:10]
    'app-1.zstd'
    """
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", log_name(log))[:80] or "log"
    return f"{safe}-{hashlib.sha1(log.encode()).hexdigest()[:10]}"


def profile_log(log: str, folder: str, window: int | str) -> dict[str, Any]:
    """Profile one log into ``folder`` (profile, report); its fleet row.

    Runs in a worker process. Never raises: an error is the row's
    ``error`` (``kind`` says whether it is the log's or the machine's).
    """
    from sparktrail.dashboard.fleet_page import fleet_row
    from sparktrail.dashboard.report import write_report
    from sparktrail.engines.profiler import REPORT_FILE, profile
    from sparktrail.errors import InputError
    from sparktrail.sources import no_rows
    from sparktrail.tracer import import_trace
    from sparktrail.tracer.eventlog import NotAnEventLog

    try:
        # What a log lacks shows in its report; a scan of hundreds of logs
        # would drown in their warnings.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = import_trace(log, progress=False)
            if trace.frame.is_empty():
                raise no_rows(log)
            result = profile(trace, window, name=log_name(log))
            result.save(folder)
            write_report(result, folder)
        report = f"{APPS_DIR}/{Path(folder).name}/{REPORT_FILE}"
        row = fleet_row(result, report)
    except NotAnEventLog as err:
        return _error_row(log, _one_line(err), NOT_A_LOG)
    except (InputError, OSError, UnicodeError) as err:
        return _error_row(log, _one_line(err), "input")
    except Exception as err:  # a bug on one log must not stop the scan
        message = f"internal error ({type(err).__name__}: {_one_line(err)})"
        return _error_row(log, message, "internal")
    row["log"] = log
    row["error"] = None
    return row


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _read_entry(folder: Path) -> dict[str, Any] | None:
    try:
        entry = json.loads((folder / ENTRY_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != ENTRY_FORMAT:
        return None
    return entry


def _write_entry(folder: Path, entry: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".{ENTRY_FILE}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(entry, indent=2) + "\n")
    os.replace(temporary, folder / ENTRY_FILE)


def _error_row(log: str, message: str, kind: str) -> dict[str, Any]:
    """The row of a log that could not be profiled: every key, the log's
    name, its error and whose the error is (``input``, ``internal``,
    ``worker``: the process died, retried on the next scan; or
    :data:`NOT_A_LOG`: no Spark event in it, skipped)."""
    from sparktrail.dashboard.fleet_page import ROW_KEYS

    row: dict[str, Any] = dict.fromkeys(ROW_KEYS)
    row["name"] = log_name(log)
    return {**row, "log": log, "error": message, "error_kind": kind}


def scan(
    root: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    jobs: int = 2,
    window: int | str = 1_000_000_000,
    on_log: Callable[[str, dict[str, Any]], None] | None = None,
) -> FleetScan:
    """Profile the new and changed logs of ``root`` into ``out``; write the
    fleet page. See the module docstring.

    Parameters
    ----------
    root
        A log directory, local or a URI.
    out
        The cache and page folder (created if missing).
    jobs
        Worker processes (each profiles one log at a time).
    window
        The profiles' window length (ns) or ``"batch"``.
    on_log
        Called with each log profiled by this scan and its row.
    """
    from sparktrail.dashboard.fleet_page import rank_rows, write_fleet_page

    out_dir = Path(out)
    apps = out_dir / APPS_DIR
    logs = find_logs(root, skip=out_dir)
    rows: dict[str, dict[str, Any]] = {}
    todo: dict[str, tuple[Path, int, float]] = {}
    for log in logs:
        uri = str(log.resolve()) if isinstance(log, Path) else str(log)
        folder = apps / _folder_name(uri)
        size, mtime = _signature(log)
        entry = _read_entry(folder)
        if (
            entry is not None
            and entry.get("log") == uri
            and entry.get("size") == size
            and entry.get("mtime") == mtime
        ):
            rows[uri] = entry["row"]
        else:
            todo[uri] = (folder, size, mtime)
    result = FleetScan([], out_dir, reused=len(rows))
    if todo:
        for uri, row in _run_pool(todo, jobs, window):
            folder, size, mtime = todo[uri]
            rows[uri] = row
            result.profiled += 1
            result.profiled_logs.append(uri)
            if row.get("error_kind") != "worker":  # a dead worker: retry next scan
                entry = {"format": ENTRY_FORMAT, "log": uri, "size": size}
                _write_entry(folder, {**entry, "mtime": mtime, "row": row})
            if on_log is not None:
                on_log(uri, row)
    _prune(apps, {_folder_name(uri) for uri in rows})
    skipped = {uri for uri, row in rows.items() if row.get("error_kind") == NOT_A_LOG}
    result.skipped = len(skipped)
    result.profiled -= len(skipped & set(result.profiled_logs))
    result.reused -= len(skipped - set(result.profiled_logs))
    ranked = rank_rows([row for uri, row in rows.items() if uri not in skipped])
    result.rows = ranked
    result.failed = sum(1 for row in ranked if row.get("error"))
    result.page = write_fleet_page(ranked, out_dir, title=str(log_path(root)))
    return result


def _run_pool(
    todo: dict[str, tuple[Path, int, float]], jobs: int, window: int | str
) -> list[tuple[str, dict[str, Any]]]:
    """Profile each log of ``todo`` in a pool of ``jobs`` worker processes."""
    done: list[tuple[str, dict[str, Any]]] = []
    # spawn: a forked child of a process that ran polars or numba threads
    # can deadlock; a fresh interpreter cannot.
    context = multiprocessing.get_context("spawn")
    workers = max(1, min(jobs, len(todo)))
    with futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        submitted = {
            pool.submit(profile_log, uri, str(folder), window): uri
            for uri, (folder, _, _) in todo.items()
        }
        for future in futures.as_completed(submitted):
            uri = submitted[future]
            try:
                row = future.result()
            except Exception as err:  # BrokenProcessPool: the worker died
                died = f"the worker profiling it died ({type(err).__name__}: {err})"
                row = _error_row(uri, died, "worker")
            done.append((uri, row))
    return done


def _prune(apps: Path, keep: set[str]) -> None:
    """Remove the cache entries of logs that are gone."""
    if not apps.is_dir():
        return
    for folder in apps.iterdir():
        if folder.name not in keep and (folder / ENTRY_FILE).is_file():
            shutil.rmtree(folder, ignore_errors=True)
