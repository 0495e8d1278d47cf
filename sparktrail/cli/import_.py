"""``sparktrail import EVENTLOG -o TRACE_DIR [--follow]``: event log -> trace."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sparktrail.tracer.remote import log_arg, log_name

from ._options import add_output, output_for

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``import`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "import",
        help="import a Spark event log as a trace",
        description=(
            "Read a Spark event log (a file; a rolling eventlog_v2_* "
            "directory; a Spark 1.x log directory; a Databricks folder of "
            "eventlog and eventlog-*.gz; plain, zstd, lz4, snappy, lzf or gzip) "
            "and write TRACE_DIR/<appId>[_<attemptId>].arrow."
        ),
    )
    parser.add_argument(
        "eventlog",
        type=log_arg,
        help="event-log file or directory, or its URI (s3://, gs://, abfs://, ...)",
    )
    add_output(parser, "trace directory to write")
    parser.add_argument(
        "--follow",
        action="store_true",
        help="keep reading a log that is being written; one trace file per batch",
    )
    parser.add_argument(
        "--poll", type=float, default=1.0, help="seconds between reads with --follow"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Import ``args.eventlog`` into ``args.output``; print a one-line summary."""
    from sparktrail.pag.trace import write_trace
    from sparktrail.tracer import ImportStats, follow_eventlog, import_trace, trace_name

    local = args.eventlog if isinstance(args.eventlog, Path) else None
    args.output = output_for(
        local or Path(log_name(args.eventlog)), args.output, "trace"
    )
    stats = ImportStats()
    if args.follow:
        files = follow_eventlog(
            args.eventlog, args.output, poll_s=args.poll, stats=stats
        )
        where = f"{len(files)} files in {args.output}"
    else:
        trace = import_trace(args.eventlog, stats=stats)
        name = trace_name(args.eventlog, stats.app_id, trace.context.attempt_id)
        target = args.output / f"{name}.arrow"
        where = str(write_trace(trace, target))
    print(f"{stats.summary()} -> {where}")
    return 0
