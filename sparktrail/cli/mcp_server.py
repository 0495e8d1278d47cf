"""``sparktrail mcp``: sparktrail's commands as tools for agents (MCP, stdio).

Serves the Model Context Protocol over stdin/stdout with the ``mcp`` SDK
(the ``agents`` extra), so that an agent (Claude Desktop, an IDE, any MCP
client) can profile a Spark run and read its hints. Each tool answers with
the JSON of the command it stands for, built by that command's own
functions:

=================================  ==========================================
tool                               answers
=================================  ==========================================
``profile(log, window="1s")``      what ran, the verdict, CP by activity,
                                   the top operators and workers, and
                                   ``hints``: ``sparktrail profile --json``'s
``hints(log, window="1s")``        ``sparktrail profile --json`` (every hint)
``whatif(log, change)``            ``sparktrail whatif``'s prediction for
                                   one change, in its syntax
                                   (``--executors 8``, ``split=3:7:2``);
                                   no change: the executor table
``compare(a, b, window="1s")``     ``sparktrail compare --json``
``stage(log, stage_id)``           the stage's row of the stage table, its
                                   operator and its hints
=================================  ==========================================

``log`` is anything ``sparktrail profile`` takes (an event log, a trace,
or, for ``compare``, a profile folder). Profiles, traces and replays are
kept per (path, modification time, size, window) while the server runs,
so ``hints`` or ``stage`` after ``profile`` on one log do not profile it
again; a log that changed is read anew. Tools run one at a time.

Bad input (a missing file, one that is not a log, a change the run does
not allow) answers as a tool error holding the command line's one-line
message (``sparktrail: error: ...``), never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sparktrail.engines.engine_choice import MICRO_BATCHES
from sparktrail.errors import InputError, SparktrailError
from sparktrail.sources import (
    EXPECTED,
    is_profile_folder,
    no_rows,
    open_profile,
    open_trace,
)

from ._units import parse_duration_ns

if TYPE_CHECKING:
    import polars as pl

    from sparktrail.engines.profiler import Profile
    from sparktrail.pag.trace import Trace
    from sparktrail.whatif import Change, Replay

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["Tools", "build_server", "register", "run"]

#: Rows of the operator and worker lists in ``profile``'s answer.
TOP = 10
#: Logs (and their profiles, replays) kept in memory at once.
CACHED = 8
#: What the command line says without the SDK.
MISSING = "sparktrail mcp needs the mcp package: pip install 'sparktrail[agents]'"
#: The errors that are the caller's input, answered in one line.
BAD_INPUT = (
    SparktrailError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    argparse.ArgumentTypeError,
)
INSTRUCTIONS = (
    "sparktrail profiles Apache Spark applications by their critical path. "
    "Give a tool the path of a Spark event log (or a sparktrail trace). "
    "`profile` says what ran, where the critical path went and the hints "
    "(what to change, with each one's predicted saving); `hints` lists "
    "every hint; `stage` drills into one stage; `whatif` predicts the run "
    "after one change (e.g. '--executors 8', 'split=STAGE:PART:K', "
    "'partitions=STAGE:N'); `compare` compares two runs of one application."
)

T = TypeVar("T")


def register(subparsers: Any) -> None:
    """Add the ``mcp`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mcp",
        help="serve sparktrail's tools to agents (Model Context Protocol, stdio)",
        description=(
            "Serve the Model Context Protocol over stdin/stdout: tools profile, "
            "hints, whatif, compare and stage, each answering with its "
            "command's JSON. Needs the agents extra (pip install "
            "'sparktrail[agents]')."
        ),
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve over stdio until the client closes; returns the exit code."""
    build_server().run("stdio")
    return 0


def _window(text: str) -> int | str:
    """A window as ``--window`` takes it: a duration, or ``batch``."""
    if text.strip().lower() == MICRO_BATCHES:
        return MICRO_BATCHES
    return parse_duration_ns(text)


def _signature(path: Path) -> tuple[str, int, int]:
    """What says a log is unchanged: its path, newest mtime and size.

    A directory (a rolling log, a trace) counts every file under it.
    """
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory; {EXPECTED}")
    if path.is_dir():
        files = [p.stat() for p in path.rglob("*") if p.is_file()]
        newest = max((s.st_mtime_ns for s in files), default=0)
        return str(path.resolve()), newest, sum(s.st_size for s in files)
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


def _dumps(value: Any) -> str:
    """JSON as the command line writes it (``json.dump(..., indent=2)``)."""
    return json.dumps(value, indent=2, default=str)


def _rows(frame: pl.DataFrame, columns: list[str], n: int | None = None) -> Any:
    kept = frame.select([c for c in columns if c in frame.columns])
    return (kept if n is None else kept.head(n)).to_dicts()


class Tools:
    """The tools' work, with its caches (one per server process).

    Each method returns the JSON text a tool answers and raises the
    command line's exceptions on bad input (:data:`BAD_INPUT`).
    """

    def __init__(self, cached: int = CACHED) -> None:
        self._cached = cached
        self._held: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.RLock()
        #: How many profiles were computed (not taken from the cache): tests.
        self.profiled = 0

    def _memo(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        with self._lock:
            if key in self._held:
                self._held.move_to_end(key)
                return self._held[key]  # type: ignore[no-any-return]
            value = make()
            self._held[key] = value
            while len(self._held) > self._cached * 3:
                self._held.popitem(last=False)
            return value

    def trace(self, log: str) -> Trace:
        """The trace of ``log`` (read or imported once per version)."""

        path = Path(log).expanduser()
        return self._memo(("trace", _signature(path)), lambda: open_trace(path)[0])

    def profile_of(self, log: str, window: str = "1s") -> Profile:
        """The profile of ``log`` with ``window`` windows (as ``profile`` makes)."""
        from sparktrail.engines.profiler import profile

        path = Path(log).expanduser()
        window_ns = _window(window)

        def make() -> Profile:
            trace = self.trace(log)
            if trace.frame.is_empty():
                raise no_rows(path)
            self.profiled += 1
            return profile(trace, window_ns, name=path.name)

        return self._memo(("profile", _signature(path), window_ns), make)

    def replay(self, log: str) -> Replay:
        """The what-if replay of ``log``."""
        from sparktrail.whatif import Replay

        path = Path(log).expanduser()
        return self._memo(
            ("replay", _signature(path)), lambda: Replay.of(self.trace(log))
        )

    # -- the tools ---------------------------------------------------------

    def profile(self, log: str, window: str = "1s") -> str:
        """What ran, the verdict, where the critical path went, the hints."""
        from sparktrail.dashboard.report import window_text
        from sparktrail.dashboard.verdict import header_line, verdict
        from sparktrail.summaries.frames import (
            CP_NS,
            CP_SHARE,
            FAIR_SHARE,
            HAS_PATHS,
            RATIO,
        )

        from .profile import hints_json

        result = self.profile_of(log, window)
        summaries = result.summaries
        windows = summaries.windows
        paths = int(windows[HAS_PATHS].sum()) if len(windows) else 0
        answer = {
            "name": result.name,
            "rows": result.rows,
            "header": header_line(summaries),
            "verdict": verdict(summaries),
            "window": window_text(summaries),
            "windows": len(windows),
            "windows_with_path": paths,
            "activity": _rows(summaries.activity, ["activity", CP_SHARE, CP_NS]),
            "operators": _rows(
                summaries.operator, ["operator", CP_SHARE, CP_NS, "stage_ids"], TOP
            ),
            "workers": _rows(
                summaries.straggler, ["worker", CP_SHARE, FAIR_SHARE, RATIO], TOP
            ),
            "hints": hints_json(result.hints),
        }
        return _dumps(answer)

    def hints(self, log: str, window: str = "1s") -> str:
        """``sparktrail profile --json``: every hint."""
        from .profile import hints_json

        return _dumps(hints_json(self.profile_of(log, window).hints))

    def whatif(self, log: str, change: str) -> str:
        """``sparktrail whatif``'s prediction for one change (or, with none,
        the replay's error and the executor table)."""
        from sparktrail.whatif import SplitPartition, executor_table, predict
        from sparktrail.whatif.contention import measured_split

        made = parse_change(change)  # a bad change fails before the log is read
        replay = self.replay(log)
        if isinstance(made, SplitPartition):
            made = measured_split(self.trace(log), made)
        if made is not None:
            prediction = dataclasses.asdict(predict(replay, made))
            return _dumps({"change": str(made), **prediction})
        wall = replay.run().wall_ns
        traced = replay.traced_wall_ns
        table = executor_table(replay)
        return _dumps(
            {
                "traced_wall_ns": traced,
                "replayed_wall_ns": wall,
                "replay_error": wall / traced - 1 if traced else 0.0,
                "tasks": replay.tasks.height,
                "slots": replay.slots,
                "executors": replay.executors,
                "executor_table": table.to_dicts(),
            }
        )

    def compare(self, a: str, b: str, window: str = "1s") -> str:
        """``sparktrail compare A B --json``."""
        from sparktrail.engines.comparison import compare

        before, after = (self._comparable(p, window) for p in (a, b))
        return _dumps(compare(before, after).to_json())

    def _comparable(self, log: str, window: str) -> Profile:

        path = Path(log).expanduser()
        window_ns = parse_duration_ns(window)
        if is_profile_folder(path):
            return open_profile(path, window_ns)
        return self.profile_of(log, window)

    def stage(self, log: str, stage_id: int, window: str = "1s") -> str:
        """One stage: its row of the stage table, its operator, its hints."""
        import polars as pl

        from .profile import hints_json

        result = self.profile_of(log, window)
        summaries = result.summaries
        stages = summaries.stages
        row = stages.filter(pl.col("stage_id") == stage_id)
        if row.is_empty():
            known = ", ".join(str(s) for s in sorted(stages["stage_id"].to_list()))
            raise InputError(
                f"{log}: no stage {stage_id} in the stage table "
                f"(stages: {known or 'none'})"
            )
        operators = summaries.operator.filter(
            pl.col("stage_ids").list.contains(stage_id)
        )
        hints = result.hints.filter(pl.col("stage_id") == stage_id)
        return _dumps(
            {
                "stage": row.to_dicts()[0],
                "operator": operators.to_dicts()[0] if len(operators) else None,
                "hints": hints_json(hints),
            }
        )


class _Refusing(argparse.ArgumentParser):
    """A parser whose errors are exceptions, not exits."""

    def error(self, message: str) -> Any:
        raise InputError(message)


def parse_change(text: str) -> Change | None:
    """A change in ``sparktrail whatif``'s syntax, ``None`` for none.

    The leading ``--`` may be left out, and ``=`` or a space separate the
    option from its value.

    >>> parse_change("--executors 8")
    Executors(count=8)
    >>> parse_change("split=3:7:2")
    SplitPartition(stage_id=3, partition=7, k=2, slowdown=1.0)
    >>> parse_change("")
    >>> parse_change("fewer")
    Traceback (most recent call last):
    ...
    sparktrail.errors.InputError: unrecognized arguments: --fewer
    """
    from . import whatif as whatif_cli

    words = shlex.split(text)
    if not words:
        return None
    if not words[0].startswith("-"):
        words[0] = "--" + words[0]
    parser = _Refusing(prog="sparktrail", add_help=False)
    whatif_cli.register(parser.add_subparsers())
    return whatif_cli.change_of(parser.parse_args(["whatif", "-", *words]))


def _answer(call: Callable[[], str]) -> Any:
    """A tool's result: ``call()``'s JSON, or its error as the command line's
    one line (``is_error``; the SDK would prefix a raised error's text)."""
    import logging

    from mcp.types import CallToolResult, TextContent

    try:
        text, failed = call(), False
    except BAD_INPUT as err:
        text, failed = f"sparktrail: error: {err}", True
    except Exception as err:  # an agent gets a line, never a traceback
        logging.getLogger(__name__).exception("sparktrail mcp: a tool failed")
        text, failed = f"sparktrail: error: {type(err).__name__}: {err}", True
    return CallToolResult(
        content=[TextContent(type="text", text=text)], is_error=failed
    )


def build_server(tools: Tools | None = None) -> MCPServer:
    """The MCP server of ``tools`` (new ones by default).

    Raises
    ------
    SparktrailError
        If the mcp SDK is not installed (the ``agents`` extra).
    """
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as err:
        raise SparktrailError(MISSING) from err
    work = tools or Tools()
    server = MCPServer("sparktrail", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(structured_output=False)
    def profile(log: str, window: str = "1s") -> Any:
        """Profile a Spark event log (or trace): what ran, the verdict, the
        critical path by activity, the top operators and workers, and the
        hints (what to change, each with its predicted saving). ``window``:
        the window length (``1s``, ``250ms``) or ``batch``."""
        return _answer(lambda: work.profile(log, window))

    @server.tool(structured_output=False)
    def hints(log: str, window: str = "1s") -> Any:
        """Every hint of a Spark event log, as ``sparktrail profile --json``
        prints them (kind, severity, stage, predicted saving, evidence,
        action)."""
        return _answer(lambda: work.hints(log, window))

    @server.tool(structured_output=False)
    def whatif(log: str, change: str) -> Any:
        """Predict the run's wall time after one change, replayed on the
        traced tasks and slots. ``change`` as ``sparktrail whatif`` takes it:
        ``--executors N``, ``--split STAGE:PART:K``, ``--partitions
        STAGE:N``, ``--speculate TASK``, ``--drop-driver-gap START_NS`` (the
        dashes may be left out; ``=`` works too). An empty change answers
        the replay's error and the wall time over executor counts."""
        return _answer(lambda: work.whatif(log, change))

    @server.tool(structured_output=False)
    def compare(a: str, b: str, window: str = "1s") -> Any:
        """Compare two runs of one application (event logs, traces or
        profile folders), as ``sparktrail compare A B --json``: the wall-time
        change by operator, settings that differ, A's hints checked in B."""
        return _answer(lambda: work.compare(a, b, window))

    @server.tool(structured_output=False)
    def stage(log: str, stage_id: int, window: str = "1s") -> Any:
        """One stage of a Spark event log: its row of the stage table (as the
        Spark UI's, with its critical-path share), the operator that ran it
        and its hints."""
        return _answer(lambda: work.stage(log, stage_id, window))

    return server
