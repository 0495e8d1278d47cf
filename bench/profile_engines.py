"""``sparktrail profile`` wall time and peak memory, polars vs Spark engine.

For each size, a synthetic barrier trace (:func:`sparktrail.synthetic.profile_trace`,
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

Old against new, side by side: ``--baseline DIR --repeat 3`` also runs each
(size, engine) with ``DIR`` first on ``PYTHONPATH``, alternating with the
checkout, and reports medians. ``DIR`` holds an older version as an
importable ``sparktrail`` package, e.g. from a worktree of commit C::

    git worktree add /tmp/old C && mkdir -p /tmp/oldpkg
    cp -r /tmp/old/sparktrail /tmp/oldpkg/
    for d in tracer pag summaries engines dashboard; do
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
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sparktrail.pag.trace import write_trace
from sparktrail.synthetic import profile_trace

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
    trace: Path,
    out: Path,
    window_ns: int,
    engine: str,
    timeout: float,
    pythonpath: str | None = None,
) -> tuple[str, float, int]:
    """Profile ``trace`` in a fresh process: status, seconds, peak tree RSS.

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
    """The runs as a Markdown table: medians per (rows, engine, version)."""
    lines = [
        "| rows | engine | version | runs | status | wall time (s) "
        "| peak RSS, process tree (MiB) |",
        "|---:|---|---|---:|---|---:|---:|",
    ]
    groups: dict[tuple[int, str, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.rows, r.engine, r.version), []).append(r)
    for (rows, engine, version), group in groups.items():
        seconds = statistics.median(r.seconds for r in group)
        peak = statistics.median(r.peak_rss_bytes for r in group)
        status = ",".join(sorted({r.status for r in group}))
        lines.append(
            f"| {rows:,} | {engine} | {version} | {len(group)} | {status} | "
            f"{seconds:.1f} | {peak / 2**20:.0f} |"
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
    args = parser.parse_args(argv)
    versions: list[tuple[str, str | None]] = [("checkout", None)]
    if args.baseline is not None:
        versions.insert(0, ("baseline", str(args.baseline.resolve())))
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
                for _ in range(args.repeat):
                    for version, pythonpath in versions:
                        out = Path(tmp) / f"out-{rows}-{engine}-{version}"
                        status, seconds, peak = run_profile(
                            path, out, window_ns, engine, args.timeout, pythonpath
                        )
                        runs.append(Run(rows, engine, status, seconds, peak, version))
                        print(
                            f"{rows:,} rows, {engine}, {version}: {status}, "
                            f"{seconds:.1f} s, {peak / 2**20:.0f} MiB",
                            file=sys.stderr,
                            flush=True,
                        )
            path.unlink()
    print(table(runs))


if __name__ == "__main__":
    main()
