"""Dashboard safety without a browser: what it binds, what a request reaches.

The real server (werkzeug, threaded) runs the app over a live trace
directory and answers a battery of hostile paths and forged callback
requests; none may answer with a file's contents, a traceback or a 500.
``sparktrail serve`` runs in a subprocess to see the socket it listens on.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.cli import build_parser
from sparktrail.cli.serve import live_loader
from sparktrail.dashboard import app as app_module
from sparktrail.dashboard.app import create_app, serve
from sparktrail.dashboard.dash_server import well_formed
from sparktrail.dashboard.live_view import LATEST, UpdateThread
from sparktrail.dashboard.page_content import GRAPHS
from sparktrail.pag import write_trace
from sparktrail.synthetic import barrier_trace
from tests.dashboard.serving import served

WINDOW_NS = 500_000
CANARY = "sparktrail-canary-0f9c"
#: What must never be in a response to the battery: /etc/passwd, the
#: canaries, trace and store files (Arrow, Parquet, checkpoint), the
#: project's files, Python tracebacks.
LEAKS = (
    b"root:",
    CANARY.encode(),
    b"ARROW1",
    b"PAR1",
    b"closed_until_ns",
    b"[project]",
    b"Traceback",
    b'File "/',
)
DRAW = ".." + "...".join(f"{key}.figure" for key in GRAPHS) + ".."
REFRESH = (
    "..status.children...counters.children...shown-version.data...drawn-windows.data.."
)


# -- the server -------------------------------------------------------------------


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    """A trace directory with a canary beside it and in it."""
    trace = barrier_trace(1500, workers=8, seed=2).with_columns(
        pl.int_range(pl.len()).alias("task_id")
    )
    folder = tmp_path / "trace"
    write_trace(trace, folder / "part-000.arrow")
    (tmp_path / "canary.txt").write_text(CANARY)
    (folder / "notes.txt").write_text(CANARY)
    return folder


def send(
    port: int, method: str, path: str, body: Any = None, raw: bytes | None = None
) -> tuple[int, bytes]:
    """Send ``path`` as is (no normalising); JSON ``body`` or ``raw`` bytes."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.putrequest(method, path, skip_accept_encoding=True)
    data = raw if body is None else json.dumps(body).encode()
    if data is not None:
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(len(data)))
    connection.endheaders(data)
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    return response.status, answer


class Server:
    """The app on 127.0.0.1 over a live trace directory; raw HTTP requests."""

    def __init__(self, port: int, thread: UpdateThread, trace_dir: Path) -> None:
        self.port = port
        self.thread = thread
        self.trace_dir = trace_dir

    def request(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None
    ) -> tuple[int, bytes]:
        """:func:`send` to this server."""
        return send(self.port, method, path, body, raw)

    def raw(self, request: bytes) -> bytes:
        """Send bytes over a socket as they are; the whole answer back."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        return answer


@pytest.fixture
def server(trace_dir: Path) -> Iterator[Server]:
    # Frames of two windows in memory: picking others reads the store.
    loader = live_loader(trace_dir, WINDOW_NS, 2 * WINDOW_NS, cached_windows=2)
    thread = UpdateThread(loader.step)
    thread.start()
    assert thread.wait_for(lambda s: len(s.windows) > 2, 30)
    with served(create_app(thread)) as port:
        yield Server(port, thread, trace_dir)
    thread.stop()


def assert_safe(status: int, body: bytes, allowed: tuple[int, ...]) -> None:
    assert status in allowed, (status, body[:200])
    for leak in LEAKS:
        assert leak not in body, (leak, body[:200])


# -- paths ------------------------------------------------------------------------


def hostile_paths(trace_dir: Path) -> list[str]:
    """GET paths that try to reach a file: traversal, encodings, store files."""
    suites = "/_dash-component-suites"
    absolute = trace_dir.resolve().as_posix()
    return [
        "/../../etc/passwd",
        "/../../../../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/%2E%2E/%2E%2E/etc/passwd",
        "/%252e%252e/%252e%252e/etc/passwd",
        "/..%2f..%2f..%2fetc%2fpasswd",
        "/..%252f..%252fetc%252fpasswd",
        "/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",
        "/..\\..\\..\\etc\\passwd",
        "/..%5c..%5c..%5cetc%5cpasswd",
        "/etc/passwd",
        "//etc/passwd",
        "/%2fetc%2fpasswd",
        "/etc/passwd%00",
        "/etc/passwd%00.js",
        "/assets/../../etc/passwd",
        "/assets/..%2f..%2fetc%2fpasswd",
        "/assets/canary.txt",
        "/static/../../etc/passwd",
        f"{suites}/dash/../../../../etc/passwd",
        f"{suites}/dash/deps/../../../../../etc/passwd",
        f"{suites}/dash/dcc/../../../../../../pyproject.toml",
        f"{suites}/dash/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        f"{suites}/dash/..%2f..%2f..%2f..%2fetc%2fpasswd",
        f"{suites}/dash/..%5c..%5c..%5cetc%5cpasswd",
        f"{suites}/dash/%00/etc/passwd",
        f"{suites}/dash{absolute}/part-000.arrow",
        f"{suites}/dash//etc/passwd",
        f"{suites}/dash/dash.py",
        f"{suites}/dash/__init__.py",
        f"{suites}/pkg_not_registered/x.js",
        f"{suites}/os/os.py",
        f"{suites}/sparktrail/app.py",
        f"{suites}/sparktrail.dashboard/app.py",
        f"{suites}/..%2f..%2fetc/passwd",
        "/part-000.arrow",
        "/notes.txt",
        "/canary.txt",
        "/../canary.txt",
        "/trace/part-000.arrow",
        "/.sparktrail/store/checkpoint.json",
        "/.sparktrail/store/.lock",
        "/%2esparktrail/store/checkpoint.json",
        f"{absolute}/part-000.arrow",
        f"{absolute}/.sparktrail/store/checkpoint.json",
        f"/{absolute}/notes.txt",
        "/_dash-layout/../../etc/passwd",
        "/_dash-layout/../canary.txt",
        "/_dash-update-component",
        "/_reload-hash",
        "/_mcp",
        "/_dash-health",
        "/favicon.ico",
        "/_favicon.ico/../../etc/passwd",
        "/?path=../../etc/passwd",
    ]


def test_no_path_of_a_request_reaches_the_file_system(server: Server) -> None:
    # GIVEN the server on a live trace directory, a canary in and beside it
    paths = hostile_paths(server.trace_dir)
    # WHEN each hostile path is requested, by GET, HEAD and POST
    for path in paths:
        status, body = server.request("GET", path)
        # THEN each is "not found" (the root with a query is the page),
        # and no body holds a file's contents or a traceback
        allowed = (200,) if path.startswith("/?") else (400, 404, 405)
        assert_safe(status, body, allowed)
        assert_safe(*server.request("HEAD", path), (*allowed, 405))
        assert_safe(*server.request("POST", path, raw=b"{}"), (400, 404, 405))


def test_malformed_request_lines_are_refused(server: Server) -> None:
    for line in (
        b"GET /etc/passwd\x00 HTTP/1.1",
        b"GET /\x00/../etc/passwd HTTP/1.1",
        b"GET http://127.0.0.1/etc/passwd HTTP/1.1",
        b"GET file:///etc/passwd HTTP/1.1",
        b"GET ../../etc/passwd HTTP/1.1",
        b"GET * HTTP/1.1",
    ):
        answer = server.raw(line + b"\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        status = int(answer.split(b" ", 2)[1])
        assert_safe(status, answer, (400, 404, 405))


def test_the_page_and_its_scripts_are_still_served(server: Server) -> None:
    # GIVEN the hardened server WHEN the page loads as a browser loads it
    status, page = server.request("GET", "/")
    assert status == 200 and b"<title>sparktrail</title>" in page
    for path in ("/_dash-layout", "/_dash-dependencies", "/_favicon.ico"):
        assert server.request("GET", path)[0] == 200
    # THEN every script the page names is served
    scripts = [
        part.split(b'"', 1)[0].decode()
        for part in page.split(b'src="')[1:]
        if part.startswith(b"/_dash-component-suites/")
    ]
    assert len(scripts) > 3
    for script in scripts:
        assert server.request("GET", script)[0] == 200, script


# -- callbacks ------------------------------------------------------------------


def draw_request(key: Any, changed: str = "window-picker.value") -> dict[str, Any]:
    return {
        "output": DRAW,
        "outputs": [{"id": key_, "property": "figure"} for key_ in GRAPHS],
        "inputs": [
            {"id": "window-picker", "property": "value", "value": key},
            {"id": "drawn-windows", "property": "data", "value": 1},
        ],
        "state": [],
        "changedPropIds": [changed],
    }


def test_forged_window_keys_pick_only_stored_windows(
    server: Server, store_reads: list[int]
) -> None:
    # GIVEN a record of every window the server reads from its store
    read = store_reads
    snapshot = server.thread.latest()
    stored = {view.start_ns for view in snapshot.windows}
    latest = snapshot.windows[-1]
    forged: list[Any] = [
        "../../etc/passwd",
        "/etc/passwd",
        str(server.trace_dir / "part-000.arrow"),
        "..%2f..%2fetc%2fpasswd",
        "1/../../../etc/passwd",
        "１２３",  # full-width digits: int() would take them
        "x" * 100_000,
        "9" * 400,
        "-1",
        "",
        12,
        -5,
        1.5,
        None,
        True,
        ["../../etc/passwd"],
        {"id": "../../etc/passwd"},
    ]
    # WHEN the draw callback gets forged window keys, by a pick or a redraw
    for key in forged:
        for changed in ("window-picker.value", "drawn-windows.data"):
            status, body = server.request(
                "POST", "/_dash-update-component", draw_request(key, changed)
            )
            # THEN each shows the latest window's figures
            assert_safe(status, body, (200,))
            timeline = json.loads(body)["response"]["critical-timeline"]["figure"]
            assert latest.label in timeline["layout"]["title"]["text"]
    # AND a real key shows its window
    older = snapshot.windows[0]
    status, body = server.request(
        "POST", "/_dash-update-component", draw_request(older.key)
    )
    assert status == 200 and older.label.encode() in body
    # AND the store was read only for windows it holds
    assert read and set(read) <= stored


def test_forged_callback_requests_are_bad_requests(server: Server) -> None:
    draw = draw_request(LATEST)
    inputs = draw["inputs"]
    bad: list[Any] = [
        {},
        [],
        "draw",
        None,
        {"output": None},
        {"output": "nope.figure", "inputs": []},
        {"output": "../../etc/passwd.figure", "inputs": []},
        {**draw, "output": "..activity-summary.figure.."},
        {**draw, "inputs": inputs[:1]},
        {**draw, "inputs": [*inputs, inputs[0]]},
        {**draw, "inputs": [{**inputs[0], "id": "../../etc/passwd"}, inputs[1]]},
        {**draw, "inputs": [{**inputs[0], "property": "__class__"}, inputs[1]]},
        {**draw, "inputs": "window-picker.value"},
        {**draw, "inputs": [None, None]},
        {**draw, "state": [{"id": "shown-version", "property": "data", "value": 1}]},
        {**draw, "outputs": draw["outputs"][:1]},
        {**draw, "outputs": {"id": "/etc/passwd", "property": "figure"}},
        {**draw, "changedPropIds": ["../../etc/passwd.value"]},
        {**draw, "changedPropIds": "window-picker.value"},
        {**draw, "output": REFRESH},
    ]
    for body in bad:
        assert_safe(*server.request("POST", "/_dash-update-component", body), (400,))
    for raw in (b"", b"not json", b"{", b"\x00\xff", b'{"output": "' + b"x" * 5000):
        assert_safe(*server.request("POST", "/_dash-update-component", raw=raw), (400,))
    # A body over the limit is not read at all
    huge = draw_request("x" * (2 << 20))
    assert_safe(*server.request("POST", "/_dash-update-component", huge), (413,))


def test_forged_values_of_the_other_callbacks_are_harmless(server: Server) -> None:
    weird: list[Any] = ["../../etc/passwd", "x" * 100_000, None, [1], {"a": 1}, -1]
    for value in weird:
        refresh = {
            "output": REFRESH,
            "outputs": [
                {"id": i, "property": p}
                for i, p in (
                    ("status", "children"),
                    ("counters", "children"),
                    ("shown-version", "data"),
                    ("drawn-windows", "data"),
                )
            ],
            "inputs": [{"id": "refresh", "property": "n_intervals", "value": value}],
            "state": [
                {"id": "shown-version", "property": "data", "value": value},
                {"id": "drawn-windows", "property": "data", "value": value},
            ],
            "changedPropIds": ["refresh.n_intervals"],
        }
        status, body = server.request("POST", "/_dash-update-component", refresh)
        assert_safe(status, body, (200,))
        search = {
            "output": "window-picker.options",
            "outputs": {"id": "window-picker", "property": "options"},
            "inputs": [
                {"id": "drawn-windows", "property": "data", "value": value},
                {"id": "window-picker", "property": "search_value", "value": value},
            ],
            "state": [{"id": "window-picker", "property": "value", "value": value}],
            "changedPropIds": ["window-picker.search_value"],
        }
        status, body = server.request("POST", "/_dash-update-component", search)
        assert_safe(status, body, (200,))
        options = json.loads(body)["response"]["window-picker"]["options"]
        assert options[0]["value"] == LATEST
        if isinstance(value, str):  # a search no window label holds
            assert len(options) == 1


def test_well_formed_takes_what_the_page_sends() -> None:
    from sparktrail.dashboard.live_view import StaticSource, ViewState

    app = create_app(StaticSource(ViewState(source="t", status="s")))
    assert well_formed(app, draw_request(LATEST))
    assert not well_formed(app, {**draw_request(LATEST), "changedPropIds": ["x.y"]})


# -- binding ----------------------------------------------------------------------


def test_serve_and_demo_bind_loopback_unless_told() -> None:
    parser = build_parser()
    for command in (["serve", "trace"], ["demo", "--serve"]):
        assert parser.parse_args(command).host == "127.0.0.1"
        assert parser.parse_args([*command, "--host", "0.0.0.0"]).host == "0.0.0.0"


def test_serve_refuses_an_empty_host() -> None:
    from sparktrail.dashboard.live_view import StaticSource, ViewState

    app = create_app(StaticSource(ViewState(source="t", status="s")))
    with pytest.raises(ValueError, match="host"):
        serve(app, "", 8050)


def test_demo_serves_on_its_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sparktrail.workloads as workloads
    from sparktrail.cli import demo

    # GIVEN demo --serve with the server and the workload faked
    served: list[tuple[str, int]] = []
    monkeypatch.setattr(
        app_module,
        "serve",
        lambda app, host, port, **options: served.append((host, port)),
    )

    def interrupted(spark: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(workloads, "warm_python_workers", interrupted)
    for extra, host in (([], "127.0.0.1"), (["--host", "0.0.0.0"], "0.0.0.0")):
        served.clear()
        args = build_parser().parse_args(["demo", "--serve", "--port", "8123", *extra])
        # WHEN it starts (and is interrupted at once)
        demo._serve_moving_hotspot(None, tmp_path / "trace", args)
        # THEN the dashboard was served on the host asked for
        deadline = time.monotonic() + 10
        while not served and time.monotonic() < deadline:
            time.sleep(0.01)
        assert served == [(host, 8123)]


#: Environment that would turn on Dash's and Flask's defaults and debug aids.
DEBUGGING = {
    "HOST": "0.0.0.0",
    "DASH_DEBUG": "true",
    "DASH_UI": "true",
    "DASH_HOT_RELOAD": "true",
    "DASH_PROPS_CHECK": "true",
    "DASH_SERVE_DEV_BUNDLES": "true",
    "DASH_MCP_ENABLED": "true",
    "FLASK_DEBUG": "1",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        port: int = sock.getsockname()[1]
    return port


def outside_address() -> str | None:
    """An IPv4 address of this machine that is not loopback, if any."""
    psutil = pytest.importorskip("psutil")
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith(
                "127."
            ):
                return str(address.address)
    return None


def listening(pid: int, port: int, timeout: float = 60) -> str:
    """The address ``pid`` listens on at ``port`` (waits for it)."""
    psutil = pytest.importorskip("psutil")
    process = psutil.Process(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        connections = getattr(process, "net_connections", process.connections)
        for sock in connections(kind="tcp"):
            if sock.status == psutil.CONN_LISTEN and sock.laddr.port == port:
                return str(sock.laddr.ip)
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def reachable(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=5):
            return True
    except OSError:
        return False


@pytest.mark.parametrize(
    ("extra", "bound"), [([], "127.0.0.1"), (["--host", "0.0.0.0"], "0.0.0.0")]
)
def test_serve_listens_where_told(tmp_path: Path, extra: list[str], bound: str) -> None:
    # GIVEN sparktrail serve started as a user starts it, in an environment
    # that asks Dash and Flask for their defaults and debugging aids
    port = free_port()
    command = [sys.executable, "-m", "sparktrail", "serve", str(tmp_path)]
    process = subprocess.Popen(
        [*command, "--port", str(port), *extra],
        env={**os.environ, **DEBUGGING},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # THEN it listens on 127.0.0.1 unless --host says otherwise
        assert listening(process.pid, port) == bound
        assert reachable("127.0.0.1", port)
        outside = outside_address()
        if outside is not None:  # from the network only when asked
            assert reachable(outside, port) == (bound == "0.0.0.0")
        # AND no dev tools: no error UI, no hot reload, no MCP route
        status, page = send(port, "GET", "/")
        assert status == 200 and b'"ui":false' in page
        assert b'"hot_reload"' not in page
        for path in ("/_reload-hash", "/_mcp", "/console"):
            assert send(port, "GET", path)[0] == 404
    finally:
        process.terminate()
        process.wait(30)
