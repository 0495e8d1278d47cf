"""Facts before rules (issue 42 items 1 and 3): a log that lacks what a
rule needs is said to lack it and the rule stays silent, and a remedy is
printed only where the run's Spark version has it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from bench.public_hints import profile_log
from sparktrail.pag.context import AppContext
from sparktrail.summaries.hints.facts import Version, run_facts
from sparktrail.summaries.hints.remedies import CATALOGUE, PROBLEMS, remedies
from tests.paths import SHARED_LOG

LINES = SHARED_LOG.read_bytes().splitlines(keepends=True)
EVENTS = [orjson.loads(line) for line in LINES]
TASK_EVENTS = ("SparkListenerTaskStart", "SparkListenerTaskEnd")


def edited_log(tmp_path: Path, keep_tasks_of_stage0: int) -> Path:
    """The shared 2.3 log with all but ``keep_tasks_of_stage0`` of stage 0's
    tasks taken out (as an edited or lossy log would hold them)."""
    kept, seen = [], set()
    for line, event in zip(LINES, EVENTS, strict=True):
        if event["Event"] in TASK_EVENTS and event.get("Stage ID") == 0:
            task = event["Task Info"]["Task ID"]
            if task not in seen and len(seen) >= keep_tasks_of_stage0:
                continue
            seen.add(task)
        kept.append(line)
    path = tmp_path / "edited"
    path.write_bytes(b"".join(kept))
    return path


def declared_tasks(stage: int) -> int:
    for event in EVENTS:
        if event["Event"] == "SparkListenerStageSubmitted":
            info = event["Stage Info"]
            if info["Stage ID"] == stage:
                return int(info["Number of Tasks"])
    raise AssertionError(f"no stage {stage}")


def test_a_stage_with_fewer_tasks_than_declared_is_named_and_left_alone(
    tmp_path: Path,
) -> None:
    # GIVEN the shared log with one of stage 0's tasks left
    assert declared_tasks(0) > 1
    hints, _ = profile_log(edited_log(tmp_path, 1))
    # THEN a log_integrity note names the stage, what it declared and holds
    notes = hints.filter(hints["kind"] == "log_integrity")["action"].to_list()
    assert len(notes) == 1
    assert f"stage 0 declares {declared_tasks(0)} tasks; the log holds 1" in notes[0]
    # AND no rule that counts a stage's tasks speaks of stage 0
    counted = {"parallelism", "over_partitioned", "hotspot", "straggler_task"}
    on_stage0 = hints.filter(
        hints["kind"].is_in(list(counted)) & (hints["stage_id"] == 0)
    )
    assert on_stage0.is_empty(), on_stage0.select("kind", "action").rows()


def test_a_whole_log_has_no_integrity_note(tmp_path: Path) -> None:
    hints, _ = profile_log(edited_log(tmp_path, 10**6))
    assert "log_integrity" not in hints["kind"].to_list()


def test_profile_says_the_log_is_not_whole(tmp_path: Path) -> None:
    # GIVEN a log cut before its ApplicationEnd
    end = next(
        i for i, e in enumerate(EVENTS) if e["Event"] == "SparkListenerApplicationEnd"
    )
    cut = tmp_path / "cut"
    cut.write_bytes(b"".join(LINES[:end]))
    # WHEN profiled on the command line
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparktrail",
            "profile",
            str(cut),
            "-o",
            str(tmp_path / "p"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    # THEN it says so beside the verdict
    assert "Log not whole" in done.stdout, done.stdout
    assert "no ApplicationEnd" in done.stdout


VERSIONS = [
    "1.1.0",
    "1.5.2",
    "1.6.0",
    "2.0.0",
    "2.4.8",
    "3.0.1",
    "3.2.0",
    "3.5.1",
    "4.0.0",
    None,
]


#: Every caller finding a remedy may need, and the numbers templates name.
VALUES = {
    "n": 8,
    "k1": 1,
    "tasks": 2,
    "advisory": "64m",
    "value": "x",
    "call": None,
    "shuffle_below": True,
    "aqe_coalesced": True,
    "stage_id": None,
}


class Unknown(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "?"


def every_remedy(version: str | None) -> set[str]:
    """Every remedy text printed for ``version``, over every problem, engine
    and input."""
    facts = run_facts(AppContext(master="yarn", spark_version=version))
    values = VALUES
    found: set[str] = set()
    for problem in PROBLEMS:
        for engine in (
            "gpu",
            "pandas_udf",
            "python_udf",
            "sql",
            "pyspark_rdd",
            "rdd",
            None,
        ):
            for reads in ("shuffle", "input", "collection", "cache", None):
                found.update(
                    remedies(problem, facts, engine=engine, reads=reads, **values)
                )
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_no_remedy_is_printed_outside_its_versions(version: str | None) -> None:
    printed = every_remedy(version)
    parsed = Version.parse(version)
    for remedy in CATALOGUE:
        inside = (
            remedy.any_version
            if parsed is None
            else remedy.since <= parsed
            and (remedy.until is None or parsed < remedy.until)
        )
        text = remedy.text.format_map(Unknown(VALUES))
        assert inside or text not in printed, (version, text)


def test_settings_only_newer_versions_have() -> None:
    old, new, unknown = every_remedy("1.6.0"), every_remedy("3.2.0"), every_remedy(None)
    assert any("spark.sql.adaptive" in text for text in new)
    assert not any("spark.sql.adaptive" in text for text in old | unknown)
    assert any("spark.memory.fraction" in text for text in new)
    assert not any("spark.memory.fraction" in text for text in every_remedy("1.5.2"))


def test_an_unknown_version_says_that_only_what_every_version_has_is_named() -> None:
    from sparktrail.summaries.hints.remedies import UNKNOWN_VERSION, remedy_text

    facts = run_facts(AppContext(master="yarn", spark_version=None))
    found = remedies("skewed_join", facts, engine="sql", k1=1)
    # AQE's skew join (3.0+) is left out, and the text says why
    assert UNKNOWN_VERSION in found
    assert not any("adaptive" in text for text in found)
    text = remedy_text(found, "spread the hot keys")
    assert text.startswith("salt the hot key") and text.endswith(f"({UNKNOWN_VERSION})")
    # a known version has no such note
    known = run_facts(AppContext(master="yarn", spark_version="3.3.0"))
    assert UNKNOWN_VERSION not in remedies("skewed_join", known, engine="sql", k1=1)
