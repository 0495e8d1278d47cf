"""Event logs into activity traces: the importer behind :mod:`sparktrail.tracer`.

:func:`import_eventlog` reads a Spark event log (a file or a rolling
directory, in any codec Spark writes) and returns its trace (DESIGN §3, §5);
:func:`import_trace` returns it with the application's context;
:func:`follow_eventlog` does the same for a log that is still being written,
one trace file per batch. Each takes a local path or a URI (``s3://``,
``gs://``, ``abfs://``, ``hdfs://``, ``http(s)://``) read through fsspec
(:mod:`.remote`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from sparktrail.pag.context import AppContext, LogIntegrity
from sparktrail.pag.trace import Trace, validate_trace, write_trace

from .eventlog import (
    EventLogError,
    EventLogReader,
    EventLogWarning,
    NotAnEventLog,
    decompressed_chunks,
    resolve,
)
from .fields import MS, EventError
from .outliers import GrowingCensus, SetAsideWarning, TimeCensus
from .remote import log_name
from .spark_model import ImportStats, SparkModel

__all__ = [
    "EventLogError",
    "EventLogWarning",
    "ImportStats",
    "SetAsideWarning",
    "follow_eventlog",
    "import_eventlog",
    "import_trace",
    "time_census",
    "trace_name",
]

#: Logs larger than this show a progress bar when stderr is a terminal.
PROGRESS_BYTES = 50 << 20


@contextmanager
def _progress(reader: EventLogReader, show: bool | None) -> Iterator[None]:
    total = reader.total_bytes()
    if show is None:
        show = total > PROGRESS_BYTES and sys.stderr.isatty()
    if not show:
        yield
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        job = bar.add_task("importing event log", total=total)
        done: dict[str, int] = {}

        def advance(position: int) -> None:
            done["now"] = position
            bar.update(job, completed=min(total, position))

        reader.progress = advance
        yield


def _fill_stats(stats: ImportStats, model: SparkModel, reader: EventLogReader) -> None:
    for name, value in vars(model.stats).items():
        setattr(stats, name, value)
    stats.app_id = stats.app_id or resolve(reader.path).app_id
    stats.spark_version = reader.spark_version
    stats.files = len(reader.source().files)
    stats.lines = reader.lines
    stats.events = reader.events_read
    stats.skipped_lines = reader.skipped_lines


def _feed(
    model: SparkModel, reader: EventLogReader, census: TimeCensus | None = None
) -> None:
    """Feed the reader's new events to the model, one bad event at a time.

    An event the model refuses (:class:`EventError`: a field of the wrong
    type or out of range) is skipped with a warning naming its file and
    line; so is one the model fails on, as an internal error, so that one
    odd line never stops an import. With a ``census``, each event's
    implausible times are set aside first (:mod:`.outliers`).
    """
    for raw in reader.events():
        event = raw if census is None else census.sanitize(raw, reader.where())
        if event is None:
            reader.reject("a task event whose launch and finish are both implausible")
            continue
        try:
            model.feed(event)
        except EventError as err:
            reader.reject(str(err))
        except Exception as err:  # a model bug must not lose the whole log
            reader.reject(
                f"internal error on this event ({type(err).__name__}: {err}); "
                "please report it"
            )


def _warn_stream_gaps(path: str | os.PathLike[str], model: SparkModel) -> None:
    """One warning per log naming the streaming fields its events lacked."""
    missing = model.streams.missing
    if missing:
        warnings.warn(
            f"{path}: Structured Streaming events lack {', '.join(sorted(missing))}"
            " (null in the trace's context)",
            EventLogWarning,
            stacklevel=3,
        )


def time_census(path: str | os.PathLike[str]) -> TimeCensus:
    """The times of every event of a log (a first pass over its text), closed.

    Its lines' problems are reported by the second pass, which feeds the
    model, so this one reads them silently.
    """
    census = TimeCensus()
    source = resolve(path)
    for file in source.files:
        with contextlib.suppress(OSError, ValueError), file.open("rb") as stream:
            tail = b""
            # A cut or corrupt stream stops here; the second pass says so.
            for chunk in decompressed_chunks(stream, source.codec(file), _no_op):
                text = tail + chunk
                cut = text.rfind(b"\n") + 1
                census.add_text(text[:cut])
                tail = text[cut:]
            census.add_text(tail)
    census.close()
    return census


def _no_op() -> None:
    pass


def _warn_set_aside(path: str | os.PathLike[str], census: TimeCensus) -> None:
    """One warning per log naming the times set aside (:mod:`.outliers`)."""
    message = census.warning(str(path))
    if message is not None:
        warnings.warn(message, SetAsideWarning, stacklevel=3)


def with_integrity(
    model: SparkModel, reader: EventLogReader, census: TimeCensus | None
) -> AppContext:
    """The model's context with what the log says of its own integrity
    (:class:`~sparktrail.pag.context.LogIntegrity`)."""
    set_aside = census.set_aside if census is not None else []
    events = sorted({f"{s.event}.{s.field}" for s in set_aside})
    log = LogIntegrity(
        lines=reader.lines,
        skipped_lines=reader.skipped_lines,
        set_aside=len(set_aside),
        set_aside_events=tuple(events[:MAX_LISTED_SET_ASIDE]),
        app_end=model.app_end_ms is not None,
        after_end=model.after_end,
        complete=reader.source().complete,
        cut_last_line=reader.cut_last_line,
        bad_environment=reader.broken_events.get("SparkListenerEnvironmentUpdate"),
    )
    context = model.context()
    # A Spark 1.x log directory names its version; its events may not.
    version = context.spark_version or reader.spark_version
    return dataclasses.replace(context, log=log, spark_version=version)


#: Kinds of event field set aside named in a context (the rest are counted).
MAX_LISTED_SET_ASIDE = 20


def _nothing_read(path: str | os.PathLike[str], reader: EventLogReader) -> None:
    if reader.events_read == 0:
        # Lines, none of them like an event: some other file, not a log.
        unlike = reader.lines > 0 and reader.event_like_lines == 0
        raise (NotAnEventLog if unlike else EventLogError)(
            f"{path}: no Spark listener events could be read "
            f"({reader.lines} lines, {reader.skipped_lines} skipped)"
        )


def import_eventlog(
    path: str | os.PathLike[str],
    *,
    stats: ImportStats | None = None,
    progress: bool | None = None,
) -> pl.DataFrame:
    """Import a Spark event log as a trace (DESIGN §3 rows, §5 model).

    Parameters
    ----------
    path
        An event-log file (plain, ``.zstd``, ``.lz4``, ``.snappy``, ``.lzf``,
        ``.gz``; ``.inprogress`` tolerated) or a log directory: rolling
        ``eventlog_v2_*`` (from its last ``.compact`` file on), Spark 1.x
        (``EVENT_LOG_<n>``) or Databricks (``eventlog-*.gz`` and
        ``eventlog``); see :mod:`sparktrail.tracer.eventlog`.
    stats
        If given, filled with what was read and built (tasks, stages, rows,
        clipped tasks, skipped lines, ...).
    progress
        Show a progress bar; default: for logs over 50 MB on a terminal.

    Returns
    -------
    polars.DataFrame
        A validated trace sorted by ``(start_ns, src_worker)``, with the
        extra columns ``attempt``, ``status``, ``speculative``,
        ``executor_id``, ``clipped_ns``, Spark's ``executor_run_ns``,
        ``jvm_gc_ns`` and ``executor_cpu_ns``, ``shuffle_write_bytes``,
        ``memory_bytes_spilled``, ``disk_bytes_spilled`` and a stateful
        task's ``state_rows``, ``state_updated_rows`` and
        ``state_memory_bytes``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    EventLogError
        If not a single event could be read, or ``path`` is a directory
        that is no event log (:class:`~.eventlog.SeveralLogsError` if it
        holds several: the message lists them).

    Warns
    -----
    EventLogWarning
        For each skipped line (file and line number in the message),
        including events with a field of the wrong type or a number out of
        range (the message names the field); once per log naming the
        fields its Structured Streaming events lack (null in the context).
    """
    return import_trace(path, stats=stats, progress=progress).frame


def import_trace(
    path: str | os.PathLike[str],
    *,
    stats: ImportStats | None = None,
    progress: bool | None = None,
) -> Trace:
    """:func:`import_eventlog`, with the application's context (DESIGN §5).

    The :class:`~sparktrail.pag.trace.Trace` carries the Spark properties,
    master, Spark version, executors (cores, lifetimes) and jobs that the
    log states; :func:`~sparktrail.pag.trace.write_trace` keeps them in the
    file. Parameters, errors and warnings are those of
    :func:`import_eventlog`.
    """
    census = time_census(path)
    reader = EventLogReader(path)
    model = SparkModel()
    with _progress(reader, progress):
        _feed(model, reader, census)
    _nothing_read(path, reader)
    _warn_stream_gaps(path, model)
    _warn_set_aside(path, census)
    frame: pl.DataFrame = validate_trace(model.build(final=True), path)
    if stats is not None:
        _fill_stats(stats, model, reader)
    return Trace(frame, with_integrity(model, reader, census))


def trace_name(
    path: str | os.PathLike[str], app_id: str | None, attempt_id: str | None = None
) -> str:
    """File stem for the trace of a log: ``<appId>[_<attemptId>]``.

    The app id is the log's (``ApplicationStart``), else the one its file
    names carry, else the log's stem. The attempt id, when the log has one
    (YARN, or a retried application), keeps the attempts of one
    application apart, the way Spark names their logs.

    >>> trace_name("/logs/local-1.zstd", None), trace_name("x", "app-7")
    ('local-1', 'app-7')
    >>> trace_name("/logs/application_1_0006_2.lz4", "application_1_0006", "2")
    'application_1_0006_2'
    """
    if not app_id:
        try:
            app_id = resolve(path).app_id
        except (OSError, EventLogError):
            app_id = None
        app_id = app_id or log_name(path).split(".")[0]
    return f"{app_id}_{attempt_id}" if attempt_id else app_id


#: A follower waits at least this many times as long as its last batch took.
FOLLOW_PACING = 9.0
#: Rows in one trace file written by a follower, at most.
FOLLOW_MAX_ROWS = 100_000
#: Seconds a follower goes on reading after ``ApplicationEnd`` while the log
#: is not marked complete: a stopping SparkContext posts the end first and
#: then its teardown (tasks that finished meanwhile, the ends of the jobs
#: it cancelled), which Spark and sparktrail's listener write before
#: marking the log complete.
FOLLOW_END_GRACE_S = 10.0


def follow_eventlog(
    path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    poll_s: float = 1.0,
    slack_ms: int = 1000,
    stop: threading.Event | None = None,
    on_batch: Callable[[Path, ImportStats], None] | None = None,
    stats: ImportStats | None = None,
    max_rows: int = FOLLOW_MAX_ROWS,
) -> list[Path]:
    """Import a log while it is written, one trace file per batch.

    A batch of more than ``max_rows`` rows is written as several files.

    Every ``poll_s`` seconds (longer on large logs: the wait is at least
    ``FOLLOW_PACING`` times the last batch's work, so following uses at most
    a tenth of a core) the complete new lines are read, and the rows
    that later events can no longer change are written to
    ``out_dir/<app>-<batch>.arrow``: a row is written once the event that
    fixes it (its task's finish, the next launch on its slot) is older than
    the latest event time minus ``slack_ms``. Reading ``out_dir`` with
    ``read_trace`` gives the trace built so far. It stops when the log
    says the application finished (the ``.inprogress`` suffix is gone or
    an ``appstatus`` marker appears; ``FOLLOW_END_GRACE_S`` after
    ``ApplicationEnd`` was read if neither happens), when ``stop`` is set,
    or on Ctrl-C, and then writes the rest as if the log were complete.

    Returns
    -------
    list[Path]
        The trace files written, in order.
    """
    reader = EventLogReader(path, follow=True)
    # A log complete already is read ahead like an import's; one still
    # growing can only be checked against what cannot happen.
    census = time_census(path) if reader.source().complete else GrowingCensus()
    model = SparkModel()
    written: list[Path] = []
    emitted = -(1 << 62)
    name = None
    ended_at: float | None = None
    try:
        while True:
            _feed(model, reader, census)
            if ended_at is None and model.app_end_ms is not None:
                ended_at = time.monotonic()
            done = reader.source().complete or (
                ended_at is not None
                and time.monotonic() - ended_at >= FOLLOW_END_GRACE_S
            )
            done = done or (stop is not None and stop.is_set())
            if done:
                break
            began = time.perf_counter()
            if reader.events_read:
                watermark = (model.max_ms - slack_ms) * MS
                # No attempt id: the live listener finds these files by
                # "<appId>-*.arrow" (LiveTrace.trace_files).
                name = name or trace_name(path, model.stats.app_id)
                emitted = _write_batch(
                    model, False, emitted, watermark, out_dir, name, written, max_rows
                )
            # Each batch rebuilds the model from every task so far, so pace
            # the polls to keep the follower under 1/(1 + PACING) of a core
            # next to the application it traces.
            busy = time.perf_counter() - began
            _pause(reader, stop, poll_s, max(poll_s, FOLLOW_PACING * busy))
    except KeyboardInterrupt:
        pass
    reader.follow = False
    _feed(model, reader, census)
    _nothing_read(path, reader)
    _warn_stream_gaps(path, model)
    _warn_set_aside(path, census)
    name = name or trace_name(path, model.stats.app_id)
    context = with_integrity(model, reader, census)
    _write_batch(
        model, True, emitted, 1 << 62, out_dir, name, written, max_rows, context
    )
    if stats is not None:
        _fill_stats(stats, model, reader)
    if on_batch is not None and written and stats is not None:
        on_batch(written[-1], stats)
    return written


def _pause(
    reader: EventLogReader,
    stop: threading.Event | None,
    poll_s: float,
    seconds: float,
) -> None:
    """Wait ``seconds``, but return within ``poll_s`` once the log is complete
    or ``stop`` is set, so the final batch is not held back by the pacing."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if reader.source().complete or (stop is not None and stop.is_set()):
            return
        if stop is not None:
            stop.wait(min(poll_s, left))
        else:
            time.sleep(min(poll_s, left))


def _write_batch(
    model: SparkModel,
    final: bool,
    emitted: int,
    watermark: int,
    out_dir: str | os.PathLike[str],
    name: str,
    written: list[Path],
    max_rows: int,
    context: AppContext | None = None,
) -> int:
    if watermark <= emitted:
        return emitted
    context = context or model.context()
    frame = model.build(final=final, settled=True)
    fixed = pl.col("settled_ns")
    batch = frame.filter((fixed > emitted) & (fixed <= watermark)).drop("settled_ns")
    # Files of at most max_rows keep each one cheap to read while live.
    for offset in range(0, batch.height, max_rows):
        target = Path(out_dir) / f"{name}-{len(written):06d}.arrow"
        rows = batch.slice(offset, max_rows)
        written.append(write_trace(rows, target, context))
    return watermark
