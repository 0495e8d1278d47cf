"""One window's parts, each timed alone on the same window (issue 15, stop 21).

Writes ``bench/window_step.py``'s producer trace (``--rate`` rows/s, 4 s),
closes it once with :class:`~sparktrail.engines.online.OnlinePipeline`,
keeps the rows of its third window, and times each part of closing that
window again: the CP (``chunk_cp``), the partial sums, the task facts, the
summaries, the hints, the what-if replay model (from the rows and from the
task facts) and the store write. Each figure is the median of 7 repeats of
10 runs, so it is steadier than a profile; run it on one core too:

    PYTHONPATH=. .venv/bin/python bench/window_parts.py
    PYTHONPATH=. taskset -c 0 .venv/bin/python bench/window_parts.py
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from bench.polars_handoff import median_ms
from bench.window_step import S, _trace
from sparktrail.engines import online
from sparktrail.engines.online import ROW, OnlinePipeline
from sparktrail.engines.store import StoredWindow, WindowStore
from sparktrail.pag.chunk_cp import chunk_cp, touching_rows
from sparktrail.pag.trace import Trace, load_trace
from sparktrail.pag.windows import to_trace_rows
from sparktrail.summaries import finish, hints
from sparktrail.summaries.partials import Partials
from sparktrail.summaries.task_table import task_facts
from sparktrail.whatif import Replay

#: Runs of a part per timing (each figure is the median of 7 timings).
RUNS = 10


def third_window(root: Path) -> tuple[OnlinePipeline, pl.DataFrame, int, int]:
    """The pipeline that closed ``root``, and its third window's rows."""
    seen: list[tuple[OnlinePipeline, pl.DataFrame, int, int]] = []
    close = OnlinePipeline._close

    def keeping(self: OnlinePipeline, rows: pl.DataFrame, ts: int, te: int) -> Any:
        seen.append((self, rows, ts, te))
        return close(self, rows, ts, te)

    online.OnlinePipeline._close = keeping  # type: ignore[method-assign]
    try:
        OnlinePipeline(root, S, 2 * S).poll(final=True)
    finally:
        online.OnlinePipeline._close = close  # type: ignore[method-assign]
    return seen[2]


def close(pipeline: OnlinePipeline, rows: pl.DataFrame, ts: int, te: int) -> Any:
    """The window's close without its store writes, on one thread."""
    near = touching_rows(rows, ts, te, row_column=ROW)
    return pipeline._summaries(pipeline._closing_cp(near, ts, te), near, ts, te)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=30_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "trace"
        _trace(root, args.rate, 4)
        pipeline, rows, ts, te = third_window(root)
        extent = (pipeline._first, pipeline._last)
        cp, near = chunk_cp(rows, te - ts, ts, ts, te, extent, row_column=ROW)  # type: ignore[arg-type]
        trace = Trace(near, pipeline._context)
        valid = load_trace(trace)
        partials = Partials.of(cp.drop("start_ns", "end_ns", strict=False))
        contexts: list[hints.Context] = []
        rules = finish.rebalancing_hints
        finish.rebalancing_hints = lambda c: contexts.append(c) or rules(c)  # type: ignore[assignment, func-returns-value]
        summaries = finish.summaries_from_partials(partials, trace, te - ts, ts)
        finish.rebalancing_hints = rules
        context = contexts[0]
        stored_cp = to_trace_rows(cp, near)
        store = WindowStore(Path(tmp) / "store")
        starts = itertools.count()
        parts: dict[str, Callable[[], object]] = {
            "close the window (all below but the store)": lambda: close(
                pipeline, rows, ts, te
            ),
            "CP: snapshot + kernel (chunk_cp)": lambda: chunk_cp(
                rows,
                te - ts,
                ts,
                ts,
                te,
                extent,
                row_column=ROW,  # type: ignore[arg-type]
            ),
            "partial sums (Partials.of)": lambda: Partials.of(
                cp.drop("start_ns", "end_ns", strict=False)
            ),
            "task facts": lambda: task_facts(valid),
            "summaries and hints from the partials": lambda: (
                finish.summaries_from_partials(partials, trace, te - ts, ts)
            ),
            "hints (rebalancing_hints)": lambda: hints.rebalancing_hints(
                dataclasses.replace(context)
            ),
            "what-if model from the rows": lambda: Replay.of(trace),
            "what-if model from the task facts": lambda: Replay.of(
                trace, context.tasks
            ),
            "store write (summaries and CP rows)": lambda: store.write_window(
                StoredWindow(next(starts), te, stored_cp, summaries)
            ),
        }
        print(f"one window of {len(near):,} rows, {len(cp):,} CP rows\n")
        print("| part | ms (median of 7 x 10) |")
        print("|---|---:|")
        for name, part in parts.items():
            print(f"| {name} | {median_ms(part, RUNS):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
