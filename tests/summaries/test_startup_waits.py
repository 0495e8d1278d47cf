"""``cold_start`` of a first job that waited for executors (issue 42): the
cause named is what starts executors on the run's cluster manager, and a
wait after the first one registered is the scheduler's, not the cluster's.

Times in seconds: the first job starts at 1 s and its tasks at 61 s; the
run ends at 81 s.
"""

from __future__ import annotations

import polars as pl
import pytest

from sparktrail.pag.context import AppContext, ExecutorLife, JobSpan
from tests.summaries.builders import Trace
from tests.summaries.test_capacity_hints import S, hints_of, only


def one_job_run(
    added_s: tuple[float, ...],
    job_s: float,
    tasks_s: float,
    master: str = "yarn",
    app_name: str | None = None,
) -> pl.DataFrame:
    """The hints of a run of one job, started at ``job_s``, whose two tasks
    run 20 s from ``tasks_s``; its executors registered at ``added_s``."""
    t = Trace()
    for core in (0, 1):
        t.task(
            f"exec-1/{core}", tasks_s * 1000, [("processing", 20_000)], stage=0, job=0
        )
    end = int((tasks_s + 20) * S)
    app = AppContext(
        app_name=app_name,
        master=master,
        spark_version="3.5.0",
        start_ns=0,
        end_ns=end,
        executors=tuple(
            ExecutorLife(str(i + 1), 2, host=f"h{i}", added_ns=int(a * S))
            for i, a in enumerate(added_s)
        ),
        jobs=(JobSpan(0, start_ns=int(job_s * S), end_ns=end),),
    )
    return hints_of(t.frame(), app)


def waited(master: str, added_s: tuple[float, ...]) -> tuple[dict, dict]:
    """The cold_start hint of a run whose executors registered at ``added_s``."""
    return only(one_job_run(added_s, 1, 61, master), "cold_start")


@pytest.mark.parametrize(
    ("master", "said"),
    [
        ("yarn", "YARN took that long to grant and start the containers"),
        ("k8s://https://10.0.0.1:443", "the pods took that long to be scheduled"),
        ("spark://host:7077", "the standalone master had no free cores"),
    ],
)
def test_the_wait_for_executors_names_what_starts_them(master: str, said: str):
    # GIVEN the first job waited 60 s and its executors registered at 60 s
    row, _ = waited(master, (60.0, 60.5))
    # THEN the cause is the cluster manager's own start of executors
    assert "job 0 1 min 0 s" in row["action"]
    assert said in row["action"]
    assert "the first executor registered after 59 s" in row["action"]
    assert "scheduler" not in row["action"]


def test_a_wait_after_the_first_executor_registered_is_the_schedulers():
    # GIVEN one executor registered 20 s into the wait, the other at its end
    row, _ = waited("spark://host:7077", (21.0, 60.5))
    # THEN the 40 s after the first registered are named as the scheduler's
    action = row["action"]
    assert "the first executor registered after 20 s" in action
    assert "the first task started 40 s later, when 2 had" in action
    assert "minRegisteredResourcesRatio" in action


def before_first_job(app_name: str) -> list[dict]:
    """driver_phase hints of a YARN run whose executor registered at 2 s and
    whose first job started at 20 s (its tasks 20-40 s)."""
    found = one_job_run((2,), 20, 20, app_name=app_name)
    return found.filter(pl.col("kind") == "driver_phase").to_dicts()


def test_the_drivers_own_code_before_the_first_job_is_named():
    # GIVEN 18 s from the executor's registration to the first job
    (row,) = before_first_job("etl")
    # THEN the driver's code before it is named, with its length
    assert "the driver ran its own code for 18 s before the first job" in row["action"]
    assert "first executor registered (2 s in)" in row["action"]
    assert row["predicted_saving_ns"] == pytest.approx(18 * S)


def test_a_shell_waiting_for_its_first_command_is_no_finding():
    # GIVEN the same run in Spark's shell: a person typing
    assert before_first_job("Spark shell") == []
