"""The store's window writes: CP rows in the background, renamed when whole."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import polars as pl
import pytest

from sparktrail.engines import store as store_module
from sparktrail.engines.online import OnlinePipeline
from sparktrail.engines.store import CP_FILE, WindowStore
from sparktrail.pag import write_trace
from sparktrail.synthetic import barrier_trace

WINDOW = 200_000


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> list[store_module.StoredWindow]:
    """Windows of a small trace, closed (and stored) once."""
    directory = tmp_path_factory.mktemp("trace")
    frame = barrier_trace(300, workers=4, seed=3)
    write_trace(
        frame.with_columns(pl.int_range(pl.len()).alias("task_id")),
        directory / "part-000.arrow",
    )
    return OnlinePipeline(directory, WINDOW, WINDOW).poll(final=True)


def leftovers(store: WindowStore) -> list[str]:
    return (
        [p.name for p in store.windows_dir.iterdir()]
        if store.windows_dir.is_dir()
        else []
    )


def test_finish_waits_for_the_cp_rows_then_makes_the_window_visible(
    tmp_path: Path,
    closed: list[store_module.StoredWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN CP rows that take a while to write
    write_cp = store_module._write_cp

    def slowly(path: Path, cp: pl.DataFrame) -> None:
        time.sleep(0.2)
        write_cp(path, cp)

    monkeypatch.setattr(store_module, "_write_cp", slowly)
    store = WindowStore(tmp_path)
    window = closed[1]
    # WHEN the window is begun, and finished at once
    with store.begin_window(window.start_ns, window.cp) as write:
        assert leftovers(store) != [str(window.start_ns)]  # not visible yet
        folder = write.finish(window.summaries)
    # THEN it is visible only with its CP rows, as written
    assert leftovers(store) == [str(window.start_ns)]
    assert (folder / CP_FILE).is_file()
    assert store.read_window(window.start_ns, WINDOW).cp.equals(window.cp)


def test_a_window_left_unfinished_leaves_nothing(
    tmp_path: Path, closed: list[store_module.StoredWindow]
) -> None:
    # GIVEN a window begun, whose summaries fail
    store = WindowStore(tmp_path)
    window = closed[1]
    with (
        pytest.raises(RuntimeError, match="summaries failed"),
        store.begin_window(window.start_ns, window.cp),
    ):
        raise RuntimeError("summaries failed")
    # THEN neither the window nor its temporary is left, and it can be written
    assert leftovers(store) == []
    store.write_window(window)
    assert store.window_starts() == [window.start_ns]


def test_a_failed_cp_write_is_raised_by_finish(
    tmp_path: Path,
    closed: list[store_module.StoredWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a disk that refuses the CP rows
    def refusing(path: Path, cp: pl.DataFrame) -> None:
        raise OSError(f"{path}: no space left on device")

    monkeypatch.setattr(store_module, "_write_cp", refusing)
    store = WindowStore(tmp_path)
    window = closed[1]
    # WHEN the window is written
    with pytest.raises(OSError, match="no space left"):
        store.write_window(window)
    # THEN its error reaches the writer and nothing is left behind
    assert leftovers(store) == []


def test_the_cp_rows_are_written_on_the_stores_background_thread(
    tmp_path: Path,
    closed: list[store_module.StoredWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN the thread each write of CP rows runs on
    seen: list[str] = []
    write_cp = store_module._write_cp

    def noting(path: Path, cp: pl.DataFrame) -> None:
        seen.append(threading.current_thread().name)
        write_cp(path, cp)

    monkeypatch.setattr(store_module, "_write_cp", noting)
    # WHEN two windows are written
    store = WindowStore(tmp_path)
    store.write_window(closed[1])
    store.write_window(closed[2])
    # THEN both went to the store's one helper thread, not the caller's
    assert len(seen) == 2 and len(set(seen)) == 1
    assert seen[0].startswith("sparktrail-store")
