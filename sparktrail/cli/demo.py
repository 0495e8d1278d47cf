"""``sparktrail demo``: run a real local Spark workload, traced live.

Without ``--serve`` it runs three short workloads with known bottlenecks and
leaves a trace to profile. With ``--serve`` it is the live demo: a workload
whose hot key moves every few rounds runs for ``--minutes`` beside a
Structured Streaming query (two rate sources joined by key, whose hot
key moves every 10 s: :func:`~sparktrail.workloads.streaming_join`), in
one traced application, while the dashboard follows the trace; the
dashboard stays up until Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._invocation import program
from ._options import add_lateness, add_server, add_window

if TYPE_CHECKING:
    from sparktrail.tracer.listener import LiveStats

#: The live demo's streaming query: its state partitions and trigger.
STATE_PARTITIONS = 2
TRIGGER_SECONDS = 5.0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run a small real Spark workload and trace it live",
        description="Start local Spark, attach the live tracer, run workloads "
        "with a known straggler and a skewed join; the trace is ready to profile. "
        "With --serve, a moving hotspot runs while the dashboard shows it live.",
    )
    parser.add_argument(
        "-o", "--out", default=".run/demo", help="trace directory (replaced)"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master URL")
    parser.add_argument(
        "--serve", action="store_true", help="serve the live dashboard meanwhile"
    )
    parser.add_argument(
        "--minutes", type=float, default=3.0, help="with --serve: workload length"
    )
    add_window(parser, batches=True)
    add_lateness(parser)
    add_server(parser)
    parser.set_defaults(run=run)


def _session(master: str) -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName("sparktrail-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # Let the skewed join show its skew: no adaptive skew handling and no
        # broadcast of its small side (which would avoid the shuffle).
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .getOrCreate()
    )


def run(args: argparse.Namespace) -> int:
    from sparktrail.pag import read_trace
    from sparktrail.tracer import attach, detach

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    print(f"starting Spark ({args.master}) ...", flush=True)
    spark = _session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        attach(spark, out)
        if args.serve:
            _serve_moving_hotspot(spark, out, args)
        else:
            _run_workloads(spark)
        stats = detach(spark)
    finally:
        spark.stop()
    print(traced_line(stats, len(read_trace(out)), out), flush=True)
    profile = f"{program()} profile {out} --window 1s -o {out.parent / 'profile'}"
    print(f"profile it with: {profile}")
    return 0


def traced_line(stats: LiveStats, rows: int, out: Path) -> str:
    """What the live tracer took, in one line: events, rows, drops.

    >>> from sparktrail.tracer.listener import LiveStats
    >>> s = LiveStats(events_seen=900, events_received=812, task_ends=640,
    ...     lines_written=830, lines_buffered=0, segments=3, trace_files=4,
    ...     rows=2100, dropped={"shared": 0, "eventLog": 0})
    >>> print(traced_line(s, 2100, Path("run")))  # doctest: +NORMALIZE_WHITESPACE
    traced 812 events (640 tasks) into run: 2,100 trace rows in 4 files;
    Spark dropped no event
    """
    lost = sum(stats.dropped.values())
    dropped = (
        "Spark dropped no event"
        if not lost
        else "Spark dropped "
        + ", ".join(f"{n:,} on {q}" for q, n in stats.dropped.items() if n)
        + " (raise spark.scheduler.listenerbus.eventqueue.capacity)"
    )
    return (
        f"traced {stats.events_received:,} events ({stats.task_ends:,} tasks) into "
        f"{out}: {rows:,} trace rows in {stats.trace_files} files; {dropped}"
    )


def _run_workloads(spark: Any) -> None:
    from sparktrail.workloads import WORKLOADS

    for name, workload in WORKLOADS.items():
        start = time.perf_counter()
        workload(spark)
        print(f"  ran {name} in {time.perf_counter() - start:.1f} s", flush=True)


def _stop_on_interrupt(stop: threading.Event) -> Any:
    """Make Ctrl-C set ``stop`` (a second one interrupts); the old handler.

    PySpark's own SIGINT handler cancels every job through py4j from inside
    whatever py4j call the main thread is in, and py4j logs the clash as
    tracebacks; ending after the running round is quiet and quick (a round
    takes about a second). None when not in the main thread (no handler).
    """

    def on_interrupt(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nstopping after this round ...", file=sys.stderr, flush=True)

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, on_interrupt)


def _serve_moving_hotspot(spark: Any, out: Path, args: argparse.Namespace) -> None:
    """Run the moving hotspot under the live dashboard until time or Ctrl-C."""
    from sparktrail.dashboard.app import create_app, serve
    from sparktrail.dashboard.live_view import UpdateThread

    from .serve import live_loader

    loader = live_loader(out, args.window, args.lateness)
    updates = UpdateThread(loader.step, source=str(out))
    updates.start()
    app = create_app(updates)
    server = threading.Thread(
        target=serve,
        args=(app, args.host, args.port),
        kwargs={"verbose": args.verbose},
        daemon=True,  # the Flask dev server has no stop(); it ends with us
    )
    server.start()
    url = f"http://{args.host}:{args.port}/"
    print(f"sparktrail dashboard on {url} (Ctrl-C stops)", file=sys.stderr)
    stop = threading.Event()
    previous = _stop_on_interrupt(stop)
    try:
        run_lesson(spark, out, args.minutes * 60, stop)
        if not stop.is_set():
            print(
                f"workload done; the dashboard stays on {url} until Ctrl-C", flush=True
            )
        while not stop.wait(0.25):
            pass
    except KeyboardInterrupt:
        print("\nstopping ...", file=sys.stderr, flush=True)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        updates.stop()


def run_lesson(spark: Any, out: Path, seconds: float, stop: threading.Event) -> None:
    """The live demo's workload: rounds of the moving hotspot's join beside
    the streaming join, for ``seconds`` or until ``stop`` is set (after the
    running round); the streaming query is stopped on the way out, whatever
    ends it. Its checkpoint is ``out/.checkpoint``, hidden from the live
    pipeline, which skips dot-entries."""
    from sparktrail.workloads import (
        moving_hotspot,
        streaming_join,
        warm_python_workers,
    )

    warm_python_workers(spark)
    # Two state partitions and a 5 s trigger: each partition costs a state
    # store commit a batch, each batch ~0.3 s of planning; eight partitions
    # every second would keep a core of local[2] busy and leave the batch
    # join's skew no idle core to cost, and batches of 1.3 s (3 s beside
    # the join under load) would outlast a 2 s trigger.
    query = streaming_join(
        spark,
        str(out / ".checkpoint"),
        state_partitions=STATE_PARTITIONS,
        trigger_seconds=TRIGGER_SECONDS,
    )
    try:
        deadline = time.monotonic() + seconds
        round_ = 0
        while not stop.is_set() and time.monotonic() < deadline:
            hot = moving_hotspot(spark, round_)
            print(f"  round {round_}: hot key {hot}; {_progress(query)}", flush=True)
            round_ += 1
    finally:
        _stop_query(spark, query)


def _progress(query: Any) -> str:
    """The streaming query's last micro-batch, in one phrase."""
    last = query.lastProgress
    if not last:
        return "streaming query starting"
    return (
        f"streaming batch {last['batchId']}: "
        f"{last.get('inputRowsPerSecond') or 0:,.0f} rows/s in, "
        f"{last.get('processedRowsPerSecond') or 0:,.0f} rows/s processed"
    )


def _stop_query(spark: Any, query: Any) -> None:
    # Stopping interrupts the running batch, whose sink then logs its abort
    # as an ERROR with a stack trace: expected, so not shown.
    spark.sparkContext.setLogLevel("OFF")
    query.stop()
    spark.sparkContext.setLogLevel("ERROR")
