"""Every log profiles in bounded time and memory (DESIGN §10, issue 25).

Three tables for BENCHMARKS.md:

1. ``sparktrail profile LOG`` of every log of ``eventlogs/public`` and
   ``eventlogs/hostile``, each in a child process: its wall time and its
   own peak RSS (``VmHWM``), against the budget of 60 s and 1 GiB that
   ``tests/integration/test_bounded_cost.py`` holds each log to.
2. ``summarize`` of a run whose driver waited 10^3 to 10^9 s between two
   jobs: the windows built and the time, flat in the span.
3. What the first pass over a log costs (the census of its times that
   finds implausible ones, ``tracer/outliers.py``): ``import_trace`` of a
   replicated Spark log with and without the census, alternating, medians.

Run (from the repository root)::

    .venv/bin/python -m bench.bounded_cost [--import-mb 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from bench.importer import replicated_log
from bench.public_hints import event_logs

EVENTLOGS = Path(__file__).resolve().parents[2] / "shared" / "eventlogs"
BUDGET_S = 60.0
BUDGET_BYTES = 1 << 30

__all__ = ["BUDGET_BYTES", "BUDGET_S", "Run", "profile_in_child"]


@dataclass(frozen=True)
class Run:
    """A child's exit code, wall time, own peak RSS and standard error, and
    its resident file-backed bytes when it ended (``RssFile``: the
    libraries it loaded, and whatever pages of the trace it left mapped)."""

    code: int
    seconds: float
    peak_bytes: int
    stderr: str
    file_bytes: int = 0


#: The child: ``sparktrail profile`` that prints its own peak RSS (VmHWM,
#: kB) and its file-backed resident set (RssFile, kB) last on stderr. Not
#: the parent's rusage: Linux keeps the high-water mark of the process image
#: a child was forked from (a 1.1 GB pytest process made every child
#: "1.1 GB"), VmHWM only the child's own.
_CHILD = """
import atexit, sys
def _peak():
    kb = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        kb[key] = value.split()[0] if value.split() else "0"
    sys.stderr.write("\\n" + _MARK + kb["VmHWM"] + " " + kb["RssFile"] + "\\n")
atexit.register(_peak)
from sparktrail.cli import main
sys.exit(main(sys.argv[1:]))
"""
_MARK = "sparktrail-peak-kb:"


def profile_in_child(log: Path, out: Path, *options: str) -> Run:
    """``sparktrail profile LOG -o OUT [OPTIONS]`` in a child, with its own
    peak RSS (``VmHWM``) and wall time."""
    began = time.monotonic()
    code = f"_MARK = {_MARK!r}\n" + _CHILD
    child = subprocess.run(
        [sys.executable, "-c", code, "profile", str(log), "-o", str(out), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - began
    stderr, _, marked = child.stderr.rpartition(_MARK)
    peak, _, mapped = marked.strip().partition(" ")
    return Run(
        child.returncode,
        seconds,
        int(peak or 0) * 1024,
        stderr,
        int(mapped or 0) * 1024,
    )


def _budget_table() -> str:
    lines = [
        "| log | exit | wall time (s) | peak RSS (MiB) |",
        "|---|---:|---:|---:|",
    ]
    times, peaks = [], []
    for log in event_logs(EVENTLOGS / "public") + event_logs(EVENTLOGS / "hostile"):
        with tempfile.TemporaryDirectory() as tmp:
            run = profile_in_child(log, Path(tmp) / "out")
        times.append(run.seconds)
        peaks.append(run.peak_bytes)
        name = str(log.relative_to(EVENTLOGS))
        mib = run.peak_bytes / 2**20
        lines.append(f"| {name} | {run.code} | {run.seconds:.1f} | {mib:.0f} |")
    lines.append(
        f"| **{len(times)} logs: median / max** | | {statistics.median(times):.1f} / "
        f"{max(times):.1f} | {statistics.median(peaks) / 2**20:.0f} / "
        f"{max(peaks) / 2**20:.0f} |"
    )
    return "\n".join(lines)


def _census_table(target_mb: float, repeat: int) -> str:
    import sparktrail.tracer.importer as tracer
    from sparktrail.tracer.outliers import TimeCensus

    real = tracer.time_census

    def unchecked(path: object) -> TimeCensus:
        census = TimeCensus()
        census.close()
        return census

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "app-replicated"
        replicated_log(log, target_mb)
        size = log.stat().st_size / 1e6
        runs: dict[str, list[float]] = {"with the census": [], "without": []}
        for _ in range(repeat):
            for name, census in (("with the census", real), ("without", unchecked)):
                tracer.time_census = census  # type: ignore[assignment]
                began = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tracer.import_trace(log, progress=False)
                runs[name].append(time.perf_counter() - began)
        tracer.time_census = real
    with_s = statistics.median(runs["with the census"])
    without_s = statistics.median(runs["without"])
    return "\n".join(
        [
            f"| import of {size:.0f} MB | median of {repeat} (s) | MB/s |",
            "|---|---:|---:|",
            f"| without the census | {without_s:.2f} | {size / without_s:.1f} |",
            f"| with the census | {with_s:.2f} | {size / with_s:.1f} |",
            f"| ratio | {with_s / without_s:.2f} | |",
        ]
    )


def _span_table(repeat: int) -> str:
    """``summarize`` of two jobs with the driver waiting 10^3 .. 10^9 s
    between them (1 s windows): time should not follow the span."""
    from sparktrail.engines import summarize
    from sparktrail.synthetic import driver_gap_trace

    lines = ["| driver gap (s) | windows built | median time (s) |", "|---:|---:|---:|"]
    for gap in (10**3, 10**5, 10**7, 10**9):
        trace = driver_gap_trace(gap)
        times = []
        for _ in range(repeat):
            began = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s = summarize(trace, 1_000_000_000)
            times.append(time.perf_counter() - began)
        lines.append(
            f"| {gap:,} | {s.windows.height} | {statistics.median(times):.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--import-mb", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-logs", action="store_true")
    args = parser.parse_args(argv)
    print(f"load average: {os.getloadavg()}")
    if not args.skip_logs:
        print(_budget_table())
        print()
    print(_span_table(args.repeat))
    print()
    print(_census_table(args.import_mb, args.repeat))
    print(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
