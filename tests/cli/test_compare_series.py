"""``sparktrail compare DIR``: a folder of runs, ordered by start time, and
the run where an operator's regression began.

The folders hold profile folders of runs built task by task
(tests/engines/test_series.py's ``nightly``), named so that their names'
order is not their start order, and the two attempts of a real event log.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sparktrail.cli import main
from sparktrail.engines.comparison import UNATTRIBUTED
from tests.engines.test_comparison import AGG, SCAN
from tests.engines.test_series import nightly
from tests.paths import EVENTLOGS

ATTEMPTS = [
    EVENTLOGS / "public" / "spark" / "spark-events" / f"local-1430917381535_{n}"
    for n in (1, 2)
]


def folder_of_runs(root: Path, agg_ms: list[int], agg_records: list[int]) -> Path:
    """Three profile folders, their names in the reverse order of their starts."""
    runs = root / "runs"
    for day, name in enumerate(["z-first", "m-second", "a-third"]):
        p = nightly(name, day, agg_ms[day], agg_records[day])
        p.save(runs / name)
    return runs


def series_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[dict, str]:
    assert main(["compare", *args, "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def by_label(found: dict) -> dict[str, dict]:
    return {op["operator"]: op for op in found["operators"]}


def test_a_regression_at_run_two_is_flagged(capsys, tmp_path):
    # GIVEN three runs whose aggregation takes 2 s, then 4 s, 4 s at one input
    runs = folder_of_runs(tmp_path, [1000, 2000, 2000], [10, 10, 10])
    out = tmp_path / "page"
    # WHEN the folder is compared
    found, err = series_json(capsys, str(runs), "-o", str(out))
    # THEN the runs are in start order, with their app ids, starts, wall times
    assert [r["run"] for r in found["runs"]] == ["z-first", "m-second", "a-third"]
    assert found["runs"][0]["app_id"] == "app-z-first"
    assert found["runs"][0]["start"] == "2023-11-14T22:13:20.000Z"
    assert found["runs"][1]["wall_s"] == pytest.approx(5.2)
    # AND the aggregation regressed from the second run; the scan did not
    ops = by_label(found)
    assert ops[AGG]["critical_s"] == pytest.approx([2.0, 4.0, 4.0])
    assert ops[AGG]["records"] == [40, 40, 40]
    assert ops[AGG]["regression_from"] == "m-second"
    assert ops[SCAN]["regression_from"] is None
    assert found["operators"][-1]["operator"] == UNATTRIBUTED
    # AND the terminal says so, the flagged cell starred
    assert "Regressions:\n  from #2 m-second: agg at etl.py:76" in err
    assert "2.00      4.00*     4.00 " in err
    # AND the page has a chart per operator, the marker and the table
    page = (out / "report.html").read_text()
    assert "1 operator regressed: agg at etl.py:76" in page
    assert 'id="series-chart-0"' in page and "regression began" in page
    assert "series-table" in page and "4.00 ▲" in page
    assert page.count("<script src=") == 0 and "Plotly.newPlot" in page
    assert json.loads((out / "series.json").read_text()) == found


def test_a_doubled_input_is_not_a_regression(capsys, tmp_path):
    # GIVEN the same slowdown, but the aggregation's input doubled with it
    runs = folder_of_runs(tmp_path, [1000, 2000, 2000], [10, 20, 20])
    found, err = series_json(capsys, str(runs))
    # THEN no operator is flagged
    ops = by_label(found)
    assert ops[AGG]["records"] == [40, 80, 80]
    assert all(op["regression_from"] is None for op in found["operators"])
    assert "No regression" in err


@pytest.mark.skipif(
    not all(p.exists() for p in ATTEMPTS), reason="the shared event logs are missing"
)
def test_two_attempts_of_a_real_log(capsys, tmp_path):
    # GIVEN the two attempts of one application's event log in a folder
    runs = tmp_path / "logs"
    runs.mkdir()
    for log in reversed(ATTEMPTS):
        shutil.copyfile(log, runs / log.name)
    found, _ = series_json(capsys, str(runs), "--window", "10ms")
    # THEN both are runs of one app id, the first attempt first
    assert [r["run"] for r in found["runs"]] == [p.name for p in ATTEMPTS]
    assert {r["app_id"] for r in found["runs"]} == {"local-1430917381535"}
    assert found["runs"][0]["start"] < found["runs"][1]["start"]
    # the first attempt ran 10 ms, the second 57 ms: no job, no operator
    assert [r["wall_s"] for r in found["runs"]] == pytest.approx([0.01, 0.06])
    [rest] = found["operators"]
    assert rest["operator"] == UNATTRIBUTED and rest["regression_from"] is None
    assert found["warnings"] == []


def test_one_run_is_not_a_series(capsys, tmp_path):
    runs = folder_of_runs(tmp_path, [1000] * 3, [10] * 3)
    # a profile folder alone is one run
    assert main(["compare", str(runs / "a-third")]) != 0
    assert "one run; give BEFORE AFTER" in capsys.readouterr().err
    # a folder of one run is too few
    for extra in ("m-second", "z-first"):
        shutil.rmtree(runs / extra)
    assert main(["compare", str(runs)]) != 0
    assert "a series needs at least two" in capsys.readouterr().err
