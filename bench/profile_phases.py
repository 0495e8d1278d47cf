"""Where a ``sparktrail profile`` run's memory goes, phase by phase.

Runs ``sparktrail profile ARGS`` in this process with ``/proc/self/status``
sampled every 10 ms in a thread, and each phase's function wrapped so that
the sample is charged to the innermost phase running; prints, per phase,
the highest RSS, anonymous RSS (``RssAnon``) and file-backed RSS
(``RssFile``: the memory-mapped trace's pages touched, and the libraries)
seen during it, and the time spent in it (nested phases count in their
callers' time too). Run (from the repository root)::

    .venv/bin/python -m bench.profile_phases TRACE -o OUT --window 198306615ns

(BENCHMARKS.md, "Where the peak of a 10^7-row profile comes from"). The
phases are module functions looked up by name: one that is gone is skipped
with a note. Each hint rule is a phase of its own too.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

#: (module, attribute, phase): the class attributes are ``Class.method``.
PHASES = (
    ("sparktrail.sources", "open_trace", "read + validate the trace"),
    ("sparktrail.engines.batch", "window_chunks", "window runs"),
    ("sparktrail.engines.batch", "plain_stretches", "plain stretches"),
    ("sparktrail.engines.batch", "chunk_candidates", "chunk candidates"),
    ("sparktrail.engines.batch", "chunk_cp", "chunk CP"),
    ("sparktrail.engines.batch", "summaries_from_partials", "finish (other)"),
    ("sparktrail.summaries.partials", "Partials.of", "Partials.of"),
    ("sparktrail.summaries.partials", "Partials.combine", "Partials.combine"),
    ("sparktrail.summaries.finish", "task_facts", "task_facts"),
    ("sparktrail.summaries.finish", "task_shares", "task_shares"),
    ("sparktrail.summaries.finish", "operators_and_stages", "operators_and_stages"),
    ("sparktrail.summaries.finish", "stage_stats", "stage_stats"),
    ("sparktrail.summaries.finish", "executor_stats", "executor_stats"),
    ("sparktrail.summaries.finish", "rule_hints", "hint rules"),
    ("sparktrail.summaries.finish", "ranked_hints", "ranking"),
    ("sparktrail.whatif.replay", "Replay.of", "Replay.of"),
    ("sparktrail.engines.profiler", "window_cp", "busiest window's CP"),
    ("sparktrail.cli.profile", "write_report", "write the report"),
)

_KEYS = ("VmRSS", "RssAnon", "RssFile")


def _status() -> dict[str, int]:
    """This process's resident sizes (MiB)."""
    sizes = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in (*_KEYS, "VmHWM"):
                sizes[key] = int(value.split()[0]) // 1024
    return sizes


class Phases:
    """The peaks and times seen per phase."""

    def __init__(self) -> None:
        self.running = ["other"]
        self.peaks: dict[str, list[int]] = {}
        self.seconds: dict[str, float] = {}

    def sample(self) -> None:
        sizes = _status()
        peaks = self.peaks.setdefault(self.running[-1], [0, 0, 0])
        for k, key in enumerate(_KEYS):
            peaks[k] = max(peaks[k], sizes[key])

    def wrap(self, function: Callable[..., Any], phase: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.running.append(phase)
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                took = time.perf_counter() - began
                self.seconds[phase] = self.seconds.get(phase, 0.0) + took
                self.running.pop()

        return wrapped


def _wrap_rules(phases: Phases) -> None:
    """Each hint rule of ``RULES`` a phase of its own, inside "hint rules",
    and the hints' finish (its replays) one inside "ranking"."""
    hints: Any = importlib.import_module("sparktrail.summaries.hints")
    hints.RULES = tuple(
        phases.wrap(rule, f"rule {rule.__name__}") for rule in hints.RULES
    )
    hints.finish_hints = phases.wrap(hints.finish_hints, "finish_hints")


def main(argv: list[str]) -> int:
    """Profile with the phases wrapped; print their peaks."""
    from sparktrail.cli import configure_allocator

    # The allocator setting of `sparktrail profile`, made before the
    # phases' modules import polars (jemalloc reads it once): the phases
    # ran with polars' default, not the command's.
    configure_allocator(["profile"])
    phases = Phases()

    def sampler() -> None:
        while True:
            phases.sample()
            time.sleep(0.01)

    threading.Thread(target=sampler, daemon=True).start()
    for module_name, attribute, phase in PHASES:
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        function = getattr(owner, name, None)
        if function is None:
            print(f"(no {module_name}.{attribute}: skipped)", file=sys.stderr)
            continue
        wrapped = phases.wrap(function, phase)
        setattr(owner, name, staticmethod(wrapped) if path else wrapped)
    _wrap_rules(phases)
    from sparktrail.cli import main as cli

    code = cli(["profile", *argv])
    phases.sample()
    print(f"VmHWM {_status()['VmHWM']} MiB")
    print("| phase | RSS (MiB) | anon (MiB) | file (MiB) | time (s) |")
    print("|---|---:|---:|---:|---:|")
    for phase, (rss, anon, mapped) in phases.peaks.items():
        took = phases.seconds.get(phase, 0.0)
        print(f"| {phase} | {rss:,} | {anon:,} | {mapped:,} | {took:.1f} |")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
