"""What the terminal shows: help, version, one-line warnings, a quiet server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from sparktrail import __version__
from sparktrail.cli import EXIT_BAD_INPUT, EXIT_USAGE, main
from tests.paths import SHARED_LOG

CLI = [sys.executable, "-m", "sparktrail"]


def test_no_arguments_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_USAGE
    out = capsys.readouterr().out
    assert out.startswith("usage: sparktrail") and "profile" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"sparktrail {__version__}"


def test_warnings_are_one_line_without_python_source(tmp_path: Path) -> None:
    # GIVEN the shared event log with one line broken in the middle
    lines = SHARED_LOG.read_bytes().splitlines(keepends=True)
    lines[10] = b'{"Event":"SparkListenerTaskEnd", broken\n'
    log = tmp_path / "broken-log"
    log.write_bytes(b"".join(lines))
    # WHEN it is imported
    done = subprocess.run(
        [*CLI, "import", str(log), "-o", str(tmp_path / "t")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # THEN the skipped line is one warning naming file and line, no source
    assert done.returncode == 0, done.stderr
    warned = [x for x in done.stderr.splitlines() if "warning" in x.lower()]
    assert warned == [x for x in done.stderr.splitlines() if x.strip()]
    assert len(warned) == 1
    assert warned[0].startswith(f"sparktrail: warning: {log}:11: ")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_refuses_a_store_another_process_writes(tmp_path: Path) -> None:
    # GIVEN another process holding the trace directory's store
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from sparktrail.engines.store import WindowStore, store_dir\n"
            f"store = WindowStore(store_dir({str(trace_dir)!r}))\n"
            "store.lock()\n"
            "print('locked', flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        # WHEN serve is asked for the same directory
        done = subprocess.run(
            [*CLI, "serve", str(trace_dir), "--port", str(_free_port())],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    # THEN it is refused in one line with exit 2, and nothing was served
    assert done.returncode == EXIT_BAD_INPUT
    assert done.stderr.count("\n") == 1, done.stderr
    assert "being written by another process" in done.stderr
    assert "dashboard on" not in done.stderr


def test_serve_prints_one_line_and_no_access_log(tmp_path: Path) -> None:
    # GIVEN a profile's output
    out = tmp_path / "profile"
    assert main(["profile", str(SHARED_LOG), "-o", str(out)]) == 0
    port = _free_port()
    # WHEN it is served and a page is fetched
    server = subprocess.Popen(
        [*CLI, "serve", "--report", str(out), "--port", str(port)],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as page:
                    assert page.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "the dashboard never answered"
                time.sleep(0.2)
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    # THEN the terminal shows the URL line and no request or banner
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines == [
        f"sparktrail dashboard on http://127.0.0.1:{port}/ (Ctrl-C stops)"
    ], err


def test_output_defaults_to_a_directory_named_after_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a compressed copy's name and no -o
    monkeypatch.chdir(tmp_path)
    # WHEN the shared log is imported and profiled without -o
    assert main(["import", str(SHARED_LOG)]) == 0
    assert main(["profile", str(SHARED_LOG)]) == 0
    # THEN each went to ./<input name>-<what>
    name = SHARED_LOG.name
    assert (tmp_path / f"{name}-trace" / f"{name}.arrow").is_file()
    assert (tmp_path / f"{name}-profile" / "report.html").is_file()
