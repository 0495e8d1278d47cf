"""``gc_bound`` and ``spill`` hints: memory pressure on the critical path.

* ``gc_bound``: JVM garbage collection (the tasks' ``gc`` rows, Spark's
  ``JVM GC Time``) holds at least ``gc_min_share`` of the run's critical
  path. The hint names the stages with the most GC on the path (at most
  :data:`TOP`, each holding at least :data:`MIN_PART` of it) in which GC
  took at least ``gc_high_share`` of the tasks' run time (fetch wait,
  processing, GC and shuffle write: Spark's executor run time). When no
  stage qualifies there is no hint: the GC on the path is spread thin
  over stages that mostly compute.
* ``spill``: a stage with a CP share of at least ``spill_min_share`` whose
  tasks spilled to disk (``disk_bytes_spilled`` > 0), one of them at least
  on the critical path; one hint per such stage, whose CP share is that of
  its spilling tasks. When only data-skewed tasks spilled (the hotspot
  rule's test, :func:`~.tasks.skew_of`) and not all of the stage's
  tasks, more partitions would not spread the spill: the action says to
  fix the skew first instead.

Both name three remedies (but for a skewed spill, above): more heap per task
(``spark.executor.memory``, or on a local master ``spark.driver.memory``:
the tasks run in the driver's JVM, whose heap is fixed when it starts),
``spark.memory.fraction`` and more, smaller tasks (for ``gc_bound`` only
when the stage's median task runs at least ``target_task_ms``: splitting
tasks already shorter adds fixed costs). Suggested values:
:data:`MEMORY_FACTOR` x the memory the application ran with (Spark's default
when unset), :data:`PARTITION_FACTOR` x the stage's tasks, and the memory
fraction one :data:`FRACTION_STEP` from its value (default 0.6) within
[:data:`FRACTION_LOW`, :data:`FRACTION_HIGH`]: lower for GC (Spark's tuning
guide: less room for cached blocks leaves the old generation room for task
objects), higher for spills (more execution memory).

Predicted savings (rule estimates; no replay models memory):
``GC_RELIEF`` of the GC on the critical path for ``gc_bound``; for
``spill``, the time to write and read back the spilled bytes at
``SPILL_BYTES_PER_S``, as a part of the spilling tasks' run time, times
their critical time.

Assumptions
-----------
* What the application ran with (master, properties) comes from the
  trace's context (``Context.app``, a :class:`~sparktrail.pag.context.
  AppContext`) when it is known; without it, a trace whose tasks all ran on
  executor ``driver`` is local, and the memory it ran with is unknown (no
  value is suggested).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from sparktrail.pag.query_engine import collect
from sparktrail.units import size

from ..operator import stage_label
from ..run_shares import run_share
from .bound import short_tasks
from .hint import Hint
from .inputs import Context
from .parallelism import split_advice
from .platform import aqe_enabled, spark_at_least
from .tasks import skew_medians, skew_of

__all__ = ["gc_bound", "spill"]

#: The part of GC time that more heap is assumed to remove.
GC_RELIEF = 0.5
#: Disk throughput assumed for writing and reading back a spill.
SPILL_BYTES_PER_S = 100e6

#: gc_bound names at most this many stages, each with at least this part
#: of the GC on the critical path.
TOP = 3
MIN_PART = 0.10
#: Spark's defaults of the settings the actions name.
DEFAULT_MEMORY = "1g"
DEFAULT_FRACTION = 0.6
#: Suggested memory and partitions: this many times today's.
MEMORY_FACTOR = 2
PARTITION_FACTOR = 2
#: spark.memory.fraction: the step of a suggestion and its bounds.
FRACTION_STEP = 0.1
#: A heap this large (MiB) is past the JVM's compressed object pointers
#: (32 GiB): more of it lengthens full collections more than it eases them.
LARGE_HEAP_MIB = 32 * 1024
FRACTION_LOW, FRACTION_HIGH = 0.3, 0.8
#: A JVM memory size as Spark reads it (no unit: MiB).
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)b?\s*$", re.IGNORECASE)
_MIB_PER_UNIT = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def memory_mib(text: str) -> float | None:
    """A Spark memory setting in MiB (``None`` if it does not parse).

    >>> memory_mib("4g"), memory_mib("512m"), memory_mib("2048"), memory_mib("x")
    (4096.0, 512.0, 2048.0, None)
    """
    match = _SIZE.match(text)
    if match is None:
        return None
    return float(int(match.group(1)) * _MIB_PER_UNIT[match.group(2).lower()])


def memory_text(mib: float) -> str:
    """MiB as a Spark memory setting, in whole ``g`` when it is.

    >>> memory_text(2048), memory_text(1536), memory_text(0.5)
    ('2g', '1536m', '1m')
    """
    whole = max(1, math.ceil(mib))
    return f"{whole // 1024}g" if whole % 1024 == 0 else f"{whole}m"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.0f} ms"


@dataclass(frozen=True)
class Memory:
    """The memory settings an action names, as the application ran with them.

    ``now`` is ``None`` when the application's settings are not known.
    """

    local: bool
    now: str | None
    fraction: float | None
    #: Task slots of the largest executor (``None``: unknown).
    cores: int | None = None

    @property
    def setting(self) -> str:
        """Where task heap comes from: the driver's in local mode."""
        return "spark.driver.memory" if self.local else "spark.executor.memory"

    @property
    def suggested(self) -> str | None:
        """:data:`MEMORY_FACTOR` x today's memory, if today's is known."""
        mib = memory_mib(self.now) if self.now is not None else None
        return None if mib is None else memory_text(mib * MEMORY_FACTOR)

    @property
    def large(self) -> bool:
        """Whether an executor's heap is :data:`LARGE_HEAP_MIB` or more: a
        larger one is no remedy there."""
        mib = memory_mib(self.now) if self.now is not None else None
        return not self.local and mib is not None and mib >= LARGE_HEAP_MIB

    def heap_action(self) -> str:
        """The sentence that asks for more heap per task.

        >>> Memory(False, "4g", 0.6).heap_action()
        'raise spark.executor.memory from 4g to 8g'
        >>> Memory(True, None, None).heap_action()[:53]
        'raise spark.driver.memory (e.g. double it; local mode'
        >>> Memory(False, "60g", None, cores=1).heap_action()[:33]
        'not a heap larger than 60g (past '
        """
        if self.large:
            fewer = (
                " with fewer cores each (spark.executor.cores)"
                if self.cores is None or self.cores > 1
                else ""
            )
            return (
                f"not a heap larger than {self.now} (past 32g the JVM's object "
                "pointers double and full collections grow long): more, smaller "
                f"executors of at most 31g{fewer}"
            )
        suggested = self.suggested
        change = f"raise {self.setting}"
        notes = []
        if suggested is None:
            notes.append("e.g. double it")
        else:
            change += f" from {self.now} to {suggested}"
        if self.local:
            flag = "--driver-memory" + ("" if suggested is None else f" {suggested}")
            notes.append(
                "local mode: the tasks run in the driver's JVM, so set it before "
                f"it starts: spark-submit {flag}"
            )
        return change + (f" ({'; '.join(notes)})" if notes else "")

    def fraction_to(self, step: float) -> float | None:
        """``spark.memory.fraction`` moved by ``step`` within the bounds
        (``None`` if it is at a bound already)."""
        now = DEFAULT_FRACTION if self.fraction is None else self.fraction
        new = round(min(FRACTION_HIGH, max(FRACTION_LOW, now + step)), 2)
        return None if math.isclose(new, now) or (new - now) * step < 0 else new

    def evidence(self) -> dict[str, Any]:
        """The settings as evidence."""
        return {
            "memory_setting": self.setting,
            "memory_now": self.now,
            "memory_suggested": self.suggested,
            "memory_fraction_now": self.fraction,
        }


def memory_of(ctx: Context) -> Memory:
    """The memory settings of the run, from the trace's context if known."""
    app = ctx.app
    if not app.known:
        executors = ctx.tasks["executor"].drop_nulls().unique().to_list()
        return Memory(executors == ["driver"], None, None)
    local = bool(app.is_local)
    setting = "spark.driver.memory" if local else "spark.executor.memory"
    now = app.setting(setting) or DEFAULT_MEMORY
    try:
        value = app.setting("spark.memory.fraction")
        fraction = float(value) if value is not None else None
    except ValueError:
        fraction = None
    cores = max((e.cores for e in app.executors if e.cores), default=None)
    return Memory(local, now, fraction, cores)


def _where(ctx: Context, stage_id: int) -> str:
    return stage_label(stage_id, ctx.stage_labels.get(stage_id))


def _partitions(ctx: Context, stage_id: int, attempts: int) -> str:
    declared = ctx.facts.partition_count(stage_id)
    tasks = attempts if declared is None else declared
    more = tasks * PARTITION_FACTOR
    app = ctx.app
    if (
        aqe_enabled(app)
        and app.flag("spark.sql.adaptive.coalescePartitions.enabled") is not False
    ):
        # AQE sets a shuffle's task count from its size, whatever
        # spark.sql.shuffle.partitions says.
        row = ctx.stage_row(stage_id) or {}
        size = (row.get("bytes") or 0) // more
        target = f"{max(1, size >> 20)}m" if size else "half its value"
        return (
            f"split {_where(ctx, stage_id)} into more, smaller tasks ({more} "
            f"instead of {tasks}): if it reads a shuffle, AQE coalesced it into "
            f"{tasks} tasks, so lower spark.sql.adaptive.advisoryPartitionSizeInBytes "
            f"(64MB by default) to {target}; else repartition({more}) before it"
        )
    how = split_advice(ctx, stage_id, more).removeprefix(f"{more} partitions: ")
    return (
        f"split {_where(ctx, stage_id)} into more, smaller tasks ({more} instead "
        f"of {tasks}): {how}"
    )


#: The fraction of the heap for execution and storage: Spark 1.6's
#: default, and from 2.0 on; before 1.6, shuffle aggregation's own share.
FRACTION_1_6, LEGACY_SHUFFLE_FRACTION = 0.75, 0.2


def fraction_advice(ctx: Context, memory: Memory, step: float) -> str | None:
    """Moving the heap's execution share by ``step``, in the run's Spark:
    ``spark.memory.fraction`` from 1.6 (0.75 by default in 1.6, 0.6
    after), ``spark.shuffle.memoryFraction`` before it (0.2); ``None`` when
    the version is unknown (no setting that exists in every version) or the
    value is at its bound.

    >>> from sparktrail.pag.context import AppContext
    >>> from .facts import run_facts
    >>> class C: facts = run_facts(AppContext(spark_version="1.5.2"))
    >>> fraction_advice(C, Memory(False, "4g", None), 0.1)
    'raise spark.shuffle.memoryFraction from 0.2 to 0.3'
    >>> class D: facts = run_facts(AppContext(spark_version="1.6.0"))
    >>> fraction_advice(D, Memory(False, "4g", None), -0.1)
    'lower spark.memory.fraction from 0.75 to 0.65'
    """
    facts = ctx.facts
    if facts.version is None:
        return None
    verb = "raise" if step > 0 else "lower"
    if facts.at_least(1, 6) is False:
        if step < 0:
            return None  # storage's share is no lever of a task's heap there
        now = _float(facts.app.setting("spark.shuffle.memoryFraction"))
        now = LEGACY_SHUFFLE_FRACTION if now is None else now
        new = round(min(FRACTION_HIGH, now + step), 2)
        return f"{verb} spark.shuffle.memoryFraction from {now:g} to {new:g}"
    default = FRACTION_1_6 if facts.at_least(2, 0) is False else DEFAULT_FRACTION
    now = default if memory.fraction is None else memory.fraction
    new = round(min(FRACTION_HIGH, max(FRACTION_LOW, now + step)), 2)
    if math.isclose(new, now) or (new - now) * step < 0:
        return None
    return f"{verb} spark.memory.fraction from {now:g} to {new:g}"


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _python_memory(ctx: Context) -> str:
    """PySpark's Python-side aggregation spills above its worker memory."""
    now = ctx.app.setting("spark.python.worker.memory") or "512m"
    mib = memory_mib(now)
    more = memory_text(mib * MEMORY_FACTOR) if mib is not None else "more"
    return (
        f"raise spark.python.worker.memory from {now} to {more} (a PySpark "
        "aggregation spills in its Python workers above it, whatever the JVM heap)"
    )


#: Why a stage that writes a round-robin repartition spills, and the lever.
SORT_BEFORE_REPARTITION = (
    "the stage writes a round-robin repartition(n), which Spark sorts each "
    "task's rows before (spark.sql.execution.sortBeforeRepartition, on by "
    "default since 2.3, so a retry shuffles them alike): that sort is what "
    "spills; drop the repartition if nothing needs it, or set the setting to "
    "false (a retried task may then send rows elsewhere)"
)


def _sorts_before_repartition(ctx: Context, stage_id: int) -> bool:
    """Whether the stage writes a round-robin exchange that Spark sorts
    before (SQL, Spark 2.3 on, the setting not off)."""
    if ctx.facts.engine(stage_id) not in ("sql", "pandas_udf", "python_udf"):
        return False
    if not spark_at_least(ctx.app, 2, 3):
        return False
    if ctx.app.flag("spark.sql.execution.sortBeforeRepartition") is False:
        return False
    labels = ctx.operator.filter(pl.col("stage_id") == stage_id)["operator"]
    return any("RoundRobinPartitioning" in (label or "") for label in labels)


def _skew_spill(ctx: Context, stage_id: int) -> str:
    factor = ctx.options.skew_factor
    head = (
        f"only tasks holding {factor:g}x or more of the stage's median "
        "records/bytes spilled: the spill is the data skew's"
    )
    if ctx.facts.reads(stage_id) == "input":
        # A scan's skew is its input splits', not a key's.
        return (
            f"{head}: its largest input splits, which more shuffle partitions do "
            "not touch, so even out the input first (the stage's hotspot hint)"
        )
    return (
        f"{head}, which more partitions do not spread (a hot key stays in one "
        "partition), so fix the skew first (the stage's hotspot or "
        "skew_unsplittable hint)"
    )


def _gc_stages(ctx: Context) -> list[dict[str, Any]]:
    """Stages with GC on the path, most first, with their tasks' GC and run."""
    gc_cp = ctx.stage_cp("gc")
    total = float(gc_cp["cp"].sum())
    if total <= 0:
        return []
    gc_ns = ctx.activity_cp_ns("gc")
    facts = ctx.stage_facts.lazy().select(
        "stage_id", "tasks", "gc_ns", "run_ns", "gc_tasks"
    )
    rows = gc_cp.lazy().join(facts, on="stage_id", how="inner", maintain_order="left")
    return [
        {
            "stage_id": r["stage_id"],
            "gc_cp_share": run_share(r["cp"], ctx.n_windows),
            "gc_cp_ns": gc_ns * r["cp"] / total,
            "part": r["cp"] / total,
            "gc_ns": r["gc_ns"],
            "run_ns": r["run_ns"],
            "gc_run_share": r["gc_ns"] / r["run_ns"] if r["run_ns"] else 0.0,
            "tasks": r["tasks"],
            "gc_tasks": r["gc_tasks"],
        }
        for r in collect(rows, len(ctx.tasks)).iter_rows(named=True)
    ]


def gc_bound(ctx: Context) -> list[Hint]:
    """GC holds the path: more heap, a lower memory fraction, smaller tasks."""
    opts = ctx.options
    share = ctx.activity_share("gc")
    if share < opts.gc_min_share or "gc_ns" not in ctx.tasks.columns:
        return []
    stages = [
        s
        for s in _gc_stages(ctx)
        if s["part"] >= MIN_PART and s["gc_run_share"] >= opts.gc_high_share
    ][:TOP]
    if not stages:
        return []
    memory = memory_of(ctx)
    gc_cp_ns = ctx.activity_cp_ns("gc")
    for s in stages:
        del s["part"]
    evidence = {
        "gc_share": share,
        "gc_cp_ns": gc_cp_ns,
        "stages": stages,
        **memory.evidence(),
    }
    named = "; ".join(
        f"{_where(ctx, s['stage_id'])}: {_ms(s['gc_cp_ns'])} of GC on the path, "
        f"GC {s['gc_run_share']:.0%} of its tasks' run time "
        f"({_ms(s['gc_ns'])} of {_ms(s['run_ns'])})"
        for s in stages
    )
    top = stages[0]
    steps = [memory.heap_action()]
    fraction = fraction_advice(ctx, memory, -FRACTION_STEP)
    if fraction is not None:
        steps.append(
            f"if it caches data, {fraction} (fewer cached blocks leave "
            "the heap to task objects)"
        )
    # Not below Spark's guideline: smaller tasks would pay their fixed costs
    # more often (a stage of 33 M tasks of 0.05 ms was told to double its
    # partitions while over_partitioned asked to cut them to 16).
    if not short_tasks(ctx, top["stage_id"]):
        steps.append(_partitions(ctx, top["stage_id"], top["tasks"]))
    action = (
        f"JVM garbage collection is {share:.0%} of the critical path "
        f"({_ms(gc_cp_ns)}), most in {named}: " + "; ".join(steps)
    )
    return [
        Hint(
            "gc_bound",
            share,
            evidence,
            action,
            stage_id=top["stage_id"],
            predicted_saving_ns=GC_RELIEF * gc_cp_ns,
        )
    ]


def _spill_stages(ctx: Context) -> pl.DataFrame:
    """Per stage with tasks that spilled to disk: its spill and its tasks."""
    spilled = pl.col("disk_bytes_spilled").fill_null(0) > 0
    skewed = (skew_of() >= ctx.options.skew_factor).fill_null(False)
    return collect(
        ctx.tasks.lazy()
        .filter(pl.col("stage_id").is_not_null())
        .join(skew_medians(ctx), on="stage_id", how="left")
        .group_by("stage_id")
        .agg(
            pl.len().alias("tasks"),
            spilled.sum().alias("spilling_tasks"),
            (spilled & skewed).sum().alias("skewed_spilling_tasks"),
            pl.col("cp_share").filter(spilled).sum().alias("spilling_cp_share"),
            pl.col("memory_bytes_spilled").sum().alias("memory_spilled_bytes"),
            pl.col("disk_bytes_spilled").sum().alias("disk_spilled_bytes"),
            pl.col("disk_bytes_spilled").max().alias("max_task_disk_spilled_bytes"),
            pl.col("run_ns").filter(spilled).sum().alias("spilling_run_ns"),
        )
        .filter(pl.col("spilling_tasks") > 0),
        len(ctx.tasks),
    )


def spill(ctx: Context) -> list[Hint]:
    """Tasks on the path spilled to disk: more partitions, memory, fraction."""
    opts = ctx.options
    if "disk_bytes_spilled" not in ctx.tasks.columns:
        return []
    # No task spilled to disk (the usual case, or no spill column in the
    # trace: a null column): no stage can have spilling tasks.
    most = ctx.tasks.select(pl.col("disk_bytes_spilled").max()).item()
    if most is None or most <= 0:  # type: ignore[operator]
        return []
    stages = ctx.operator.filter(
        pl.col("stage_id").is_not_null() & (pl.col("cp_share") >= opts.spill_min_share)
    ).select("stage_id", pl.col("cp_share").alias("stage_cp_share"), "cp_ns")
    rows = stages.join(_spill_stages(ctx), on="stage_id", how="inner").filter(
        pl.col("spilling_cp_share") > 0
    )
    if rows.is_empty():
        return []
    memory = memory_of(ctx)
    hints = []
    for s in rows.sort(
        "spilling_cp_share", "stage_id", descending=[True, False]
    ).iter_rows(named=True):
        tasks, spilling = s["tasks"], s["spilling_tasks"]
        evidence = {
            "stage_cp_share": s["stage_cp_share"],
            "stage_cp_ns": s["cp_ns"],
            "spilling_cp_share": s["spilling_cp_share"],
            "tasks": tasks,
            "spilling_tasks": spilling,
            "spilling_task_share": spilling / tasks,
            "memory_spilled_bytes": s["memory_spilled_bytes"],
            "disk_spilled_bytes": s["disk_spilled_bytes"],
            "max_task_disk_spilled_bytes": s["max_task_disk_spilled_bytes"],
            "skewed_spilling_tasks": s["skewed_spilling_tasks"],
            "suggested_partitions": tasks * PARTITION_FACTOR,
            **memory.evidence(),
        }
        # Only skewed tasks spilled: a hot key stays whole in one partition
        # however many there are, so more partitions would not spread it.
        of_skew = s["skewed_spilling_tasks"] == spilling < tasks
        first = (
            _skew_spill(ctx, s["stage_id"])
            if of_skew
            else _partitions(ctx, s["stage_id"], tasks)
        )
        steps = [first, memory.heap_action()]
        if _sorts_before_repartition(ctx, s["stage_id"]):
            steps.insert(0, SORT_BEFORE_REPARTITION)
        if ctx.facts.engine(s["stage_id"]) == "pyspark_rdd":
            # PySpark's own aggregation spills in its Python workers.
            steps.insert(0, _python_memory(ctx))
        fraction = fraction_advice(ctx, memory, FRACTION_STEP)
        if fraction is not None:
            steps.append(f"{fraction} (more of the heap for execution)")
        action = (
            f"{spilling} of {tasks} tasks ({spilling / tasks:.0%}) of "
            f"{_where(ctx, s['stage_id'])} spilled to disk "
            f"({size(s['memory_spilled_bytes'])} in memory, "
            f"{size(s['disk_spilled_bytes'])} on disk); the stage is "
            f"{s['stage_cp_share']:.0%} of the critical path ({_ms(s['cp_ns'])}), "
            f"its spilling tasks {s['spilling_cp_share']:.0%}: " + "; ".join(steps)
        )
        spill_ns = 2 * s["disk_spilled_bytes"] / SPILL_BYTES_PER_S * 1e9
        part = (
            min(1.0, spill_ns / s["spilling_run_ns"]) if s["spilling_run_ns"] else 0.0
        )
        hints.append(
            Hint(
                "spill",
                s["spilling_cp_share"],
                evidence,
                action,
                s["stage_id"],
                predicted_saving_ns=part * s["spilling_cp_share"] * ctx.wall_ns,
            )
        )
    return hints


def heap_remedy(ctx: Context) -> str:
    """What eases GC pauses of tasks in the run's Spark: a larger heap (the
    driver's on a local master, whose executors live in it), a smaller
    execution share where the version has one (:func:`fraction_advice`),
    or less cached on it."""
    memory = "spark.driver.memory" if ctx.app.is_local else "spark.executor.memory"
    settings = memory_of(ctx)
    if settings.large:
        return settings.heap_action() + ", or cache less"
    fraction = fraction_advice(ctx, settings, -FRACTION_STEP)
    lower = f" or {fraction}" if fraction else ""
    return f"raise {memory}{lower}, or cache less"
