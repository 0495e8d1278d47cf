"""Event logs where Spark writes them: ``s3://``, ``gs://``, ``abfs://``, ...

A URI (``scheme://...``) is read through `fsspec
<https://filesystem-spec.readthedocs.io>`_: :func:`log_path` turns it into
a :class:`RemotePath`, which answers the few questions
:mod:`~sparktrail.tracer.eventlog` asks of a :class:`pathlib.Path` (name,
parent, exists, is it a file, its children, open it for reading, its size
and modification time), so rolling directories, Spark 1.x and Databricks
folders, every codec and ``--follow`` work on it unchanged.

The filesystems are optional (``pip install 'sparktrail[cloud]'``: fsspec,
s3fs, gcsfs, adlfs). Credentials come from where each filesystem looks
for them: the ``AWS_*`` variables (``AWS_ENDPOINT_URL`` for an
S3-compatible server), ``GOOGLE_APPLICATION_CREDENTIALS``, the
``AZURE_STORAGE_*`` variables, and fsspec's own configuration
(``~/.config/fsspec/*.json``, ``FSSPEC_<PROTOCOL>_<OPTION>`` variables).

Errors:

* a filesystem that is not installed raises :class:`MissingExtraError`
  (the command line's exit 3), saying which ``pip install`` adds it;
* a URI that cannot be reached or read raises :class:`RemoteError`
  (an :class:`~sparktrail.errors.InputError`: exit 2), naming the URI and
  the filesystem's own error; one that does not exist,
  :class:`FileNotFoundError`, as a local path would.

Directory listings are never taken from fsspec's cache: a followed log
gains files, and its object sizes change.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sparktrail.errors import InputError, SparktrailError

__all__ = [
    "CLOUD_EXTRA",
    "MissingExtraError",
    "RemoteError",
    "RemotePath",
    "RemoteStat",
    "is_uri",
    "log_arg",
    "log_name",
    "log_path",
]

#: The pip command that adds every filesystem sparktrail reads remotely.
CLOUD_EXTRA = "pip install 'sparktrail[cloud]'"
#: The package fsspec needs for each scheme (for the missing-extra message).
PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "az": "adlfs",
    "adl": "adlfs",
    "http": "aiohttp",
    "https": "aiohttp",
    "hdfs": "pyarrow",
}
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class MissingExtraError(SparktrailError, RuntimeError):
    """A filesystem the URI needs is not installed (the message says how to
    add it)."""


class RemoteError(InputError):
    """A URI could not be reached or read; the message names it and the
    filesystem's error."""


def is_uri(path: object) -> bool:
    """Whether ``path`` is a URI with a scheme (not a local path).

    >>> is_uri("s3://bucket/logs/app-1"), is_uri("logs/app-1"), is_uri(Path("x"))
    (True, False, False)
    """
    return isinstance(path, str) and _URI.match(path) is not None


def log_path(path: str | os.PathLike[str] | RemotePath) -> Path | RemotePath:
    """``path`` as the reader's path: a :class:`RemotePath` for a URI, else
    a :class:`pathlib.Path`.

    >>> log_path("logs/app-1")
    PosixPath('logs/app-1')
    """
    if isinstance(path, RemotePath | Path):
        return path
    if is_uri(path):
        return RemotePath.of(str(path))
    return Path(path)


def log_arg(text: str) -> str | Path:
    """A command-line input: a URI stays a string (``Path`` would fold its
    ``//``), anything else is a :class:`pathlib.Path`.

    >>> log_arg("s3://b/logs/app-1"), log_arg("logs/app-1")
    ('s3://b/logs/app-1', PosixPath('logs/app-1'))
    """
    return text if is_uri(text) else Path(text)


def log_name(path: str | os.PathLike[str] | RemotePath) -> str:
    """The last part of a path or URI, without asking any filesystem.

    >>> log_name("s3://b/logs/eventlog_v2_app-1/"), log_name(Path("x/app-2.zstd"))
    ('eventlog_v2_app-1', 'app-2.zstd')
    """
    if isinstance(path, RemotePath):
        return path.name
    return str(path).rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class RemoteStat:
    """What :meth:`RemotePath.stat` knows: size (bytes) and modification
    time (seconds since the epoch; 0 when the filesystem does not say)."""

    st_size: int
    st_mtime: float


def _scheme(uri: str) -> str:
    match = _URI.match(uri)
    return match.group(1).lower() if match else ""


def _filesystem(uri: str) -> tuple[Any, str]:
    """``(fsspec filesystem, path on it)`` for ``uri``."""
    scheme = _scheme(uri)
    package = PACKAGES.get(scheme)
    try:
        import fsspec.core
    except ImportError as err:
        raise MissingExtraError(
            f"{uri}: reading {scheme}:// URIs needs fsspec; {CLOUD_EXTRA}"
        ) from err
    try:
        fs, path = fsspec.core.url_to_fs(uri)
    except ImportError as err:
        needed = f" ({package})" if package else ""
        raise MissingExtraError(
            f"{uri}: reading {scheme}:// URIs needs a filesystem that is not "
            f"installed{needed}; {CLOUD_EXTRA}"
            + (f" or pip install {package}" if package else "")
        ) from err
    except ValueError as err:  # fsspec: "Protocol not known"
        raise RemoteError(f"{uri}: {err}") from err
    except Exception as err:
        raise RemoteError(f"{uri}: {type(err).__name__}: {err}") from err
    return fs, str(path)


def _is_http(fs: Any) -> bool:
    protocol = fs.protocol
    names = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    return "http" in names or "https" in names


def _mtime(info: dict[str, Any]) -> float:
    """The modification time in a filesystem's ``info`` (0: not given)."""
    for key in ("LastModified", "mtime", "last_modified", "updated", "modified"):
        value = info.get(key)
        if isinstance(value, dt.datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return dt.datetime.fromisoformat(
                    value.replace("Z", "+00:00")
                ).timestamp()
            except ValueError:
                continue
    return 0.0


class RemotePath:
    """A file or folder on an fsspec filesystem, with the part of
    :class:`pathlib.Path`'s interface the event-log reader uses.

    ``str()`` is its URI; two are equal when they name the same object.
    """

    __slots__ = ("_folder", "_info", "fs", "path")

    def __init__(
        self,
        fs: Any,
        path: str,
        info: dict[str, Any] | None = None,
        folder: bool = False,
    ) -> None:
        self.fs = fs
        self.path = path.rstrip("/") or path
        self._info = info
        # Over HTTP, only a listing (or a URI's trailing slash) tells a
        # folder from a file: a server answers both.
        self._folder = folder or (info is not None and info.get("type") == "directory")

    @classmethod
    def of(cls, uri: str) -> RemotePath:
        """The path a URI names (raises :class:`MissingExtraError` or
        :class:`RemoteError` as the module says)."""
        fs, path = _filesystem(uri)
        return cls(fs, path, folder=_is_http(fs) and uri.endswith("/"))

    # -- names -----------------------------------------------------------

    def __str__(self) -> str:
        return str(self.fs.unstrip_protocol(self.path))

    def __repr__(self) -> str:
        return f"RemotePath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotePath) and (self.fs, self.path) == (
            other.fs,
            other.path,
        )

    def __hash__(self) -> int:
        return hash(self.path)

    def __lt__(self, other: RemotePath) -> bool:
        return self.path < other.path

    @property
    def name(self) -> str:
        """The last part of the path."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def parent(self) -> RemotePath:
        """The folder holding this path."""
        head = self.path.rsplit("/", 1)[0] if "/" in self.path else self.path
        return RemotePath(self.fs, head)

    def with_name(self, name: str) -> RemotePath:
        """This path with its last part replaced."""
        return self.parent / name

    def __truediv__(self, name: str) -> RemotePath:
        return RemotePath(self.fs, f"{self.path}/{name}")

    # -- questions to the filesystem -------------------------------------

    @contextmanager
    def _calling(self) -> Iterator[None]:
        """Turn the filesystem's errors (but a missing path) into
        :class:`RemoteError`s naming this URI."""
        try:
            yield
        except FileNotFoundError as err:
            # fsspec's HTTP filesystem says "not found" for a server it
            # cannot reach; the cause says which.
            cause = err.__cause__
            if isinstance(cause, OSError) and not isinstance(cause, FileNotFoundError):
                raise RemoteError(f"{self}: {type(cause).__name__}: {cause}") from err
            raise
        except SparktrailError:
            raise
        except Exception as err:
            raise RemoteError(f"{self}: {type(err).__name__}: {err}") from err

    def info(self, fresh: bool = True) -> dict[str, Any]:
        """The filesystem's ``info`` of this path (fresh: not from a listing).

        Raises
        ------
        FileNotFoundError
            If it does not exist.
        RemoteError
            If it cannot be reached.
        """
        if self._info is None or fresh:
            with self._calling():
                self.fs.invalidate_cache(self.path)
                info: dict[str, Any] = self.fs.info(self._address())
            if self._folder:
                info = {**info, "type": "directory"}
            self._info = info
        return self._info

    def _address(self) -> str:
        """The path as the filesystem wants it (an HTTP folder's URL ends
        with a slash)."""
        return f"{self.path}/" if self._folder and _is_http(self.fs) else self.path

    def exists(self) -> bool:
        """Whether the path exists (an unreachable one raises RemoteError)."""
        try:
            self.info()
        except FileNotFoundError:
            return False
        return True

    def is_file(self) -> bool:
        """Whether it is a file (as last listed, else asked now)."""
        try:
            return self.info(fresh=False).get("type") == "file"
        except FileNotFoundError:
            return False

    def is_dir(self) -> bool:
        """Whether it is a folder (as last listed, else asked now)."""
        try:
            return self.info(fresh=False).get("type") == "directory"
        except FileNotFoundError:
            return False

    def iterdir(self) -> Iterator[RemotePath]:
        """The folder's entries, listed now (never from a cache)."""
        with self._calling():
            self.fs.invalidate_cache(self.path)
            entries = self.fs.ls(self._address(), detail=True)
        for entry in entries:
            name = str(entry["name"]).rstrip("/")
            # Some filesystems list the folder itself, or (HTTP) its parent.
            if name == self.path or not name.startswith(f"{self.path}/"):
                continue
            yield RemotePath(self.fs, name, entry)

    def stat(self) -> RemoteStat:
        """Size and modification time (as last listed, else asked now)."""
        info = self.info(fresh=False)
        return RemoteStat(int(info.get("size") or 0), _mtime(info))

    def open(self, mode: str = "rb") -> IO[bytes]:
        """Open for reading (``"rb"`` only)."""
        if mode != "rb":
            raise ValueError(f"{self}: remote event logs are read only")
        with self._calling():
            stream: IO[bytes] = self.fs.open(self.path, "rb")
        return stream

    def resolve(self) -> RemotePath:
        """Itself (a URI is absolute)."""
        return self
