"""Wall time of the batch engine's CP phase alone, by trace size (issue 15, item 6).

The CP phase of ``sparktrail profile`` on the polars engine is everything
:func:`sparktrail.engines.summarize` does before it finishes the summaries
from the partials: the trace read (memory-mapped), the batches of windows,
the rows of each batch, the CP of every window and its partial sums. It is
timed here alone, in a fresh process per size, by stopping ``summarize``
where it would call ``summaries_from_partials`` (the finish, which holds
one row per task, is what does not yet fit at 10^8 rows; see
BENCHMARKS.md). Traces are :func:`sparktrail.synthetic.write_profile_trace`
files (reused from ``--trace-dir``), with about 100 windows, as
``bench/profile_engines.py`` uses.

Run (from the repository root)::

    .venv/bin/python bench/cp_phase_scaling.py --sizes 1e6 1e7 1e8 \
        --trace-dir /tmp/huge/traces
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class _Finish(Exception):
    """Raised where summarize would finish the summaries."""


def _child(path: str, window_ns: int) -> None:
    """Time the CP phase of ``path`` in this process; print it as JSON."""
    import sparktrail.engines.batch as batch

    def stop(*args: object, **kwargs: object) -> None:
        raise _Finish

    batch.summaries_from_partials = stop  # type: ignore[assignment]
    start = time.perf_counter()
    with contextlib.suppress(_Finish):
        batch.summarize(path, window_ns)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "peak_rss_bytes": peak}))


def main(argv: list[str] | None = None) -> None:
    """Write or reuse each trace, time its CP phase, print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e5, 1e6])
    parser.add_argument("--trace-dir", type=Path, help="keep (reuse) traces here")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from profile_engines import sized_trace  # the same traces and windows

    lines = [
        "| rows | CP phase (s) | per 10^6 rows (s) | peak RSS (MiB) |",
        "|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        traces = args.trace_dir or Path(tmp)
        for size in args.sizes:
            rows = int(size)
            path, window_ns = sized_trace(traces, rows)
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(path), str(window_ns)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            got = json.loads(out.strip().splitlines()[-1])
            seconds, peak = got["seconds"], got["peak_rss_bytes"]
            print(f"{rows:,} rows: {seconds:.1f} s", file=sys.stderr, flush=True)
            lines.append(
                f"| {rows:,} | {seconds:.1f} | {seconds / rows * 1e6:.2f} "
                f"| {peak / 2**20:,.0f} |"
            )
            if args.trace_dir is None:
                path.unlink()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
