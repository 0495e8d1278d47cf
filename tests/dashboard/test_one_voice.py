"""One run reads one way (issue 43, item 8): on every public log, the
terminal summary, ``--json``, the HTML report and the fleet row say the
same header, verdict, top hint and saving, with no scientific notation,
and no word of streaming on a batch application.

Each log is profiled once; every renderer then renders that one
:class:`~sparktrail.engines.profiler.Profile`, as the commands do.
"""

from __future__ import annotations

import html
import io
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

import sparktrail
from sparktrail.cli.profile import hints_json, print_summary
from sparktrail.dashboard.fleet_page import fleet_row
from sparktrail.dashboard.report import write_report
from sparktrail.dashboard.verdict import header_facts, header_line
from sparktrail.errors import InputError
from sparktrail.fleet import find_logs
from sparktrail.units import duration
from tests.paths import EVENTLOGS

PUBLIC = EVENTLOGS / "public"
LOGS = find_logs(PUBLIC) if PUBLIC.is_dir() else []
#: A number in scientific notation, as "7.81e+03".
SCIENTIFIC = re.compile(r"\b\d+(\.\d+)?[eE][+-]?\d+\b")
#: Words of Structured Streaming, on a page of a batch application.
STREAMING = re.compile(r"micro-batch|Structured Streaming|streaming query", re.I)


def _visible(page: str) -> str:
    """The text a reader sees on a report: no scripts, no tags."""
    body = re.sub(r"<script.*?</script>|<style.*?</style>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def _rendered(log: Path, folder: Path) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            profile = sparktrail.profile(log)
        except InputError as err:  # a log without a row: nothing to render
            pytest.skip(f"{log.name}: {err}")
        write_report(profile, folder)
    terminal = io.StringIO()
    print_summary(profile, folder, 5, terminal)
    return {
        "profile": profile,
        "terminal": terminal.getvalue(),
        "json": hints_json(profile.hints),
        "report": (folder / "report.html").read_text(encoding="utf-8"),
        "row": fleet_row(profile, "report.html"),
    }


@pytest.mark.skipif(not LOGS, reason=f"{PUBLIC} is missing")
@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(PUBLIC)))
def test_every_renderer_says_the_same(log: Path, tmp_path: Path) -> None:
    got = _rendered(log, tmp_path)
    summaries = got["profile"].summaries
    said = sparktrail.verdict(summaries)
    terminal, report, row = got["terminal"], got["report"], got["row"]
    # THEN the header and the verdict read alike everywhere
    assert terminal.startswith(header_line(summaries) + "\n")
    assert f"Verdict: {said}" in terminal
    assert html.escape(said) in report
    assert row["verdict"] == said
    for _, value in header_facts(summaries):
        assert html.escape(value) in report
    # AND the wall time is the fleet row's, printed one way, in the header
    # and in the report's time span
    visible = _visible(report)
    if row["wall_s"] is not None:
        wall = duration(row["wall_s"] * 1e9)
        assert f"{wall} wall time" in terminal
        assert f"({wall})" in visible
    # AND the top hint and its saving are the same in --json, the terminal
    # and the fleet row
    shown = [h for h in got["json"] if h["severity"] != "info"]
    if shown:
        top = shown[0]
        assert row["top_hint"] == top["kind"]
        assert f"\n  [{top['severity']}] {top['kind']}" in terminal
        if row["predicted_saving_s"] is not None:
            assert row["predicted_saving_s"] == top["predicted_saving_ns"] / 1e9
    else:
        assert row["top_hint"] is None
        assert "Hints (0):" in terminal
    # AND no number in scientific notation, and streaming words only where
    # a streaming query ran
    for text in (terminal, visible):
        assert not SCIENTIFIC.search(text), SCIENTIFIC.search(text)
        if not summaries.context.batches:
            assert not STREAMING.search(text), STREAMING.search(text)
