"""The Python API on what users hold (issue 44, item 2) and README's
"Python API" block, run verbatim."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sparktrail
from sparktrail.errors import InputError
from tests.paths import ROOT, SHARED_LOG


def test_profile_takes_an_event_log_a_trace_and_a_profile_folder(tmp_path: Path):
    # GIVEN the shared event log, its trace, and the profile folder it gives
    from_log = sparktrail.profile(SHARED_LOG)
    trace = sparktrail.import_trace(SHARED_LOG)
    from_trace = sparktrail.profile(trace)
    from_log.save(tmp_path / "p")
    from_folder = sparktrail.profile(tmp_path / "p")
    # THEN each is the same run: its rows, its verdict, its hints
    assert from_log.rows == from_trace.rows == trace.frame.height > 0
    runs = (from_log, from_trace, from_folder)
    said = {sparktrail.verdict(p.summaries) for p in runs}
    assert len(said) == 1
    assert from_log.hints.equals(from_folder.hints)
    assert from_log.name == SHARED_LOG.name


def test_profile_of_what_is_not_an_input_is_the_command_lines_error(tmp_path: Path):
    # GIVEN a text file that is no event log, and a path that does not exist
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    # THEN the same one-line errors as `sparktrail profile`
    with pytest.raises(InputError, match=r"neither a trace .* nor a Spark event log"):
        sparktrail.profile(junk)
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        sparktrail.profile(tmp_path / "missing")


def _readme_block(heading: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(rf"^## {heading}\n\n```python\n(.*?)```", text, re.M | re.S)
    assert found, f"README has no python block under '## {heading}'"
    return found.group(1)


def test_readme_python_api_runs_verbatim(tmp_path: Path):
    # GIVEN README's "Python API" block, run where its relative paths hold
    # (a folder beside `shared/`, as the repository is)
    code = _readme_block("Python API")
    work = tmp_path / "main"
    work.mkdir()
    (tmp_path / "shared").symlink_to(ROOT.parent / "shared")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=work, capture_output=True, text=True
    )
    # THEN it runs to the end and prints the verdict and CP by activity
    assert done.returncode == 0, done.stderr
    assert "of the run" in done.stdout
    assert "cp_sum" in done.stdout
    assert (work / "out" / "summaries").is_dir()


@pytest.mark.integration
def test_readme_notebook_block_runs_verbatim(tmp_path: Path):
    # GIVEN README's "In a notebook" block (its own local[2] session)
    pytest.importorskip("pyspark")
    code = _readme_block("In a notebook")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    # THEN it runs to the end: the block's verdict, then its hints' table
    assert done.returncode == 0, done.stderr
    verdict, table = done.stdout.split("shape:", 1)
    assert "of the run" in verdict and "No Spark job" not in verdict
    assert "severity" in table
