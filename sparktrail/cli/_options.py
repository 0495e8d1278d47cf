"""Options several subcommands share: window, lateness, host and port."""

from __future__ import annotations

import argparse

from ._units import parse_duration_ns, parse_lateness_ns

__all__ = ["add_lateness", "add_server", "add_window"]


def add_window(parser: argparse.ArgumentParser) -> None:
    """``--window``: the window length, 1 s by default."""
    parser.add_argument(
        "--window",
        type=parse_duration_ns,
        default="1s",
        help="window length with a unit, e.g. 1s or 250ms (default: 1s)",
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
