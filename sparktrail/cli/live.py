"""``sparktrail live TRACE_DIR``: profile a trace directory as it grows.

Follows TRACE_DIR, closes each window once the watermark (latest event
minus ``--lateness``) has passed its end (``--window batch``: a window
per Structured Streaming micro-batch and per wait between two), and
appends its CP, summaries and hints to ``TRACE_DIR/.sparktrail/store/`` (see
:mod:`sparktrail.engines.store`). ``--once`` processes what is there and
exits; Ctrl-C stops.

It may also be killed at any moment (``kill -9`` included): a restart
resumes from the store's checkpoint, and the store ends up as an
uninterrupted run's (``bench/restart.py``). One process writes a store at
a time; a second ``live`` (or ``serve``) on the same directory is refused.

``--engine spark`` runs the same pipeline as a Spark Structured Streaming
query (:mod:`sparktrail.engines.spark_live`) on a local session: each
look at the directory is one ``AvailableNow`` run of the query. It writes
the same store, and refuses a store the polars engine wrote (and the
other way round).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktrail.engines.engine_choice import ENGINES, engine_for
from sparktrail.errors import InputError

from ._options import add_lateness, add_window

if TYPE_CHECKING:
    from sparktrail.engines.online import ClosedWindow, OnlinePipeline

if TYPE_CHECKING:  # imported on demand below: pyspark is optional
    from sparktrail.engines.spark_live import SparkLivePipeline

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``live`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "live",
        help="profile a growing trace directory window by window",
        description=(
            "Follow TRACE_DIR as trace files land, close each window when the "
            "watermark passes its end, and store its CP and summaries under "
            "TRACE_DIR/.sparktrail/store/."
        ),
    )
    parser.add_argument("trace_dir", type=Path, help="directory of *.arrow files")
    add_window(parser, batches=True)
    add_lateness(parser)
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="polars",
        help="run the pipeline on polars (default) or on Spark Structured Streaming",
    )
    parser.add_argument(
        "--poll",
        type=float,
        default=0.5,
        help="seconds between looks at the directory (default: 0.5)",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="process the files there now, close windows up to the watermark, exit",
    )
    parser.add_argument(
        "--final",
        action="store_true",
        help="with --once: the trace is complete, close every window",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="answer Prometheus scrapes on 127.0.0.1:PORT/metrics (README, "
        "'Prometheus and Grafana'; the metrics extra)",
    )
    parser.set_defaults(run=run)


def _metrics(args: argparse.Namespace, pipeline: Any) -> Any:
    """The snapshots ``--metrics-port`` serves, or ``None`` without it."""
    if args.metrics_port is None:
        return None
    from sparktrail.dashboard.metrics import PipelineSnapshots, serve_metrics

    snapshots = PipelineSnapshots(pipeline, str(args.trace_dir), args.lateness)
    try:
        serve_metrics(snapshots, "127.0.0.1", args.metrics_port)
    except ImportError as err:
        raise InputError(
            "--metrics-port needs prometheus-client: pip install 'sparktrail[metrics]'"
        ) from err
    return snapshots


def _report(window: ClosedWindow) -> str:
    start = dt.datetime.fromtimestamp(window.start_ns / 1e9, tz=dt.timezone.utc)
    top = window.summaries.activity.head(1).rows(named=True)
    lead = f"{top[0]['activity']} {top[0]['cp_share']:.0%}" if top else "no path"
    hints = len(window.summaries.hints)
    length = (window.end_ns - window.start_ns) / 1e9
    return f"window {start:%H:%M:%S.%f} UTC ({length:g} s): {lead}, {hints} hint(s)"


def _pipeline(args: argparse.Namespace) -> OnlinePipeline | SparkLivePipeline:
    """The pipeline of ``args.engine`` on ``args.trace_dir``.

    Raises
    ------
    ValueError
        If the spark engine cannot be imported (pyspark missing) or does not
        run ``args.window`` (:func:`~sparktrail.engines.engine_choice.engine_for`).
    """
    return engine_for(args.engine, args.window).live(args.trace_dir, args.lateness)


def run(args: argparse.Namespace) -> int:
    """Run the online pipeline on ``args.trace_dir``; returns the exit code."""
    from sparktrail.engines.online import OnlinePipeline

    if args.final and not args.once:
        raise InputError("--final needs --once (a live run never knows the end)")
    pipeline = _pipeline(args)
    total = 0
    try:
        metrics = _metrics(args, pipeline)
        while True:
            closed = pipeline.poll(final=args.final)
            for window in closed:
                total += 1
                print(_report(window), flush=True)
            if metrics is not None:
                metrics.publish(closed)
            if args.once:
                break
            time.sleep(args.poll)
    except KeyboardInterrupt:
        print("sparktrail: stopped", file=sys.stderr)
    finally:
        if not isinstance(pipeline, OnlinePipeline):
            pipeline.stop()  # the Spark session it started
    print(
        f"{total} window(s) closed; store: {pipeline.store.root}; "
        f"corrupt files skipped: {pipeline.corrupt_files}; "
        f"late rows: {pipeline.late_rows}",
        file=sys.stderr,
    )
    return 0
