"""``sparktrail export INPUT --format perfetto|chrome|otlp -o FILE``.

INPUT is what ``sparktrail profile`` reads (a trace or an event log), or a
profile folder it wrote (then only its most critical window is exported:
the folder holds that window's rows and no others).

* ``perfetto`` / ``chrome``: Chrome trace-event JSON, which
  ui.perfetto.dev and chrome://tracing open: a track per task slot and the
  driver, messages as flows, critical slices marked and a "critical path"
  track (:mod:`~sparktrail.dashboard.trace_export`). Both formats write
  the same JSON (Perfetto opens it; no protobuf trace is written).
* ``otlp``: OpenTelemetry spans (application → job → stage → task) as
  OTLP/JSON (:mod:`~sparktrail.dashboard.otlp_export`); with
  ``--endpoint URL`` also POSTed to ``URL/v1/traces`` as OTLP/HTTP
  protobuf. An endpoint that cannot be reached: one line naming it, exit
  2, the file still written.

``--window`` is a CP window length (``1s``, the default), or a range
``START:END`` of offsets from the trace's first event (``2s:5s``; either
side may be left out): only the rows touching it are exported, clipped
to it, with the CP of that one window.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktrail.errors import InputError
from sparktrail.sources import is_profile_folder, open_trace

from ._units import parse_duration_ns

if TYPE_CHECKING:
    from sparktrail.dashboard.trace_export import CriticalRows
    from sparktrail.pag.trace import Trace

__all__ = ["FORMATS", "TRACES_PATH", "parse_window", "post_otlp", "register", "run"]

FORMATS = ("perfetto", "chrome", "otlp")
#: Where an OTLP/HTTP collector takes traces, below its base URL.
TRACES_PATH = "/v1/traces"
#: Seconds an OTLP endpoint has to answer.
POST_TIMEOUT_S = 10.0
DEFAULT_WINDOW = "1s"


def register(subparsers: Any) -> None:
    """Add the ``export`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "export",
        help="export a run as a Perfetto/Chrome trace or OpenTelemetry spans",
        description=(
            "Write a trace or event log (or a profile folder's most critical "
            "window) as Chrome trace-event JSON for ui.perfetto.dev and "
            "chrome://tracing, critical path marked, or as OpenTelemetry "
            "spans (OTLP/JSON, optionally sent to a collector)."
        ),
    )
    parser.add_argument(
        "input",
        type=Path,
        help="trace (*.arrow file or directory), event log, or profile folder",
    )
    parser.add_argument("--format", choices=FORMATS, required=True)
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="file to write"
    )
    parser.add_argument(
        "--window",
        type=parse_window,
        default=DEFAULT_WINDOW,
        help=(
            "CP window length with a unit (default: 1s), or START:END, a "
            "range of offsets from the trace's first event (e.g. 2s:5s) "
            "to export alone"
        ),
    )
    parser.add_argument(
        "--critical",
        type=float,
        default=None,
        metavar="FRACTION",
        help=(
            "mark a slice critical when at least this fraction of its "
            "window's critical paths run through it (default: half of them)"
        ),
    )
    parser.add_argument(
        "--endpoint",
        metavar="URL",
        help="otlp: also send the spans to URL/v1/traces (OTLP/HTTP protobuf)",
    )
    parser.set_defaults(run=run)


#: A parsed ``--window``: a length, or a range of offsets (``None``: open).
Window = int | tuple[int | None, int | None]


def parse_window(text: str) -> Window:
    """``--window``: a length in ns, or ``(start, end)`` offsets in ns.

    >>> parse_window("250ms"), parse_window("2s:5s"), parse_window(":1s")
    (250000000, (2000000000, 5000000000), (None, 1000000000))
    """
    if ":" not in text:
        return parse_duration_ns(text)
    first, _, second = text.partition(":")

    def offset(part: str) -> int | None:
        part = part.strip()
        if not part:
            return None
        if part in {"0", "0s", "0ms"}:
            return 0
        return parse_duration_ns(part)

    start, end = offset(first), offset(second)
    if start is not None and end is not None and end <= start:
        raise argparse.ArgumentTypeError(f"{text!r}: the range ends before it starts")
    return start, end


def _rows(path: Path, window: Window) -> CriticalRows:
    from sparktrail.dashboard.live_view import utc
    from sparktrail.dashboard.trace_export import profile_window, whole_trace
    from sparktrail.engines.profiler import Profile

    if is_profile_folder(path):
        saved = Profile.load(path)
        span = saved.critical_window
        which = "" if span is None else f" ({utc(span[0])} – {utc(span[1])} UTC)"
        ignored = (
            "; --window is ignored" if window != parse_window(DEFAULT_WINDOW) else ""
        )
        print(
            f"sparktrail: {path} is a profile folder, which keeps the rows of "
            f"its most critical window only: exporting that window{which}"
            f"{ignored}; export the event log or trace for the whole run",
            file=sys.stderr,
        )
        return profile_window(saved)
    trace, _ = open_trace(path)
    name = path.resolve().name
    if isinstance(window, int):
        return whole_trace(trace, window, name)
    return _range(trace, window, name)


def _range(
    trace: Trace, window: tuple[int | None, int | None], name: str
) -> CriticalRows:
    from sparktrail.dashboard.trace_export import time_range
    from sparktrail.pag.chunk_cp import trace_extent

    frame = trace.frame
    first, last = trace_extent(frame) if len(frame) else (0, 0)
    start = first + (window[0] or 0)
    end = first + window[1] if window[1] is not None else max(last, start + 1)
    return time_range(trace, start, end, name)


def post_otlp(url: str, body: bytes) -> str:
    """POST ``body`` (a serialized ``ExportTraceServiceRequest``) to
    ``url`` + :data:`TRACES_PATH`; returns that address.

    Raises
    ------
    InputError
        Naming the address when it cannot be reached or refuses the spans.
    """
    import urllib.error
    import urllib.request

    target = url.rstrip("/")
    if not target.endswith(TRACES_PATH):
        target += TRACES_PATH
    request = urllib.request.Request(
        target,
        data=body,
        method="POST",
        headers={"Content-Type": "application/x-protobuf"},
    )
    try:
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S) as answer:
            answer.read()
    except urllib.error.HTTPError as err:
        raise InputError(
            f"{target}: the collector refused the spans (HTTP {err.code} {err.reason})"
        ) from err
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise InputError(f"{target}: cannot send the spans: {reason}") from err
    return target


def run(args: argparse.Namespace) -> int:
    """Export INPUT; 0 on success (errors are raised, cli/__init__ maps them)."""
    from sparktrail.dashboard.trace_export import CRITICAL_THRESHOLD, write_chrome_trace

    if args.critical is None:
        args.critical = CRITICAL_THRESHOLD
    if not 0.0 <= args.critical <= 1.0:
        raise InputError(f"--critical {args.critical}: expected a fraction in [0, 1]")
    if args.endpoint and args.format != "otlp":
        raise InputError(
            "--endpoint sends OpenTelemetry spans: use it with --format otlp"
        )
    data = _rows(args.input, args.window)
    out: Path = args.output
    if out.parent != Path():
        out.parent.mkdir(parents=True, exist_ok=True)
    if data.rows.is_empty():
        where = "in the input"
        if isinstance(args.window, tuple):
            start, end = ("" if ns is None else f"{ns / 1e9:g}s" for ns in args.window)
            where = f"in --window {start}:{end} (offsets from the first event)"
        print(f"sparktrail: no rows {where}; writing an empty trace", file=sys.stderr)
    if args.format == "otlp":
        return _otlp(data, out, args.endpoint)
    stats = write_chrome_trace(data, out, args.critical)
    print(
        f"wrote {out}: {stats.slices} slices ({stats.critical} critical), "
        f"{stats.flows} flows, {stats.path} on the critical path track",
        file=sys.stderr,
    )
    if stats.clipped or stats.dropped:
        print(
            f"sparktrail: {stats.clipped} slices clipped where they overlapped "
            f"the one before on their track, {stats.dropped} dropped "
            "(nothing left, or under a microsecond)",
            file=sys.stderr,
        )
    return 0


def _otlp(data: CriticalRows, out: Path, endpoint: str | None) -> int:
    from sparktrail import __version__
    from sparktrail.dashboard.otlp_export import otlp_json, otlp_request

    request = otlp_request(data, __version__)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps(otlp_json(request), indent=1) + "\n")
    partial.replace(out)
    spans = sum(
        len(scope.spans)
        for resource in request.resource_spans
        for scope in resource.scope_spans
    )
    print(f"wrote {out}: {spans} spans", file=sys.stderr)
    if endpoint:
        target = post_otlp(endpoint, request.SerializeToString())
        print(f"sent {spans} spans to {target}", file=sys.stderr)
    return 0
