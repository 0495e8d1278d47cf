"""The remedy catalogue: what fixes a problem, for which engine, Spark version
and platform (DESIGN §6, "How advice is derived", step 3).

Each :class:`Remedy` names a problem it fixes, the setting or API that
fixes it, the stage engines and inputs it applies to, the Spark versions
where it exists (with its default there) and the platforms where it acts.
:func:`remedies` picks the ones that fit a run's facts and renders them
with the run's numbers; a remedy outside its range is never printed, and a
setting already at the value it would set is left out.

Assumptions
-----------
* Versions and defaults are Spark's documentation and release notes:
  AQE's coalescing and skew join exist from 3.0 and are on by default from
  3.2; ``spark.memory.fraction`` exists from 1.6 (default 0.75 there, 0.6
  from 2.0), before it ``spark.shuffle.memoryFraction`` (0.2);
  ``spark.sql.files.maxPartitionBytes`` from 2.0, ``spark.sql.files.
  minPartitionNum`` from 3.1; dynamic allocation's shuffle tracking from
  3.0; ``spark.speculation.minTaskRuntime`` from 3.2.
* An unknown version matches only remedies valid in every version
  (:data:`ANY_VERSION`), and :func:`remedies` says so once.
* Engines are :data:`~.facts.ENGINES`; ``None`` (unknown) matches only
  remedies that name no engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from .facts import RunFacts, Version

__all__ = [
    "ANY_VERSION",
    "CATALOGUE",
    "NOTES",
    "PROBLEMS",
    "UNKNOWN_PLATFORM",
    "UNKNOWN_VERSION",
    "Remedy",
    "remedies",
    "remedy_text",
]

#: The oldest version: a remedy since it exists in every version.
EVERY_VERSION = Version(0, 0)
ANY_VERSION = (EVERY_VERSION, None)


@dataclass(frozen=True)
class Remedy:
    """One fix of one problem.

    ``text`` is a template filled with :func:`remedies`' values
    (``{n}``, ``{value}``, ...); ``setting`` is the Spark property it sets
    to ``value`` (a template too), left out where the run had it already;
    ``engines`` and ``reads`` the stages it applies to (empty: any);
    ``since``/``until`` the versions where it exists (``until``
    exclusive; ``None``: still there); ``platforms`` where it acts (empty:
    any; ``not_platforms`` where it does not); ``needs`` a fact that must
    hold (:func:`_holds`).
    """

    problem: str
    text: str
    setting: str | None = None
    value: str | None = None
    engines: frozenset[str] = frozenset()
    reads: frozenset[str] = frozenset()
    since: Version = EVERY_VERSION
    until: Version | None = None
    platforms: frozenset[str] = frozenset()
    not_platforms: frozenset[str] = frozenset()
    needs: str | None = None

    @property
    def any_version(self) -> bool:
        return self.since == EVERY_VERSION and self.until is None


_SQL = frozenset({"sql", "pandas_udf", "python_udf", "gpu"})
_RDD = frozenset({"rdd", "pyspark_rdd"})
_V30, _V32 = Version(3, 0), Version(3, 2)
_CLUSTER = frozenset({"yarn", "standalone", "kubernetes", "mesos"})


def _r(problem: str, text: str, **kw: Any) -> Remedy:
    for key in ("engines", "reads", "platforms", "not_platforms"):
        if key in kw:
            kw[key] = frozenset(kw[key])
    return Remedy(problem, text, **kw)


#: Every remedy, by problem. Order within a problem is the order printed.
CATALOGUE: tuple[Remedy, ...] = (
    # -- more partitions: a stage ran fewer tasks than the slots ------------
    _r(
        "more_partitions",
        "the program calls {call} before it; make it {call_new} "
        "(spark.sql.shuffle.partitions does not change a count the program gives)",
        needs="explicit_partitions",
    ),
    _r(
        "more_partitions",
        "spark.sql.shuffle.partitions={n}",
        setting="spark.sql.shuffle.partitions",
        value="{n}",
        engines=_SQL,
        reads={"shuffle"},
        needs="shuffle_below",
    ),
    _r(
        "more_partitions",
        "AQE coalesced the shuffle to {tasks} tasks: "
        "spark.sql.adaptive.coalescePartitions.parallelismFirst=false with "
        "spark.sql.adaptive.advisoryPartitionSizeInBytes={advisory}, or "
        "spark.sql.adaptive.coalescePartitions.minPartitionNum={n}",
        engines=_SQL,
        reads={"shuffle"},
        since=_V32,
        needs="aqe_coalesced",
    ),
    _r(
        "more_partitions",
        "the shuffle's numPartitions argument ({n}: reduceByKey, groupByKey, "
        "join, sortByKey(numPartitions=...))",
        engines=_RDD,
        reads={"shuffle"},
        needs="no_explicit_partitions",
    ),
    _r(
        "more_partitions",
        "spark.default.parallelism={n} (for the shuffles that take no "
        "numPartitions; sortByKey keeps its parent's partitions)",
        setting="spark.default.parallelism",
        value="{n}",
        engines=_RDD,
        reads={"shuffle"},
        needs="no_explicit_partitions",
    ),
    _r(
        "more_partitions",
        "spark.sql.files.maxPartitionBytes={split} (now {split_now}: smaller "
        "splits of the files it scans)",
        setting="spark.sql.files.maxPartitionBytes",
        value="{split}",
        engines=_SQL,
        reads={"input"},
        since=Version(2, 0),
        needs="splittable_input",
    ),
    _r(
        "more_partitions",
        "spark.sql.files.minPartitionNum={n} (files cut into at least that "
        "many splits, where their format splits)",
        setting="spark.sql.files.minPartitionNum",
        value="{n}",
        engines=_SQL,
        reads={"input"},
        since=Version(3, 1),
        needs="file_input",
    ),
    _r(
        "more_partitions",
        "the input's minPartitions argument (sc.textFile(path, {n}), "
        "hadoopFile(..., minPartitions={n}))",
        engines=_RDD,
        reads={"input"},
        needs="file_input",
    ),
    _r(
        "more_partitions",
        "more partitions of the Kafka topic (a direct stream reads each in one "
        "task), or repartition({n}) of the stream after the read (a shuffle "
        "of every batch)",
        engines=_RDD,
        reads={"input"},
        needs="kafka_input",
    ),
    _r(
        "more_partitions",
        "the Kafka source's minPartitions option ({n}: it splits the topic's "
        "offset ranges into at least that many tasks)",
        engines=_SQL,
        reads={"input"},
        since=Version(2, 4),
        needs="kafka_input",
    ),
    _r(
        "more_partitions",
        "parallelize(data, {n}) (numSlices)",
        engines=_RDD,
        reads={"collection"},
    ),
    _r(
        "more_partitions",
        "spark.range(..., numPartitions={n}), or repartition({n}) of a "
        "DataFrame made from local data",
        engines=_SQL,
        reads={"collection"},
    ),
    _r(
        "more_partitions",
        "repartition({n}) of the data before it is cached (its cached "
        "blocks keep {tasks} partitions)",
        reads={"cache"},
    ),
    _r(
        "more_partitions",
        "store the input splittable: its files do not split (gzip or another "
        "whole-file format: one task a file, whatever the split size), so "
        "rewrite them as Parquet, ORC or bzip2, or as more, smaller files, for "
        "the scan to run {n} tasks (a repartition({n}) after the read would "
        "split only the work after it)",
        reads={"input"},
        needs="unsplittable_input",
    ),
    _r(
        "more_partitions",
        "spark.streaming.blockInterval lower (more blocks a batch), more "
        "receivers, or repartition({n}) of the received stream",
        reads={"receiver"},
    ),
    _r(
        "more_partitions",
        "GraphX: load the graph with numEdgePartitions={n} "
        "(GraphLoader.edgeListFile) or partitionBy a PartitionStrategy",
        needs="graphx",
    ),
    _r(
        "more_partitions",
        "repartition({n}) the training data before fit(): each iteration of "
        "an MLlib estimator runs one task per partition of its input",
        needs="iterative_ml",
    ),
    # -- more slots: every slot was busy -----------------------------------
    _r(
        "more_slots",
        "spark.dynamicAllocation.maxExecutors={executors} (now {max_now})",
        setting="spark.dynamicAllocation.maxExecutors",
        value="{executors}",
        platforms=_CLUSTER,
        needs="dynamic_allocation",
    ),
    _r(
        "more_slots",
        "spark.executor.instances={executors} (now {instances})",
        setting="spark.executor.instances",
        value="{executors}",
        platforms={"yarn", "kubernetes"},
        needs="static_allocation",
    ),
    _r(
        "more_slots",
        "spark.cores.max={cores} (standalone: the cores the application may take)",
        setting="spark.cores.max",
        value="{cores}",
        platforms={"standalone", "mesos"},
        needs="cores_max_set",
    ),
    _r(
        "more_slots",
        "more workers: spark.cores.max is unset, so the application held every "
        "core the cluster's workers offered",
        platforms={"standalone", "mesos"},
        needs="cores_max_unset",
    ),
    _r(
        "more_slots",
        "a larger cluster: raise the autoscaling maximum of workers to {executors}",
        platforms={"databricks", "emr-serverless", "dataproc-serverless", "glue"},
    ),
    _r(
        "more_slots",
        "more cores: local[{cores}] on a machine that has them",
        platforms={"local"},
    ),
    # -- fewer partitions: tiny tasks whose fixed costs dominate ------------
    _r(
        "fewer_partitions",
        "the program calls {call} before it; make it {call_new}",
        needs="explicit_partitions",
    ),
    _r(
        "fewer_partitions",
        "spark.sql.shuffle.partitions={n} (now {now})",
        setting="spark.sql.shuffle.partitions",
        value="{n}",
        engines=_SQL,
        reads={"shuffle"},
        needs="no_explicit_partitions",
    ),
    _r(
        "fewer_partitions",
        "spark.sql.adaptive.enabled=true (AQE coalesces small shuffle "
        "partitions; off in this run)",
        setting="spark.sql.adaptive.enabled",
        value="true",
        engines=_SQL,
        reads={"shuffle"},
        since=_V30,
        needs="aqe_off",
    ),
    _r(
        "fewer_partitions",
        "coalesce({n}) or the shuffle's numPartitions argument ({n})",
        engines=_RDD,
        reads={"shuffle", "input", "cache"},
    ),
    _r(
        "fewer_partitions",
        "spark.sql.files.maxPartitionBytes={split} (now {split_now}: larger "
        "splits of the files it scans)",
        setting="spark.sql.files.maxPartitionBytes",
        value="{split}",
        engines=_SQL,
        reads={"input"},
        since=Version(2, 0),
        needs="splittable_input",
    ),
    _r(
        "fewer_partitions",
        "parallelize(data, {n}) (numSlices)",
        engines=_RDD,
        reads={"collection"},
    ),
    # -- skew -----------------------------------------------------------------
    _r(
        "skewed_join",
        "spark.sql.adaptive.skewJoin.enabled=true (AQE splits a skewed "
        "partition of a sort-merge join)",
        setting="spark.sql.adaptive.skewJoin.enabled",
        value="true",
        engines=_SQL,
        since=_V30,
        needs="aqe_skew_off",
    ),
    _r(
        "skewed_join",
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes={half}: "
        "AQE left the {size} partition whole (it splits only above the "
        "threshold, 256MB by default)",
        setting="spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes",
        value="{half}",
        engines=_SQL,
        since=_V30,
        needs="aqe_skew_on",
    ),
    _r(
        "skewed_join",
        "salt the hot key: add a random 0..{k1} to it on the big side and "
        "replicate the other side's rows for each salt",
    ),
    _r(
        "skewed_aggregation",
        "aggregate in two steps: by (key, a random salt 0..{k1}), then by the "
        "key (AQE cannot split an aggregation's partition)",
    ),
    _r(
        "input_layout",
        "rewrite the input as evenly sized files (repartition before its "
        "write; for Parquet, smaller row groups)",
    ),
    _r(
        "input_layout",
        "spark.sql.files.maxPartitionBytes={split} (its largest splits are "
        "at the {split_now} cap)",
        setting="spark.sql.files.maxPartitionBytes",
        value="{split}",
        engines=_SQL,
        since=Version(2, 0),
        needs="splits_at_cap",
    ),
    # -- slow tasks of normal size --------------------------------------------
    _r(
        "slow_host",
        "spark.speculation=true (a copy of a slow task on another executor)",
        setting="spark.speculation",
        value="true",
        not_platforms={"local"},
    ),
    _r(
        "slow_host",
        "spark.speculation.minTaskRuntime lower than {slow} (speculation is "
        "on, yet the slow tasks were not copied)",
        since=_V32,
        needs="speculation_on",
        not_platforms={"local"},
    ),
    # -- memory ---------------------------------------------------------------
    _r(
        "spill",
        "spark.memory.fraction={fraction} (now {fraction_now}: more of the "
        "heap for execution)",
        setting="spark.memory.fraction",
        value="{fraction}",
        since=Version(1, 6),
        engines=frozenset({"sql", "rdd", "pyspark_rdd", "pandas_udf", "python_udf"}),
    ),
    _r(
        "spill",
        "spark.shuffle.memoryFraction={fraction_legacy} (Spark before 1.6: "
        "the heap share for shuffle aggregation, 0.2 by default)",
        setting="spark.shuffle.memoryFraction",
        value="{fraction_legacy}",
        until=Version(1, 6),
    ),
    _r(
        "spill",
        "spark.python.worker.memory={python_memory} (now {python_memory_now}: "
        "PySpark's Python-side aggregation spills above it)",
        setting="spark.python.worker.memory",
        value="{python_memory}",
        engines={"pyspark_rdd"},
    ),
    _r(
        "spill",
        "{memory_key}={memory} (now {memory_now})",
        engines=frozenset({"sql", "rdd", "pyspark_rdd", "pandas_udf", "python_udf"}),
    ),
    _r(
        "gpu_memory",
        "spark.rapids.memory.gpu.allocFraction={alloc} (now {alloc_now}: the "
        "GPU's memory the plugin may pool)",
        setting="spark.rapids.memory.gpu.allocFraction",
        value="{alloc}",
        engines={"gpu"},
        needs="gpu_alloc_low",
    ),
    _r(
        "gpu_memory",
        "spark.rapids.sql.concurrentGpuTasks={gpu_tasks} (now {gpu_tasks_now}: "
        "fewer tasks share a GPU's memory)",
        setting="spark.rapids.sql.concurrentGpuTasks",
        value="{gpu_tasks}",
        engines={"gpu"},
        needs="gpu_concurrency",
    ),
    _r(
        "gpu_memory",
        "spark.sql.files.maxPartitionBytes={split} (now {split_now}: smaller "
        "input batches per task)",
        setting="spark.sql.files.maxPartitionBytes",
        value="{split}",
        engines={"gpu"},
        needs="large_splits",
    ),
    # -- executors started cold -------------------------------------------------
    _r(
        "cold_executors",
        "spark.dynamicAllocation.executorIdleTimeout={timeout} (now "
        "{timeout_now}: idle executors were released between jobs and new "
        "ones started cold)",
        setting="spark.dynamicAllocation.executorIdleTimeout",
        value="{timeout}",
        needs="dynamic_allocation",
    ),
    _r(
        "cold_executors",
        "spark.dynamicAllocation.minExecutors={min_executors} (keeps that "
        "many warm between commands)",
        setting="spark.dynamicAllocation.minExecutors",
        value="{min_executors}",
        needs="dynamic_allocation",
    ),
)

#: Every problem the catalogue knows.
PROBLEMS = frozenset(r.problem for r in CATALOGUE)


def _holds(need: str | None, facts: RunFacts, values: dict[str, Any]) -> bool:
    """Whether the fact a remedy ``needs`` holds (``values`` carry the
    caller's findings: ``explicit_partitions``, ``aqe_coalesced``, ...)."""
    if need is None:
        return True
    da = facts.dynamic_allocation
    app = facts.app
    checks = {
        "explicit_partitions": lambda: bool(values.get("call")),
        "shuffle_below": lambda: (
            not values.get("call") and bool(values.get("shuffle_below"))
        ),
        "no_explicit_partitions": lambda: not values.get("call"),
        "kafka_input": lambda: bool(values.get("kafka")),
        "file_input": lambda: not values.get("kafka"),
        "dynamic_allocation": lambda: da.enabled,
        "static_allocation": lambda: not da.enabled,
        "graphx": lambda: facts.graphx,
        "iterative_ml": lambda: facts.iterative_ml,
        "speculation_on": lambda: bool(app.flag("spark.speculation")),
        "cores_max_set": lambda: app.setting("spark.cores.max") is not None,
        "cores_max_unset": lambda: app.setting("spark.cores.max") is None,
        "aqe_off": lambda: not facts.aqe(values.get("stage_id")),
        "aqe_skew_off": lambda: (
            not facts.aqe(values.get("stage_id"))
            or app.flag("spark.sql.adaptive.skewJoin.enabled") is False
        ),
        "aqe_skew_on": lambda: (
            facts.aqe(values.get("stage_id"))
            and app.flag("spark.sql.adaptive.skewJoin.enabled") is not False
        ),
    }
    if need in checks:
        return bool(checks[need]())
    return bool(values.get(need))


def _in_version(remedy: Remedy, version: Version | None) -> bool:
    if version is None:
        return remedy.any_version
    if version < remedy.since:
        return False
    return remedy.until is None or version < remedy.until


def _fits(remedy: Remedy, facts: RunFacts, values: dict[str, Any]) -> bool:
    engine = values.get("engine")
    reads = values.get("reads")
    if remedy.engines and engine not in remedy.engines:
        return False
    if remedy.reads and reads not in remedy.reads:
        return False
    platform = facts.platform
    if remedy.platforms and platform not in remedy.platforms:
        return False
    if remedy.not_platforms and platform in remedy.not_platforms:
        return False
    if not _in_version(remedy, facts.version):
        return False
    return _holds(remedy.needs, facts, values)


class _Blank(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def _render(template: str, values: dict[str, Any]) -> str:
    return template.format_map(_Blank(values))


def _in_force(remedy: Remedy, facts: RunFacts, values: dict[str, Any]) -> bool:
    """Whether the setting the remedy sets is at its value already (for the
    stage's SQL execution, where it changed the setting)."""
    if remedy.setting is None or remedy.value is None:
        return False
    now = facts.setting(remedy.setting, values.get("stage_id"))
    if now is None:
        return False
    return now.strip().lower() == _render(remedy.value, values).strip().lower()


def remedies(problem: str, facts: RunFacts, **values: Any) -> list[str]:
    """The remedies of ``problem`` that fit ``facts``, rendered with
    ``values`` (``engine``, ``reads``, ``stage_id`` and the numbers the
    templates name), in catalogue order; none whose setting is in force.

    >>> from sparktrail.pag.context import AppContext
    >>> from .facts import run_facts
    >>> old = run_facts(AppContext(master="yarn", spark_version="1.6.0"))
    >>> [r[:38] for r in remedies("skewed_join", old, engine="sql", k1=1)]
    ['salt the hot key: add a random 0..1 to']
    >>> new = run_facts(AppContext(master="yarn", spark_version="3.1.1"))
    >>> remedies("skewed_join", new, engine="sql", k1=1)[0][:40]
    'spark.sql.adaptive.skewJoin.enabled=true'
    """
    if problem not in PROBLEMS:
        raise ValueError(
            f"no remedy for problem {problem!r} (known: {sorted(PROBLEMS)})"
        )
    found = []
    unknown: list[str] = []
    for remedy in CATALOGUE:
        if remedy.problem != problem:
            continue
        if not _fits(remedy, facts, values):
            unknown += _left_out_unknown(remedy, facts, values)
            continue
        if _in_force(remedy, facts, values):
            continue
        text = _render(remedy.text, values)
        if text not in found:
            found.append(text)
    return found + sorted(set(unknown))


#: What :func:`remedies` adds when a remedy was left out for a fact the log
#: does not state (:func:`remedy_text` puts it after the remedies).
UNKNOWN_VERSION = (
    "the log does not state its Spark version: only what every version has is named"
)
UNKNOWN_PLATFORM = (
    "the log does not state its master: what one cluster manager alone has is left out"
)
NOTES = (UNKNOWN_VERSION, UNKNOWN_PLATFORM)


def _left_out_unknown(
    remedy: Remedy, facts: RunFacts, values: dict[str, Any]
) -> list[str]:
    """The notes saying that ``remedy`` would fit but for a version or a
    platform the log does not state."""
    if facts.version is None and not remedy.any_version:
        known = replace(remedy, since=EVERY_VERSION, until=None)
        if _fits(known, facts, values):
            return [UNKNOWN_VERSION]
    if facts.platform is None and remedy.platforms:
        known = replace(remedy, platforms=frozenset())
        if _fits(known, facts, values):
            return [UNKNOWN_PLATFORM]
    return []


def remedy_text(found: Iterable[str], fallback: str) -> str:
    """``found`` remedies as one clause (``a; or b``), else ``fallback``
    (what holds the run back and what is known, when no remedy fits).

    >>> remedy_text(["x=1", "y=2"], "look at it")
    'x=1; or y=2'
    >>> remedy_text([], "look at it")
    'look at it'
    >>> remedy_text(["x=1", UNKNOWN_VERSION], "look at it")[:29]
    'x=1 (the log does not state i'
    """
    found = list(found)
    notes = [f for f in found if f in NOTES]
    fixes = [f for f in found if f not in NOTES]
    text = "; or ".join(fixes) if fixes else fallback
    return text + "".join(f" ({note})" for note in notes)
