"""Restart without loss: SIGKILL ``sparktrail live`` at random points, compare.

A producer lands the trace files of a skewed, Spark-like run in a directory
one by one; meanwhile ``sparktrail live`` follows the directory and is
killed with SIGKILL at random moments (seeded) and started again; at the
end ``sparktrail live --once --final`` closes the rest. The store must then
equal, frame by frame, the store of an uninterrupted pipeline that read
the same files in the same order (polling after each one), checkpoint and
counters included, with no temporary left behind. ::

    .venv/bin/python bench/restart.py --kills 50

The files keep the lateness bound (the lateness is the longest row plus
one file's span) but for three faults: a corrupt file, a file of late rows
(landed once the store has closed their window, so ``late_rows`` is the
same however the polls fall) and two messages that make one window's PAG
cyclic (``failed_windows``). ``tests/summaries/test_restart.py`` runs the
same harness, smaller.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.store import (
    CHECKPOINT,
    LOCK,
    WINDOW_FILES,
    WINDOW_FRAMES,
    WindowStore,
    store_dir,
)
from sparktrail.pag import write_trace
from sparktrail.pag.trace import TRACE_COLUMNS

__all__ = [
    "REL_TOL",
    "Comparison",
    "Landing",
    "Outcome",
    "arrival",
    "compare_stores",
    "land",
    "reference_run",
    "run_with_kills",
    "spark_like_trace",
]

SECOND = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * SECOND  # an epoch time: windows are multiples since 1970


def spark_like_trace(
    stages: int = 24,
    tasks: int = 24,
    executors: int = 4,
    slots: int = 2,
    seed: int = 0,
) -> pl.DataFrame:
    """A run of ``stages`` stages of ``tasks`` tasks each, with skew.

    The driver plans each stage, then launches each task on the first free
    slot (a control message); the task runs deserialization, shuffle_read
    (after the first stage, fed by data messages from two tasks of the
    stage before), processing (sometimes gc), then shuffle_write or result,
    and reports back (a control message); idle slots wait. Per stage one
    hot partition has 8x the records and 6x the time, and the last
    executor runs 1.8x slower. 24 stages of 24 tasks span ~60 s.
    """
    rng = np.random.default_rng(seed)
    names = [f"exec-{e}/{s}" for e in range(1, executors + 1) for s in range(slots)]
    slow = {n for n in names if n.startswith(f"exec-{executors}/")}
    rows: list[dict[str, object]] = []
    driver_events: set[int] = set()

    def edge(src: str, dst: str, a: int, b: int, activity: str, **kw: object) -> None:
        driver_events.update([a] if src == "driver" else [])
        driver_events.update([b] if dst == "driver" else [])
        rows.append(
            {"src_worker": src, "dst_worker": dst, "start_ns": a, "end_ns": b}
            | {"activity": activity, **kw}
        )

    net = 2 * MS
    now = T0
    free = dict.fromkeys(names, now)
    planning: set[tuple[int, int]] = set()
    writers: list[tuple[str, int]] = []  # tasks of the stage before: (slot, end)
    task_id = 0
    for stage in range(stages):
        plan = int(20 + rng.integers(0, 80)) * MS
        planning.add((now, now + plan))
        now += plan
        hot = int(rng.integers(0, tasks))
        ended: list[tuple[str, int]] = []
        for part in range(tasks):
            slot = min(names, key=lambda n: (free[n], n))
            launch = max(now, free[slot] + net)  # once it heard the slot is free
            edge("driver", slot, launch, launch + net, "control")
            t = launch + net
            edge(slot, slot, free[slot], t, "waiting")
            factor = (1.8 if slot in slow else 1.0) * (6.0 if part == hot else 1.0)
            records = int(rng.integers(900, 1100)) * (8 if part == hot else 1)
            ident = {
                "operator": f"stage {stage}: {'join' if stage % 3 else 'map'} "
                f"at App.scala:{10 + stage % 3}",
                "job_id": stage // 3,
                "stage_id": stage,
                "task_id": task_id,
                "partition": part,
            }
            last = stage == stages - 1
            pieces = [("deserialization", int(rng.integers(5, 20)) * MS)]
            if writers:
                pieces.append(
                    ("shuffle_read", int(rng.integers(20, 120) * factor) * MS)
                )
            pieces.append(("processing", int(rng.lognormal(5.3, 0.4) * factor) * MS))
            if rng.random() < 0.2:
                pieces.append(("gc", int(rng.integers(10, 150)) * MS))
            pieces.append(
                ("result" if last else "shuffle_write", int(rng.integers(10, 60)) * MS)
            )
            for activity, length in pieces:
                if activity == "shuffle_read":
                    for k in rng.choice(len(writers), size=2, replace=False):
                        src, at = writers[int(k)]
                        edge(src, slot, at, t, "data")
                work: dict[str, object] = {}
                if activity == "processing":
                    work = {"records": records, "bytes": records * 120}
                    work["shuffle_write_bytes"] = None if last else records * 80
                edge(slot, slot, t, t + length, activity, **ident, **work)
                t += length
            edge(slot, "driver", t, t + net, "control")
            free[slot] = t
            ended.append((slot, t))
            task_id += 1
        now = max(free.values()) + net
        writers = ended
    # The driver's timeline: planning pieces, waiting between its events.
    events = sorted(driver_events | {t for span in planning for t in span})
    for a, b in itertools.pairwise(events):
        edge("driver", "driver", a, b, "driver" if (a, b) in planning else "waiting")
    for n in names:
        edge(n, n, free[n], now, "waiting")
    # The trace schema without seq (reading fills 0, as for any trace without
    # it), plus the shuffle bytes written that the communication summary reads.
    schema = {c: t for c, t in TRACE_COLUMNS.items() if c not in ("src_seq", "dst_seq")}
    return pl.DataFrame(rows, schema={**schema, "shuffle_write_bytes": pl.Int64()})


@dataclass(frozen=True)
class Landing:
    """One file to land: rows (or raw bytes, for a corrupt file).

    ``after_closed_ns``: land only once the store's checkpoint says every
    window before this time is closed (for rows meant to be late).
    """

    name: str
    rows: pl.DataFrame | None = None
    raw: bytes | None = None
    after_closed_ns: int | None = None


def arrival(
    trace: pl.DataFrame, n_files: int, window_ns: int
) -> tuple[list[Landing], int]:
    """Split ``trace`` into files in the order rows become final; the lateness.

    Rows go to ``n_files`` files by their last event, in equal time spans.
    The lateness that holds them all is the longest row plus one span,
    rounded up to whole windows. Three faults are added: two messages that
    make a cycle in the middle window, a corrupt file, and a file of late
    rows (in the run's second window), landed once the files before it
    have closed that window (a pipeline that polls after each file has).
    """
    last = pl.max_horizontal("start_ns", "end_ns")
    first = pl.min_horizontal("start_ns", "end_ns")
    lo, hi = trace.select(first.min().alias("a"), last.max().alias("b")).row(0)
    origin = lo // window_ns * window_ns
    middle = (lo + hi) // 2 // window_ns * window_ns + window_ns // 2
    a, b = sorted(set(trace["src_worker"]) - {"driver"})[:2]
    cycle = pl.DataFrame(  # a -> b and b -> a at the same event
        {
            "src_worker": [a, b],
            "dst_worker": [b, a],
            "start_ns": [middle, middle],
            "end_ns": [middle, middle],
            "activity": ["control", "control"],
        }
    )
    trace = pl.concat([trace, cycle], how="diagonal_relaxed")
    bounds = [lo - 1 + (hi - lo + 1) * i // n_files for i in range(n_files + 1)]
    span = max(b - a for a, b in itertools.pairwise(bounds))
    longest = int(trace.select((last - first).max()).item())
    lateness = -(-(longest + span) // window_ns) * window_ns
    files = [
        trace.filter((last > a) & (last <= b)) for a, b in itertools.pairwise(bounds)
    ]
    late_at = origin + window_ns
    late = pl.DataFrame(
        {
            "src_worker": ["exec-late/0"] * 3,
            "dst_worker": ["exec-late/0"] * 3,
            "start_ns": [late_at + k * window_ns // 4 for k in range(3)],
            "end_ns": [late_at + (k + 1) * window_ns // 4 for k in range(3)],
            "activity": ["gc"] * 3,
        }
    )
    landings = [Landing("part", f) for f in files]
    closed = late_at + window_ns
    after = next(  # the watermark has passed ``closed`` once file i is in
        i
        for i, (f, top) in enumerate(zip(files, bounds[1:], strict=True))
        if not f.is_empty() and top - lateness >= closed + window_ns
    )
    landings[after + 1 : after + 1] = [
        Landing("corrupt", raw=b"not arrow at all"),
        Landing("late", late, after_closed_ns=closed),
    ]
    # Names sort in arrival order, as the tracer's <app>-<n>.arrow do: a
    # poll consumes the files it finds by name.
    return [
        replace(x, name=f"{i:04d}-{x.name}.arrow") for i, x in enumerate(landings)
    ], lateness


def land(directory: Path, landing: Landing) -> None:
    """Put a file in place whole (temporary name, then rename)."""
    target = directory / landing.name
    if landing.rows is not None:
        write_trace(landing.rows, target)
        return
    assert landing.raw is not None
    temporary = directory / f".{landing.name}.tmp"
    temporary.write_bytes(landing.raw)
    os.replace(temporary, target)


def reference_run(
    directory: Path, landings: Sequence[Landing], window_ns: int, lateness_ns: int
) -> None:
    """The uninterrupted run: land each file, poll, and close all at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the faults warn
        pipeline = OnlinePipeline(directory, window_ns, lateness_ns)
        for landing in landings:
            closed = pipeline.closed_until_ns
            if landing.after_closed_ns is not None:
                assert closed is not None and closed >= landing.after_closed_ns
            land(directory, landing)
            pipeline.poll()
        pipeline.poll(final=True)


@dataclass
class Comparison:
    """Two stores compared: ``problems`` must be empty."""

    problems: list[str] = field(default_factory=list)
    frames: int = 0
    #: Frames equal only up to :data:`REL_TOL`, not bit for bit.
    inexact: list[str] = field(default_factory=list)


#: Floats of two runs may differ in the last bits: polars sums a group_by's
#: floats on several threads in no fixed order (e.g. the hints' cp_share),
#: even for the same input in one process (``POLARS_MAX_THREADS=1``: never).
REL_TOL = 1e-9


def compare_stores(got: Path, want: Path) -> Comparison:
    """What differs between the stores of two trace directories.

    The window starts, every frame of every window (schema, row order,
    values; floats to :data:`REL_TOL`), the checkpoint, and any entry that
    is not a whole window, the checkpoint or the lock (a temporary left
    behind).
    """
    a, b = WindowStore(store_dir(got)), WindowStore(store_dir(want))
    out = Comparison([f"left behind: {p}" for s in (a, b) for p in _strays(s)])
    starts_a, starts_b = a.window_starts(), b.window_starts()
    if starts_a != starts_b:
        missing = sorted(set(starts_b) - set(starts_a))
        added = sorted(set(starts_a) - set(starts_b))
        out.problems.append(f"windows missing {missing}, extra {added}")
    for start in sorted(set(starts_a) & set(starts_b)):
        for name in WINDOW_FRAMES:
            fa, fb = a.read_frame(start, name), b.read_frame(start, name)
            out.frames += 1
            if fa.schema == fb.schema and fa.equals(fb):
                continue
            try:
                assert_frame_equal(fa, fb, rel_tol=REL_TOL, abs_tol=1e-15)
            except AssertionError:
                out.problems.append(f"window {start}: {name} differs")
            else:
                out.inexact.append(f"window {start}: {name}")
    ca, cb = a.read_checkpoint() or {}, b.read_checkpoint() or {}
    if ca != cb:
        keys = sorted(k for k in {*ca, *cb} if ca.get(k) != cb.get(k))
        out.problems.append(f"checkpoints differ in {keys}")
    return out


def _strays(store: WindowStore) -> list[str]:
    """Store entries other than whole windows, the checkpoint and the lock."""
    if not store.root.is_dir():
        return []
    whole = set(WINDOW_FILES)
    strays = [
        p.name
        for p in store.root.iterdir()
        if p.name not in {CHECKPOINT, LOCK, store.windows_dir.name}
    ]
    if store.windows_dir.is_dir():
        for p in store.windows_dir.iterdir():
            if not p.name.isdigit() or {f.name for f in p.iterdir()} != whole:
                strays.append(f"windows/{p.name}")
    return strays


@dataclass
class Outcome:
    """What a run with kills did."""

    kills: int = 0
    lives: int = 0
    #: Where the kills fell, as told by the store each one left behind.
    found: Counter[str] = field(default_factory=Counter)
    #: Windows the killed lives had stored when the final run started.
    stored_by_killed: int = 0
    seconds: float = 0.0


def _live(directory: Path, window_ns: int, lateness_ns: int, *more: str) -> list[str]:
    duration = ("--window", f"{window_ns}ns", "--lateness", f"{lateness_ns}ns")
    return [
        sys.executable,
        "-m",
        "sparktrail",
        "live",
        str(directory),
        *duration,
        *more,
    ]


def _entries(folder: Path) -> frozenset[str]:
    try:
        return frozenset(os.listdir(folder))
    except FileNotFoundError:
        return frozenset()


def _what_was_left(directory: Path) -> list[str]:
    store = WindowStore(store_dir(directory))
    found = []
    if any(name.startswith(".") for name in _entries(store.windows_dir)):
        found.append("a window half-written")
    if any(name.startswith(f".{CHECKPOINT}") for name in _entries(store.root)):
        found.append("a checkpoint half-written")
    checkpoint = store.read_checkpoint()
    if checkpoint is not None and checkpoint.get("closing_until_ns") is not None:
        found.append("a close cut short")
    return found or ["between closes"]


def _wait_closed(directory: Path, until_ns: int, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    store = WindowStore(store_dir(directory))
    while True:
        closed = (store.read_checkpoint() or {}).get("closed_until_ns")
        if isinstance(closed, int) and closed >= until_ns:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no live run closed the windows before {until_ns}")
        time.sleep(0.02)


def run_with_kills(
    directory: Path,
    landings: Sequence[Landing],
    window_ns: int,
    lateness_ns: int,
    *,
    kills: int,
    seed: int,
    pace_s: float = 0.1,
    amid_s: float = 1.0,
    wait_s: float = 60.0,
) -> Outcome:
    """Land the files while ``live`` runs and is killed ``kills`` times or more.

    Files land ``pace_s`` apart on average. Each life of ``live`` is
    SIGKILLed either up to ``amid_s`` after a window (or its temporary)
    first appears in the store (7 kills in 10: amid closes; after 5 s
    without one it is idle and killed anyway), or up to 3 s after its
    start (start-up, re-reading, idling). The kills go on while files are
    still to land. Then ``live --once --final`` closes the rest.
    """
    rng = random.Random(seed)
    pace = random.Random(seed + 1)
    directory.mkdir(parents=True, exist_ok=True)
    windows_dir = store_dir(directory) / "windows"
    outcome = Outcome()
    began = time.perf_counter()
    failure: list[BaseException] = []

    def produce() -> None:
        try:
            for landing in landings:
                if landing.after_closed_ns is not None:
                    _wait_closed(directory, landing.after_closed_ns, wait_s)
                time.sleep(pace.uniform(0, 2 * pace_s))
                land(directory, landing)
        except BaseException as err:  # re-raised by the caller's thread
            failure.append(err)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    command = _live(directory, window_ns, lateness_ns, "--poll", "0.05")
    while outcome.kills < kills or producer.is_alive():
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        outcome.lives += 1
        if rng.random() < 0.7:
            before = _entries(windows_dir)
            deadline = time.monotonic() + 5.0  # else it is idle: kill it anyway
            while _entries(windows_dir) == before and process.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            time.sleep(rng.uniform(0, amid_s))
        else:
            time.sleep(rng.uniform(0, 3.0))
        process.send_signal(signal.SIGKILL)
        _, err = process.communicate()
        if process.returncode != -signal.SIGKILL:
            raise RuntimeError(f"live ended by itself: {err.decode()}")
        outcome.kills += 1
        outcome.found.update(_what_was_left(directory))
    producer.join()
    if failure:
        raise failure[0]
    outcome.stored_by_killed = len(WindowStore(store_dir(directory)).window_starts())
    final = subprocess.run(
        _live(directory, window_ns, lateness_ns, "--once", "--final"),
        capture_output=True,
        text=True,
        check=False,
    )
    if final.returncode != 0:
        raise RuntimeError(f"live --once --final failed: {final.stderr}")
    outcome.lives += 1
    outcome.seconds = time.perf_counter() - began
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", type=int, default=24)
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--window-ms", type=int, default=250)
    parser.add_argument("--pace", type=float, default=0.5, help="s between files")
    parser.add_argument(
        "--amid", type=float, default=0.5, help="kill up to this long into a close"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="an empty directory to keep the run in"
    )
    args = parser.parse_args(argv)
    window = args.window_ms * MS
    trace = spark_like_trace(args.stages, args.tasks, seed=args.seed)
    landings, lateness = arrival(trace, args.files, window)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.dir or Path(tmp)
        began = time.perf_counter()
        reference_run(base / "reference", landings, window, lateness)
        reference_s = time.perf_counter() - began
        outcome = run_with_kills(
            base / "killed",
            landings,
            window,
            lateness,
            kills=args.kills,
            seed=args.seed,
            pace_s=args.pace,
            amid_s=args.amid,
        )
        compared = compare_stores(base / "killed", base / "reference")
        checkpoint = WindowStore(store_dir(base / "reference")).read_checkpoint() or {}
        windows = len(WindowStore(store_dir(base / "reference")).window_starts())
    rows = sum(0 if x.rows is None else x.rows.height for x in landings)
    print(
        f"trace: {rows} rows in {len(landings)} files, window {args.window_ms} ms, "
        f"lateness {lateness / MS:.0f} ms"
    )
    print(
        f"reference (uninterrupted, in-process): {windows} windows, "
        f"late_rows {checkpoint.get('late_rows')}, failed_windows "
        f"{checkpoint.get('failed_windows')}, corrupt files "
        f"{len(checkpoint.get('corrupt', {}))}; {reference_s:.1f} s"
    )
    print(
        f"killed run: {outcome.kills} SIGKILLs survived over {outcome.lives} "
        f"lives of `sparktrail live`, which stored {outcome.stored_by_killed} "
        f"windows before `live --once --final`; {outcome.seconds:.1f} s"
    )
    print(
        "  the store after each kill: "
        + ", ".join(f"{name} {n}" for name, n in outcome.found.most_common())
    )
    print(
        f"windows compared: {windows} ({compared.frames} frames, "
        f"{len(compared.inexact)} of them equal only to {REL_TOL:g} relative) "
        f"+ checkpoint; mismatches: {len(compared.problems)}"
    )
    for line in [*compared.problems[:20], *compared.inexact[:5]]:
        print(f"  {line}")
    return 1 if compared.problems else 0


if __name__ == "__main__":
    sys.exit(main())
