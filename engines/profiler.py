"""A profile: what ``sparktrail profile`` computed for one run, saved whole.

:func:`profile` runs an engine over a trace and returns a :class:`Profile`:
the run's :class:`~sparktrail.summaries.Summaries` (with its hints and
context), the CP rows of its most critical window (the Gantt chart's), and
what was profiled. Every renderer (the terminal summary, ``--json``, the
HTML report, the dashboard's ``serve --report``) takes a ``Profile``, as
pyinstrument's renderers take a saved ``Session``; :meth:`Profile.save`
and :meth:`Profile.load` own the folder's layout (:data:`SUMMARIES_DIR`,
:data:`CRITICAL_WINDOW_FILE`, :data:`META_FILE`; the report is
:data:`REPORT_FILE`).

The most critical window
------------------------
The Gantt chart shows one window, picked by :func:`most_critical_window`:
the window with the most critical-path time in task activities (everything
but ``driver``, ``waiting``, ``scheduling`` and messages, i.e. time the
critical path spends inside tasks on executors), from
``Summaries.activity_by_window``. When no window has any (a run whose
critical path is all driver time), it is the window with paths that has
the most edges, the busiest one. Ties go to the earliest window. This
needs only the summaries, so it picks the same window for every engine;
:func:`window_cp` then computes CP for that window alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag import critical_participation
from sparktrail.pag.chunk_cp import one_window_cp, trace_extent
from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS
from sparktrail.pag.trace import (
    Trace,
    TraceLike,
    load_trace,
    release_mapped_pages,
    validate_trace,
)
from sparktrail.pag.windows import to_trace_rows
from sparktrail.summaries import HintOptions, Summaries
from sparktrail.summaries.frames import CP_NS, HAS_PATHS

from .batch import Progress
from .engine_choice import ENGINES, engine_for

__all__ = [
    "CRITICAL_WINDOW_FILE",
    "ENGINES",
    "META_FILE",
    "PROFILE_FORMAT",
    "REPORT_FILE",
    "SUMMARIES_DIR",
    "TASK_ACTIVITIES",
    "Profile",
    "most_critical_window",
    "profile",
    "summarize_with",
    "window_cp",
]

#: A profile folder: the summaries' folder, in it the critical window's CP
#: rows, beside it what was profiled, and the HTML report.
SUMMARIES_DIR = "summaries"
CRITICAL_WINDOW_FILE = "critical_window.parquet"
META_FILE = "profile.json"
REPORT_FILE = "report.html"
#: The version of :data:`META_FILE`'s fields; a folder without the file is
#: an older sparktrail's (its summaries load, the name is the folder's).
PROFILE_FORMAT = 1

#: Activities that happen inside a task on an executor slot.
TASK_ACTIVITIES = (
    "processing",
    "gc",
    "deserialization",
    "serialization",
    "shuffle_read",
    "shuffle_write",
    "result",
)


@dataclass(frozen=True)
class Profile:
    """One run's profile: summaries, the most critical window's CP, a name.

    Attributes
    ----------
    summaries
        Every summary and hint of the run, with its context.
    critical_cp
        CP rows of :func:`most_critical_window` (empty when no window has
        a path); ``edge_index`` is the trace row.
    name
        What was profiled (the input's name), for titles.
    rows
        Trace rows profiled (``None``: a folder that does not say).
    """

    summaries: Summaries
    critical_cp: pl.DataFrame
    name: str
    rows: int | None = None

    @property
    def hints(self) -> pl.DataFrame:
        """The run's hints (``summaries.hints``)."""
        return self.summaries.hints

    @property
    def critical_window(self) -> tuple[int, int] | None:
        """``(start_ns, end_ns)`` of the Gantt chart's window."""
        return most_critical_window(self.summaries)

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write the profile into ``folder`` (created if missing); returns it.

        ``folder/summaries/`` (:meth:`Summaries.save`), the critical
        window's rows in it, and ``folder/profile.json``.
        """
        root = Path(folder)
        summaries = self.summaries.save(root / SUMMARIES_DIR)
        self.critical_cp.write_parquet(summaries / CRITICAL_WINDOW_FILE)
        meta = {"format": PROFILE_FORMAT, "name": self.name, "rows": self.rows}
        (root / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        return root

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> Profile:
        """The profile saved in ``folder`` by :meth:`save` (or an older
        ``sparktrail profile``, which wrote no ``profile.json``).

        Raises
        ------
        FileNotFoundError
            If ``folder/summaries`` lacks a summary frame.
        InputError
            If ``profile.json`` is not a profile's, or of a newer format.
        """
        root = Path(folder)
        try:
            summaries = Summaries.load(root / SUMMARIES_DIR)
        except FileNotFoundError as err:
            raise FileNotFoundError(
                f"{err.filename}: missing; expected the output of `sparktrail profile`"
            ) from err
        cp_path = root / SUMMARIES_DIR / CRITICAL_WINDOW_FILE
        cp = pl.read_parquet(cp_path) if cp_path.is_file() else pl.DataFrame()
        meta = _meta(root / META_FILE)
        name = meta.get("name") or root.name
        rows = meta.get("rows")
        return cls(summaries, cp, str(name), rows if isinstance(rows, int) else None)


def _meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not a sparktrail profile ({err})") from err
    if not isinstance(meta, dict):
        raise InputError(f"{path}: not a sparktrail profile (not an object)")
    version = meta.get("format")
    if not isinstance(version, int) or version > PROFILE_FORMAT:
        raise InputError(
            f"{path}: profile format {version!r}; this sparktrail reads "
            f"format {PROFILE_FORMAT} and older"
        )
    return meta


def most_critical_window(summaries: Summaries) -> tuple[int, int] | None:
    """``(start_ns, end_ns)`` of the window the Gantt chart shows.

    The window with the most critical time in :data:`TASK_ACTIVITIES`; if
    none has any, the window with paths that has the most edges; ``None``
    when no window has a path (see the module docstring).

    Examples
    --------
    >>> from sparktrail import summarize
    >>> t = pl.DataFrame({"src_worker": ["driver", "exec-1/0"],
    ...     "dst_worker": ["driver", "exec-1/0"], "start_ns": [0, 10],
    ...     "end_ns": [10, 20], "activity": ["driver", "processing"]})
    >>> most_critical_window(summarize(t, 10))
    (10, 20)
    """
    by_window = summaries.activity_by_window
    task = (
        by_window.filter(pl.col("activity").is_in(TASK_ACTIVITIES))
        .group_by(WINDOW_START_NS, WINDOW_END_NS)
        .agg(pl.col(CP_NS).sum())
        .filter(pl.col(CP_NS) > 0)
        .sort([CP_NS, WINDOW_START_NS], descending=[True, False])
    )
    if len(task):
        return int(task[WINDOW_START_NS][0]), int(task[WINDOW_END_NS][0])
    busy = summaries.windows.filter(pl.col(HAS_PATHS)).sort(
        ["edges", WINDOW_START_NS], descending=[True, False]
    )
    if busy.is_empty():
        return None
    return int(busy[WINDOW_START_NS][0]), int(busy[WINDOW_END_NS][0])


def window_cp(trace: pl.DataFrame | Trace, start_ns: int, end_ns: int) -> pl.DataFrame:
    """CP rows of the one window ``[start_ns, end_ns)`` of a trace.

    Only the rows that touch the window go into the computation
    (:func:`~sparktrail.pag.chunk_cp.one_window_cp`, the pag rules' own
    path), so this costs one window, not the whole trace.
    A listed window of the trace gets the same CP as in
    :func:`~sparktrail.pag.critical_participation` over the whole trace;
    ``edge_index`` is the row of ``trace``.

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "a"],
    ...     "start_ns": [0, 10], "end_ns": [10, 20],
    ...     "activity": ["processing", "gc"]})
    >>> window_cp(t, 10, 20).select("activity", "cp").rows()
    [('gc', 1.0)]
    """
    # A Trace is valid already: validating it again would read every page.
    frame = trace.frame if isinstance(trace, Trace) else validate_trace(trace)
    if frame.is_empty():
        return critical_participation(frame, end_ns - start_ns, start_ns)
    # The window is window 0 of windows from start_ns: an instant on
    # start_ns lies in it (as it does in the trace's own windows).
    cp, rows = one_window_cp(frame, start_ns, end_ns, trace_extent(frame))
    return to_trace_rows(cp, rows)


def summarize_with(
    engine: str,
    trace: TraceLike,
    window_ns: int | str,
    progress: Progress | None = None,
    options: HintOptions | None = None,
) -> Summaries:
    """Run the summaries of ``trace`` on ``engine`` (one of :data:`ENGINES`):
    :meth:`~sparktrail.engines.engine_choice.Engine.summarize` of
    :func:`~sparktrail.engines.engine_choice.engine_for`.

    Raises
    ------
    InputError
        If the engine is unknown, or the spark engine cannot be imported
        (pyspark missing), or asked for micro-batch windows.
    """
    return engine_for(engine, window_ns).summarize(trace, progress, options)


def profile(
    trace: TraceLike,
    window_ns: int | str,
    *,
    engine: str = "polars",
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    options: HintOptions | None = None,
) -> Profile:
    """Profile a trace: its summaries and hints, and its most critical window.

    Parameters
    ----------
    trace
        A trace frame, path or :class:`~sparktrail.pag.trace.Trace`.
    window_ns
        Window length (ns), or ``"batch"`` (one window per micro-batch).
    engine
        ``polars`` (default) or ``spark``.
    name
        What was profiled, for titles (default: ``"trace"``).
    progress
        Called with a line saying what runs now.
    options
        Hint thresholds (default :class:`~sparktrail.summaries.HintOptions`).

    Returns
    -------
    Profile

    Examples
    --------
    >>> t = pl.DataFrame({"src_worker": ["driver", "exec-1/0"],
    ...     "dst_worker": ["driver", "exec-1/0"], "start_ns": [0, 10],
    ...     "end_ns": [10, 20], "activity": ["driver", "processing"]})
    >>> p = profile(t, 10, name="t")
    >>> p.critical_window, p.critical_cp["activity"].to_list(), p.rows
    ((10, 20), ['processing'], 2)
    """
    valid: Trace = load_trace(trace)

    def batches(done: int, total: int) -> None:
        if progress is not None:
            progress(f"summaries and hints: batch {done}/{total}")

    summaries = summarize_with(engine, valid, window_ns, batches, options)
    if progress is not None:
        progress("critical path of the busiest window")
    window = most_critical_window(summaries)
    frame = valid.frame
    if window is None:
        cp = critical_participation(frame.clear(), 1)  # no path: no rows
    else:
        cp = window_cp(valid, *window)
    release_mapped_pages()
    return Profile(summaries, cp, name or "trace", frame.height)
