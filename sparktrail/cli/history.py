"""``sparktrail history DIR_OR_URI [-o OUT] [--json] [--serve] [--jobs N]``.

Profiles every application of an event-log directory (a History Server's
``spark.history.fs.logDirectory``, local or ``s3://``/``gs://``/...) once,
incrementally, and writes ``OUT/index.html``: one row per application,
ranked by what its top hint saves, each linking to its report
(:mod:`sparktrail.fleet`). ``--json`` prints the rows on stdout;
``--serve`` serves the page and re-scans every ``--interval`` seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktrail.errors import InputError
from sparktrail.tracer.remote import log_arg, log_name

from ._options import add_server, add_window, output_for

if TYPE_CHECKING:
    from sparktrail.fleet import FleetScan

__all__ = ["register", "routes", "rows_json", "run"]


def register(subparsers: Any) -> None:
    """Add the ``history`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "history",
        help="profile every application of an event-log directory (a fleet view)",
        description=(
            "Scan an event-log directory (spark.history.fs.logDirectory; a path "
            "or a URI), profile each new or changed log in parallel, and write "
            "OUT/index.html: the applications ranked by what can be saved, each "
            "linking to its report. Unchanged logs are not profiled again."
        ),
    )
    parser.add_argument(
        "logdir", type=log_arg, help="event-log directory, or its URI (s3://...)"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="the page and its cache (default: ./<dir>-history)",
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="worker processes (default: 2)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the rows as JSON on stdout"
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="serve the page (127.0.0.1:8050) and re-scan every --interval s",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=60.0,
        help="seconds between scans with --serve (default: 60)",
    )
    add_window(parser, batches=True)
    add_server(parser)
    parser.set_defaults(run=run)


def rows_json(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows in the ``--json`` contract's order (then ``log``, ``error``)."""
    from sparktrail.dashboard.fleet_page import ROW_KEYS

    return [
        {
            **{k: row.get(k) for k in ROW_KEYS},
            "log": row.get("log"),
            "error": row.get("error"),
        }
        for row in rows
    ]


def routes(result: FleetScan, out: Path) -> dict[str, Path]:
    """The URL paths the server answers: the page and each report."""
    from sparktrail.dashboard.fleet_page import FLEET_PAGE
    from sparktrail.fleet import APPS_DIR

    table = {"/": out / FLEET_PAGE, f"/{FLEET_PAGE}": out / FLEET_PAGE}
    for row in result.rows:
        report = row.get("report")
        if report and report.startswith(f"{APPS_DIR}/"):
            table[f"/{report}"] = out / report
    return table


def _print_scan(result: FleetScan) -> None:
    skipped = (
        f"; {result.skipped} file(s) skipped: not event logs" if result.skipped else ""
    )
    print(
        f"{len(result.rows)} applications: {result.profiled} "
        f"profiled, {result.reused} unchanged, {result.failed} could not be "
        f"profiled{skipped} -> {result.page}",
        file=sys.stderr,
    )


def run(args: argparse.Namespace) -> int:
    """Scan ``args.logdir`` into ``args.output``; returns the exit code."""
    from sparktrail.fleet import scan

    if args.jobs < 1:
        raise ValueError("--jobs must be at least 1")
    local = args.logdir if isinstance(args.logdir, Path) else None
    args.output = output_for(
        local or Path(log_name(args.logdir)), args.output, "history"
    )
    result = scan(args.logdir, args.output, jobs=args.jobs, window=args.window)
    _print_scan(result)
    if not result.rows and not args.serve:
        raise InputError(
            f"{args.logdir}: no Spark event log in it"
            + (
                f" ({result.skipped} file(s) are not event logs)"
                if result.skipped
                else ""
            )
        )
    if args.json:
        json.dump(rows_json(result.rows), sys.stdout, indent=2)
        sys.stdout.write("\n")
    if args.serve:
        _serve(args, result)
    return 0


def _serve(args: argparse.Namespace, first: FleetScan) -> None:
    """Serve the page and the reports (only those paths) and re-scan."""
    import http.server

    from sparktrail.fleet import scan

    table = {"routes": routes(first, args.output)}
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            target = table["routes"].get(self.path.split("?", 1)[0])
            if target is None or not target.is_file():
                self.send_error(404)
                return
            body = target.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *values: Any) -> None:
            if args.verbose:
                super().log_message(format, *values)

    def rescan() -> None:
        while not stop.wait(args.interval):
            result = scan(args.logdir, args.output, jobs=args.jobs, window=args.window)
            table["routes"] = routes(result, args.output)
            _print_scan(result)

    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    thread = threading.Thread(target=rescan, name="sparktrail-history", daemon=True)
    thread.start()
    print(
        f"sparktrail history on http://{args.host}:{args.port}/ (Ctrl-C stops)",
        file=sys.stderr,
    )
    try:
        server.serve_forever()
    finally:
        stop.set()
        server.server_close()
