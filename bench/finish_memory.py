"""Peak anonymous memory of each phase of ``profile``'s finish (issue 15, item 6).

The batch engine's :func:`~sparktrail.engines.summarize` of a
:func:`sparktrail.synthetic.write_profile_trace` file (written or reused in
``--trace-dir``, cut into 100 windows as ``bench/profile_engines.py`` cuts
it), with each phase of the finish (task facts, summaries, every hint rule,
the hints' what-if replays, stage and executor tables) wrapped so that it
prints its wall time, the peak of the process's ``RssAnon`` while it ran
(sampled every 10 ms by a thread) and ``RssAnon`` after it. ``RssAnon``
leaves out the memory-mapped trace file, which the kernel can take back;
polars' allocator keeps freed pages for a while, so "after" is an upper
bound. Linux only (``/proc/self/status``).

    .venv/bin/python bench/finish_memory.py --rows 1e7 --trace-dir /tmp/huge/traces
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sparktrail.engines.batch as batch
import sparktrail.summaries.finish as finish
import sparktrail.summaries.hints as hints

#: The finish's phases, by the name ``summaries.finish`` calls them by.
PHASES = (
    "activity_from_partial",
    "executor_from_partial",
    "task_facts",
    "task_shares",
    "operators_and_stages",
    "communication_from_partial",
    "straggler_from_partial",
    "stage_stats",
    "executor_stats",
    "rule_hints",
    "ranked_hints",
)
GIB = 2**30


def rss_anon() -> int:
    """The process's anonymous resident bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


class PeakSampler(threading.Thread):
    """Samples :func:`rss_anon` every 10 ms; :meth:`reset` starts a phase."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0

    def reset(self) -> None:
        self.peak = rss_anon()

    def run(self) -> None:
        while True:
            self.peak = max(self.peak, rss_anon())
            time.sleep(0.01)


def timed(
    name: str, fn: Callable[..., Any], sampler: PeakSampler
) -> Callable[..., Any]:
    """``fn``, printing its time, peak and after-``RssAnon`` per call."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        outer = sampler.peak  # of the phase that calls this one, if any
        sampler.reset()
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        peak = sampler.peak
        print(
            f"| {name} | {time.perf_counter() - start:.1f} "
            f"| {peak / GIB:.2f} | {rss_anon() / GIB:.2f} |",
            flush=True,
        )
        sampler.peak = max(outer, peak)
        return out

    return wrapped


def main(argv: list[str] | None = None) -> None:
    """Write or reuse the trace, profile it with every phase wrapped."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=float, default=1e6, help="trace rows")
    parser.add_argument("--trace-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from profile_engines import sized_trace  # the same traces and windows

    path, window_ns = sized_trace(args.trace_dir, int(args.rows))
    sampler = PeakSampler()
    sampler.start()
    for name in PHASES:
        setattr(finish, name, timed(name, getattr(finish, name), sampler))
    hints.RULES = tuple(timed(f"rule {r.__name__}", r, sampler) for r in hints.RULES)
    hints.finish_hints = timed("replays (finish_hints)", hints.finish_hints, sampler)
    batch.summaries_from_partials = timed(
        "whole finish", finish.summaries_from_partials, sampler
    )
    print("| phase | time (s) | peak RssAnon (GiB) | after (GiB) |")
    print("|---|---:|---:|---:|")
    timed("whole summarize", batch.summarize, sampler)(str(path), window_ns)


if __name__ == "__main__":
    main()
