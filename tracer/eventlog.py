"""Reading Spark event logs: files, codecs, rolling directories, JSON lines.

An event log is one of:

* one file, ``<appId>[_<attemptId>][.codec][.inprogress]``;
* a rolling directory ``eventlog_v2_<appId>/`` holding
  ``events_<n>_<appId>[.codec][.compact][.inprogress]`` files, read in ``n``
  order from the last ``.compact`` file on (Spark's compactor folds the
  earlier files into it, dropping the events of finished jobs), and an empty
  ``appstatus_<appId>[.inprogress]`` marker (no ``.inprogress``: the
  application has finished);
* a Spark 1.x log directory ``<appId>/`` holding ``EVENT_LOG_<n>`` files,
  an empty ``SPARK_VERSION_<version>`` marker, ``COMPRESSION_CODEC_<codec>``
  when compressed (a short name or a codec class name) and
  ``APPLICATION_COMPLETE`` once the application finished;
* a Databricks log directory holding the gzipped rolled parts
  ``eventlog-YYYY-MM-DD--HH-MM.gz`` (read in name order, which is time
  order) and the plain ``eventlog`` being written, read last.

Any other directory is refused; one that holds several event logs (a
``spark.eventLog.dir``, the attempts of one application) says which, so the
user can pick one.

Codecs are chosen by suffix and decoded the way Spark encodes them:

* ``.zstd``/``.zst``: zstandard frames (Spark 4's default), one after another;
* ``.lz4``: lz4-java's ``LZ4BlockOutputStream`` block stream (not the LZ4
  frame format): ``"LZ4Block"``, a token (method | level), compressed length,
  decompressed length and checksum (int32 LE each), then the block;
* ``.snappy``: snappy-java's ``SnappyOutputStream``: ``"\\x82SNAPPY\\x00"``,
  two int32 BE version numbers, then ``[int32 BE length][raw snappy]`` blocks;
* ``.lzf``: compress-lzf's ``LZFOutputStream`` chunks (``"ZV"``, type,
  lengths, data), decoded in pure Python (slow, and rare in practice).
* ``.gz``: gzip members one after another (Databricks' rolled parts).

Checksums of lz4 blocks are not verified; a corrupt block ends the file's
read with a warning.

Bad input never stops a read: a line that is not JSON (a truncated last
line, garbage), a JSON line that is not an event, an unknown event whose name
says it is about tasks, and a log from a Spark version newer than 4 each give
an :class:`EventLogWarning` naming the file and line; the rest is read and
:attr:`EventLogReader.skipped_lines` counts what was dropped. A consumer that
cannot use an event it was given (a field of the wrong type, a number out of
range) hands it back with :meth:`EventLogReader.reject`, which reports and
counts it the same way. Events this importer does not use (SQL, block
updates, ...) are skipped unparsed.
"""

from __future__ import annotations

import os
import re
import struct
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from sparktrail.errors import InputError

from .remote import RemotePath, log_path
from .sql_plans import SQL_EVENTS
from .streaming import STREAM_EVENTS

__all__ = [
    "USED_EVENTS",
    "EventLogError",
    "EventLogReader",
    "EventLogWarning",
    "LogSource",
    "NotAnEventLog",
    "SeveralLogsError",
    "codec_of",
    "decompressed_chunks",
    "resolve",
]

#: Highest Spark major version whose event-log fields this importer knows.
SUPPORTED_MAJOR = 4
#: Individual warnings per read before they are only counted.
MAX_LINE_WARNINGS = 20
CHUNK_BYTES = 8 << 20

INPROGRESS = ".inprogress"
#: Suffix of a rolling log's compacted file, after the codec's.
COMPACT = ".compact"
CODECS = {".zstd": "zstd", ".zst": "zstd", ".lz4": "lz4", ".snappy": "snappy"}
CODECS[".lzf"] = "lzf"
CODECS[".gz"] = "gzip"

#: Databricks' first event (its ``Spark Version`` is Spark's, not the runtime's).
DATABRICKS_METADATA = "DBCEventLoggingListenerMetadata"
#: Events the model reads; any other event is skipped without parsing.
USED_EVENTS = (
    STREAM_EVENTS
    | frozenset(
        f"SparkListener{name}"
        for name in (
            "LogStart",
            "ApplicationStart",
            "ApplicationEnd",
            "EnvironmentUpdate",
            "ExecutorAdded",
            "ExecutorRemoved",
            "JobStart",
            "JobEnd",
            "StageSubmitted",
            "StageCompleted",
            "TaskStart",
            "TaskEnd",
        )
    )
    | SQL_EVENTS
    # Databricks' first event names the Spark version its runtime runs.
    | {DATABRICKS_METADATA}
)
_KNOWN_TASK_EVENTS = frozenset(
    {"SparkListenerTaskStart", "SparkListenerTaskEnd", "SparkListenerTaskGettingResult"}
)
_PREFIX = b'{"Event":"'
_CODEC_SUFFIX = "|".join(re.escape(suffix) for suffix in CODECS)
_EVENTS_FILE = re.compile(
    rf"^events_(\d+)_(.+?)({_CODEC_SUFFIX})?(\.compact)?(\.inprogress)?$"
)
#: Spark 1.x log directories (``FileLogger``): one event file per index.
_LEGACY_FILE = re.compile(r"^EVENT_LOG_(\d+)$")
LEGACY_VERSION = "SPARK_VERSION_"
LEGACY_CODEC = "COMPRESSION_CODEC_"
LEGACY_COMPLETE = "APPLICATION_COMPLETE"
#: Spark 1.x named a codec by short name or class
#: (``org.apache.spark.io.LZFCompressionCodec``); both decode as these.
_LEGACY_CODECS = {"lz4": "lz4", "lzf": "lzf", "snappy": "snappy", "zstd": "zstd"}
#: Databricks: the plain file being written, and its gzipped rolled parts.
DATABRICKS_LOG = "eventlog"
_DATABRICKS_PART = re.compile(r"^eventlog-\d{4}-\d\d-\d\d--\d\d-\d\d\.gz$")
#: Event logs listed, at most, when refusing a folder of several.
MAX_LISTED = 8
#: A log's file or folder: local, or a URI read through fsspec (:mod:`.remote`).
LogPath = Path | RemotePath


class EventLogError(InputError):
    """Nothing could be read from an event log; the message names the file."""


class NotAnEventLog(EventLogError):
    """The input holds no Spark listener event at all: it is not an event
    log (a fleet scan skips it rather than counting a failed application)."""


class SeveralLogsError(EventLogError):
    """A directory holds several event logs rather than being one.

    Attributes
    ----------
    logs
        The event logs found in it, sorted by name.
    """

    def __init__(self, root: LogPath, logs: list[LogPath]) -> None:
        self.logs = logs
        names = [log.name for log in logs[:MAX_LISTED]]
        more = f" and {len(logs) - MAX_LISTED} more" if len(logs) > MAX_LISTED else ""
        if len(logs) == 1:
            message = f"a folder holding one event log; give its path: {names[0]}"
        else:
            message = (
                f"a folder holding {len(logs)} event logs, not one log; give "
                f"the path of one: {', '.join(names)}{more}"
            )
        super().__init__(f"{root}: {message}")


class EventLogWarning(UserWarning):
    """Part of an event log was skipped (file and line are in the message)."""


class _Truncated(Exception):
    """A compressed stream ended inside a block."""


@dataclass(frozen=True)
class LogSource:
    """The files of one event log, in reading order.

    Attributes
    ----------
    root
        The path given: a file or a log directory.
    files
        Event files in reading order.
    app_id
        The application id from the file names, if they carry one.
    complete
        Whether the log says the application finished (no ``.inprogress``
        file, an ``appstatus`` marker without it, or a Spark 1.x
        ``APPLICATION_COMPLETE`` marker).
    codecs
        Codecs of files whose name does not say it (Spark 1.x logs);
        :meth:`codec` falls back to :func:`codec_of` for the others.
    spark_version
        The Spark version the directory names (Spark 1.x logs), if any.
    compacted
        The compacted file a rolling log is read from, if any.
    """

    root: LogPath
    files: list[LogPath]
    app_id: str | None
    complete: bool
    codecs: dict[LogPath, str | None] = field(default_factory=dict)
    spark_version: str | None = None
    compacted: LogPath | None = None

    def codec(self, path: LogPath) -> str | None:
        """The codec of one of :attr:`files` (``None``: plain)."""
        return self.codecs[path] if path in self.codecs else codec_of(path)


def codec_of(path: LogPath) -> str | None:
    """Name the codec of an event file from its suffix (``None``: plain).

    >>> codec_of(Path("app-1.zstd.inprogress")), codec_of(Path("local-1"))
    ('zstd', None)
    >>> codec_of(Path("events_3_app-1.lz4.compact")), codec_of(Path("x.gz"))
    ('lz4', 'gzip')
    """
    name = path.name.removesuffix(INPROGRESS).removesuffix(COMPACT)
    return CODECS.get(os.path.splitext(name)[1])


def _strip_name(path: LogPath) -> str:
    name = path.name.removesuffix(INPROGRESS).removesuffix(COMPACT)
    stem, ext = os.path.splitext(name)
    return stem if ext in CODECS else name


def resolve(path: str | os.PathLike[str] | RemotePath) -> LogSource:
    """Find the event files of a log file or log directory.

    ``path`` may be a URI (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``,
    ``http(s)://``, ...), read through fsspec (:mod:`.remote`).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    SeveralLogsError
        If a directory is not one log but holds event logs (it lists them).
    EventLogError
        If a directory is no event log and holds none.
    """
    root = log_path(path)
    if not root.exists():
        raise FileNotFoundError(f"event log does not exist: {root}")
    if root.is_file():
        complete = not root.name.endswith(INPROGRESS)
        return LogSource(root, [root], _strip_name(root), complete)
    source = _log_directory(root)
    if source is not None:
        return source
    logs = _logs_in(root)
    if logs:
        raise SeveralLogsError(root, logs)
    raise EventLogError(
        f"{root}: no event log in this directory (expected a rolling log's "
        "events_<n>_<appId> files, a Spark 1.x log's EVENT_LOG_<n>, "
        "Databricks' eventlog and eventlog-*.gz, or event-log files)"
    )


def _log_directory(root: LogPath) -> LogSource | None:
    """Read ``root`` as one log directory of a kind above, or ``None``."""
    children = [c for c in root.iterdir() if c.is_file()]
    for kind in (_rolling_log, _legacy_log, _databricks_log):
        source = kind(root, children)
        if source is not None:
            return source
    return None


def _rolling_log(root: LogPath, children: list[LogPath]) -> LogSource | None:
    # (index, compacted, file): a compacted file holds its index's events,
    # so it sorts after a plain file of the same index that is not yet gone.
    numbered: list[tuple[int, bool, LogPath]] = []
    app_id: str | None = None
    for child in children:
        match = _EVENTS_FILE.match(child.name)
        if match:
            numbered.append((int(match.group(1)), bool(match.group(4)), child))
            app_id = match.group(2)
    if not numbered:
        return None
    numbered.sort()
    compacts = [k for k, (_, compacted, _) in enumerate(numbered) if compacted]
    first = compacts[-1] if compacts else 0
    status = [c.name for c in children if c.name.startswith("appstatus_")]
    complete = any(not name.endswith(INPROGRESS) for name in status)
    if app_id is None and root.name.startswith("eventlog_v2_"):
        app_id = root.name.removeprefix("eventlog_v2_")
    return LogSource(
        root,
        [p for _, _, p in numbered[first:]],
        app_id,
        complete,
        compacted=numbered[first][2] if compacts else None,
    )


def _legacy_codec(root: LogPath, names: list[str]) -> str | None:
    given = [n.removeprefix(LEGACY_CODEC) for n in names if n.startswith(LEGACY_CODEC)]
    if not given:
        return None
    name = given[0]
    for key, codec in _LEGACY_CODECS.items():
        if name.lower() == key or name.lower().endswith(f".{key}compressioncodec"):
            return codec
    raise EventLogError(
        f"{root}: unknown compression codec {name!r} in {LEGACY_CODEC}{name} "
        f"(expected one of {', '.join(sorted(_LEGACY_CODECS))} or its Spark class)"
    )


def _legacy_log(root: LogPath, children: list[LogPath]) -> LogSource | None:
    numbered = sorted(
        (int(match.group(1)), child)
        for child in children
        if (match := _LEGACY_FILE.match(child.name))
    )
    if not numbered:
        return None
    names = [c.name for c in children]
    codec = _legacy_codec(root, names)
    version = next(
        (n.removeprefix(LEGACY_VERSION) for n in names if n.startswith(LEGACY_VERSION)),
        None,
    )
    files = [p for _, p in numbered]
    return LogSource(
        root,
        files,
        root.name,
        LEGACY_COMPLETE in names,
        codecs=dict.fromkeys(files, codec),
        spark_version=version,
    )


def _databricks_log(root: LogPath, children: list[LogPath]) -> LogSource | None:
    parts = sorted(c for c in children if _DATABRICKS_PART.match(c.name))
    current = [c for c in children if c.name == DATABRICKS_LOG]
    if not parts and not current:
        return None
    # Nothing marks the application's end; the files are as complete as
    # they will get once Databricks has delivered them.
    return LogSource(root, parts + current, None, True)


def _looks_like_log(path: LogPath) -> bool:
    """A file that names a codec or starts like a plain event log, or a log
    directory."""
    if path.name.startswith("."):
        return False
    if path.is_dir():
        try:
            return _log_directory(path) is not None
        except (EventLogError, OSError):
            return False
    if codec_of(path) is not None:
        return True
    try:
        with path.open("rb") as handle:
            return handle.read(len(_PREFIX)) == _PREFIX
    except OSError:
        return False


def _logs_in(root: LogPath) -> list[LogPath]:
    return sorted(child for child in root.iterdir() if _looks_like_log(child))


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) < size:
        raise _Truncated
    return data


def _lz4_blocks(stream: IO[bytes]) -> Iterator[bytes]:
    import lz4.block

    while True:
        magic = stream.read(8)
        if not magic:
            return
        if magic != b"LZ4Block":
            if len(magic) < 8:
                raise _Truncated
            raise ValueError(f"bad LZ4Block magic {magic!r}")
        token, compressed, size, _checksum = struct.unpack(
            "<Biii", _read_exact(stream, 13)
        )
        data = _read_exact(stream, compressed)
        method = token & 0xF0
        if method == 0x10:
            yield data
        elif method == 0x20:
            yield lz4.block.decompress(data, uncompressed_size=size)
        else:
            raise ValueError(f"unknown LZ4Block method {method:#x}")


_SNAPPY_MAGIC = b"\x82SNAPPY\x00"


def _snappy_blocks(stream: IO[bytes]) -> Iterator[bytes]:
    import cramjam

    while True:
        head = stream.read(4)
        if not head:
            return
        if head == _SNAPPY_MAGIC[:4]:
            rest = _read_exact(stream, 12)
            if head + rest[:4] != _SNAPPY_MAGIC:
                raise ValueError("bad snappy-java stream header")
            continue
        if len(head) < 4:
            raise _Truncated
        (length,) = struct.unpack(">i", head)
        data = _read_exact(stream, length)
        yield bytes(cramjam.snappy.decompress_raw(data))


def lzf_decompress(data: bytes, size: int) -> bytes:
    """Decode one raw LZF block (liblzf format) of ``size`` output bytes."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            out += data[i : i + ctrl + 1]
            i += ctrl + 1
            continue
        length = ctrl >> 5
        if length == 7:
            length += data[i]
            i += 1
        ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
        i += 1
        for k in range(length + 2):
            out.append(out[ref + k])
    if len(out) != size:
        raise ValueError(f"LZF block decoded to {len(out)} bytes, expected {size}")
    return bytes(out)


def _lzf_blocks(stream: IO[bytes]) -> Iterator[bytes]:
    while True:
        head = stream.read(3)
        if not head:
            return
        if len(head) < 3:
            raise _Truncated
        if head[:2] != b"ZV":
            raise ValueError(f"bad LZF chunk header {head!r}")
        if head[2] == 0:
            (length,) = struct.unpack(">H", _read_exact(stream, 2))
            yield _read_exact(stream, length)
        elif head[2] == 1:
            length, size = struct.unpack(">HH", _read_exact(stream, 4))
            yield lzf_decompress(_read_exact(stream, length), size)
        else:
            raise ValueError(f"unknown LZF chunk type {head[2]}")


def _zstd_blocks(stream: IO[bytes]) -> Iterator[bytes]:
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True)
    try:
        while chunk := reader.read(CHUNK_BYTES):
            yield chunk
    except zstandard.ZstdError as err:
        raise _Truncated from err


def _gzip_blocks(stream: IO[bytes]) -> Iterator[bytes]:
    decoder = zlib.decompressobj(wbits=31)  # 31: gzip header and trailer
    fed = False
    while chunk := stream.read(CHUNK_BYTES):
        while chunk:
            fed = True
            try:
                data = decoder.decompress(chunk)
            except zlib.error as err:
                raise ValueError(f"bad gzip data ({err})") from err
            if data:
                yield data
            chunk = b""
            if decoder.eof:  # the next member, if any, follows this one
                chunk, fed = decoder.unused_data, False
                decoder = zlib.decompressobj(wbits=31)
    if fed and not decoder.eof:
        raise _Truncated


def _plain_blocks(stream: IO[bytes]) -> Iterator[bytes]:
    while chunk := stream.read(CHUNK_BYTES):
        yield chunk


_DECODERS: dict[str | None, Callable[[IO[bytes]], Iterator[bytes]]] = {
    None: _plain_blocks,
    "zstd": _zstd_blocks,
    "lz4": _lz4_blocks,
    "snappy": _snappy_blocks,
    "lzf": _lzf_blocks,
    "gzip": _gzip_blocks,
}


def decompressed_chunks(
    stream: IO[bytes], codec: str | None, on_truncated: Callable[[], None]
) -> Iterator[bytes]:
    """Decode ``stream`` with ``codec``, calling ``on_truncated`` at a cut block.

    Raises
    ------
    ValueError
        If the stream is corrupt (not just cut short); the message says what
        was wrong.
    """
    try:
        yield from _DECODERS[codec](stream)
    except _Truncated:
        on_truncated()
    except ValueError:
        raise
    except Exception as err:  # lz4 and cramjam raise their own error types
        raise ValueError(f"corrupt {codec} data ({type(err).__name__}: {err})") from err


@dataclass
class _FileState:
    offset: int = 0  # bytes of plain text consumed (plain files only)
    lines: int = 0  # complete lines consumed
    bytes_read: int = 0


@dataclass
class EventLogReader:
    """Read the events of a log, now or bit by bit while it is written.

    Parameters
    ----------
    path
        An event-log file or rolling directory.
    follow
        Take only complete (newline-terminated) lines and keep the position,
        so the next :meth:`events` call returns what was appended since.
    progress
        Called with the number of (compressed) bytes read so far.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     log = Path(d) / "app-1"
    ...     _ = log.write_text('{"Event":"SparkListenerJobEnd","Job ID":0}\\n')
    ...     [e["Job ID"] for e in EventLogReader(log).events()]
    [0]
    """

    path: str | os.PathLike[str] | RemotePath
    follow: bool = False
    progress: Callable[[int], None] | None = None
    lines: int = 0
    events_read: int = 0
    skipped_lines: int = 0
    #: Lines before the first event read that mention an ``Event`` key:
    #: none in a file of lines without an event means the file is no event
    #: log at all, not a broken one.
    event_like_lines: int = 0
    spark_version: str | None = None
    _states: dict[LogPath, _FileState] = field(default_factory=dict)
    #: Whether the last line of the log ends mid-event (a cut log).
    cut_last_line: bool = False
    #: ``file:line`` of the first line of each event kind that was not JSON
    #: (the kind read off the line's start): what a damaged log lost.
    broken_events: dict[str, str] = field(default_factory=dict)
    _warned: int = 0
    _last: tuple[LogPath, int] | None = None  # file and line of the last event
    _told_compacted: bool = False

    def source(self) -> LogSource:
        """Resolve the log's files now (a rolling log gains files).

        A followed ``.inprogress`` file that was renamed is found under its
        final name.
        """
        path = log_path(self.path)
        final = path.with_name(path.name.removesuffix(INPROGRESS))
        if not path.exists() and final != path and final.exists():
            self.path = final
        return resolve(self.path)

    def total_bytes(self) -> int:
        """Size on disk of the log's files."""
        return sum(p.stat().st_size for p in self.source().files)

    def events(self) -> Iterator[dict[str, Any]]:
        """Yield the events not returned before, in log order."""
        source = self.source()
        if self.spark_version is None:
            self.spark_version = source.spark_version  # a LogStart overrides it
        if source.compacted is not None and not self._told_compacted:
            self._told_compacted = True
            self._warn(
                source.compacted,
                0,
                "compacted by Spark: the events of jobs that had finished by "
                "then were dropped, so their tasks are missing from the trace",
            )
        for path in source.files:
            yield from self._file_events(path, source.codec(path))

    def _file_events(
        self, path: LogPath, codec: str | None
    ) -> Iterator[dict[str, Any]]:
        key = path.parent / path.name.removesuffix(INPROGRESS)
        state = self._states.setdefault(key, _FileState())
        try:
            stream: IO[bytes] = path.open("rb")
        except FileNotFoundError:  # renamed from .inprogress meanwhile
            path = key if key.exists() else path
            stream = path.open("rb")
        with stream:
            if state.bytes_read == 0 and _is_empty(stream) and not self.follow:
                self._warn(path, 0, "empty event file")
                return
            yield from self._stream_events(path, stream, state, codec)

    def _stream_events(
        self, path: LogPath, stream: IO[bytes], state: _FileState, codec: str | None
    ) -> Iterator[dict[str, Any]]:
        if codec is None:
            stream.seek(state.offset)
        cut: list[bool] = []
        chunks = _tolerant(
            decompressed_chunks(stream, codec, lambda: cut.append(True)),
            lambda why: self._warn(
                path, lineno, f"{why}; the rest of the file is skipped"
            ),
        )
        lineno, skip = state.lines, (0 if codec is None else state.lines)
        tail = b""
        offset = state.offset
        for chunk in chunks:
            if self.progress is not None:
                self.progress(stream.tell())
            pieces = (tail + chunk).split(b"\n")
            tail = pieces.pop()
            for line in pieces:
                offset += len(line) + 1
                if skip:
                    skip -= 1
                    continue
                lineno += 1
                event = self._parse(line, path, lineno)
                if event is not None:
                    yield event
        if tail and not self.follow:
            lineno += 1
            offset += len(tail)
            event = self._parse(tail, path, lineno, last=True)
            if event is not None:
                yield event
        if cut and not self.follow:
            self._warn(path, lineno, "compressed stream is cut short")
        state.lines, state.offset = lineno, offset
        state.bytes_read = max(state.bytes_read, stream.tell(), 1)

    def _parse(
        self, line: bytes, path: LogPath, lineno: int, last: bool = False
    ) -> dict[str, Any] | None:
        self.lines += 1
        if not self.events_read and b"Event" in line:  # only until one is read
            self.event_like_lines += 1
        name = None
        if line.startswith(_PREFIX):
            end = line.find(b'"', len(_PREFIX))
            name = line[len(_PREFIX) : end].decode("utf-8", "replace")
            if name not in USED_EVENTS and end > 0:
                self._unused(name, path, lineno)
                return None
        elif not line.strip():
            return None
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            what = "truncated last line" if last else "line is not valid JSON"
            self.cut_last_line = self.cut_last_line or last
            if name is not None:
                self.broken_events.setdefault(name, f"{path}:{lineno}")
                what = f"{what}, a {name.removeprefix('SparkListener')} event"
            self._skip(path, lineno, f"{what} ({err})")
            return None
        if not isinstance(event, dict) or not isinstance(event.get("Event"), str):
            self._skip(path, lineno, "line is not a Spark listener event")
            return None
        name = event["Event"]
        if name not in USED_EVENTS:
            self._unused(name, path, lineno)
            return None
        if name == "SparkListenerLogStart":
            self._check_version(event, path, lineno)
        self.events_read += 1
        self._last = (path, lineno)
        return event

    def where(self) -> str:
        """``file:line`` of the event :meth:`events` yielded last."""
        if self._last is None:
            raise RuntimeError("where() called before any event was read")
        return f"{self._last[0]}:{self._last[1]}"

    def reject(self, why: str) -> None:
        """Report the event :meth:`events` yielded last as skipped.

        For a consumer that cannot use it: it counts in
        :attr:`skipped_lines`, not in :attr:`events_read`, and the warning
        names its file and line, then ``why``.
        """
        if self._last is None:
            raise RuntimeError("reject() called before any event was read")
        path, lineno = self._last
        self._last = None
        self.events_read -= 1
        self._skip(path, lineno, why)

    def _unused(self, name: str, path: LogPath, lineno: int) -> None:
        if name.startswith("SparkListenerTask") and name not in _KNOWN_TASK_EVENTS:
            self._skip(path, lineno, f"unknown task event {name!r}")

    def _check_version(self, event: dict[str, Any], path: LogPath, lineno: int) -> None:
        version = str(event.get("Spark Version", ""))
        self.spark_version = version or None
        # ASCII digits, and at most 9: int() refuses strings of 4,300 digits.
        major = re.match(r"0*([0-9]{1,9})(?![0-9])", version)
        newer = re.match(r"0*[1-9][0-9]{9}", version)  # 10 or more digits
        if newer or (major and int(major.group(1)) > SUPPORTED_MAJOR):
            self._warn(
                path,
                lineno,
                f"written by Spark {version}, newer than this importer knows "
                f"(<= {SUPPORTED_MAJOR}.x); unknown fields are ignored",
            )

    def _skip(self, path: LogPath, lineno: int, why: str) -> None:
        self.skipped_lines += 1
        self._warn(path, lineno, f"skipped: {why}")

    def _warn(self, path: LogPath, lineno: int, message: str) -> None:
        self._warned += 1
        if self._warned <= MAX_LINE_WARNINGS:
            warnings.warn(f"{path}:{lineno}: {message}", EventLogWarning, stacklevel=5)
        elif self._warned == MAX_LINE_WARNINGS + 1:
            warnings.warn(
                f"{path}: more problems; only counting skipped lines from here",
                EventLogWarning,
                stacklevel=5,
            )


def _tolerant(
    chunks: Iterator[bytes], on_corrupt: Callable[[str], None]
) -> Iterator[bytes]:
    """``chunks`` up to a corrupt block, which is reported, not raised."""
    try:
        yield from chunks
    except ValueError as err:
        on_corrupt(str(err))


def _is_empty(stream: IO[bytes]) -> bool:
    empty = not stream.read(1)
    stream.seek(0)
    return empty
