"""No hint on the public event logs is nonsense on its face (issue 11).

Every log of ``eventlogs/public`` (other projects' logs: Spark 1.2-4.x,
YARN, standalone, local) is profiled with its context; no hint may
recommend a value the application already ran with, dynamic allocation on
a ``local`` master, show ``inf``/``nan``, or be ``high`` on under 5% of the
critical path (see :func:`bench.public_hints.nonsense`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.public_hints import ROOT, event_logs, nonsense, profile_log
from sparktrail.pag.context import AppContext

LOGS = event_logs(ROOT)

pytestmark = pytest.mark.skipif(not LOGS, reason=f"no public logs under {ROOT}")


@pytest.mark.parametrize("log", LOGS, ids=[str(p.relative_to(ROOT)) for p in LOGS])
def test_no_hint_is_nonsense(log: Path) -> None:
    hints, app = profile_log(log)
    bad = {
        f"{h['kind']} (stage {h['stage_id']})": why
        for h in hints.to_dicts()
        if (why := nonsense(h, app))
    }
    assert bad == {}


def test_the_checker_catches_each_kind_of_nonsense() -> None:
    # GIVEN an application that ran with speculation on, on a local master
    app = AppContext(master="local[4]", properties={"spark.speculation": "true"})
    hint = {"kind": "straggler_task", "severity": "low", "cp_share": 0.3}
    # THEN each kind of nonsense is named
    assert nonsense(hint | {"action": "set spark.speculation=true"}, app) == [
        "recommends spark.speculation=true, already set"
    ]
    assert nonsense(
        hint | {"action": "spark.dynamicAllocation.maxExecutors=2"}, app
    ) == ["dynamic allocation on a local master"]
    assert nonsense(hint | {"action": "holds infx the median"}, app) == [
        "inf or nan in the hint"
    ]
    assert nonsense(hint | {"severity": "high", "cp_share": 0.01}, app) == [
        "high on 1.0% of the critical path"
    ]
    assert nonsense(hint | {"action": "set spark.speculation.quantile=0.5"}, app) == []
