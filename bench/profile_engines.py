"""``sparktrail profile`` wall time and peak memory, polars vs Spark engine.

For each size, a synthetic barrier trace (:func:`sparktrail.synthetic.profile_trace`,
16 workers, with a task id per local activity and a stage label, so that
every summary and hint rule has something to read) is written to an Arrow
trace file in chunks (:func:`sparktrail.synthetic.write_profile_trace`, so
10^8 rows need not fit in memory), then profiled in a fresh process per
engine::

    python -m sparktrail profile TRACE -o OUT --window <span/100>ns --engine E

(about 100 windows). Wall time is the subprocess's; peak memory is the
largest resident set of the whole process tree (the Spark engine's JVM and
Python workers are children of the CLI process), sampled every 50 ms with
psutil, and the largest of that less its file-backed pages (psutil's
``shared``: mostly the memory-mapped trace file, which the kernel can take
back; what is left is anonymous memory, which it cannot without swap).
Prints a Markdown table. ``--trace-dir DIR`` keeps the trace files there
(and reuses one already written) instead of a temporary directory.

Run (from the repository root)::

    .venv/bin/python bench/profile_engines.py --sizes 1e5 1e6 1e7 \
        --engines polars spark --timeout 600

Old against new, side by side: ``--baseline DIR --repeat 3`` also runs each
(size, engine) with ``DIR`` first on ``PYTHONPATH``, alternating with the
checkout, and reports medians. ``DIR`` holds an older version as an
importable ``sparktrail`` package, e.g. from a worktree of commit C::

    git worktree add /tmp/old C && mkdir -p /tmp/oldpkg
    cp -r /tmp/old/sparktrail /tmp/oldpkg/
    for d in tracer pag whatif summaries engines dashboard; do
        test -d /tmp/old/$d && ln -s /tmp/old/$d /tmp/oldpkg/sparktrail/$d; done

(the runs start in the temporary directory, so the checkout's own
``sparktrail`` folder does not shadow ``DIR``).

Needs ``psutil`` (dev extra) and, for the Spark engine, ``pyspark`` with
``pandas`` (PySpark's Arrow UDFs import it) and Java 17+.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sparktrail.synthetic import write_profile_trace

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
    version: str = "checkout"
    #: Peak of resident minus file-backed bytes (anonymous memory).
    peak_anon_bytes: int = 0


def _tree_rss(root: int) -> tuple[int, int]:
    """Resident bytes of a process and all its descendants, and those
    bytes less file-backed ones ((0, 0) once gone)."""
    import psutil

    try:
        proc = psutil.Process(root)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    total = anon = 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            info = p.memory_info()
            total += info.rss
            anon += info.rss - info.shared
    return total, anon


def run_profile(
    trace: Path,
    out: Path,
    window_ns: int,
    engine: str,
    timeout: float,
    pythonpath: str | None = None,
) -> tuple[str, float, int, int]:
    """Profile ``trace`` in a fresh process: status, seconds, peak tree RSS
    and peak anonymous (non-file) RSS.

    ``pythonpath``: put this directory first on the child's import path
    (an older ``sparktrail`` to compare with); the child then starts in
    ``out``'s parent directory.
    """
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
    env = dict(os.environ)
    cwd = None
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
        cwd = out.parent
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    peak = peak_anon = 0
    status = "ok"
    while proc.poll() is None:
        rss, anon = _tree_rss(proc.pid)
        peak, peak_anon = max(peak, rss), max(peak_anon, anon)
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
    return status, seconds, peak, peak_anon


def _span_ns(path: Path) -> int:
    """Last ``end_ns`` less first ``start_ns`` of a trace file, read mapped."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    with pa.memory_map(str(path)) as source:
        table = ipc.open_file(source).read_all()
        end = pc.max(table["end_ns"]).as_py()
        start = pc.min(table["start_ns"]).as_py()
    return int(end) - int(start)


def sized_trace(traces: Path, rows: int) -> tuple[Path, int]:
    """The profile trace of ``rows`` rows in ``traces`` (written unless it is
    there already) and the window length that cuts it into :data:`WINDOWS`."""
    path = traces / f"profile-trace-{rows}.arrow"
    if not path.exists():
        write_profile_trace(rows, path)
    return path, max(1, -(-_span_ns(path) // WINDOWS))


def table(runs: list[Run]) -> str:
    """The runs as a Markdown table: medians per (rows, engine, version)."""
    lines = [
        "| rows | engine | version | runs | status | wall time (s) "
        "| peak RSS, process tree (MiB) | of it not file-backed (MiB) |",
        "|---:|---|---|---:|---|---:|---:|---:|",
    ]
    groups: dict[tuple[int, str, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.rows, r.engine, r.version), []).append(r)
    for (rows, engine, version), group in groups.items():
        seconds = statistics.median(r.seconds for r in group)
        peak = statistics.median(r.peak_rss_bytes for r in group)
        anon = statistics.median(r.peak_anon_bytes for r in group)
        status = ",".join(sorted({r.status for r in group}))
        lines.append(
            f"| {rows:,} | {engine} | {version} | {len(group)} | {status} | "
            f"{seconds:.1f} | {peak / 2**20:,.0f} | {anon / 2**20:,.0f} |"
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
    parser.add_argument(
        "--baseline",
        type=Path,
        help="an older sparktrail package tree to run side by side (see above)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each")
    parser.add_argument(
        "--trace-dir",
        type=Path,
        help="keep the trace files here (reused when present)",
    )
    args = parser.parse_args(argv)
    versions: list[tuple[str, str | None]] = [("checkout", None)]
    if args.baseline is not None:
        versions.insert(0, ("baseline", str(args.baseline.resolve())))
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        traces = args.trace_dir or Path(tmp)
        for size in args.sizes:
            rows = int(size)
            path, window_ns = sized_trace(traces, rows)
            for engine in args.engines:
                for _ in range(args.repeat):
                    for version, pythonpath in versions:
                        out = Path(tmp) / f"out-{rows}-{engine}-{version}"
                        status, seconds, peak, anon = run_profile(
                            path, out, window_ns, engine, args.timeout, pythonpath
                        )
                        runs.append(
                            Run(rows, engine, status, seconds, peak, version, anon)
                        )
                        print(
                            f"{rows:,} rows, {engine}, {version}: {status}, "
                            f"{seconds:.1f} s, {peak / 2**20:.0f} MiB "
                            f"({anon / 2**20:.0f} MiB not file-backed), "
                            f"load average {os.getloadavg()[0]:.1f}",
                            file=sys.stderr,
                            flush=True,
                        )
                        shutil.rmtree(out, ignore_errors=True)
            if args.trace_dir is None:
                path.unlink()
    print(table(runs))
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
