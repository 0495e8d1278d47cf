"""Every public event log in the shared folder imports (issue 11, item 5).

The logs come from Spark's, RAPIDS' and Kubeflow's test resources: Spark
1.x to 4.x, YARN attempts, rolling directories, zstd files. A log is a
file, a rolling ``eventlog_v2_*`` directory or a Spark 1.x directory (one
holding ``EVENT_LOG_<n>``); the files inside those two are parts of their
log, not logs.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from sparktrail.tracer import ImportStats, import_trace, trace_name
from tests.paths import EVENTLOGS

PUBLIC = EVENTLOGS / "public"


def is_log_dir(path: Path) -> bool:
    """A rolling or Spark 1.x log directory."""
    return path.is_dir() and (
        path.name.startswith("eventlog_v2_") or any(path.glob("EVENT_LOG_*"))
    )


def public_logs(root: Path) -> list[Path]:
    """The event logs under ``root``, sorted: files and log directories."""
    if not root.is_dir():
        return []
    logs: list[Path] = []
    for path in sorted(root.rglob("*")):
        if any(is_log_dir(parent) for parent in path.parents):
            continue  # a part of a log directory
        if is_log_dir(path) or (path.is_file() and not path.name.startswith(".")):
            logs.append(path)
    return logs


def size(log: Path) -> int:
    files = log.rglob("*") if log.is_dir() else [log]
    return sum(f.stat().st_size for f in files if f.is_file())


LOGS = public_logs(PUBLIC)
#: Logs this large (compressed: 10k tasks) take seconds each; they run with
#: the integration tests.
SLOW_BYTES = 900_000
pytestmark = pytest.mark.skipif(not LOGS, reason=f"no event logs in {PUBLIC}")


def test_the_folder_holds_every_kind() -> None:
    """The discovery finds the layouts this test is meant to cover."""
    names = [log.name for log in LOGS]
    assert len(LOGS) >= 40
    assert any(name.startswith("eventlog_v2_") for name in names)
    assert any(
        is_log_dir(log) and not log.name.startswith("eventlog_v2") for log in LOGS
    )
    assert any(name.endswith(".zstd") for name in names)


@pytest.mark.parametrize(
    "log",
    [
        pytest.param(
            log,
            id=str(log.relative_to(PUBLIC)),
            marks=[pytest.mark.integration] if size(log) > SLOW_BYTES else [],
        )
        for log in LOGS
    ],
)
def test_public_log_imports(log: Path) -> None:
    # GIVEN one public event log; WHEN it is imported
    stats = ImportStats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what these logs warn is tested elsewhere
        trace = import_trace(log, stats=stats)
    # THEN it gives rows, read from listener events
    assert trace.frame.height > 0
    assert stats.events > 0
    assert stats.skipped_lines == 0


def test_attempts_get_their_own_trace_names() -> None:
    """The attempts of one application (same app id) name distinct traces."""
    folder = PUBLIC / "rapids" / "spark-events-qualification" / "multiple_attempts"
    attempts = sorted(folder.glob("attempt_*_eventlog.zstd"))
    if not attempts:
        pytest.skip(f"no attempts in {folder}")
    names = set()
    for log in attempts:
        trace = import_trace(log)
        assert trace.context.app_id == "application_1724877841851_0016"
        names.add(trace_name(log, trace.context.app_id, trace.context.attempt_id))
    assert names == {f"application_1724877841851_0016_{n}" for n in range(1, 5)}
