"""--follow: a log appended to from a thread, imported batch by batch."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import polars as pl

from sparktrail.pag.trace import read_trace
from sparktrail.tracer import ImportStats, follow_eventlog, import_eventlog
from tests.paths import SHARED_LOG

LOG = SHARED_LOG
KEYS = ["start_ns", "src_worker", "src_seq", "dst_worker", "dst_seq", "activity"]


def writer(target: Path, lines: list[bytes], rename: bool) -> None:
    with target.open("ab") as sink:
        for line in lines:
            sink.write(line[: len(line) // 2])  # half a line: must not be read yet
            sink.flush()
            time.sleep(0.01)
            sink.write(line[len(line) // 2 :])
            sink.flush()
            time.sleep(0.01)
    if rename:
        target.rename(target.with_name(target.name.removesuffix(".inprogress")))


def test_follow_appended_log_matches_full_import(tmp_path: Path) -> None:
    lines = LOG.read_bytes().splitlines(keepends=True)[:-1]  # no ApplicationEnd
    target = tmp_path / "local-1532512550423.inprogress"
    target.write_bytes(b"")
    out = tmp_path / "traces"
    thread = threading.Thread(target=writer, args=(target, lines, True))
    thread.start()
    stats = ImportStats()
    files = follow_eventlog(target, out, poll_s=0.02, slack_ms=1, stats=stats)
    thread.join()
    assert len(files) >= 3
    assert [f.name for f in files] == sorted(f.name for f in files)
    assert stats.tasks == 8 and stats.skipped_lines == 0
    followed = read_trace(out).sort(KEYS)
    expected = import_eventlog(tmp_path / "local-1532512550423").sort(KEYS)
    assert followed.height == expected.height
    assert followed.equals(expected)


def test_follow_stops_on_event(tmp_path: Path) -> None:
    target = tmp_path / "app.inprogress"
    target.write_bytes(LOG.read_bytes()[:2000])
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    files = follow_eventlog(target, tmp_path / "out", poll_s=0.05, stop=stop)
    timer.cancel()
    frame = pl.concat([read_trace(f) for f in files]) if files else None
    assert frame is None or frame["task_id"].is_null().all()


def test_follow_splits_large_batches_into_files_of_max_rows(tmp_path: Path) -> None:
    # GIVEN a finished log of 73 trace rows
    log = tmp_path / "app"
    log.write_bytes(LOG.read_bytes())
    # WHEN it is followed with files of at most 20 rows
    files = follow_eventlog(log, tmp_path / "out", poll_s=0.05, max_rows=20)
    # THEN the rows are spread over files of at most 20 rows, none lost
    sizes = [read_trace(f).height for f in files]
    assert max(sizes) <= 20 and len(files) >= 4
    assert sum(sizes) == import_eventlog(log).height
