"""Options several subcommands share: window, lateness, host and port."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparktrail.engines.engine_choice import MICRO_BATCHES

from ._units import parse_duration_ns, parse_lateness_ns

__all__ = [
    "BATCH_WINDOWS",
    "add_lateness",
    "add_output",
    "add_server",
    "add_window",
    "output_for",
]

#: Suffixes an input name loses before it names an output directory.
INPUT_SUFFIXES = (
    ".inprogress",
    ".compact",
    ".zstd",
    ".zst",
    ".lz4",
    ".lzf",
    ".snappy",
    ".gz",
    ".json",
    ".arrow",
)


#: ``--window batch``: one window per Structured Streaming micro-batch.
BATCH_WINDOWS = MICRO_BATCHES


def _window_or_batch(text: str) -> int | str:
    return (
        BATCH_WINDOWS
        if text.strip().lower() == BATCH_WINDOWS
        else parse_duration_ns(text)
    )


def add_window(parser: argparse.ArgumentParser, *, batches: bool = False) -> None:
    """``--window``: the window length, 1 s by default (or ``batch``, with
    ``batches``: a window per streaming micro-batch)."""
    help_text = "window length with a unit, e.g. 1s or 250ms (default: 1s)"
    if batches:
        help_text += (
            "; 'batch': one window per Structured Streaming micro-batch "
            "(and one per wait between them)"
        )
    parser.add_argument(
        "--window",
        type=_window_or_batch if batches else parse_duration_ns,
        default="1s",
        help=help_text,
    )


def add_lateness(parser: argparse.ArgumentParser) -> None:
    """``--lateness``: how late a trace row may arrive, 2 s by default."""
    parser.add_argument(
        "--lateness",
        type=parse_lateness_ns,
        default="2s",
        help="how late a trace row may arrive (default: 2s)",
    )


def add_server(parser: argparse.ArgumentParser) -> None:
    """``--host`` (127.0.0.1 unless told otherwise), ``--port``, ``--verbose``."""
    parser.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    parser.add_argument("--port", type=int, default=8050, help="default: 8050")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="log every request and the web server's banners",
    )


def add_output(parser: argparse.ArgumentParser, what: str) -> None:
    """``-o/--output``: a directory, by default named after the input."""
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help=f"{what} (default: ./<input name>-{what.split()[0]})",
    )


def output_for(input_path: Path, output: Path | None, kind: str) -> Path:
    """The output directory: ``output``, else ``<input name>-<kind>`` here.

    >>> output_for(Path("logs/app-1.zstd.inprogress"), None, "profile")
    PosixPath('app-1-profile')
    >>> output_for(Path("trace/"), Path("out"), "profile")
    PosixPath('out')
    """
    if output is not None:
        return output
    name = input_path.resolve().name
    stripped = True
    while stripped:
        stripped = False
        for suffix in INPUT_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                stripped = True
    return Path(f"{name}-{kind}")
