"""Does the live step grow over a long run? (issue 15)

Lands ``--files`` trace files of ``--rate`` rows each (one a second of
trace: ``bench/window_step.py``'s producer, its 20 seconds repeated later
and later) one at a time, polls after each as ``sparktrail live`` does,
and prints the median poll over 30 polls at the start, the middle and the
end, with its parts: listing the new files (``_new_files``) and writing
the checkpoint, which scale with the files read, then reading the new
files, the window's close (its store writes included) and those writes.

    PYTHONPATH=. .venv/bin/python bench/live_growth.py --files 600
"""

from __future__ import annotations

import argparse
import collections
import statistics
import tempfile
import time
from pathlib import Path

import polars as pl

from bench.window_step import S, _trace, timed
from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.store import WindowStore, WindowWrite
from sparktrail.pag import read_trace, write_trace

#: Seconds of trace generated, then repeated later and later.
ROUND = 20
#: Polls each median is taken over.
SPAN = 30


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=600)
    parser.add_argument("--rate", type=int, default=30_000)
    args = parser.parse_args(argv)
    if args.files < 3 * SPAN:
        parser.error(f"--files must be at least {3 * SPAN}")
    spent: dict[str, float] = collections.defaultdict(float)
    parts = {
        "list new files": (OnlinePipeline, "_new_files"),
        "read them": (OnlinePipeline, "_consume"),
        "close (store writes included)": (OnlinePipeline, "_close"),
        "store: begin a window": (WindowStore, "begin_window"),
        "store: finish it": (WindowWrite, "finish"),
        "checkpoint writes": (WindowStore, "write_checkpoint"),
    }
    for name, (owner, attribute) in parts.items():
        setattr(owner, attribute, timed(spent, name, getattr(owner, attribute)))
    with tempfile.TemporaryDirectory() as tmp:
        # Warm up first: numba loads its cached kernels on their first call.
        _trace(Path(tmp) / "warm", 3000, 4)
        OnlinePipeline(Path(tmp) / "warm", S, 2 * S).poll(final=True)
        seed = Path(tmp) / "seed"
        _trace(seed, args.rate, ROUND)
        rounds = [read_trace(path) for path in sorted(seed.glob("*.arrow"))]
        root = Path(tmp) / "live"
        root.mkdir()
        pipeline = OnlinePipeline(root, S, 2 * S)
        polls: list[float] = []
        split: dict[str, list[float]] = collections.defaultdict(list)
        for i in range(args.files):
            shift = (i // ROUND) * ROUND * S
            rows = rounds[i % ROUND].with_columns(
                pl.col("start_ns") + shift, pl.col("end_ns") + shift
            )
            write_trace(rows, root / f"part-{i:05d}.arrow")
            spent.clear()
            t = time.perf_counter()
            pipeline.poll()
            polls.append(time.perf_counter() - t)
            for name in parts:
                split[name].append(spent[name])
    print(f"{args.files} files of {args.rate:,} rows, a poll after each\n")
    print(f"| polls (median of {SPAN}) | whole poll, ms | " + " | ".join(parts) + " |")
    print("|---|---:|" + "---:|" * len(parts))
    for lo in (5, args.files // 2, args.files - SPAN):
        span = slice(lo, lo + SPAN)
        cells = [f"{statistics.median(split[n][span]) * 1e3:.2f}" for n in parts]
        whole = statistics.median(polls[span]) * 1e3
        print(f"| {lo + 1}-{lo + SPAN} | {whole:.1f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
