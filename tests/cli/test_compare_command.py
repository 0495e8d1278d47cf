"""The ``sparktrail compare`` subcommand on real event logs and profile folders."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from sparktrail.cli import main
from sparktrail.engines.comparison import COMPARISON_FILE, UNATTRIBUTED, Comparison
from tests.paths import EVENTLOGS, SHARED_LOG

PUBLIC = EVENTLOGS / "public" / "spark" / "spark-events"
#: Two attempts of one application (Spark shell, no job ran).
ATTEMPT_1, ATTEMPT_2 = (
    PUBLIC / "local-1430917381535_1",
    PUBLIC / "local-1430917381535_2",
)
#: Two different applications: a Spark shell and a Kafka word count.
SHELL, KAFKA = PUBLIC / "local-1430917381534", PUBLIC / "local-1596020211915"
CONTRACT = {
    "wall_delta_s",
    "operators",
    "activities",
    "settings_changed",
    "hints",
    "regressions",
    "matched_operators",
    "warnings",
}

pytestmark = pytest.mark.skipif(
    not all(p.exists() for p in (ATTEMPT_1, ATTEMPT_2, SHELL, KAFKA, SHARED_LOG)),
    reason="the shared event logs are missing",
)


def compare_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[dict, str]:
    assert main(["compare", *args, "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_two_attempts_of_one_app(capsys, tmp_path):
    # GIVEN two attempts of one application  WHEN compared with -o
    out = tmp_path / "cmp"
    found, err = compare_json(
        capsys, str(ATTEMPT_1), str(ATTEMPT_2), "-o", str(out), "--window", "10ms"
    )
    # THEN stdout holds the JSON contract, stderr the verdict first
    assert set(found) == CONTRACT
    assert err.startswith("Verdict: ")
    # AND the operator rows (here only the unattributed one) sum to the delta
    assert found["operators"][-1]["operator"] == UNATTRIBUTED
    deltas = [row["delta_s"] for row in found["operators"]]
    assert math.fsum(deltas) == pytest.approx(found["wall_delta_s"], abs=1e-9)
    # the second attempt ran 57 ms, the first 10 ms: 10 ms windows see it
    assert found["wall_delta_s"] == pytest.approx(0.05)
    assert found["warnings"] == []
    # AND the report and the comparison's files are written, and load back
    page = (out / "report.html").read_text()
    assert 'id="waterfall"' in page and '"type":"waterfall"' in page
    assert "<script src=" not in page  # plotly.js inlined: the page opens offline
    assert "Plotly.newPlot" in page
    assert (out / COMPARISON_FILE).is_file()
    assert Comparison.load(out).to_json() == found


def test_two_different_apps_are_refused_in_one_line(capsys):
    # GIVEN two applications of different names, no operator in common
    # WHEN compared without --force
    code = main(["compare", str(SHELL), str(KAFKA), "--json"])
    out, err = capsys.readouterr()
    # THEN exit 2, nothing on stdout, one line saying why and what forces it
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "two applications ('Spark shell' and 'StructuredKafkaWordCount')" in err
    assert "--force" in err


def test_two_different_apps_forced_warn_and_compare_what_matches(capsys):
    found, err = compare_json(capsys, str(SHELL), str(KAFKA), "--force")
    assert found["matched_operators"] == 0
    [warning] = found["warnings"]
    assert "two applications ('Spark shell' and 'StructuredKafkaWordCount')" in warning
    assert "0 of 2 operators matched" in warning
    assert f"Warning: {warning}" in err
    assert found["settings_changed"]["spark.sql.shuffle.partitions"] == [None, "2"]


def test_a_profile_folder_is_an_input_and_an_older_one_loads(capsys, tmp_path):
    # GIVEN the shared log profiled into a folder, and a copy of it without
    # profile.json (an older sparktrail's)
    folder = tmp_path / "profiled"
    assert main(["profile", str(SHARED_LOG), "-o", str(folder)]) == 0
    older = tmp_path / "older"
    shutil.copytree(folder, older)
    (older / "profile.json").unlink()
    capsys.readouterr()
    # WHEN the folder is compared with the log itself, and with the older one
    found, _ = compare_json(capsys, str(folder), str(SHARED_LOG))
    again, _ = compare_json(capsys, str(older), str(folder))
    # THEN the same run compares as itself
    for result in (found, again):
        assert result["wall_delta_s"] == 0
        assert result["matched_operators"] == 1
        assert all(row["delta_s"] == pytest.approx(0) for row in result["operators"])
        assert result["settings_changed"] == {}


def test_bad_input_is_refused_in_one_line(capsys, tmp_path):
    # GIVEN a profile folder missing a frame, and a path that does not exist
    broken = tmp_path / "broken"
    assert main(["profile", str(SHARED_LOG), "-o", str(broken)]) == 0
    (broken / "summaries" / "operator.parquet").unlink()
    capsys.readouterr()
    for before in (broken, tmp_path / "missing"):
        # WHEN compared  THEN exit code 2 and one line naming the path
        assert main(["compare", str(before), str(SHARED_LOG)]) == 2
        _, err = capsys.readouterr()
        assert err.count("\n") == 1
        assert err.startswith("sparktrail: error: ")
        assert str(before) in err


def test_the_terminal_table(capsys):
    assert main(["compare", str(SHELL), str(SHELL)]) == 0
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("Verdict: As fast as before")
    assert any(line.strip().endswith("wall time") for line in lines)
    assert any("map at <console>:26" in line for line in lines)
