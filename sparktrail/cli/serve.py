"""``sparktrail serve``: the live dashboard in a browser.

``sparktrail serve TRACE_DIR`` runs the online pipeline on TRACE_DIR (as
``sparktrail live`` does) in a background thread and shows each window as
it closes; ``sparktrail serve --report OUT_DIR`` shows the summaries that
``sparktrail profile`` wrote; ``sparktrail serve --compare BEFORE AFTER``
shows ``sparktrail compare``'s page of two runs. The server binds
127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktrail.engines.engine_choice import engine_for
from sparktrail.errors import InputError
from sparktrail.sources import open_profile

from ._options import add_lateness, add_server, add_window

if TYPE_CHECKING:
    from sparktrail.dashboard.live_view import LiveLoader

__all__ = ["live_loader", "register", "run"]


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
    parser.add_argument(
        "--compare",
        type=Path,
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="show `sparktrail compare BEFORE AFTER` (event logs, traces or "
        "profile folders)",
    )
    add_window(parser, batches=True)
    add_lateness(parser)
    add_server(parser)
    parser.set_defaults(run=run)


def live_loader(
    trace_dir: str | Path, window_ns: int | str, lateness_ns: int, **options: Any
) -> LiveLoader:
    """The dashboard's loader of the online pipeline this command runs on
    ``trace_dir`` (the dashboard only reads; the pipeline is opened here).

    ``options`` go to :class:`~sparktrail.dashboard.live_view.LiveLoader`.
    """
    from sparktrail.dashboard.live_view import LiveLoader

    engine = engine_for("polars", window_ns)
    pipeline = functools.partial(engine.live, trace_dir, lateness_ns)
    return LiveLoader(pipeline, trace_dir, lateness_ns, **options)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns the exit code."""
    from sparktrail.dashboard.app import create_app, serve
    from sparktrail.dashboard.live_view import (
        StaticSource,
        UpdateThread,
        ViewSource,
        load_report,
    )

    given = [x for x in (args.trace_dir, args.report, args.compare) if x is not None]
    if len(given) != 1:
        raise InputError(
            "give either TRACE_DIR or --report OUT_DIR or --compare BEFORE AFTER"
        )
    if args.compare is not None:
        return _serve_comparison(args)
    thread: UpdateThread | None = None
    source: ViewSource
    if args.report is not None:
        source = StaticSource(load_report(args.report))
    else:
        loader = live_loader(args.trace_dir, args.window, args.lateness)
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


def _serve_comparison(args: argparse.Namespace) -> int:
    """Serve the comparison of ``args.compare``'s two runs until interrupted."""
    from sparktrail.dashboard.app import create_compare_app, serve
    from sparktrail.engines.comparison import compare

    before, after = (open_profile(path, args.window) for path in args.compare)
    app = create_compare_app(compare(before, after))
    print(
        f"sparktrail comparison on http://{args.host}:{args.port}/ (Ctrl-C stops)",
        file=sys.stderr,
    )
    serve(app, args.host, args.port, verbose=args.verbose)
    return 0
