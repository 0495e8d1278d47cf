"""``sparktrail serve``: the live dashboard in a browser.

``sparktrail serve TRACE_DIR`` runs the online pipeline on TRACE_DIR (as
``sparktrail live`` does) in a background thread and shows each window as
it closes; ``sparktrail serve LOG`` profiles an event log and shows its
report; ``sparktrail serve --report OUT_DIR`` (or ``serve OUT_DIR``) shows
the summaries that ``sparktrail profile`` wrote; ``sparktrail serve
--compare BEFORE AFTER`` shows ``sparktrail compare``'s page of two runs.
The server binds 127.0.0.1 unless ``--host`` says otherwise.
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
        "trace_dir",
        type=Path,
        nargs="?",
        metavar="INPUT",
        help="a directory of *.arrow trace files (followed live), an event log "
        "(profiled, then shown) or a `sparktrail profile` output",
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
    from sparktrail.engines.run_so_far import RunSoFar

    engine = engine_for("polars", window_ns)
    pipeline = functools.partial(engine.live, trace_dir, lateness_ns)
    options.setdefault("run_so_far", RunSoFar(trace_dir, engine))
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
    kind = "report" if args.report is not None else _kind_of(args.trace_dir)
    if kind == "report":
        source = StaticSource(load_report(args.report or args.trace_dir))
    elif kind == "log":
        source = StaticSource(_profiled(args.trace_dir, args.window))
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


def _kind_of(path: Path) -> str:
    """What ``serve INPUT`` shows: ``report`` (a profile folder), ``live``
    (a trace directory, perhaps still empty) or ``log`` (an event log)."""
    from sparktrail.pag.trace import trace_files
    from sparktrail.sources import is_profile_folder
    from sparktrail.tracer.eventlog import EventLogError, SeveralLogsError, resolve

    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if is_profile_folder(path):
        return "report"
    if not path.is_dir():
        return "log"
    if trace_files(path) or (path / "raw").is_dir():
        return "live"
    try:
        resolve(path)
    except SeveralLogsError:
        return "log"  # refused by _profiled, pointing at `history --serve`
    except EventLogError:
        return "live"  # a trace directory still to fill (or its store only)
    return "log"


def _profiled(log: Path, window: int | str) -> Any:
    """The snapshot of ``log`` profiled (one line on stderr while it runs); a
    folder of several logs is the fleet's, which ``history --serve`` shows."""
    from sparktrail.dashboard.live_view import profile_snapshot
    from sparktrail.tracer.eventlog import SeveralLogsError

    print(f"sparktrail: profiling {log} ...", file=sys.stderr)
    try:
        profile = open_profile(log, window)
    except SeveralLogsError as err:
        raise InputError(
            f"{err}; `sparktrail history {log} --serve` shows them all"
        ) from err
    return profile_snapshot(profile, str(log))


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
