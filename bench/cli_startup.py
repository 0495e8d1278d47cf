"""How fast the command line answers ``--help``: time, modules, peak RSS.

Each run is a fresh interpreter that runs ``sparktrail.cli.main(ARGV)`` for
``--help``, ``profile --help`` and ``serve --help``, beside a bare
``python -c pass`` (issue 43's yardstick: at most 4x its time, 200 modules
and 80 MB). Wall time is the parent's clock around the subprocess; the child
reports its own module count and peak RSS. Medians of ``--repeat`` runs,
the commands interleaved so that a noisy moment hits them alike.

Old against new, side by side: ``--baseline DIR`` also runs each command
with ``DIR`` first on ``PYTHONPATH`` (an older version as an importable
``sparktrail`` package, built as ``bench/versions.sh`` builds it), from a
temporary directory so that the checkout does not shadow it.

Run (from the repository root)::

    .venv/bin/python bench/cli_startup.py --repeat 15 [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = (["--help"], ["profile", "--help"], ["serve", "--help"])

CHILD = """
import contextlib, io, json, resource, sys
argv = json.loads(sys.argv[1])
if argv is not None:
    from sparktrail.cli import main
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"modules": len(sys.modules), "rss_mb": peak / 1024}))
"""


def _once(argv: list[str] | None, pythonpath: str | None, cwd: str) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(argv)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=cwd,
    )
    seconds = time.perf_counter() - start
    return {**json.loads(done.stdout), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--baseline", help="an older sparktrail package folder")
    args = parser.parse_args()
    versions = {"now": None}
    if args.baseline:
        versions = {"baseline": args.baseline, **versions}
    cases = [("python -c pass", None, None)] + [
        (f"{name}: sparktrail {' '.join(argv)}", argv, path)
        for name, path in versions.items()
        for argv in COMMANDS
    ]
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in cases}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(args.repeat):
            for label, argv, path in cases:
                runs[label].append(_once(argv, path, cwd))
    bare = statistics.median(r["seconds"] for r in runs["python -c pass"])
    print(f"load average (1, 5, 15 min) before {load_before}, after {os.getloadavg()}")
    print(f"medians of {args.repeat} runs\n")
    print("| command | time | × bare python | modules | peak RSS |")
    print("|---|---|---|---|---|")
    for label, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        modules = statistics.median(r["modules"] for r in results)
        rss = statistics.median(r["rss_mb"] for r in results)
        print(
            f"| {label} | {seconds * 1000:.0f} ms | {seconds / bare:.1f}× | "
            f"{modules:.0f} | {rss:.0f} MB |"
        )


if __name__ == "__main__":
    main()
