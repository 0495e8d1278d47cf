"""The result of :func:`~sparktrail.engines.summarize`: frames and options.

:class:`Summaries` owns how its frames are written and read
(:meth:`Summaries.save`, :meth:`Summaries.load`): the online store, the
batch report and the dashboard all go through it.

On disk
-------
A folder with one Parquet file per frame, ``<name>.parquet`` for each name
of :data:`~sparktrail.summaries.frames.SUMMARY_FRAMES` (other files, such
as a window's CP rows, may sit beside them). The window length and origin
are key-value metadata of ``windows.parquet`` (:data:`WINDOW_NS_KEY`,
:data:`ORIGIN_NS_KEY`); a folder written before they were (no metadata)
loads with them taken from the ``windows`` frame. The application's
context (:class:`~sparktrail.pag.context.AppContext`: name, Spark version,
master, executors, jobs) is ``context.json`` (:data:`CONTEXT_FILE`),
written when anything is known; a folder without it (an empty context, or
an older sparktrail) loads with an empty context.

The online store writes a window's frames faster (``save(fast=True)``):
all of them in one file, ``summaries.arrows`` (:data:`BUNDLE_FILE`, a
:mod:`~sparktrail.summaries.bundle` with the window length and origin as
its metadata), which only sparktrail reads. :meth:`Summaries.load` reads
either layout, the bundle when a folder has both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag.context import AppContext
from sparktrail.pag.query_engine import write_small_parquets
from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS

from .bundle import read_bundle, write_bundle
from .frames import (
    OPTIONAL_FRAMES,
    SPAN,
    SUMMARY_FRAMES,
    SUMMARY_SCHEMAS,
    check_summary_frames,
    with_parts,
    with_share_of,
)

__all__ = [
    "BUNDLE_FILE",
    "CONTEXT_FILE",
    "ORIGIN_NS_KEY",
    "WINDOW_NS_KEY",
    "HintOptions",
    "Summaries",
    "load_frame",
    "saved_window",
]

#: Parquet metadata keys of ``windows.parquet`` that hold the window length
#: and the start of window 0.
WINDOW_NS_KEY = "sparktrail.window_ns"
ORIGIN_NS_KEY = "sparktrail.origin_ns"
#: The file beside the frames that holds the application's context (JSON).
CONTEXT_FILE = "context.json"
#: The one file of every frame that ``save(fast=True)`` writes.
BUNDLE_FILE = "summaries.arrows"


@dataclass(frozen=True)
class HintOptions:
    """Thresholds of the rebalancing hints (DESIGN §6 starting points).

    Shares are fractions of the whole run's critical path (CP summed over the
    windows with paths, divided by their number); factors are ratios.

    Examples
    --------
    >>> HintOptions().skew_factor
    5.0
    >>> HintOptions(target_stage_seconds=30).target_stage_seconds
    30
    """

    #: A hint that saves less wall time than this (seconds) is ``info``,
    #: whatever its share of the run.
    min_saving_s: float = 1.0
    #: straggler_executor: CP >= factor x fair share, or tasks this many
    #: times slower than the same stages' tasks elsewhere; and >= min share.
    straggler_factor: float = 2.0
    straggler_slowdown: float = 1.2
    #: Tasks each side must run, in all, in the stages an executor's
    #: slowdown compares (one task a side in each stage counts).
    straggler_min_tasks: int = 3
    straggler_min_share: float = 0.10
    #: A task "has high CP" when its share of the critical path in the
    #: windows it ran in is at least this.
    task_min_share: float = 0.25
    #: ... or it runs in a stage with at least this share of the critical
    #: path.
    task_stage_min_share: float = 0.05
    #: Stages with fewer tasks have no meaningful median.
    min_stage_tasks: int = 3
    #: straggler_task: duration >= factor x stage median (records are not).
    straggler_task_factor: float = 5.0
    #: ... and at least this many ms over it: a smaller excess is a JVM's
    #: jitter (a GC pause, JIT compilation, a cold cache) as often as the
    #: partition's own work, and no fix of the task saves more than it.
    straggler_min_excess_ms: float = 500.0
    #: hotspot: records or bytes >= factor x stage median (AQE's
    #: spark.sql.adaptive.skewJoin.skewedPartitionFactor).
    skew_factor: float = 5.0
    #: parallelism: stages with at least this share of the critical path
    #: (the replayed saving then rates the hint).
    parallelism_min_share: float = 0.05
    #: parallelism target stage time in seconds (overrides the share).
    target_stage_seconds: float | None = None
    #: scheduling_bound: scheduling + deserialization share, and the task
    #: time Spark's tuning guide aims for (tasks shorter than it are "short").
    scheduling_min_share: float = 0.30
    target_task_ms: float = 100.0
    #: over_partitioned: stages of at least this many tasks (and twice the
    #: slots), median task under this many ms, fixed per-task costs at least
    #: this share of the stage's critical time, which is at least this share
    #: of the run.
    over_partitioned_min_tasks: int = 16
    over_partitioned_task_ms: float = 50.0
    over_partitioned_fixed_share: float = 0.5
    over_partitioned_min_share: float = 0.05
    #: ... or a median task reading under this many bytes, with fixed costs
    #: at least this share.
    over_partitioned_task_bytes: int = 1 << 20
    over_partitioned_fixed_share_small_data: float = 0.3
    #: shuffle_bound: shuffle_read share of the critical path.
    shuffle_min_share: float = 0.20
    #: driver_bound: `driver` activity share of the critical path.
    driver_min_share: float = 0.20
    #: idle_capacity: share of executor slot time spent waiting.
    idle_min_share: float = 0.50
    #: straggler_executor and gc_bound: a GC share of task run time worth
    #: naming (Spark's UI marks an executor's GC time red above 10% of its
    #: task time).
    gc_high_share: float = 0.10
    #: gc_bound: `gc` share of the critical path (and gc_high_share of the
    #: run time of the tasks of the stages it names).
    gc_min_share: float = 0.10
    #: spill: CP share of a stage whose tasks spilled to disk; smaller
    #: stages' spills cost too little of the path to act on.
    spill_min_share: float = 0.10
    #: moving_hotspot: runs of an operator with a hot partition, and how
    #: often that partition must change between consecutive runs.
    moving_min_runs: int = 3
    moving_min_moves: int = 2
    #: state_skew: one state partition's share of the state rows, and that
    #: share over the fair one (1 / partitions).
    state_skew_min_share: float = 0.25
    state_skew_factor: float = 2.0
    #: stream_backlog, trigger_bound, planning_bound: batches needed (after
    #: a run's first), the last batches looked at, how far below the input
    #: rate counts as behind, DS2's target utilisation, and the median
    #: share of trigger time outside addBatch, and time a batch (ms), that
    #: is planning-bound.
    stream_min_batches: int = 3
    stream_batches: int = 20
    stream_behind_share: float = 0.05
    stream_target_utilisation: float = 0.7
    planning_min_share: float = 0.30
    planning_min_ms: float = 100.0


@dataclass(frozen=True)
class Summaries:
    """Every summary of one trace, for one window length.

    Attributes
    ----------
    activity, activity_by_window
        CP by activity type, whole run and per window with paths.
    straggler, executor
        CP by worker (timeline) and by executor, each with its fair share.
    operator
        CP by operator (call site and SQL plan node; its stages listed).
    communication
        CP by ``src -> dst`` channel at executor level (see ``note``).
    hints
        Rebalancing hints: ``kind, severity, stage_id, executor_id,
        partition, cp_share, evidence`` (JSON object) ``, action``.
    windows
        One row per window: ``window_start_ns, window_end_ns, edges,
        cp_total, has_paths, active_workers, active_executors``.
    window_ns, origin_ns
        The window length and the start of window 0.
    context
        What the application ran with (name, Spark version, master,
        executors, jobs), from the trace; empty when the trace has none.
    stages, executors
        The stage and executor tables (:mod:`~sparktrail.summaries.
        stage_stats`): the Spark UI's facts with each one's CP share;
        empty where they are not computed (the live "whole run").
    """

    activity: pl.DataFrame
    activity_by_window: pl.DataFrame
    straggler: pl.DataFrame
    executor: pl.DataFrame
    operator: pl.DataFrame
    communication: pl.DataFrame
    hints: pl.DataFrame
    windows: pl.DataFrame
    window_ns: int
    origin_ns: int
    context: AppContext = field(default_factory=AppContext)
    stages: pl.DataFrame = field(default_factory=lambda: _empty("stages"))
    executors: pl.DataFrame = field(default_factory=lambda: _empty("executors"))

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every frame by name, in the order of ``SUMMARY_FRAMES``."""
        return {name: getattr(self, name) for name in SUMMARY_FRAMES}

    def check(self, where: str = "") -> Summaries:
        """Check every frame against its declared schema; returns ``self``.

        Raises
        ------
        SchemaError
            Naming the frame (prefixed with ``where``) and the column.
        """
        check_summary_frames(self.frames(), where)
        return self

    def save(
        self,
        folder: str | os.PathLike[str],
        *,
        fast: bool = False,
        beside: Mapping[str, pl.DataFrame] | None = None,
    ) -> Path:
        """Write every frame to ``folder/<name>.parquet`` (see "On disk").

        ``folder`` is created if missing; files of the same names are
        replaced. Returns ``folder`` as a :class:`~pathlib.Path`. ``fast``
        writes the frames as one :data:`BUNDLE_FILE`, and ``beside`` as
        LZ4 Parquet without column statistics
        (:func:`~sparktrail.pag.query_engine.write_small_parquets`), for a
        folder only sparktrail reads back (the online store writes its
        windows this way, and its CP rows itself); else a Parquet file per
        frame, polars' default zstd with statistics, which any Parquet
        reader reads. ``beside`` are other frames to write in ``folder``
        (file name -> frame).

        Examples
        --------
        >>> import tempfile
        >>> from sparktrail import summarize
        >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
        ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
        >>> s = summarize(t, 4)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     back = Summaries.load(s.save(d))
        >>> back.window_ns, back.activity.equals(s.activity), back.context == s.context
        (4, True, True)
        """
        target = Path(folder)
        target.mkdir(parents=True, exist_ok=True)
        beside = beside or {}
        meta = {WINDOW_NS_KEY: str(self.window_ns), ORIGIN_NS_KEY: str(self.origin_ns)}
        if fast:
            write_bundle(target / BUNDLE_FILE, self.frames(), meta)
            if beside:
                write_small_parquets(
                    {target / name: (frame, None) for name, frame in beside.items()}
                )
        else:
            (target / BUNDLE_FILE).unlink(missing_ok=True)  # it would win on load
            for name, frame in self.frames().items():
                metadata = meta if name == "windows" else None
                frame.write_parquet(target / f"{name}.parquet", metadata=metadata)
            for name, frame in beside.items():
                frame.write_parquet(target / name)
        context = target / CONTEXT_FILE
        if self.context.known:
            context.write_text(self.context.to_json(), encoding="utf-8")
        else:  # nothing known: no file, as before contexts were saved
            context.unlink(missing_ok=True)
        return target

    @classmethod
    def load(
        cls,
        folder: str | os.PathLike[str],
        *,
        window_ns: int | None = None,
        origin_ns: int | None = None,
    ) -> Summaries:
        """Read the summaries :meth:`save` wrote to ``folder``.

        Parameters
        ----------
        folder
            The folder of ``<name>.parquet`` files.
        window_ns, origin_ns
            Override what the folder says. A folder without the metadata
            (an older sparktrail) gives the first window's length and
            start, or 0 when it holds no window.

        Raises
        ------
        FileNotFoundError
            If a frame's file is missing (the message and ``filename``
            name it); the stage and executor tables, which an older
            sparktrail did not write, load empty instead.
        SchemaError
            If a frame's columns or dtypes are not its declared ones (the
            message names the file and the column).
        InputError
            If a file is not Parquet, or its metadata not an integer, or
            ``context.json`` not a context (a missing one is an empty
            context: an older sparktrail).
        """
        root = Path(folder)
        bundle = root / BUNDLE_FILE
        if bundle.is_file():
            frames, where, window_of = _bundle_frames(bundle)
        else:
            frames, where, window_of = _parquet_frames(root)
        if SPAN not in frames["windows"].columns:  # an older sparktrail's
            frames["windows"] = frames["windows"].with_columns(
                pl.lit(1, pl.Int64).alias(SPAN)
            )
        frames["hints"] = with_share_of(frames["hints"])  # an older one lacks it
        frames["operator"] = with_parts(frames["operator"])  # as may this
        check_summary_frames(frames, where)
        if window_ns is None or origin_ns is None:
            saved = window_of(frames["windows"])
            window_ns = saved[0] if window_ns is None else window_ns
            origin_ns = saved[1] if origin_ns is None else origin_ns
        return cls(
            **frames,
            window_ns=window_ns,
            origin_ns=origin_ns,
            context=_saved_context(root / CONTEXT_FILE),
        )


#: What a folder's layout gives :meth:`Summaries.load`: the frames, where
#: they are (for messages), and the window length and origin given them.
_Loaded = tuple[dict[str, pl.DataFrame], str, Callable[[pl.DataFrame], tuple[int, int]]]


def _parquet_frames(root: Path) -> _Loaded:
    """The frames of a folder of ``<name>.parquet`` files."""
    frames = {}
    for name in SUMMARY_FRAMES:
        path = root / f"{name}.parquet"
        if name in OPTIONAL_FRAMES and not path.is_file():
            frames[name] = _empty(name)  # an older sparktrail's folder
            continue
        if not path.is_file():
            missing = FileNotFoundError(
                f"{path}: missing; expected the {name!r} frame of sparktrail summaries"
            )
            missing.filename = str(path)
            raise missing
        frames[name] = _read_parquet(path)
    windows = root / "windows.parquet"
    return frames, f"{root}/", lambda frame: _saved_window(windows, frame)


def _bundle_frames(path: Path) -> _Loaded:
    """The frames of a :data:`BUNDLE_FILE`."""
    found, meta = read_bundle(path)
    missing = [n for n in SUMMARY_FRAMES if n not in found and n not in OPTIONAL_FRAMES]
    if missing:
        raise InputError(f"{path}: holds no {missing[0]!r} frame")
    frames = {name: found.get(name, _empty(name)) for name in SUMMARY_FRAMES}
    return frames, f"{path}/", lambda frame: _bundle_window(path, meta, frame)


def _read_parquet(path: Path) -> pl.DataFrame:
    """``path`` read, or InputError naming it when it is not Parquet."""
    try:
        return pl.read_parquet(path)
    except FileNotFoundError:
        raise
    except (pl.exceptions.PolarsError, OSError) as err:
        raise InputError(f"{path}: not a Parquet file ({err})") from err


def load_frame(folder: str | os.PathLike[str], name: str) -> pl.DataFrame:
    """The frame ``name`` of the summaries saved in ``folder``, alone.

    Reads ``summaries.arrows`` or ``<name>.parquet``, whichever
    :meth:`Summaries.save` wrote; unchecked (:meth:`Summaries.load`
    checks every frame).

    Raises
    ------
    FileNotFoundError
        If ``folder`` holds neither, or a bundle without that frame.
    InputError
        If the file is not what it should be.
    """
    bundle = Path(folder) / BUNDLE_FILE
    if not bundle.is_file():
        return _read_parquet(Path(folder) / f"{name}.parquet")
    frames, _ = read_bundle(bundle, [name])
    if name not in frames:
        raise FileNotFoundError(f"{bundle}: holds no {name!r} frame")
    return frames[name]


def _empty(name: str) -> pl.DataFrame:
    return pl.DataFrame(schema=SUMMARY_SCHEMAS[name])


def _saved_context(path: Path) -> AppContext:
    """The context in ``path``, or an empty one when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AppContext()
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot be read ({err})") from err
    try:
        return AppContext.from_json(text)
    except InputError as err:
        raise InputError(f"{path}: {err}") from err


def saved_window(folder: str | os.PathLike[str]) -> tuple[int, int]:
    """``(window_ns, origin_ns)`` of the summaries :meth:`Summaries.save`
    wrote to ``folder``, reading no more than it must.

    >>> import tempfile
    >>> from sparktrail import summarize
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     saved_window(summarize(t, 4).save(d))
    (4, 0)
    """
    bundle = Path(folder) / BUNDLE_FILE
    if bundle.is_file():
        _, meta = read_bundle(bundle, ())
        return _bundle_window(bundle, meta, None)
    return _saved_window(Path(folder) / "windows.parquet", None)


def _window_of(
    path: Path,
    meta: Mapping[str, str],
    windows: pl.DataFrame | None,
    read_windows: Callable[[], pl.DataFrame | None],
) -> tuple[int, int]:
    """``(window_ns, origin_ns)`` from the metadata ``meta`` of ``path``, or
    else from its ``windows`` frame (first window; ``read_windows()`` when
    not given), or else ``(0, 0)``."""
    if WINDOW_NS_KEY in meta and ORIGIN_NS_KEY in meta:
        try:
            return int(meta[WINDOW_NS_KEY]), int(meta[ORIGIN_NS_KEY])
        except ValueError as err:
            raise InputError(f"{path}: window metadata is not an integer") from err
    return _first_window(read_windows() if windows is None else windows)


def _bundle_window(
    path: Path, meta: Mapping[str, str], windows: pl.DataFrame | None
) -> tuple[int, int]:
    """:func:`_window_of` a bundle."""
    return _window_of(
        path, meta, windows, lambda: read_bundle(path, ["windows"])[0].get("windows")
    )


def _saved_window(path: Path, windows: pl.DataFrame | None) -> tuple[int, int]:
    """:func:`_window_of` a ``windows.parquet``."""
    meta = pl.read_parquet_metadata(path)
    return _window_of(path, meta, windows, lambda: pl.read_parquet(path))


def _first_window(windows: pl.DataFrame | None) -> tuple[int, int]:
    """The first window's length and the start of window 0, or ``(0, 0)``."""
    if windows is None or windows.is_empty():
        return 0, 0
    first = windows.row(0, named=True)
    origin = windows[WINDOW_START_NS].min()
    return int(first[WINDOW_END_NS] - first[WINDOW_START_NS]), int(origin)  # type: ignore[arg-type]
