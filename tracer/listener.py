"""The live bridge: tracing a running Spark application as it runs.

Two halves, because a Python listener cannot keep up: through py4j each
callback costs ~40 ms (~25 events/s) and Spark's shared listener queue
drops events beyond 10,000 waiting ones.

* In the driver JVM, ``dev.sparktrail.SparktrailListener`` (Java, compiled
  on first use, see :mod:`sparktrail.tracer.jvm`) keeps the events the
  model uses and writes them, off the listener-bus thread, as a Spark-format
  rolling event log ``<out_dir>/raw/eventlog_v2_<appId>/events_<n>_<appId>``:
  a new segment every ``flush_seconds`` or ``max_events`` events, whichever
  comes first, each renamed into place when complete; the empty
  ``appstatus_<appId>`` marker says it is finished. A ``SparkSession``
  stopped while traced finishes the log by itself: Spark posts the
  application end first and the stop's own events after it (tasks that
  ended meanwhile, the ends of the jobs it cancelled), so the log is marked
  complete once the listener bus has delivered its last event; the follower
  then writes the rest and exits, and ``detach`` only collects its stats.
* A follower process (a child of the driver's Python, at the lowest CPU
  priority) follows that log with :func:`sparktrail.tracer.follow_eventlog`
  and writes Arrow trace files ``<out_dir>/<appId>-<n>.arrow`` (renamed
  into place) as rows become final, so ``read_trace(out_dir)`` is the trace
  so far. Each poll rebuilds the model from all events so far, so on a busy
  machine the files lag behind the log and catch up when CPU is idle.

Entry points:

* :func:`attach` on a running ``SparkSession``; :func:`detach` removes the
  listener, writes the rest and stops the follower.
* :func:`spark_conf` gives settings that install the listener when the
  application starts (``spark.extraListeners``), so nothing is missed before
  ``attach``. Only the JVM half runs then; the Arrow conversion runs either
  from the driver's Python, by ``attach(spark, out_dir, existing=True)``
  later (it takes over the listener Spark created), or in any process by
  ``sparktrail import --follow <out_dir>/raw/eventlog_v2_<appId> -o <out_dir>``.
  The raw log is complete and importable on its own at application end.

Attaching to a running application starts the log with what Spark posted
before (application start, the master setting, executors and their cores);
jobs already running are traced from their next event on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .jvm import CLASS_NAME, listener_classes, load_listener_class
from .spark_model import ImportStats

__all__ = [
    "LiveStats",
    "LiveTrace",
    "attach",
    "detach",
    "dropped_events",
    "follow_main",
    "spark_conf",
]

#: Events per raw segment that force a write before ``flush_seconds``.
MAX_EVENTS = 20_000

# Attached traces by application id: one bridge per application.
_ATTACHED: dict[str, LiveTrace] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class LiveStats:
    """A snapshot of a live trace's counters.

    Attributes
    ----------
    events_seen
        Listener events delivered to the Java listener, of any kind.
    events_received
        Events of the kinds the model uses, taken into the raw log.
    task_ends
        ``TaskEnd`` events among them.
    lines_written
        Lines in raw segment files (received events plus the header lines
        an attach writes for what happened before it).
    lines_buffered
        Lines still in the JVM's memory.
    segments
        Raw segment files written.
    trace_files
        Arrow trace files in ``out_dir``.
    rows
        Rows in those files.
    dropped
        Spark's ``numDroppedEvents`` counter per listener queue.
    """

    events_seen: int
    events_received: int
    task_ends: int
    lines_written: int
    lines_buffered: int
    segments: int
    trace_files: int
    rows: int
    dropped: dict[str, int] = field(default_factory=dict)


def dropped_events(spark: Any) -> dict[str, int]:
    """Spark's count of events each listener queue dropped, by queue name.

    Parameters
    ----------
    spark
        A running ``SparkSession`` or ``SparkContext``.

    Returns
    -------
    dict[str, int]
        E.g. ``{"shared": 0, "appStatus": 0, "eventLog": 0, ...}``.
    """
    sc = getattr(spark, "sparkContext", spark)
    registry = sc._jsc.sc().listenerBus().metrics().metricRegistry()
    counters = registry.getCounters()
    out: dict[str, int] = {}
    for name in list(counters.keySet()):
        text = str(name)
        if text.endswith(".numDroppedEvents"):
            queue = text.removesuffix(".numDroppedEvents").removeprefix("queue.")
            out[queue] = int(counters.get(name).getCount())
    return out


def _arrow_rows(path: Path) -> int:
    import pyarrow.ipc as ipc

    with ipc.open_file(path) as reader:
        return sum(
            reader.get_batch(i).num_rows for i in range(reader.num_record_batches)
        )


class LiveTrace:
    """A live bridge attached to one Spark application (returned by :func:`attach`).

    Attributes
    ----------
    out_dir
        Where the Arrow trace files go; the raw log is under ``out_dir/raw``.
    app_id
        The application's id.
    log_dir
        The raw rolling event log, ``out_dir/raw/eventlog_v2_<app_id>``.
    """

    def __init__(
        self,
        sc: Any,
        listener: Any,
        out_dir: Path,
        *,
        flush_seconds: float,
        follow: bool,
        nice: int,
        registered: bool,
    ) -> None:
        self._sc = sc
        self._listener = listener
        self._registered = registered
        self._detached = False
        self.out_dir = out_dir
        self.app_id: str = str(sc.applicationId)
        self.log_dir = out_dir / "raw" / f"eventlog_v2_{self.app_id}"
        self._poll = flush_seconds
        self.import_stats = ImportStats()
        self._proc: subprocess.Popen[str] | None = None
        self._follow_log = out_dir / f".follow-{self.app_id}.log"
        if follow:
            # A child process at the lowest CPU priority, not a thread: each
            # poll rebuilds the model (~1 s of CPU per 20,000 tasks), which
            # in-process took CPU from the tasks and ran the job 21% longer on
            # 2 cores; niced, it uses idle CPU and catches up between jobs.
            with self._follow_log.open("w") as log:
                self._proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        "from sparktrail.tracer.listener import follow_main; "
                        "raise SystemExit(follow_main())",
                        str(self.log_dir),
                        str(out_dir),
                        "--poll",
                        str(flush_seconds),
                        "--nice",
                        str(nice),
                        "--parent",
                        str(os.getpid()),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                )

    @property
    def attached(self) -> bool:
        """Whether :meth:`detach` has not been called yet."""
        return not self._detached

    def trace_files(self) -> list[Path]:
        """The Arrow trace files written so far, in order."""
        return sorted(self.out_dir.glob(f"{self.app_id}-*.arrow"))

    def stats(self) -> LiveStats:
        """Counters of the JVM listener, the trace files and Spark's drop counts."""
        files = self.trace_files()
        listener = self._listener
        dropped: dict[str, int] = {}
        if self._sc._jsc is not None:  # None once the SparkContext stopped
            dropped = dropped_events(self._sc)
        return LiveStats(
            events_seen=int(listener.eventsSeen()),
            events_received=int(listener.eventsReceived()),
            task_ends=int(listener.taskEndsReceived()),
            lines_written=int(listener.linesWritten()),
            lines_buffered=int(listener.linesBuffered()),
            segments=int(listener.segmentsWritten()),
            trace_files=len(files),
            rows=sum(_arrow_rows(f) for f in files),
            dropped=dropped,
        )

    def _wait_follower(self, timeout: float) -> str:
        """Wait for the follower to see the finished log; its stdout."""
        if self._proc is None:
            return ""
        try:
            output, _ = self._proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # SIGINT makes follow_eventlog write the rest and return.
            self._proc.send_signal(signal.SIGINT)
            try:
                output, _ = self._proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                output, _ = self._proc.communicate()
        return output

    def detach(self, timeout: float = 60.0) -> LiveStats:
        """Stop tracing: remove the listener, write everything, stop the follower.

        Events Spark posted before the call are waited for (the listener
        queues are drained first), so the trace covers every job that
        finished before ``detach``.

        Parameters
        ----------
        timeout
            Longest wait, in seconds, for each of: the listener queues to
            drain, the JVM writer, the Python follower.

        Returns
        -------
        LiveStats
            The final counters.

        Raises
        ------
        RuntimeError
            If the JVM writer or the follower did not finish in time, or the
            follower failed (the cause is chained).
        """
        millis = int(timeout * 1000)
        jsc = self._sc._jsc
        if jsc is not None and self._registered:
            bus = jsc.sc().listenerBus()
            # Deliver what was posted before detach; on a timeout detach anyway
            # (the counters then show what was not written).
            with contextlib.suppress(Exception):
                bus.waitUntilEmpty(millis)
            jsc.sc().removeSparkListener(self._listener)
            self._registered = False
        self._detached = True
        finished = bool(self._listener.close(millis))
        output = self._wait_follower(timeout)
        with _LOCK:
            if _ATTACHED.get(self.app_id) is self:
                del _ATTACHED[self.app_id]
        if not finished:
            error = self._listener.lastError()
            raise RuntimeError(
                f"sparktrail listener did not finish writing {self.log_dir}"
                + (f": {error}" if error else f" within {timeout} s")
            )
        if self._proc is not None:
            if self._proc.returncode != 0:
                tail = self._follow_log.read_text(errors="replace")[-3000:]
                raise RuntimeError(
                    f"trace follower for {self.log_dir} failed "
                    f"(exit {self._proc.returncode}):\n{tail}"
                )
            lines = output.strip().splitlines()
            for key, value in (json.loads(lines[-1]) if lines else {}).items():
                if hasattr(self.import_stats, key):
                    setattr(self.import_stats, key, value)
            self._follow_log.unlink(missing_ok=True)
        return self.stats()


def attach(
    spark: Any,
    out_dir: str | os.PathLike[str],
    *,
    flush_seconds: float = 1.0,
    max_events: int = MAX_EVENTS,
    existing: bool = False,
    follow: bool = True,
    nice: int = 19,
) -> LiveTrace:
    """Attach the live bridge to a running Spark application.

    Parameters
    ----------
    spark
        A running ``SparkSession`` (or ``SparkContext``).
    out_dir
        Directory of the trace: Arrow files ``<appId>-<n>.arrow`` and the raw
        event log under ``raw/``. One application per directory.
    flush_seconds
        Longest time an event waits before it reaches disk, and the follower's
        polling interval (so roughly one Arrow file per interval while tasks
        finish).
    max_events
        Events that make the JVM write a raw segment before ``flush_seconds``.
    existing
        Take over the listener :func:`spark_conf` made Spark create at start-up
        (same ``out_dir``) instead of registering a new one.
    follow
        Convert to Arrow while the application runs (the default), in a child
        process of this Python. Without it only the raw log is written.
    nice
        CPU niceness of that child (19: it only takes CPU the application
        leaves idle, so trace files may lag behind while all cores are busy).

    Returns
    -------
    LiveTrace
        The handle: ``stats()``, ``trace_files()``, ``detach()``.

    Raises
    ------
    RuntimeError
        If the application already has a bridge in this process, if
        ``out_dir`` already holds this application's finished raw log, or if
        ``existing`` and no start-up listener writes to ``out_dir``.
    JavaNotFoundError
        If the listener must be compiled and there is no JDK.
    """
    sc = getattr(spark, "sparkContext", spark)
    out = Path(out_dir).resolve()
    app_id = str(sc.applicationId)
    with _LOCK:
        if app_id in _ATTACHED and _ATTACHED[app_id].attached:
            raise RuntimeError(f"{app_id} already has a live trace in {out}")
        cls = load_listener_class(sc)
        jvm, gateway = sc._jvm, sc._gateway
        if existing:
            listener = _static(gateway, jvm, cls, "forTraceDir", str(out))
            if listener is None:
                raise RuntimeError(
                    f"no {CLASS_NAME} writes to {out}: start the application with "
                    "sparktrail.tracer.spark_conf(out_dir) or attach without existing"
                )
        else:
            if any((out / "raw" / f"eventlog_v2_{app_id}").glob("appstatus_*")):
                raise RuntimeError(
                    f"{out} already holds a trace of {app_id}; use a new directory"
                )
            out.mkdir(parents=True, exist_ok=True)
            listener = _new(
                gateway,
                jvm,
                cls,
                str(out),
                int(flush_seconds * 1000),
                int(max_events),
            )
            listener.attachTo(sc._jsc.sc())
        live = LiveTrace(
            sc,
            listener,
            out,
            flush_seconds=flush_seconds,
            follow=follow,
            nice=nice,
            registered=not existing,
        )
        _ATTACHED[app_id] = live
    return live


def detach(spark: Any, timeout: float = 60.0) -> LiveStats:
    """Detach the live bridge from an application (see :meth:`LiveTrace.detach`).

    Raises
    ------
    RuntimeError
        If the application has no bridge in this process.
    """
    sc = getattr(spark, "sparkContext", spark)
    with _LOCK:
        live = _ATTACHED.get(str(sc.applicationId))
    if live is None:
        raise RuntimeError(f"{sc.applicationId} has no live trace to detach")
    return live.detach(timeout)


def spark_conf(
    out_dir: str | os.PathLike[str],
    *,
    flush_seconds: float = 1.0,
    max_events: int = MAX_EVENTS,
) -> dict[str, str]:
    """Settings that install the listener when the application starts.

    Compiles the listener if needed (a JDK must be present here; the driver
    runs the classes from this machine's cache directory, so it must be
    local). Merge them into an existing ``spark.extraListeners`` or
    ``spark.driver.extraClassPath`` by hand (comma- and path-separated).

    Only the JVM half runs from these settings: it writes the raw rolling
    log under ``out_dir/raw/``. Arrow files come from
    ``attach(spark, out_dir, existing=True)`` in the driver's Python process,
    or from ``sparktrail import --follow <out_dir>/raw/eventlog_v2_<appId>
    -o <out_dir>`` anywhere; without either, the raw log alone is a complete
    event log at application end.

    Parameters
    ----------
    out_dir
        The trace directory (made absolute).
    flush_seconds, max_events
        As in :func:`attach`.

    Returns
    -------
    dict[str, str]
        For ``SparkSession.builder.config(map=...)`` or ``--conf`` flags.
    """
    return {
        "spark.extraListeners": CLASS_NAME,
        "spark.driver.extraClassPath": str(listener_classes()),
        "spark.sparktrail.traceDir": str(Path(out_dir).resolve()),
        "spark.sparktrail.flushMillis": str(int(flush_seconds * 1000)),
        "spark.sparktrail.maxEvents": str(int(max_events)),
    }


def _class_array(gateway: Any, jvm: Any, names: list[str]) -> Any:
    array = gateway.new_array(jvm.java.lang.Class, len(names))
    primitives = {"long": jvm.java.lang.Long.TYPE, "int": jvm.java.lang.Integer.TYPE}
    for i, name in enumerate(names):
        array[i] = primitives.get(name) or jvm.java.lang.Class.forName(name)
    return array


def _object_array(gateway: Any, jvm: Any, values: list[Any]) -> Any:
    array = gateway.new_array(jvm.java.lang.Object, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


def _new(gateway: Any, jvm: Any, cls: Any, out: str, millis: int, events: int) -> Any:
    # py4j's jvm.<package> lookup cannot see a class from our class loader, so
    # construct it through reflection on the Class object.
    ctor = cls.getConstructor(
        _class_array(gateway, jvm, ["java.lang.String", "long", "int"])
    )
    args = [out, jvm.java.lang.Long(millis), jvm.java.lang.Integer(events)]
    return ctor.newInstance(_object_array(gateway, jvm, args))


def _static(gateway: Any, jvm: Any, cls: Any, name: str, arg: str) -> Any:
    method = cls.getMethod(name, _class_array(gateway, jvm, ["java.lang.String"]))
    return method.invoke(None, _object_array(gateway, jvm, [arg]))


def follow_main(argv: list[str] | None = None) -> int:
    """The follower process: ``LOG_DIR OUT_DIR [--poll S] [--nice N] [--parent PID]``.

    Waits for the first raw segment, then runs
    :func:`~sparktrail.tracer.follow_eventlog` until the log is complete (or
    the parent process is gone, or SIGINT), and prints its
    :class:`~sparktrail.tracer.ImportStats` as one JSON line.
    """
    from .importer import follow_eventlog

    parser = argparse.ArgumentParser(prog="sparktrail-follow")
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--nice", type=int, default=0)
    parser.add_argument("--parent", type=int, default=0)
    args = parser.parse_args(argv)
    if args.nice:
        os.nice(args.nice)
    stop = threading.Event()

    def orphaned() -> None:
        # If the driver dies without closing the log, finish what we have.
        while not stop.wait(1.0):
            if args.parent and os.getppid() != args.parent:
                stop.set()

    threading.Thread(target=orphaned, daemon=True).start()
    stats = ImportStats()
    try:
        while not any(args.log_dir.glob("events_*")):
            if stop.is_set():
                return 0
            time.sleep(min(args.poll, 0.2))
    except KeyboardInterrupt:
        return 0
    files = follow_eventlog(
        args.log_dir, args.out_dir, poll_s=args.poll, stop=stop, stats=stats
    )
    stop.set()
    print(json.dumps({**asdict(stats), "trace_files": len(files)}), flush=True)
    return 0
