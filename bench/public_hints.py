"""Hints on the public event logs: how many per log, and which are nonsense.

A hint is nonsense on its face (issue 11) when it

* recommends a Spark setting at the value the application already ran with;
* recommends dynamic allocation on a ``local`` master (Spark ignores it);
* shows ``inf`` or ``nan`` in its action or evidence;
* is ``high`` on under 5% of the critical path (``idle_capacity`` aside: its
  saving is executor time, never on the critical path; and a ``failures``
  hint on a failed job, high whatever time it cost).

Usage::

    .venv/bin/python -m bench.public_hints [--root ../shared/eventlogs/public] \
        [--dump HINTS.json]

prints one line per log (hints shown, hints kept as info, nonsense) and the
totals. :func:`event_logs` and :func:`nonsense` are what
``tests/summaries/test_public_hints.py`` checks with.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from sparktrail.engines import summarize
from sparktrail.pag.context import AppContext
from sparktrail.tracer import import_trace

__all__ = ["event_logs", "nonsense", "profile_log"]

ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "eventlogs" / "public"
WINDOW_NS = 1_000_000_000
#: ``key=value`` of a Spark setting in an action.
_SETTING = re.compile(r"\b(spark\.[A-Za-z0-9_.]+)=([^\s,;)]+)")
_NOT_A_NUMBER = re.compile(r"\b(inf|nan)(x\b|\b)", re.IGNORECASE)  # "infx" too


def event_logs(root: Path = ROOT) -> list[Path]:
    """Every event log under ``root``: a file, a rolling ``eventlog_v2_*``
    directory or a Spark 1.x log directory (``EVENT_LOG_*`` inside)."""
    found: list[Path] = []

    def walk(folder: Path) -> None:
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or path.name.lower().startswith("readme"):
                continue
            if path.is_dir():
                legacy = any(p.name.startswith("EVENT_LOG_") for p in path.iterdir())
                if path.name.startswith("eventlog_v2_") or legacy:
                    found.append(path)
                else:
                    walk(path)
            elif path.is_file():
                found.append(path)

    if root.is_dir():
        walk(root)
    return found


def _same(value: str, now: str) -> bool:
    return value.strip().lower().rstrip(".") == now.strip().lower()


def nonsense(hint: dict[str, Any], app: AppContext) -> list[str]:
    """Why ``hint`` (a row of ``Summaries.hints``) is nonsense; empty if not.

    >>> row = {"kind": "idle_capacity", "severity": "low", "cp_share": 0.0,
    ...     "action": "set spark.dynamicAllocation.enabled=true", "evidence": "{}"}
    >>> nonsense(row, AppContext(master="local[2]"))
    ['dynamic allocation on a local master']
    """
    why = []
    action, evidence = hint.get("action") or "", hint.get("evidence") or ""
    for key, value in _SETTING.findall(action):
        now = app.setting(key)
        if now is not None and _same(value, now):
            why.append(f"recommends {key}={value}, already set")
        if key.startswith("spark.dynamicAllocation") and app.is_local:
            why.append("dynamic allocation on a local master")
    if _NOT_A_NUMBER.search(action) or _NOT_A_NUMBER.search(evidence):
        why.append("inf or nan in the hint")
    if (
        hint.get("severity") == "high"
        and hint.get("kind") != "idle_capacity"
        and not (hint.get("kind") == "failures" and '"failed_job"' in evidence)
        and (hint.get("cp_share") or 0.0) < 0.05
    ):
        why.append(f"high on {hint.get('cp_share', 0):.1%} of the critical path")
    return sorted(set(why))


def profile_log(path: Path) -> tuple[pl.DataFrame, AppContext]:
    """The hints of one log (every severity) and its context."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_trace(path, progress=False)
        if trace.frame.is_empty():
            return pl.DataFrame(), trace.context
        return summarize(trace, WINDOW_NS).hints, trace.context


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument(
        "--dump",
        type=Path,
        help="also write every hint of every log, every column, as JSON here "
        "(to compare two versions' hints: run each from its own checkout)",
    )
    args = parser.parse_args(argv)
    dumped: dict[str, list[dict[str, Any]]] = {}
    shown_total = info_total = bad_total = failed = 0
    kinds: Counter[str] = Counter()
    logs = event_logs(args.root)
    for path in logs:
        began = time.perf_counter()
        name = str(path.relative_to(args.root))
        try:
            hints, app = profile_log(path)
        except Exception as err:
            failed += 1
            print(f"{name}: FAILED {type(err).__name__}: {str(err)[:100]}")
            continue
        rows = hints.to_dicts()
        dumped[name] = rows
        shown = [h for h in rows if h["severity"] != "info"]
        bad = {h["kind"]: nonsense(h, app) for h in rows if nonsense(h, app)}
        kinds.update(h["kind"] for h in shown)
        shown_total += len(shown)
        info_total += len(rows) - len(shown)
        bad_total += len(bad)
        took = time.perf_counter() - began
        listed = ", ".join(f"{h['kind']}:{h['severity']}" for h in shown) or "-"
        print(
            f"{name}: {len(shown)} shown, {len(rows) - len(shown)} info, "
            f"{len(bad)} nonsense ({took:.1f} s) {listed}"
        )
        for kind, why in bad.items():
            print(f"    NONSENSE {kind}: {'; '.join(why)}")
    print(
        f"\n{len(logs)} logs, {failed} failed; {shown_total} hints shown "
        f"({shown_total / max(1, len(logs) - failed):.2f} per log), {info_total} "
        f"info, {bad_total} nonsense; shown by kind: "
        + json.dumps(dict(kinds.most_common()))
    )
    if args.dump is not None:
        args.dump.write_text(json.dumps(dumped, indent=1, sort_keys=True, default=str))
    return 1 if bad_total or failed else 0


if __name__ == "__main__":
    sys.exit(main())
