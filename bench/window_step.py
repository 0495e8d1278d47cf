"""Where one closed window's step goes in the online pipeline (issue 15).

Writes ``--seconds`` of the online benchmark's producer trace (16 workers
in rounds, :func:`bench.online_latency._rounds`) at ``--rate`` rows/s as
one trace file per second, then closes every window with
:class:`~sparktrail.engines.online.OnlinePipeline` under cProfile, and
prints the time per closed window split into the pipeline's phases (by the
cumulative time of the functions that run them), plus the top functions.
A small trace is closed first, so that numba's first-call loading of its
cached kernels is not counted.

    .venv/bin/python -m bench.window_step --rate 30000 --seconds 8

The windows are first closed without the profiler: as the live pipeline
closes them, ``--live-seconds`` files of the same producer landing one at
a time with a poll after each ("live", timed from the poll after the one
that closed the first window; "the close alone" is that poll's
``OnlinePipeline._close`` without its store writes), then in one poll over
the ``--seconds`` files ("unprofiled"), for the wall time per window;
``bench/window_step_versions.sh`` alternates this script on an older
commit and on the checkout.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.online_latency import _rounds
from sparktrail.engines import store
from sparktrail.engines.online import OnlinePipeline
from sparktrail.pag import write_trace

S = 1_000_000_000
WORKERS = 16
#: Phase -> (module file suffix, functions) whose cumulative time it is
#: (functions: names separated by "|").
PHASES = {
    "read new files": ("engines/online.py", "_consume"),
    "CP: snapshot + kernel (chunk_cp)": ("pag/chunk_cp.py", "chunk_cp"),
    "summaries and hints (summaries_from_cp)": (
        "summaries/finish.py",
        "summaries_from_cp",
    ),
    "  of which hints": (
        "summaries/hints/__init__.py",
        "rule_hints|ranked_hints",
    ),
    "  of which what-if replays": ("whatif/replay.py", "run"),
    "  of which task facts": ("summaries/task_table.py", "task_facts"),
    # The CP rows are written in the background while the summaries are
    # computed (the profiler sees only this thread): this is the rest of the
    # write and the wait for them (an older sparktrail: its write_window).
    "store write (write_window)": ("engines/store.py", "write_window|finish"),
    "checkpoint writes": ("engines/store.py", "write_checkpoint"),
}


#: A window's store writes inside its close, where a version has them:
#: (class of engines/store.py, method).
STORE_PARTS = (("WindowStore", "begin_window"), ("WindowWrite", "finish"))


def _trace(root: Path, rate: int, seconds: int) -> None:
    rng = np.random.default_rng(0)
    round_ns = 3 * WORKERS * S // rate
    per_second = S // round_ns
    t0 = 1_700_000_000 * S
    for k in range(seconds):
        rows = _rounds(rng, t0, round_ns, k * per_second, (k + 1) * per_second)
        write_trace(rows, root / f"part-{k:04d}.arrow")


def timed(spent: dict[str, float], part: str, function: Any) -> Any:
    """``function``, adding its wall time to ``spent[part]`` at each call."""

    def timing(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[part] += time.perf_counter() - t

    return timing


def _live(files: Path, root: Path) -> tuple[float, float]:
    """Seconds per window closed when the files land one at a time: the
    whole poll, and the window's close alone (``OnlinePipeline._close``
    without its store writes: its CP, task facts, summaries and hints).

    As in the live pipeline: a file lands, a poll reads it and closes the
    window the watermark passed (2 s of lateness: one window a poll once
    the first two are in). Only the polls after the first window closed
    are timed: the first decides how the next polls run (on one core for a
    small window, ``engines/threads.py``) and is not a steady step.
    """
    root.mkdir()
    pipeline = OnlinePipeline(root, S, 2 * S)
    spent = {"close": 0.0, "store": 0.0}

    # The store writes a window inside the close (since it writes the CP
    # rows in the background): those calls, where they exist, are taken
    # out of the close, so that an older sparktrail's close compares.
    parts = {(OnlinePipeline, "_close"): "close"}
    parts |= {
        (getattr(store, owner), name): "store"
        for owner, name in STORE_PARTS
        if hasattr(getattr(store, owner, None), name)
    }
    found = {(owner, name): getattr(owner, name) for owner, name in parts}
    for (owner, name), part in parts.items():
        setattr(owner, name, timed(spent, part, found[owner, name]))
    try:
        closed, polls, started = 0, 0.0, False
        for path in sorted(files.glob("*.arrow")):
            shutil.copy(path, root / path.name)
            t = time.perf_counter()
            now = len(pipeline.poll())
            if started:
                polls += time.perf_counter() - t
                closed += now
            else:
                spent["close"] = spent["store"] = 0.0
            started = started or now > 0
        t = time.perf_counter()
        closed += len(pipeline.poll(final=True))
        polls += time.perf_counter() - t
    finally:
        for (owner, name), function in found.items():
            setattr(owner, name, function)
    n = max(1, closed)
    return polls / n, (spent["close"] - spent["store"]) / n


def _cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    total = 0.0
    for (path, _, function), row in stats.stats.items():  # type: ignore[attr-defined]
        if function in name.split("|") and path.endswith(suffix):
            total += row[3]
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=30_000)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument(
        "--live-seconds",
        type=int,
        default=20,
        help="seconds of trace landed a file at a time for the live figures",
    )
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        # Warm up first: numba loads its cached kernels on their first call.
        _trace(Path(tmp) / "warm", 3000, 4)
        OnlinePipeline(Path(tmp) / "warm", S, 2 * S).poll(final=True)
        root = Path(tmp) / "trace"
        _trace(root, args.rate, args.seconds)
        live_files = Path(tmp) / "landing"
        _trace(live_files, args.rate, args.live_seconds)
        live = _live(live_files, Path(tmp) / "live")
        # Unprofiled first (cProfile slows the many small calls down), then
        # again on a fresh store, profiled.
        t = time.perf_counter()
        plain = len(OnlinePipeline(root, S, 2 * S).poll(final=True))
        unprofiled = time.perf_counter() - t
        shutil.rmtree(root / ".sparktrail")
        pipeline = OnlinePipeline(root, S, 2 * S)
        profiler = cProfile.Profile()
        t = time.perf_counter()
        profiler.enable()
        closed = pipeline.poll(final=True)
        profiler.disable()
        wall = time.perf_counter() - t
    n = max(1, len(closed))
    stats = pstats.Stats(profiler)
    print(f"{len(closed)} windows of ~{args.rate:,} rows closed in {wall:.2f} s")
    print(f"(profiled; {wall / n * 1e3:.0f} ms per window)")
    print(f"unprofiled: {unprofiled / max(1, plain) * 1e3:.0f} ms per window")
    print(
        f"live, a poll per file: {live[0] * 1e3:.0f} ms per window after the first"
        f" ({args.live_seconds} files)"
    )
    print(f"live, the close alone: {live[1] * 1e3:.0f} ms per window after the first\n")
    print("| phase | ms per window |")
    print("|---|---:|")
    for phase, (suffix, name) in PHASES.items():
        print(f"| {phase} | {_cumulative(stats, suffix, name) / n * 1e3:.1f} |")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.top)
    print("\n```\n" + out.getvalue().strip() + "\n```")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
