"""Restart without loss: killed anywhere, the live pipeline stores the same.

The steps of the store's writes are numbered: before and after each
rename that makes a window or the checkpoint visible, and amid a window's
parquet files. Three ways of killing the pipeline:

* at each step in turn: the trace directory is copied as it stands at
  that step of an uninterrupted run (what SIGKILL would leave on disk,
  temporaries included) and a new pipeline goes on from the copy;
* at several steps of one run, the later ones during the recovery from the
  earlier ones (a property test): the step raises :class:`Crash`, the
  pipeline object is dropped and a new one made;
* for real: ``sparktrail live`` subprocesses SIGKILLed at random (seeded)
  moments while the files land (``bench/restart.py``, which also holds the
  trace, the arrival order with its three faults, and the comparison).

Either way the store must equal that of a pipeline never stopped, frame by
frame, with the same checkpoint (so the same counters), and hold no
temporary.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.restart import (
    Landing,
    arrival,
    compare_stores,
    land,
    reference_run,
    run_with_kills,
    spark_like_trace,
)
from sparktrail.engines import store as store_module
from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.store import WindowStore, store_dir
from sparktrail.summaries import result as result_module

SECOND = 1_000_000_000


class Crash(Exception):
    """Stands for SIGKILL: the pipeline is dropped where it stood."""


@dataclass
class Faults:
    """Numbers the steps of the store's writes; crashes at those in ``at``."""

    at: frozenset[int] = frozenset()
    on_step: Callable[[int, str], None] | None = None
    step: int = 0
    crashed: list[str] = field(default_factory=list)

    def point(self, what: str) -> None:
        k, self.step = self.step, self.step + 1
        if self.on_step is not None:
            self.on_step(k, what)
        if k in self.at:
            self.crashed.append(what)
            raise Crash(f"step {k}: {what}")


@contextmanager
def faults(at: frozenset[int] = frozenset()) -> Iterator[Faults]:
    """Steps: between a window's two files, before and after each rename."""
    f = Faults(at)
    rename: Callable[[Path, Path], None] = store_module._rename
    write_bundle = result_module.write_bundle

    def renaming(source: Path, target: Path) -> None:
        what = "checkpoint" if target.name == "checkpoint.json" else "window"
        f.point(f"before renaming a {what}")
        rename(source, target)
        f.point(f"after renaming a {what}")

    def bundling(path: Path, *args: Any, **kw: Any) -> None:
        # The store writes a window's summary frames, then its CP rows: a
        # kill between them leaves one file of the two.
        write_bundle(path, *args, **kw)
        f.point("amid a window's frames")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_module, "_rename", renaming)
        patch.setattr(result_module, "write_bundle", bundling)
        yield f


def run_crashing(
    directory: Path,
    landings: Sequence[Landing],
    window_ns: int,
    lateness_ns: int,
    *,
    resume_at: int | None = None,
) -> None:
    """The reference's schedule (a poll after each file), restarted on a crash.

    ``resume_at``: go on from the poll after that file (which has landed).
    """
    directory.mkdir(parents=True, exist_ok=True)
    pipeline: OnlinePipeline | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the faults warn
        for i, landing in enumerate([*landings, None]):
            if resume_at is not None and i < resume_at:
                continue
            if landing is not None and (resume_at is None or i > resume_at):
                land(directory, landing)
            while True:
                try:
                    if pipeline is None:
                        pipeline = OnlinePipeline(directory, window_ns, lateness_ns)
                    pipeline.poll(final=landing is None)
                    break
                except Crash:
                    pipeline = None


@dataclass(frozen=True)
class Small:
    """A small run for the in-process tests, and its uninterrupted store."""

    landings: list[Landing]
    window_ns: int
    lateness_ns: int
    reference: Path
    steps: int


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Small:
    window = SECOND
    landings, lateness = arrival(spark_like_trace(3, 12, 2, 2), 8, window)
    reference = tmp_path_factory.mktemp("reference")
    with faults() as counted:
        reference_run(reference, landings, window, lateness)
    return Small(landings, window, lateness, reference, counted.step)


def test_a_kill_at_any_step_loses_and_repeats_nothing(
    small: Small, tmp_path: Path
) -> None:
    # GIVEN the trace directory as a kill at each step of the small run
    # would leave it, and the poll that step belongs to
    run = tmp_path / "run"
    poll = [0]  # the poll under way: after the file of that index
    kills: list[tuple[str, int, Path]] = []

    def copy(step: int, what: str) -> None:
        kills.append((what, poll[0], shutil.copytree(run, tmp_path / f"step-{step}")))

    with faults() as f:
        f.on_step = copy
        run.mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pipeline = OnlinePipeline(run, small.window_ns, small.lateness_ns)
            for i, landing in enumerate([*small.landings, None]):
                poll[0] = i
                if landing is not None:
                    land(run, landing)
                pipeline.poll(final=landing is None)
    assert len(kills) == small.steps >= 30
    assert len({what for what, _, _ in kills}) == 5
    failures = {}
    for what, at, directory in kills:
        # WHEN a new pipeline goes on from there
        run_crashing(
            directory, small.landings, small.window_ns, small.lateness_ns, resume_at=at
        )
        # THEN its store equals the uninterrupted one, counters included
        problems = compare_stores(directory, small.reference).problems
        if problems:
            failures[f"{directory.name}: {what}"] = problems
    assert failures == {}


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_crashes_during_the_recovery_lose_nothing_either(
    small: Small, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    # GIVEN several crashes in one run: the later ones (steps counted on
    # across restarts) fall into the recovery of the earlier ones
    first = data.draw(st.integers(0, small.steps - 1), label="first")
    gaps = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=3), label="gaps")
    at = [first]
    for gap in gaps:
        at.append(at[-1] + 1 + gap)
    directory = tmp_path_factory.mktemp("crashes")
    # WHEN the run goes on through them
    with faults(frozenset(at)) as f:
        run_crashing(directory, small.landings, small.window_ns, small.lateness_ns)
    # THEN the store is still the uninterrupted one
    assert f.crashed
    assert compare_stores(directory, small.reference).problems == []


def test_sigkilled_live_restarts_to_the_store_of_an_unkilled_run(
    tmp_path: Path,
) -> None:
    # GIVEN a skewed run of 24 stages (~60 one-second windows) in 40 files,
    # plus a corrupt file, late rows and a cyclic window; and the store of
    # an uninterrupted pipeline on the same files
    window = SECOND
    landings, lateness = arrival(spark_like_trace(seed=0), 40, window)
    reference_run(tmp_path / "reference", landings, window, lateness)
    # WHEN the files land while `sparktrail live` is SIGKILLed at random
    # moments and restarted, and `live --once --final` ends it
    outcome = run_with_kills(
        tmp_path / "killed", landings, window, lateness, kills=5, seed=7, pace_s=0.3
    )
    # THEN both stores hold the same windows, frames and checkpoint
    assert outcome.kills >= 5
    assert compare_stores(tmp_path / "killed", tmp_path / "reference").problems == []
    killed = WindowStore(store_dir(tmp_path / "killed"))
    assert len(killed.window_starts()) >= 60
    checkpoint = killed.read_checkpoint()
    assert checkpoint is not None
    assert (checkpoint["late_rows"], checkpoint["failed_windows"]) == (3, 1)
    assert len(checkpoint["corrupt"]) == 1


# -- the store's part -------------------------------------------------------


def test_temporaries_of_a_killed_writer_are_removed_on_restart(
    small: Small, tmp_path: Path
) -> None:
    # GIVEN a store with a half-written window and checkpoint of a dead pid
    run_crashing(tmp_path, small.landings[:4], small.window_ns, small.lateness_ns)
    store = WindowStore(store_dir(tmp_path))
    windows = store.window_starts()
    half = store.windows_dir / ".1700000099000000000.99999.tmp"
    half.mkdir()
    (half / "cp.feather").write_bytes(b"ARROW1")
    (store.root / ".checkpoint.json.99999.tmp").write_text("{")
    # WHEN a pipeline starts on it
    OnlinePipeline(tmp_path, small.window_ns, small.lateness_ns)
    # THEN they are gone and the rest is untouched
    assert sorted(p.name for p in store.root.iterdir()) == [
        ".lock",
        "checkpoint.json",
        "windows",
    ]
    assert not any(p.name.startswith(".") for p in store.windows_dir.iterdir())
    assert store.window_starts() == windows


def test_windows_without_a_checkpoint_are_made_again(
    small: Small, tmp_path: Path
) -> None:
    # GIVEN windows of 2 s whose checkpoint is gone
    kept, fresh = tmp_path / "kept", tmp_path / "fresh"
    run_crashing(kept, small.landings, 2 * small.window_ns, small.lateness_ns)
    (store_dir(kept) / "checkpoint.json").unlink()
    # WHEN a pipeline of 1 s windows takes the store over and finishes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        OnlinePipeline(kept, small.window_ns, small.lateness_ns).poll(final=True)
        for landing in small.landings:
            land(fresh, landing)
        OnlinePipeline(fresh, small.window_ns, small.lateness_ns).poll(final=True)
    # THEN it holds what a pipeline on the files alone stores
    assert compare_stores(kept, fresh).problems == []


def test_a_window_is_written_once(small: Small) -> None:
    store = WindowStore(store_dir(small.reference))
    window = store.read_window(store.window_starts()[0], small.window_ns)
    with pytest.raises(FileExistsError, match="stored already"):
        store.write_window(window)


def test_a_second_writer_process_is_refused(small: Small, tmp_path: Path) -> None:
    # GIVEN another process that writes the store
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from sparktrail.engines.store import WindowStore; "
            "store = WindowStore(sys.argv[1]); store.lock(); "
            "print('locked', flush=True); sys.stdin.read()",
            str(store_dir(tmp_path)),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        # WHEN a pipeline starts on it
        # THEN it is refused, naming the holder
        with pytest.raises(ValueError, match=f"another process \\(pid {holder.pid}\\)"):
            OnlinePipeline(tmp_path, small.window_ns, small.lateness_ns)
    finally:
        holder.communicate("")
    # ... and once that process has ended, it starts
    OnlinePipeline(tmp_path, small.window_ns, small.lateness_ns)
