"""The hints an engineer reviewed against the raw events stay reviewed (issue 26).

``review_corpus.csv`` (how it was made: README.md beside it) holds every
hint sparktrail gave on ``eventlogs/public`` before the rules checked their
causes, each with an engineer's verdict and the evidence from the events.
This test re-profiles those logs and fails when

* a hint judged ``right`` disappears;
* a hint judged ``wrong`` comes back: for a cause the rules now check
  (:data:`CHECKED`) any hint of that kind on that stage and executor; for
  the others, the wrong claim (:data:`CLAIMS`) or a shown severity;
* a log whose failures no hint named (``missing``) still has no
  ``failures`` hint.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from bench.public_hints import ROOT, profile_log

CORPUS = Path(__file__).with_name("review_corpus.csv")
ROWS = list(csv.DictReader(CORPUS.open()))
#: Causes the rules now check before naming one: such a hint must be gone.
CHECKED = frozenset(
    {
        "failed_attempt",
        "interactive_think_time",
        "capacity_not_applicable",
        "idle_from_skew",
        "cold_executor",
        "wave_stall",
        "empty_median",
        "streaming_one_off",
        "degenerate_state",
    }
)
#: The wrong claim of a class whose hint may stay, with the claim fixed.
CLAIMS = {
    "speculated_copy_as_slow": "spark.speculation",
    "local_master_speculation": "spark.speculation",
    "scan_layout": "salt",
}

#: Wrong hints the rules do not yet check, with why: each fails strictly
#: (xfail) until its rule is fixed, then this entry must go.
OPEN: dict[str, str] = {}

pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=f"no logs under {ROOT}")


@functools.cache
def hints_of(log: str) -> tuple[dict[str, Any], ...]:
    hints, _ = profile_log(ROOT / log)
    return tuple(hints.to_dicts()) if not hints.is_empty() else ()


def _id(row: dict[str, str]) -> str:
    where = "/".join(x for x in (row["stage_id"], row["executor_id"]) if x)
    return f"{row['log'].split('/')[-1][:40]}:{row['kind']}@{where}:{row['verdict']}"


def matching(row: dict[str, str]) -> list[dict[str, Any]]:
    """The log's hints of the row's kind on its stage and executor (for a
    missing hint, of its kind anywhere: the stage is the reviewer's pick
    among the failures, which one hint per cause may name otherwise)."""
    found = []
    for hint in hints_of(row["log"]):
        if hint["kind"] != row["kind"]:
            continue
        if row["verdict"] == "missing":
            found.append(hint)
            continue
        if row["stage_id"] and str(hint["stage_id"]) != row["stage_id"]:
            continue
        if row["executor_id"] and str(hint["executor_id"]) != row["executor_id"]:
            continue
        found.append(hint)
    return found


def _key(row: dict[str, str]) -> str:
    where = "/".join(x for x in (row["stage_id"], row["executor_id"]) if x)
    return f"{row['log'].split('/')[-1]}:{row['kind']}@{where}"


def _params() -> list[object]:
    return [
        pytest.param(
            row,
            id=_id(row),
            marks=[pytest.mark.xfail(reason=OPEN[_key(row)], strict=True)]
            if _key(row) in OPEN
            else [],
        )
        for row in ROWS
    ]


@pytest.mark.parametrize("row", _params())
def test_a_reviewed_hint_keeps_its_verdict(row: dict[str, str]) -> None:
    found = matching(row)
    verdict, why = row["verdict"], row["wrong_because"]
    if verdict == "right":
        assert found, f"a hint judged right is gone: {row['evidence']}"
    elif verdict == "missing":
        assert found, f"no failures hint: {row['evidence']}"
    elif verdict == "wrong" and why in CHECKED:
        assert not found, f"came back ({why}): {found[0]['action']}"
    elif verdict == "wrong" and why in CLAIMS:
        claims = [h["action"] for h in found if CLAIMS[why] in h["action"]]
        assert not claims, f"the wrong claim came back ({why}): {claims[0]}"
    elif verdict == "wrong":
        shown = [h for h in found if h["severity"] != "info"]
        assert not shown, f"shown again ({why}): {shown[0]['action']}"


def test_the_corpus_holds_enough_reviews() -> None:
    reviewed = [r for r in ROWS if r["verdict"] in ("right", "weak", "wrong")]
    assert len(reviewed) >= 40
    assert all(r["evidence"].strip() for r in ROWS)
    assert (
        pl.DataFrame(ROWS)["log"]
        .map_elements(lambda log: (ROOT / log).exists(), return_dtype=pl.Boolean)
        .all()
    )
