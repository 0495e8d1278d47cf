"""Several small frames in one file: Arrow IPC streams one after another.

The online store writes a window's ten summary frames, each of a few dozen
rows. A file per frame cost about 0.45 ms each to create and write here
(4.9 ms a window on one core), against 0.3 ms for all ten as one file of
streams; reading them back, 3.8 against 1.0 ms (measured on a window of
30,000 rows).

Layout
------
The file is a sequence of Arrow IPC streams, each ending with its
end-of-stream marker. The first is a header of one row: ``frames``, the
names of the frames that follow in order, and ``metadata``, a JSON object
of strings. Each frame is then one stream, uncompressed (the frames are
small).

Assumptions
-----------
* Frames hold types Arrow IPC carries and polars reads back: the summary
  frames' integers, floats, booleans, strings and lists.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from sparktrail.errors import InputError

__all__ = ["read_bundle", "write_bundle"]


def write_bundle(
    path: str | os.PathLike[str],
    frames: Mapping[str, pl.DataFrame],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write ``frames`` (name -> frame) and ``metadata`` to one file.

    Parameters
    ----------
    path
        The file, replaced if it exists.
    frames
        The frames, read back in this order.
    metadata
        String keys and values stored with them.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_bundle(Path(d, "b"), {"a": pl.DataFrame({"x": [1]})}, {"k": "v"})
    ...     frames, meta = read_bundle(Path(d, "b"))
    >>> frames["a"]["x"].to_list(), meta
    ([1], {'k': 'v'})
    """
    header = pl.DataFrame(
        {"frames": [list(frames)], "metadata": [json.dumps(dict(metadata or {}))]},
        schema={"frames": pl.List(pl.String), "metadata": pl.String},
    )
    sink = io.BytesIO()
    for frame in (header, *frames.values()):
        frame.write_ipc_stream(sink, compression="uncompressed")
    Path(path).write_bytes(sink.getvalue())


def read_bundle(
    path: str | os.PathLike[str], names: Collection[str] | None = None
) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
    """The frames and metadata :func:`write_bundle` wrote to ``path``.

    Parameters
    ----------
    path
        The file.
    names
        The frames wanted (default: all); others are skipped, not
        converted.

    Returns
    -------
    (frames, metadata)
        Name -> frame for the wanted frames the file holds, in its order,
        and its metadata.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    InputError
        If the file is not such a bundle (the message names it).
    """
    try:
        with pa.memory_map(str(path), "r") as source:
            header = ipc.open_stream(source).read_all().to_pylist()
            listed, metadata = _header(header)
            frames = {}
            for name in listed:
                table = ipc.open_stream(source).read_all()
                if names is None or name in names:
                    frames[name] = pl.from_arrow(table)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError, ValueError, pl.exceptions.PolarsError) as err:
        raise InputError(f"{path}: not a sparktrail frame bundle ({err})") from err
    return frames, metadata  # type: ignore[return-value]


def _header(rows: list[dict[str, object]]) -> tuple[list[str], dict[str, str]]:
    """The frame names and metadata of a bundle's header rows."""
    if len(rows) != 1:
        raise ValueError(f"its header has {len(rows)} rows, not 1")
    names, raw = rows[0].get("frames"), rows[0].get("metadata")
    if not isinstance(names, list) or not isinstance(raw, str):
        raise ValueError("its header has no frame names and metadata")
    metadata = json.loads(raw)
    if not isinstance(metadata, dict):
        raise ValueError("its metadata is not a JSON object")
    return [str(n) for n in names], {str(k): str(v) for k, v in metadata.items()}
