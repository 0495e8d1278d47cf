"""What a user hands sparktrail, recognised in one place.

An input is a trace (an ``*.arrow`` file, a directory of them, or a trace
directory holding only the listener's raw log under ``raw/``), a Spark
event log (a file in any codec, a rolling or Spark 1.x log directory, or a
URI read through fsspec), or a profile folder that ``sparktrail profile``
wrote. Every subcommand and the Python API read inputs through
:func:`open_trace`, :func:`is_profile_folder` and :func:`open_profile`, so
a bad input gets the same one-line error everywhere (``InputError``, exit
code 2 on the command line).

This module sits above the stages (it imports the tracer and the engines,
which no stage below may import together), beside :mod:`sparktrail.fleet`.

Assumptions
-----------
* A file is a trace when its name ends in ``.arrow`` or it starts with the
  Arrow IPC magic bytes; anything else that exists is tried as an event log.
* A directory with a profile's ``meta.json`` or ``summaries/`` is a profile
  folder: it is loaded, never profiled again.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktrail.errors import InputError
from sparktrail.tracer.remote import is_uri, log_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from sparktrail.engines.profiler import Profile
    from sparktrail.pag.trace import Trace
    from sparktrail.summaries import HintOptions

__all__ = [
    "DEFAULT_WINDOW_NS",
    "EXPECTED",
    "is_profile_folder",
    "no_rows",
    "open_profile",
    "open_trace",
    "profile",
]

#: What an input may be, for error messages.
EXPECTED = "expected a trace (*.arrow file or directory) or a Spark event log"
#: The first bytes of an Arrow IPC file.
ARROW_MAGIC = b"ARROW1"
#: The window length when none is given (the command line's ``--window 1s``).
DEFAULT_WINDOW_NS = 10**9


def no_rows(source: object) -> InputError:
    """The one error for an input whose trace holds no rows.

    >>> str(no_rows("app.log"))
    'app.log: the trace holds no rows'
    """
    return InputError(f"{source}: the trace holds no rows")


def _is_arrow(path: Path) -> bool:
    from sparktrail.pag.trace import TRACE_SUFFIX

    if path.suffix == TRACE_SUFFIX:
        return True
    with path.open("rb") as handle:
        return handle.read(len(ARROW_MAGIC)) == ARROW_MAGIC


def _import(path: Path | str) -> Trace:
    from sparktrail.tracer import EventLogError, EventLogWarning, import_trace
    from sparktrail.tracer.eventlog import SeveralLogsError

    try:
        with warnings.catch_warnings():
            # a file that is not an event log warns once per line
            warnings.simplefilter("ignore", EventLogWarning)
            return import_trace(path, progress=False)
    except SeveralLogsError:
        raise  # an InputError that lists the logs to pick from
    except EventLogError as err:
        reason = str(err).removeprefix(f"{path}: ")
        raise InputError(
            f"{path}: neither a trace (*.arrow) nor a Spark event log: {reason}"
        ) from err
    except UnicodeError as err:
        raise InputError(
            f"{path}: neither a trace (*.arrow) nor a Spark event log: {err}"
        ) from err


def open_trace(path: Path | str) -> tuple[Trace, str]:
    """Read ``path`` as a trace, or import it as an event log (a URI is an
    event log, read through fsspec).

    Returns
    -------
    tuple
        The trace (validated, with its context) and what ``path`` was:
        ``"trace"`` or ``"event log"``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    InputError
        If it is empty, or neither a trace nor an event log (the message
        names the path and what was expected), or a directory of several
        event logs (the message lists them).

    Examples
    --------
    >>> open_trace("no/such/log")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no/such/log: no such file or directory; expected a \
trace (*.arrow file or directory) or a Spark event log
    """
    from sparktrail.pag.trace import load_trace, trace_files

    if isinstance(path, str) and is_uri(path):
        return _import(path), "event log"
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory; {EXPECTED}")
    if path.is_dir():
        if not any(path.iterdir()):
            raise InputError(f"{path}: empty directory; {EXPECTED}")
        if trace_files(path):
            return load_trace(path), "trace"
        raw = path / "raw"
        if raw.is_dir():
            # a trace directory holding only the listener's raw log (a driver
            # without sparktrail's Python: `sparktrail listener-jar`)
            logs = sorted(raw.glob("eventlog_v2_*"))
            return _import(logs[0] if len(logs) == 1 else raw), "event log"
        return _import(path), "event log"
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file; {EXPECTED}")
    if _is_arrow(path):
        return load_trace(path), "trace"
    return _import(path), "event log"


def is_profile_folder(path: Path | str) -> bool:
    """Whether ``path`` is a folder ``sparktrail profile`` wrote.

    >>> is_profile_folder("no/such/folder")
    False
    """
    from sparktrail.engines.profiler import META_FILE, SUMMARIES_DIR

    path = Path(path)
    return path.is_dir() and (
        (path / META_FILE).is_file() or (path / SUMMARIES_DIR).is_dir()
    )


def open_profile(
    source: Path | str,
    window_ns: int | str = DEFAULT_WINDOW_NS,
    *,
    engine: str = "polars",
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    options: HintOptions | None = None,
) -> Profile:
    """``source`` as a :class:`~sparktrail.engines.profiler.Profile`: a
    profile folder loaded, else a trace or event log profiled in windows of
    ``window_ns`` (``"batch"``: one per streaming micro-batch).

    Raises
    ------
    FileNotFoundError, InputError
        If ``source`` is missing, holds no rows, or is neither a trace, an
        event log nor a profile folder.
    """
    from sparktrail.engines.profiler import Profile
    from sparktrail.engines.profiler import profile as profile_trace

    if not (isinstance(source, str) and is_uri(source)) and is_profile_folder(source):
        return Profile.load(Path(source))
    trace, _ = open_trace(source)
    if trace.frame.is_empty():
        raise no_rows(source)
    return profile_trace(
        trace,
        window_ns,
        engine=engine,
        name=name or log_name(source),
        progress=progress,
        options=options,
    )


def profile(
    source: Any,
    window_ns: int | str = DEFAULT_WINDOW_NS,
    *,
    engine: str = "polars",
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    options: HintOptions | None = None,
) -> Profile:
    """Profile what a user holds: an event log (a file, a rolling directory,
    a URI), a trace (a frame, a :class:`~sparktrail.pag.trace.Trace`, a file
    or directory) or a profile folder (loaded as saved).

    Parameters
    ----------
    source
        The input; a path or URI goes through :func:`open_profile`.
    window_ns
        Window length in ns (default 1 s), or ``"batch"``.
    engine, name, progress, options
        As :func:`sparktrail.engines.profiler.profile` takes them.

    Examples
    --------
    >>> import polars as pl
    >>> t = pl.DataFrame({"src_worker": ["driver", "exec-1/0"],
    ...     "dst_worker": ["driver", "exec-1/0"], "start_ns": [0, 10],
    ...     "end_ns": [10, 20], "activity": ["driver", "processing"]})
    >>> profile(t, 10).rows
    2
    """
    from sparktrail.notebook import register_display

    register_display()  # in a notebook, the profile renders as HTML
    if isinstance(source, str | Path):
        return open_profile(
            source,
            window_ns,
            engine=engine,
            name=name,
            progress=progress,
            options=options,
        )
    from sparktrail.engines.profiler import profile as profile_trace

    return profile_trace(
        source,
        window_ns,
        engine=engine,
        name=name,
        progress=progress,
        options=options,
    )
