"""The ``sparktrail`` command line: one module per subcommand.

Each subcommand module defines ``register(subparsers)`` and a ``run(args)``
that returns an exit code. Errors are turned into one line and an exit code
here, in one place.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence

from sparktrail.errors import InputError, SparktrailError

__all__ = ["EXIT_BAD_INPUT", "EXIT_ENVIRONMENT", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BAD_INPUT = 2
#: Something the machine lacks (a JDK for the live listener).
EXIT_ENVIRONMENT = 3
EXIT_INTERRUPTED = 130

#: Subcommand name -> module under sparktrail.cli.
SUBCOMMANDS = {
    "import": "import_",
    "cp": "cp",
    "demo": "demo",
    "profile": "profile",
    "live": "live",
    "serve": "serve",
    "whatif": "whatif",
    "compare": "compare",
    "mcp": "mcp_server",
    "export": "export",
    "history": "history",
    "listener-jar": "listener_jar",
}


#: Commands that compute window after window: they keep freed memory for
#: the next window. One-shot commands do not, as the kept memory would add
#: to their peak (1.4 GiB more for a 10^7-row ``profile``).
WINDOW_LOOPS = frozenset({"live", "serve", "demo"})


#: polars' allocator (jemalloc) setting for one-shot commands, added to the
#: one polars sets on import (freed pages purged after 0.5 s): purged pages
#: go back to the kernel at once, not after a second of "muzzy" state in
#: which they still count in RSS. A 10^7-row ``profile`` peaked about 80 MiB
#: lower at the same speed (BENCHMARKS.md, issue 25).
ONE_SHOT_ALLOCATOR = "muzzy_decay_ms:0"


def configure_allocator(argv: Sequence[str]) -> bool:
    """Set :data:`ONE_SHOT_ALLOCATOR` for a one-shot command ``argv``;
    return whether it applies.

    jemalloc reads its setting once, when polars is imported: only before
    that, and never over the user's own ``_RJEM_MALLOC_CONF``. Window loops
    keep their freed memory (:data:`WINDOW_LOOPS`).

    >>> configure_allocator(["live", "app.jar"])
    False
    """
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in WINDOW_LOOPS or "polars" in sys.modules:
        return False
    os.environ.setdefault("_RJEM_MALLOC_CONF", ONE_SHOT_ALLOCATOR)
    return os.environ["_RJEM_MALLOC_CONF"] == ONE_SHOT_ALLOCATOR


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparktrail",
        description="Critical-path profiling for Apache Spark applications.",
    )
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMANDS.values():
        module = importlib.import_module(f"sparktrail.cli.{module_name}")
        module.register(subparsers)
    return parser


def _version() -> str:
    from sparktrail import __version__

    return f"sparktrail {__version__}"


def one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """A warning as one line: sparktrail's messages name their own file and
    line (``trace.arrow:12: ...``); Python's source line would not help."""
    return f"sparktrail: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    # Before the subcommands import polars.
    configure_allocator(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    # The format, not showwarning: code that records warnings still does.
    formatted = warnings.formatwarning
    warnings.formatwarning = one_line_warning
    try:
        return _run(args)
    finally:
        warnings.formatwarning = formatted


def _run(args: argparse.Namespace) -> int:
    if args.command in WINDOW_LOOPS:
        # Imported here: sparktrail.pag imports polars.
        from sparktrail.pag.memory import retain_freed_memory

        retain_freed_memory()
    try:
        code: int = args.run(args)
    # A path that is missing or of the wrong kind is bad input too.
    except (
        InputError,
        FileNotFoundError,
        IsADirectoryError,
        NotADirectoryError,
    ) as err:
        print(f"sparktrail: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SparktrailError as err:
        print(f"sparktrail: error: {err}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except KeyboardInterrupt:
        print("sparktrail: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code
