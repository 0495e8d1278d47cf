"""``sparktrail mcp``: the commands as MCP tools (issue 29, item 4).

An MCP client of the SDK spawns ``python -m sparktrail mcp`` as an agent
would, lists its tools and calls each on real logs; every answer is held
against the command line's ``--json`` (or its printed prediction), run in
this process on the same log. The cache is checked on the tools' own
object.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from sparktrail.cli import main
from sparktrail.cli.mcp_server import Tools
from sparktrail.units import duration
from tests.paths import EVENTLOGS, ROOT, SHARED_LOG

#: A public log whose run has a failed job (a ``failures`` hint).
FAILED_LOG = EVENTLOGS / "public" / "spark" / "spark-events" / "local-1422981780767"
TOOLS = {"profile", "hints", "whatif", "compare", "stage"}


def cli(*argv: str) -> tuple[int, str, str]:
    """``sparktrail ARGV`` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def same_json(a: str, b: str) -> bool:
    """Equal JSON (NaN equal to NaN: compared as re-dumped text)."""
    return json.dumps(json.loads(a), sort_keys=True) == json.dumps(
        json.loads(b), sort_keys=True
    )


async def _session(calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sparktrail", "mcp"],
        env={"PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])},
        cwd=str(ROOT),
    )
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(server, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            results = [await session.call_tool(name, args) for name, args in calls]
    return listed, results


def text(result: Any) -> str:
    assert len(result.content) == 1
    return str(result.content[0].text)


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One server session: every tool on the two real logs, and bad input."""
    missing = tmp_path_factory.mktemp("bad") / "no-such-log"
    not_a_log = tmp_path_factory.mktemp("bad") / "notes.txt"
    not_a_log.write_text("these are notes, not a Spark event log\n")
    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "profile": ("profile", {"log": str(FAILED_LOG)}),
        "hints": ("hints", {"log": str(FAILED_LOG)}),
        "hints_shared": ("hints", {"log": str(SHARED_LOG), "window": "1s"}),
        "stage": ("stage", {"log": str(FAILED_LOG), "stage_id": 2}),
        "no_stage": ("stage", {"log": str(FAILED_LOG), "stage_id": 999}),
        "whatif": ("whatif", {"log": str(SHARED_LOG), "change": "--executors 2"}),
        "whatif_none": ("whatif", {"log": str(SHARED_LOG), "change": ""}),
        "bad_change": ("whatif", {"log": str(SHARED_LOG), "change": "split=1:x"}),
        "compare": ("compare", {"a": str(SHARED_LOG), "b": str(FAILED_LOG)}),
        "missing": ("profile", {"log": str(missing)}),
        "not_a_log": ("hints", {"log": str(not_a_log)}),
    }
    listed, results = anyio.run(_session, list(calls.values()))
    return {
        "tools": listed.tools,
        "missing_path": missing,
        "not_a_log_path": not_a_log,
        **dict(zip(calls, results, strict=True)),
    }


def test_the_server_lists_the_five_tools(answers: dict[str, Any]) -> None:
    tools = {t.name: t for t in answers["tools"]}
    assert set(tools) == TOOLS
    assert set(tools["whatif"].input_schema["required"]) == {"log", "change"}
    assert set(tools["stage"].input_schema["required"]) == {"log", "stage_id"}
    assert tools["stage"].input_schema["properties"]["stage_id"]["type"] == "integer"
    assert all(t.description for t in tools.values())


def test_profile_and_hints_answer_what_profile_json_prints(
    answers: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN the command line's --json on the same logs
    for key, log in (("hints", FAILED_LOG), ("hints_shared", SHARED_LOG)):
        code, out, _ = cli("profile", str(log), "-o", str(tmp_path / key), "--json")
        assert code == 0
        # THEN hints answers exactly that JSON
        assert not answers[key].is_error
        assert same_json(text(answers[key]), out)
    # AND profile holds it as its hints, beside the overview
    overview = json.loads(text(answers["profile"]))
    _, out, err = cli("profile", str(FAILED_LOG), "-o", str(tmp_path / "p"), "--json")
    assert same_json(json.dumps(overview["hints"]), out)
    assert any(h["kind"] == "failures" for h in overview["hints"])
    assert overview["verdict"] in err and overview["header"] in err
    assert overview["name"] == FAILED_LOG.name and overview["rows"] > 0
    shares = sum(a["cp_share"] for a in overview["activity"])
    assert shares == pytest.approx(1.0)
    assert 0 < len(overview["operators"]) <= 10


def test_stage_answers_its_row_operator_and_hints(answers: dict[str, Any]) -> None:
    stage = json.loads(text(answers["stage"]))
    assert stage["stage"]["stage_id"] == 2
    assert 2 in stage["operator"]["stage_ids"]
    assert [h["kind"] for h in stage["hints"]] == ["failures"]
    assert all(h["stage_id"] == 2 for h in stage["hints"])
    # AND a stage the run does not have is a one-line error naming those it has
    missing = answers["no_stage"]
    assert missing.is_error
    assert re.fullmatch(
        r"sparktrail: error: .*: no stage 999 in the stage table \(stages: [0-9, ]+\)",
        text(missing),
    )


def test_whatif_answers_the_commands_prediction(answers: dict[str, Any]) -> None:
    prediction = json.loads(text(answers["whatif"]))
    code, out, _ = cli("whatif", str(SHARED_LOG), "--executors", "2")
    assert code == 0
    assert f"change: {prediction['change']}" in out
    assert f"predicted wall {duration(prediction['predicted_wall_ns'])}," in out
    assert prediction["saving_ns"] == (
        prediction["replayed_wall_ns"] - prediction["predicted_wall_ns"]
    )
    # AND no change answers the replay's error and the executor table
    table = json.loads(text(answers["whatif_none"]))
    _, out, _ = cli("whatif", str(SHARED_LOG))
    assert f"error {table['replay_error']:+.2%}" in out
    assert len(table["executor_table"]) > 1
    # AND a bad change is the command line's one line
    bad = answers["bad_change"]
    assert bad.is_error
    assert (
        text(bad)
        == "sparktrail: error: argument --split: '1:x' is not STAGE:PART:K (integers)"
    )


def test_compare_answers_compare_json(answers: dict[str, Any]) -> None:
    code, out, _ = cli("compare", str(SHARED_LOG), str(FAILED_LOG), "--json")
    assert code == 0
    assert not answers["compare"].is_error
    assert same_json(text(answers["compare"]), out)


@pytest.mark.parametrize("case", ["missing", "not_a_log"])
def test_bad_input_is_the_command_lines_one_line(
    answers: dict[str, Any], case: str
) -> None:
    # GIVEN the command line's message on the same input
    path = answers[f"{case}_path"]
    code, _, err = cli("profile", str(path), "-o", str(path) + ".out")
    assert code == 2
    # THEN the tool error is that line, and no traceback
    result = answers[case]
    assert result.is_error
    assert text(result) == err.strip()
    assert "Traceback" not in text(result)


def test_a_profile_is_computed_once_per_log_version(tmp_path: Path) -> None:
    # GIVEN the tools' cache and a copy of a real log
    log = tmp_path / SHARED_LOG.name
    log.write_bytes(SHARED_LOG.read_bytes())
    tools = Tools()
    # WHEN profile, hints and stage ask for one log
    tools.profile(str(log))
    tools.hints(str(log))
    tools.stage(str(log), 0)
    # THEN it was profiled once
    assert tools.profiled == 1
    # AND another window, or a changed log, is profiled anew
    tools.hints(str(log), window="500ms")
    assert tools.profiled == 2
    os.utime(log, ns=(1, 1))
    tools.hints(str(log))
    assert tools.profiled == 3
