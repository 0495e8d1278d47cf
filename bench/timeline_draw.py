"""The timeline's draw on windows of 10^4 .. 10^6 activities (issue 15).

Times ``critical_gantt`` plus the figure's JSON (what the dashboard's draw
callback sends) on one window of ``window_cp_rows(n)`` (64 slots, 0.2% of
activities critical), for this checkout and, side by side (alternating,
medians of ``--repeat``), for ``dashboard/timeline_gantt.py`` (before it,
``dashboard/figures.py``) of a baseline git revision, loaded from
``git show``. Also reports the bars sent.

    .venv/bin/python bench/timeline_draw.py --baseline 2f18d5e
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from sparktrail.dashboard import figures
from sparktrail.synthetic import window_cp_rows

ROOT = Path(__file__).resolve().parents[1]


def _baseline(rev: str) -> ModuleType:
    # The timeline's module since figures.py was split (its relative imports
    # resolve in this checkout's package), else the whole figures.py.
    for name in ("timeline_gantt", "figures"):
        shown = subprocess.run(
            ["git", "show", f"{rev}:dashboard/{name}.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if shown.returncode == 0:
            break
    shown.check_returncode()
    path = Path(tempfile.mkdtemp()) / f"baseline_{name}.py"
    path.write_text(shown.stdout, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(
        f"sparktrail.dashboard.baseline_{name}", path
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _draw(module: Any, rows: Any) -> tuple[float, int]:
    t = time.perf_counter()
    fig = module.critical_gantt(rows)
    fig.to_plotly_json()
    seconds = time.perf_counter() - t
    return seconds, sum(len(trace.x) for trace in fig.data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="git revision to compare with")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000]
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    modules = {"this checkout": figures}
    if args.baseline:
        modules[f"baseline {args.baseline}"] = _baseline(args.baseline)
    print("| activities | version | draw, median (s) | points sent |")
    print("|---:|---|---:|---:|")
    for n in args.sizes:
        rows = window_cp_rows(n)
        times: dict[str, list[float]] = {name: [] for name in modules}
        points: dict[str, int] = {}
        for _ in range(args.repeat):  # alternating: the same load on both
            for name, module in modules.items():
                seconds, points[name] = _draw(module, rows)
                times[name].append(seconds)
        for name in modules:
            median = statistics.median(times[name])
            print(f"| {n:,} | {name} | {median:.3f} | {points[name]:,} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
