"""``sparktrail profile`` wall time and peak memory, polars vs Spark engine.

For each size, a synthetic barrier trace (:func:`synthetic.barrier_trace`,
16 workers, with a task id per local activity and a stage label, so that
every summary and hint rule has something to read) is written to an Arrow
trace file, then profiled in a fresh process per engine::

    python -m sparktrail profile TRACE -o OUT --window <span/100>ns --engine E

(about 100 windows). Wall time is the subprocess's; peak memory is the
largest resident set of the whole process tree (the Spark engine's JVM and
Python workers are children of the CLI process), sampled every 50 ms with
psutil. Prints a Markdown table.

Run (from the repository root)::

    .venv/bin/python bench/profile_engines.py --sizes 1e5 1e6 1e7 \
        --engines polars spark --timeout 600

Needs ``psutil`` (dev extra) and, for the Spark engine, ``pyspark`` with
``pandas`` (PySpark's Arrow UDFs import it) and Java 17+.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).parent))

from synthetic import barrier_trace

from sparktrail.pag.trace import write_trace

#: Windows per run (the window length is the trace span over this).
WINDOWS = 100
SAMPLE_SECONDS = 0.05


@dataclass(frozen=True)
class Run:
    """One profiled run: its size, engine, outcome, wall time and peak RSS."""

    rows: int
    engine: str
    status: str
    seconds: float
    peak_rss_bytes: int


def profile_trace(n_rows: int, workers: int = 16) -> pl.DataFrame:
    """A barrier trace of about ``n_rows`` rows, with task ids and a stage.

    Each local activity is its own task (``task_id``) of stage 1
    (``operator`` ``stage 1: barrier at synthetic.py:1``); messages and
    waiting rows have no task.
    """
    trace = barrier_trace(n_rows, workers=workers)
    n_local = (len(trace) // 3) if len(trace) else 0
    task = np.full(len(trace), -1, dtype=np.int64)
    task[:n_local] = np.arange(n_local)
    return trace.with_columns(
        pl.Series("task_id", task).replace(-1, None),
        pl.lit("stage 1: barrier at synthetic.py:1").alias("operator"),
    )


def _tree_rss(root: int) -> int:
    """Resident bytes of a process and all its descendants (0 once gone)."""
    import psutil

    try:
        proc = psutil.Process(root)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def run_profile(
    trace: Path, out: Path, window_ns: int, engine: str, timeout: float
) -> tuple[str, float, int]:
    """Profile ``trace`` in a fresh process: status, seconds, peak tree RSS."""
    command = [
        sys.executable,
        "-m",
        "sparktrail",
        "profile",
        str(trace),
        "-o",
        str(out),
        "--window",
        f"{window_ns}ns",
        "--engine",
        engine,
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    peak = 0
    status = "ok"
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        if time.perf_counter() - start > timeout:
            proc.kill()
            status = "timeout"
            break
        time.sleep(SAMPLE_SECONDS)
    _, stderr = proc.communicate()
    seconds = time.perf_counter() - start
    if status == "ok" and proc.returncode != 0:
        status = f"exit {proc.returncode}"
        print(stderr[-2000:], file=sys.stderr)
    return status, seconds, peak


def table(runs: list[Run]) -> str:
    """The runs as a Markdown table."""
    lines = [
        "| rows | engine | status | wall time (s) | peak RSS, process tree (MiB) |",
        "|---:|---|---|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r.rows:,} | {r.engine} | {r.status} | {r.seconds:.1f} | "
            f"{r.peak_rss_bytes / 2**20:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run every (size, engine) pair, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", nargs="+", type=float, default=[1e5, 1e6], help="trace rows"
    )
    parser.add_argument(
        "--engines", nargs="+", default=["polars", "spark"], choices=["polars", "spark"]
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per run before kill"
    )
    args = parser.parse_args(argv)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            rows = int(size)
            trace = profile_trace(rows)
            path = Path(tmp) / f"trace-{rows}.arrow"
            write_trace(trace, path)
            span = int(trace["end_ns"].max()) - int(trace["start_ns"].min())  # type: ignore[arg-type]
            window_ns = max(1, -(-span // WINDOWS))
            del trace
            for engine in args.engines:
                out = Path(tmp) / f"out-{rows}-{engine}"
                status, seconds, peak = run_profile(
                    path, out, window_ns, engine, args.timeout
                )
                runs.append(Run(rows, engine, status, seconds, peak))
                print(
                    f"{rows:,} rows, {engine}: {status}, {seconds:.1f} s, "
                    f"{peak / 2**20:.0f} MiB",
                    file=sys.stderr,
                    flush=True,
                )
            path.unlink()
    print(table(runs))


if __name__ == "__main__":
    main()
