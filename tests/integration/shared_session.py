"""Ground-truth workloads on the shared SparkSession: their SQL settings set
for one run, then restored, and the run traced live."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import ground_truth as gt
from sparktrail.tracer import attach, detach


@contextmanager
def sql_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """Set SQL settings on the shared session for one test, then restore them."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def trace_workload(
    spark: Any, out: Path, name: str, *, fixed: bool = False, rehearse: bool = False
) -> None:
    """Run one variant of workload ``name`` on the shared session, traced live
    into ``out``; its warm-up (``setup``) and, with ``rehearse``, one more
    run of the variant go before the trace starts."""
    workload = gt.WORKLOADS[name]
    assert workload.master == gt.LOCAL
    gt._by_value()
    with sql_conf(spark, workload.settings(fixed=fixed)):
        if workload.setup is not None:
            workload.setup(spark)
        if rehearse:
            workload.run(spark, fixed)
        attach(spark, out)
        try:
            workload.run(spark, fixed)
        finally:
            detach(spark)
