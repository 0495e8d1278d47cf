"""The advice holds to its labels on the logs it was tuned on (issue 42).

``bench.advice_eval`` profiles every log of the tune split (the reviewed
corpus, the gathered logs of the tune repositories, the planted workloads)
and holds the hints to ``bench/advice``'s labels. This test fails when a
change of the rules

* shows a hint nobody has reviewed (review it against the raw events and
  add a verdict row: the figures below are only as good as the labels);
* shows a wrong hint at high severity, or lets precision (right of the
  reviewed shown hints) fall under :data:`PRECISION`;
* misses a problem an engineer names (recall under :data:`RECALL`), or
  shows a hint on more healthy logs than :data:`FALSE_ALARMS`;
* misses a planted bottleneck, or raises any alarm on a planted log whose
  bottleneck was fixed.

The held-out split is not run here: it measures the rules on logs nobody
tuned them on (BENCHMARKS.md has its figures).
"""

from __future__ import annotations

import functools

import pytest

from bench.advice_eval import CORPORA, Report, evaluate

#: Least precision of the reviewed shown hints of the tune split.
PRECISION = 0.85
#: Least share of the problems an engineer names that a shown hint names.
RECALL = 0.9
#: Most healthy logs with a shown hint.
FALSE_ALARMS = 1


@functools.cache
def tuned() -> Report:
    corpora = [c for c in CORPORA if CORPORA[c].is_dir()]
    return evaluate(corpora, jobs=1, only="tune")


def test_every_shown_hint_of_the_tune_split_is_reviewed() -> None:
    assert [(u["log"], u["kind"], u["stage"]) for u in tuned().unreviewed] == []


def test_shown_hints_are_right_and_none_wrong_at_high() -> None:
    tally = tuned().splits["tune"]
    assert tally.wrong_high == 0
    precision = tally.precision()
    assert precision is not None and precision >= PRECISION, tally.row()


def test_the_problems_an_engineer_names_are_named() -> None:
    report = tuned()
    recall = report.splits["tune"].recall()
    missed = [(m["log"], m["problem"]) for m in report.missed]
    assert recall is not None and recall >= RECALL, missed


def test_healthy_logs_get_no_shown_hint() -> None:
    report = tuned()
    alarms = {(a["log"], a["kind"]) for a in report.alarms}
    assert report.splits["tune"].false_alarms <= FALSE_ALARMS, alarms


def test_every_planted_bottleneck_is_named_and_no_fixed_run_alarms() -> None:
    report = tuned()
    planted = [m for m in report.missed if m["log"].startswith("planted/")]
    assert planted == []
    alarms = [a for a in report.alarms if a["log"].startswith("planted/")]
    assert alarms == []


def test_every_log_profiles_but_the_one_that_is_no_event_log() -> None:
    failed = [f["log"] for f in tuned().failures]
    if CORPORA["reviewed"].is_dir():
        assert failed == ["reviewed/rapids/spark-events-profiling/driverlog"]
    else:  # pragma: no cover - a checkout without the shared logs
        assert failed == []


pytestmark = pytest.mark.skipif(
    not CORPORA["planted"].is_dir(), reason="no planted logs in bench/advice"
)
