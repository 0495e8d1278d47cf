"""Event logs where Spark writes them (issue 28 item 2): S3 through a real
S3-compatible server (moto's, started here on 127.0.0.1), HTTP through
Python's own file server; errors in one line with their exit codes."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import shutil
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.cli import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, main
from sparktrail.pag.trace import read_trace
from sparktrail.tracer import follow_eventlog, import_eventlog
from sparktrail.tracer.eventlog import resolve
from sparktrail.tracer.remote import MissingExtraError, RemotePath
from tests.paths import EVENTLOGS

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

PUBLIC = EVENTLOGS / "public"
#: A plain Spark 1.2 log, a zstd Spark 4.1 log, a rolling Spark 3.5 log.
PLAIN = PUBLIC / "spark" / "spark-events" / "local-1422981759269"
ZSTD = PUBLIC / "kubeflow/skills/cli/e2e/spark-events/local-1776286804625.zstd"
ROLLING = (
    PUBLIC
    / "kubeflow/examples/basic/events"
    / "eventlog_v2_spark-bcec39f6201b42b9925124595baad260"
)
BUCKET = "spark-logs"
KEYS = ["start_ns", "src_worker", "src_seq", "dst_worker", "dst_seq", "activity"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A moto S3 server on 127.0.0.1, found through AWS_ENDPOINT_URL, with
    the three logs uploaded under s3://spark-logs/events/."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    patch = pytest.MonkeyPatch()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
    }.items():
        patch.setenv(key, value)
    patch.delenv("AWS_PROFILE", raising=False)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    fs.mkdir(BUCKET)
    fs.put(str(PLAIN), f"{BUCKET}/events/{PLAIN.name}")
    fs.put(str(ZSTD), f"{BUCKET}/events/{ZSTD.name}")
    for file in ROLLING.iterdir():
        fs.put(str(file), f"{BUCKET}/events/{ROLLING.name}/{file.name}")
    try:
        yield fs
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        patch.undo()
        server.stop()


def _quiet_main(argv: list[str]) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main(argv)


@pytest.mark.parametrize(
    "log", [PLAIN, ZSTD, ROLLING], ids=["plain", "zstd", "rolling"]
)
def test_import_from_s3_gives_the_local_trace(
    s3: Any, log: Path, tmp_path: Path
) -> None:
    # GIVEN a log uploaded to S3
    uri = f"s3://{BUCKET}/events/{log.name}"
    # WHEN `sparktrail import` reads its URI and the local file
    assert _quiet_main(["import", uri, "-o", str(tmp_path / "remote")]) == 0
    assert _quiet_main(["import", str(log), "-o", str(tmp_path / "local")]) == 0
    # THEN the trace files are named alike and hold the same rows and context
    remote = sorted((tmp_path / "remote").iterdir())
    local = sorted((tmp_path / "local").iterdir())
    assert [p.name for p in remote] == [p.name for p in local]
    assert read_trace(remote[0]).equals(read_trace(local[0]))


def test_a_rolling_directory_on_s3_resolves_like_the_local_one(s3: Any) -> None:
    source = resolve(f"s3://{BUCKET}/events/{ROLLING.name}")
    local = resolve(ROLLING)
    assert [f.name for f in source.files] == [f.name for f in local.files]
    assert (source.app_id, source.complete) == (local.app_id, local.complete)
    assert str(source.root) == f"s3://{BUCKET}/events/{ROLLING.name}"


def test_profile_of_an_s3_log_gives_the_local_hints(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"s3://{BUCKET}/events/{ZSTD.name}"
    assert _quiet_main(["profile", uri, "--json", "-o", str(tmp_path / "r")]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert _quiet_main(["profile", str(ZSTD), "--json", "-o", str(tmp_path / "l")]) == 0
    local = json.loads(capsys.readouterr().out)
    assert remote == local and remote
    assert (tmp_path / "r" / "report.html").is_file()


def test_follow_a_rolling_log_growing_on_s3(s3: Any, tmp_path: Path) -> None:
    # GIVEN a rolling log of three events files, uploaded one by one (S3
    # shows a file whole once written) while the follower polls
    lines = PLAIN.read_bytes().splitlines(keepends=True)
    app = PLAIN.name
    parts = [lines[: len(lines) // 3], lines[len(lines) // 3 : 2 * len(lines) // 3]]
    parts.append(lines[2 * len(lines) // 3 :])
    local = tmp_path / f"eventlog_v2_{app}"
    local.mkdir()
    for n, part in enumerate(parts, 1):
        (local / f"events_{n}_{app}").write_bytes(b"".join(part))
    (local / f"appstatus_{app}").write_bytes(b"")
    prefix = f"{BUCKET}/growing/eventlog_v2_{app}"
    s3.pipe(f"{prefix}/appstatus_{app}.inprogress", b"")
    s3.put(str(local / f"events_1_{app}"), f"{prefix}/events_1_{app}")
    out = tmp_path / "traces"

    def upload() -> None:
        for n in (2, 3):
            # the next file once the follower has written a batch (5 s at most)
            deadline = time.monotonic() + 5
            while len(list(out.glob("*.arrow"))) < n - 1:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            s3.put(str(local / f"events_{n}_{app}"), f"{prefix}/events_{n}_{app}")
        time.sleep(0.2)
        s3.pipe(f"{prefix}/appstatus_{app}", b"")
        s3.rm(f"{prefix}/appstatus_{app}.inprogress")

    writer = threading.Thread(target=upload)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        writer.start()
        files = follow_eventlog(f"s3://{prefix}", out, poll_s=0.05, slack_ms=1)
        writer.join()
        expected = import_eventlog(local).sort(KEYS)
    # THEN the follower wrote several batches, and together they are the
    # trace of the whole log
    assert len(files) >= 2
    followed = read_trace(out).sort(KEYS)
    assert followed.equals(expected)


def test_a_missing_bucket_is_one_line_and_exit_2(
    s3: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["import", "s3://no-such-bucket/app-1", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert err.count("\n") == 1 and "s3://no-such-bucket/app-1" in err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_named_with_its_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    uri = f"http://127.0.0.1:{_free_port()}/logs/app-1"
    code = main(["profile", uri, "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert err.count("\n") == 1 and uri in err and "connect" in err.lower()


def test_a_missing_filesystem_says_which_pip_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # GIVEN fsspec without the filesystem a gs:// URI needs
    import fsspec.core

    def no_gcsfs(uri: str, **_: Any) -> Any:
        raise ImportError("Install gcsfs to access Google Storage")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_gcsfs)
    with pytest.raises(MissingExtraError):
        RemotePath.of("gs://bucket/app-1")
    # WHEN the command line is given one THEN exit 3 and the pip command
    code = main(["import", "gs://bucket/app-1", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == EXIT_ENVIRONMENT
    assert "pip install 'sparktrail[cloud]'" in err and "gcsfs" in err


@contextlib.contextmanager
def _http_server(folder: Path) -> Iterator[int]:
    # serves the folder's files, and its listings as HTML pages
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_rolling_log_over_http(tmp_path: Path) -> None:
    # GIVEN a rolling log behind a web server that lists folders
    shutil.copytree(ROLLING, tmp_path / ROLLING.name)
    with _http_server(tmp_path) as port:
        uri = f"http://127.0.0.1:{port}/{ROLLING.name}/"
        # WHEN it is imported by URL THEN it is the local log's trace
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            remote = import_eventlog(uri)
            local = import_eventlog(ROLLING)
    assert remote.height > 0
    assert remote.sort(KEYS).equals(local.sort(KEYS))
    assert isinstance(remote, pl.DataFrame)
