"""``sparktrail export --format otlp``: OTLP/JSON spans, sent to a collector.

A stand-in collector (a ``http.server`` on 127.0.0.1 in a thread) parses
each POST body as an ``ExportTraceServiceRequest`` and keeps it.
"""

from __future__ import annotations

import collections
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from sparktrail.cli import main
from tests.paths import SHARED_LOG

pytestmark = pytest.mark.skipif(
    not SHARED_LOG.exists(), reason=f"{SHARED_LOG} is missing"
)


class Collector(http.server.BaseHTTPRequestHandler):
    received: list[tuple[str, str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        self.received.append((self.path, self.headers["Content-Type"], request))
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, str, Any]]]]:
    received: list[tuple[str, str, Any]] = []
    handler = type("Handler", (Collector,), {"received": received})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _attrs(span: Any) -> dict[str, Any]:
    values = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        values[kv.key] = getattr(kv.value, kind)
    return values


def test_spans_reach_the_collector_as_a_tree(collector, tmp_path, capsys):
    url, received = collector
    out = tmp_path / "spans.json"
    # GIVEN the shared log (2 jobs, a stage each, 8 tasks)
    # WHEN exported as OTLP and sent to the collector
    assert (
        main(
            [
                "export",
                str(SHARED_LOG),
                "--format",
                "otlp",
                "-o",
                str(out),
                "--endpoint",
                url,
            ]
        )
        == 0
    )
    assert f"sent 13 spans to {url}/v1/traces" in capsys.readouterr().err
    # THEN one protobuf request arrived at /v1/traces
    assert [(p, t) for p, t, _ in received] == [
        ("/v1/traces", "application/x-protobuf")
    ]
    request = received[0][2]
    (resource,) = request.resource_spans
    (scope,) = resource.scope_spans
    assert scope.scope.name == "sparktrail"
    assert _attrs(resource.resource)["service.name"] == "Spark shell"
    spans = list(scope.spans)
    by_id = {s.span_id: s for s in spans}
    # AND it is one trace: the application, its jobs, their stages, their tasks
    assert len({s.trace_id for s in spans}) == 1
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == 1

    def depth(span: Any) -> int:
        return 0 if not span.parent_span_id else 1 + depth(by_id[span.parent_span_id])

    level = {s.span_id: depth(s) for s in spans}
    counts = collections.Counter(level.values())
    assert counts == {0: 1, 1: 2, 2: 2, 3: 8}
    names = {
        lvl: {by_id[i].name.split()[0] for i, d in level.items() if d == lvl}
        for lvl in (1, 2, 3)
    }
    assert names == {1: {"job"}, 2: {"stage"}, 3: {"task"}}
    # AND each child lies within its parent's time
    for s in spans:
        if s.parent_span_id:
            parent = by_id[s.parent_span_id]
            assert parent.start_time_unix_nano <= s.start_time_unix_nano
            assert s.end_time_unix_nano <= parent.end_time_unix_nano
    # AND the root holds the app's properties, tasks their CP and activities
    root = _attrs(roots[0])
    assert root["spark.app.id"] == "local-1532512550423"
    assert root["spark.eventLog.enabled"] == "true"
    tasks = [s for s in spans if level[s.span_id] == 3]
    for task in tasks:
        a = _attrs(task)
        assert {
            "sparktrail.cp.task_share",
            "sparktrail.cp.stage_share",
            "spark.task.partition",
        } <= set(a)
        assert 0 <= a["sparktrail.cp.task_share"] <= a["sparktrail.cp.stage_share"] <= 1
        assert "processing" in {e.name for e in task.events}
        stage = by_id[task.parent_span_id]
        assert _attrs(stage)["spark.stage.id"] == a["spark.stage.id"]
    shares = [_attrs(s)["sparktrail.cp.share"] for s in spans if level[s.span_id] == 3]
    assert 0 < sum(shares) < 1  # the driver's time is the rest
    # AND the file is the same request in OTLP/JSON: hex ids, string times
    doc = json.loads(out.read_text())
    (json_spans,) = [
        ss["spans"] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
    ]
    assert len(json_spans) == len(spans)
    first = json_spans[0]
    assert first["traceId"] == spans[0].trace_id.hex() and len(first["traceId"]) == 32
    assert len(first["spanId"]) == 16
    assert isinstance(first["startTimeUnixNano"], str) and first["kind"] == 1
    assert all(len(s["parentSpanId"]) == 16 for s in json_spans[1:])


def test_an_unreachable_endpoint_is_one_line_and_exit_2(tmp_path, capsys):
    # GIVEN a port nothing listens on
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    out = tmp_path / "spans.json"
    # WHEN spans are sent there
    code = main(
        [
            "export",
            str(SHARED_LOG),
            "--format",
            "otlp",
            "-o",
            str(out),
            "--endpoint",
            url,
        ]
    )
    # THEN one error line names it, the exit code is 2, the file is written
    err = capsys.readouterr().err
    assert code == 2
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1 and f"{url}/v1/traces" in errors[0]
    assert json.loads(out.read_text())["resourceSpans"]


def test_endpoint_needs_otlp(tmp_path, capsys):
    code = main(
        [
            "export",
            str(SHARED_LOG),
            "--format",
            "chrome",
            "-o",
            str(tmp_path / "t.json"),
            "--endpoint",
            "http://127.0.0.1:1",
        ]
    )
    assert code == 2
    assert "--format otlp" in capsys.readouterr().err
