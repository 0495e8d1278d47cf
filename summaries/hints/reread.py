"""``re_read``: the same input read and parsed again by job after job.

Stages that scan input (:attr:`~.facts.StageFacts.reads` ``input``) and
read exactly the same number of bytes, :data:`MIN_READS` times or more,
read the same files: a DataFrame or RDD used by several actions without
``cache()``, each action reading (and a CSV or JSON source inferring its
schema) anew. A reader's own jobs (:attr:`~.facts.StageFacts.purpose`
``schema``: a header, an inferred schema) count among them.

The change replayed: every read after the first takes half its time (the
parse and the read of the files saved, the rest of its work left), and a
repeated schema job none. The half is an assumption (the log does not
split a scan's time into reading and computing), stated in the evidence.

Assumptions
-----------
* Equal bytes read, to the byte, over :data:`MIN_BYTES`, is the same
  input; a table read whole by two queries that aggregate it differently
  counts too (caching it serves both).
"""

from __future__ import annotations

from collections import defaultdict

import polars as pl

from sparktrail.units import duration, size
from sparktrail.whatif.changes import TaskTimes

from .hint import Hint
from .inputs import Context

__all__ = ["MIN_BYTES", "MIN_READS", "re_read"]

#: Reads of one input that make a finding.
MIN_READS = 3
#: Inputs smaller than this are not worth caching.
MIN_BYTES = 1 << 20
#: The share of a repeated scan's time a cached read saves (see the notes).
SCAN_SAVED = 0.5


def re_read(ctx: Context) -> list[Hint]:
    """Inputs read :data:`MIN_READS` times or more (module notes)."""
    facts = ctx.facts
    persisted = {s.stage_id for s in facts.app.stages if s.cached}
    # A stage over a persisted dataset is served by its cache already.
    reading = [
        s.stage_id
        for s in facts.stages.values()
        if s.reads == "input" and s.stage_id not in persisted
    ]
    if len(reading) < MIN_READS or ctx.tasks.is_empty():
        return []
    per_stage = (
        ctx.stage_facts.filter(pl.col("stage_id").is_in(reading))
        .select("stage_id", "bytes", "launch_ns", "duration_ns")
        .filter(pl.col("bytes") >= MIN_BYTES)
    )
    groups: dict[int, list[dict[str, int]]] = defaultdict(list)
    for row in per_stage.iter_rows(named=True):
        groups[int(row["bytes"])].append(row)
    hints = []
    for nbytes, stages in groups.items():
        if len(stages) < MIN_READS:
            continue
        stages.sort(key=lambda r: r["launch_ns"])
        hints.append(_hint(ctx, nbytes, stages))
    return hints


def _hint(ctx: Context, nbytes: int, stages: list[dict[str, int]]) -> Hint:
    facts = ctx.facts
    again = [r["stage_id"] for r in stages[1:]]
    schema = [s for s in again if facts.purpose(s) == "schema"]
    tasks = ctx.tasks.filter(pl.col("stage_id").is_in(again)).select(
        "task_id", "stage_id", "duration_ns"
    )
    cut = pl.when(pl.col("stage_id").is_in(schema)).then(0.0).otherwise(1 - SCAN_SAVED)
    faster = tasks.select(
        "task_id", (pl.col("duration_ns") * cut).round(0).cast(pl.Int64).alias("d")
    )
    change = TaskTimes(tuple(faster["task_id"].to_list()), tuple(faster["d"].to_list()))
    spent = float(sum(r["duration_ns"] for r in stages[1:]))
    engines = {facts.engine(r["stage_id"]) for r in stages}
    sql = bool(engines & {"sql", "pandas_udf", "python_udf", "gpu"})
    fix = (
        "read it once and cache() (or persist()) the DataFrame that every action uses"
        if sql
        else "cache() (or persist()) the RDD that every action reads"
    )
    if schema:
        fix += (
            f"; {len(schema)} of the reads are the reader inferring the schema "
            "again: give it one (spark.read.schema(...)) instead of inferSchema"
        )
    evidence = {
        "bytes": nbytes,
        "reads": len(stages),
        "stages": [r["stage_id"] for r in stages][:20],
        "schema_reads": schema[:20],
        "repeated_task_ns": spent,
        "assumes": (
            f"a cached read takes {1 - SCAN_SAVED:.0%} of a repeated scan's time, "
            "and a repeated schema job none"
        ),
    }
    action = (
        f"the same {size(nbytes)} of input was read {len(stages)} times (stages "
        f"{', '.join(str(r['stage_id']) for r in stages[:8])}"
        + (" and more" if len(stages) > 8 else "")
        + f"), {duration(spent)} of task time after the first read: {fix}"
    )
    share = sum(_cp(ctx, r["stage_id"]) for r in stages[1:])
    return Hint(
        "re_read",
        share,
        evidence,
        action,
        stage_id=int(stages[1]["stage_id"]),
        predicted_saving_ns=SCAN_SAVED * spent,
        change=change,
    )


def _cp(ctx: Context, stage_id: int) -> float:
    rows = ctx.operator.filter(pl.col("stage_id") == stage_id)["cp_share"]
    return float(rows.sum() or 0.0)
