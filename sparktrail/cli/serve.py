"""``sparktrail serve``: the live dashboard in a browser.

``sparktrail serve TRACE_DIR`` runs the online pipeline on TRACE_DIR (as
``sparktrail live`` does) in a background thread and shows each window as
it closes; ``sparktrail serve --report OUT_DIR`` shows the summaries that
``sparktrail profile`` wrote. The server binds 127.0.0.1 unless ``--host``
says otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sparktrail.dashboard.app import create_app, serve
from sparktrail.dashboard.snapshots import (
    LiveLoader,
    SnapshotSource,
    StaticSource,
    UpdateThread,
    load_report,
)
from sparktrail.errors import InputError

from ._options import add_lateness, add_server, add_window

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``serve`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="show a live trace directory (or a finished report) in a browser",
        description=(
            "Serve the sparktrail dashboard: profile TRACE_DIR window by window "
            "as it grows, or show OUT_DIR/summaries of `sparktrail profile` "
            "(--report)."
        ),
    )
    parser.add_argument(
        "trace_dir", type=Path, nargs="?", help="directory of *.arrow trace files"
    )
    parser.add_argument(
        "--report", type=Path, metavar="OUT_DIR", help="a `sparktrail profile` output"
    )
    add_window(parser, batches=True)
    add_lateness(parser)
    add_server(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns the exit code."""
    if (args.trace_dir is None) == (args.report is None):
        raise InputError("give either TRACE_DIR or --report OUT_DIR")
    thread: UpdateThread | None = None
    source: SnapshotSource
    if args.report is not None:
        source = StaticSource(load_report(args.report))
    else:
        loader = LiveLoader(args.trace_dir, args.window, args.lateness)
        # Here, not in the thread: a store another process writes is refused
        # in one line before anything is served.
        loader.start()
        thread = UpdateThread(loader.step, source=str(args.trace_dir))
        thread.start()
        source = thread
    app = create_app(source)
    print(
        f"sparktrail dashboard on http://{args.host}:{args.port}/ (Ctrl-C stops)",
        file=sys.stderr,
    )
    try:
        serve(app, args.host, args.port, verbose=args.verbose)
    finally:
        if thread is not None:
            thread.stop()
    return 0
