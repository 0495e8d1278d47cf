"""The run's facts: what every rule and remedy reads, computed once (DESIGN §6,
"How advice is derived", step 1).

A rule names a cause only where the facts allow it, and a remedy is printed
only where it exists (:mod:`.remedies`). The facts come from the
application's context (:class:`~sparktrail.pag.context.AppContext`) and the
task facts:

* **integrity**: stages that declared more tasks than the log holds, times
  set aside, a missing ``ApplicationEnd``, events after it, a cut last line,
  a damaged ``EnvironmentUpdate``. Each is a sentence for the report
  (:attr:`Integrity.notes`); a rule that needs a stage whose tasks are
  missing stays silent on it (:meth:`RunFacts.whole_stage`).
* **the kind of application**: a batch run, an interactive session (shell,
  notebook), a DStream application (with its batch interval), a Structured
  Streaming query, an iterative ML fit;
* **each stage's engine** (SQL, RDD, PySpark RDD, pandas UDF, Python UDF,
  GPU) and **what it reads** (a shuffle, input files, a parallelized
  collection, a receiver's blocks), from its RDDs and their scopes;
* **the Spark version**, **the platform** (who gives executors),
  **dynamic allocation** as set and as it behaved, and **the settings in
  force per SQL execution** (the application's, overridden by the
  execution's ``modifiedConfigs``).

Assumptions
-----------
* A fact the log does not state is ``None`` (unknown), never a guess: a
  rule whose fact is unknown does not fire, or names the remedy that holds
  in every version.
* A stage's engine is read off the names of its RDDs and their scopes
  (``PythonRDD``, ``ArrowEvalPython``, ``Exchange``, ``Gpu…``), which Spark
  writes into ``StageSubmitted`` since 1.x; a trace without them (written
  by hand, or before they were kept) has every engine unknown.
"""

from __future__ import annotations

import itertools
import re
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sparktrail.pag.context import AppContext, StageInfo

from .platform import aqe_enabled, cluster_manager, interactive_signs

__all__ = [
    "ENGINES",
    "DynamicAllocation",
    "Integrity",
    "RunFacts",
    "StageFacts",
    "Version",
    "run_facts",
    "stage_engine",
    "stage_purpose",
    "stage_reads",
]

#: A stage's engine, the first that fits, in this order.
ENGINES = ("gpu", "pandas_udf", "python_udf", "sql", "pyspark_rdd", "rdd", None)

_PANDAS_SCOPES = (
    "ArrowEvalPython",
    "FlatMapGroupsInPandas",
    "FlatMapCoGroupsInPandas",
    "AggregateInPandas",
    "WindowInPandas",
    "MapInPandas",
    "MapInArrow",
    "PythonMapInArrow",
    "FlatMapGroupsInArrow",
)
_SQL_SCOPES = re.compile(
    r"^(WholeStageCodegen|Exchange|Scan |Scan$|FileScan|BatchScan|LocalTableScan|"
    r"HashAggregate|SortAggregate|ObjectHashAggregate|Project|Filter|Sort|"
    r"BroadcastExchange|ShuffleQueryStage|AQEShuffleRead|CustomShuffleReader|"
    r"InMemoryTableScan|Execute |DeserializeToObject|SerializeFromObject|Range|"
    r"Window|Generate|Expand|Union|Coalesce|Sample|SortMergeJoin|"
    r"BroadcastHashJoin|ShuffledHashJoin|CartesianProduct|ColumnarToRow|"
    r"RowToColumnar|WriteFiles|Photon)"
)
_INPUT_NAMES = re.compile(
    r"^(FileScanRDD|HadoopRDD|NewHadoopRDD|JDBCRDD|DataSourceRDD|path(:|$)|"
    r"textFile|wholeTextFiles|binaryFiles|hadoopFile|newAPIHadoopFile|"
    r"sequenceFile|objectFile|Scan |Scan$|FileScan|BatchScan|GpuFileScan|"
    r"GpuScan|GpuBatchScan|HiveTableScan|KafkaRDD|KafkaSourceRDD)"
)
_COLLECTION_NAMES = re.compile(r"^(ParallelCollectionRDD|parallelize|Range|range)$")
_RECEIVER_NAMES = re.compile(r"^(BlockRDD|WriteAheadLogBackedBlockRDD|Receiver)")
_ML_SITES = re.compile(
    r"(RandomForest|DecisionTree|GradientBoosted|GBTClassifier|GBTRegressor|"
    r"LogisticRegression|LinearRegression|KMeans|ALS\b|LDA\b|GaussianMixture|"
    r"treeAggregate|org\.apache\.spark\.ml|org\.apache\.spark\.mllib|"
    r"xgboost|XGBoost|CrossValidator|Pipeline\.fit|\.fit at)"
)
_GRAPHX = re.compile(
    r"(VertexRDD|EdgeRDD|GraphImpl|GraphLoader|Pregel|pageRank|PageRank)"
)
_DSTREAM_JOB = re.compile(r"^Streaming job from")
_DRIVER_KILLED = re.compile(
    r"(killed by driver|explicit termination request|decommission)", re.IGNORECASE
)


@dataclass(frozen=True, order=True)
class Version:
    """A Spark version, ``major.minor.patch``.

    >>> v = Version.parse("3.1.1-amzn-0")
    >>> v, v >= Version(3, 1), Version.parse("x") is None
    (Version(major=3, minor=1, patch=1), True, True)
    """

    major: int
    minor: int = 0
    patch: int = 0

    @classmethod
    def parse(cls, text: str | None) -> Version | None:
        found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
        if not found:
            return None
        return cls(int(found.group(1)), int(found.group(2)), int(found.group(3) or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


@dataclass(frozen=True)
class StageFacts:
    """One stage: what it declared against what the log holds, its engine
    and what it reads.

    ``recorded`` counts its task attempts in the trace, ``settled`` those
    that neither failed nor were killed, ``partitions`` the distinct
    partitions those ran; ``engine`` is one of :data:`ENGINES`; ``reads``
    ``shuffle``, ``input``, ``collection``, ``cache``, ``receiver`` or
    ``None`` (unknown).
    """

    stage_id: int
    declared: int | None
    recorded: int
    settled: int
    partitions: int
    engine: str | None
    reads: str | None
    name: str | None
    rdds: tuple[str, ...] = ()
    job_id: int | None = None
    attempts: int = 1
    sql_id: int | None = None

    #: Partitions of any attempt (failed and killed too) the log holds.
    recorded_partitions: int = 0
    #: Whether the stage completed without a failure (``StageCompleted``).
    completed: bool = True
    #: What Spark ran the stage for, when not the program's own data:
    #: ``listing`` (listing a table's files), ``schema`` (reading a
    #: source's schema: a DataFrame reader's job over a list of files).
    purpose: str | None = None

    @property
    def partition_count(self) -> int:
        """Its partitions: as declared, else those its attempts ran (never
        its attempts: retries of a partition are one partition).

        >>> StageFacts(0, 64, 89, 64, 64, None, None, None).partition_count
        64
        """
        return self.declared or self.recorded_partitions or self.partitions

    @property
    def whole(self) -> bool:
        """Whether the log holds a task of every partition the stage
        declared (``True`` when it declared none, or it failed or never
        completed: a stage cut short by a failure ran only some)."""
        if self.declared is None or not self.completed:
            return True
        return self.recorded_partitions >= self.declared


@dataclass(frozen=True)
class Integrity:
    """Whether the log is whole, and what is missing, in sentences."""

    notes: tuple[str, ...]
    partial_stages: frozenset[int]
    set_aside: int = 0
    app_end: bool = True
    after_end: int = 0

    @property
    def whole(self) -> bool:
        return not self.notes


@dataclass(frozen=True)
class DynamicAllocation:
    """Dynamic allocation as configured, and what it did.

    ``enabled`` is the setting (``False`` when unset, Spark's default);
    ``idle_timeout_ns`` the executor idle timeout in force (60 s by
    default); ``can_release`` whether Spark may release executors that hold
    shuffle files (a shuffle service or shuffle tracking);
    ``released`` counts executors the driver removed (idle timeout,
    decommission) before the application ended, ``added_late`` those added
    after the first job started.
    """

    enabled: bool
    min_executors: int | None = None
    max_executors: int | None = None
    initial_executors: int | None = None
    idle_timeout_ns: int | None = None
    can_release: bool | None = None
    released: int = 0
    added_late: int = 0


@dataclass(frozen=True)
class RunFacts:
    """Everything the rules and remedies read of a run, computed once.

    ``kind`` is ``batch``, ``interactive``, ``dstream`` or
    ``structured_streaming`` (the one that decides what time between jobs
    is); ``iterative_ml`` and ``graphx`` say what the jobs ran;
    ``platform`` is :func:`~.platform.cluster_manager`'s answer (``None``:
    unknown); ``version`` ``None`` when the log does not state it.
    """

    app: AppContext
    integrity: Integrity
    kind: str
    interactive_signs: tuple[str, ...]
    dstream_interval_ns: int | None
    iterative_ml: bool
    graphx: bool
    version: Version | None
    platform: str | None
    dynamic_allocation: DynamicAllocation
    stages: dict[int, StageFacts] = field(default_factory=dict)

    def stage(self, stage_id: int | None) -> StageFacts | None:
        return None if stage_id is None else self.stages.get(stage_id)

    def partition_count(self, stage_id: int | None) -> int | None:
        """:attr:`StageFacts.partition_count` of a stage (``None``: the
        context does not describe it)."""
        found = self.stage(stage_id)
        return None if found is None else found.partition_count

    def whole_stage(self, stage_id: int | None) -> bool:
        """Whether the log holds every task of stage ``stage_id`` (a stage
        the context does not describe counts as whole)."""
        found = self.stage(stage_id)
        return found is None or found.whole

    def engine(self, stage_id: int | None) -> str | None:
        found = self.stage(stage_id)
        return None if found is None else found.engine

    def reads(self, stage_id: int | None) -> str | None:
        found = self.stage(stage_id)
        return None if found is None else found.reads

    def purpose(self, stage_id: int | None) -> str | None:
        found = self.stage(stage_id)
        return None if found is None else found.purpose

    def at_least(self, major: int, minor: int = 0) -> bool | None:
        """Whether the run's Spark is ``major.minor`` or newer (``None``:
        the version is unknown)."""
        if self.version is None:
            return None
        return self.version >= Version(major, minor)

    def setting(self, key: str, stage_id: int | None = None) -> str | None:
        """Setting ``key`` as it was in force for ``stage_id``: the value its
        SQL execution changed at run time, else the application's."""
        found = self.stage(stage_id)
        if found is not None and found.sql_id is not None:
            changed = self._modified.get(found.sql_id, {})
            if key in changed:
                return changed[key]
        return self.app.setting(key)

    @cached_property
    def _modified(self) -> dict[int, dict[str, str]]:
        return {q.execution_id: q.modified_configs for q in self.app.sql}

    def scan_cap(self, stage_id: int | None = None) -> int:
        """The file scan's split cap in force for ``stage_id``, in bytes
        (``spark.sql.files.maxPartitionBytes``; 128 MB when unset or
        unreadable).

        >>> run_facts(AppContext(properties={
        ...     "spark.sql.files.maxPartitionBytes": "64m"})).scan_cap() >> 20
        64
        """
        found = size_bytes(self.setting("spark.sql.files.maxPartitionBytes", stage_id))
        return SCAN_CAP if found is None else found

    def aqe(self, stage_id: int | None = None) -> bool:
        """Whether adaptive query execution was on for ``stage_id``."""
        value = self.setting("spark.sql.adaptive.enabled", stage_id)
        if value is not None and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        return aqe_enabled(self.app)


def stage_engine(info: StageInfo | None, gpu_app: bool = False) -> str | None:
    """The engine of a stage, from the names of its RDDs and their scopes
    (one of :data:`ENGINES`; ``None`` when they are unknown).

    >>> stage_engine(StageInfo(0, rdds=("PythonRDD", "map", "ParallelCollectionRDD")))
    'pyspark_rdd'
    >>> stage_engine(StageInfo(0, rdds=("MapPartitionsRDD", "ArrowEvalPython",
    ...     "WholeStageCodegen")))
    'pandas_udf'
    >>> stage_engine(StageInfo(0, rdds=("GpuColumnarExchange", "Exchange")))
    'gpu'
    """
    if info is None or not info.rdds:
        return None
    names = info.rdds
    if any(n.startswith("Gpu") for n in names):
        return "gpu"
    if any(n.startswith(_PANDAS_SCOPES) for n in names):
        return "pandas_udf"
    if any(n.startswith("BatchEvalPython") for n in names):
        return "python_udf"
    if any(_SQL_SCOPES.match(n) for n in names):
        return "gpu" if gpu_app else "sql"
    if "PythonRDD" in names or "PythonPartitionsRDD" in names:
        return "pyspark_rdd"
    return "rdd"


def stage_reads(info: StageInfo | None) -> str | None:
    """What a stage reads: ``shuffle`` (it has parent stages), ``input``
    (files, a table, JDBC, Kafka), ``collection`` (a parallelized
    collection or a range), ``receiver`` (a DStream receiver's blocks),
    ``cache`` (persisted blocks), or ``None``.

    >>> stage_reads(StageInfo(3, parents=(1, 2)))
    'shuffle'
    >>> stage_reads(StageInfo(0, rdds=("MapPartitionsRDD", "path:.csv", "textFile")))
    'input'
    """
    if info is None:
        return None
    if info.parents:
        return "shuffle"
    names = info.rdds
    if any(_RECEIVER_NAMES.match(n) for n in names):
        return "receiver"
    if any(_INPUT_NAMES.match(n) for n in names):
        return "input"
    if any(_COLLECTION_NAMES.match(n) for n in names):
        return "collection"
    if info.cached:
        return "cache"
    return None


#: A DataFrame reader's call (``spark.read.parquet(...)``): a job it runs
#: before the query is Spark reading the source's schema or listing files.
_READER_SITE = re.compile(
    r"^(load|parquet|csv|json|orc|text|table|avro|jdbc|schema) at "
)
_LISTING = re.compile(r"^Listing leaf files and directories")
_WRITES = re.compile(
    r"^(WriteFiles|Execute |InsertInto|DataWritingCommand|AppendData|"
    r"OverwriteByExpression)"
)


def stage_purpose(info: StageInfo | None, description: str | None) -> str | None:
    """What Spark ran a stage for, when not the program's data: ``listing``
    (its job lists a table's files) or ``schema`` (a job named by a
    DataFrame reader's call, ``spark.read.csv(...)``, that writes nothing:
    Parquet footers, a CSV's header or its inferred schema; a program's
    actions are named by their own call, ``count at ...``).

    >>> stage_purpose(StageInfo(0, name="load at x.py:3",
    ...     rdds=("MapPartitionsRDD", "ParallelCollectionRDD")), None)
    'schema'
    >>> stage_purpose(None, "Listing leaf files and directories for 9 paths")
    'listing'
    """
    if _LISTING.match(description or ""):
        return "listing"
    if info is None or not _READER_SITE.match(info.name or ""):
        return None
    # ``df.write.parquet(...)`` names its jobs "parquet at ..." too: a stage
    # that writes files or a shuffle, or reads one, is the program's.
    if info.parents or any(
        _WRITES.match(n) or n.startswith("Exchange") for n in info.rdds
    ):
        return None
    return "schema"


def _gpu_app(app: AppContext) -> bool:
    plugins = app.setting("spark.plugins") or ""
    return (
        "rapids" in plugins.lower()
        and app.flag("spark.rapids.sql.enabled") is not False
    )


def _integrity(app: AppContext, stages: dict[int, StageFacts]) -> Integrity:
    notes: list[str] = []
    partial = sorted(s.stage_id for s in stages.values() if not s.whole)
    for sid in partial[:3]:
        s = stages[sid]
        notes.append(
            f"stage {sid} declares {s.declared} tasks; the log holds "
            f"{s.recorded_partitions}"
        )
    if len(partial) > 3:
        notes.append(
            f"and {len(partial) - 3} more stages hold fewer tasks than declared"
        )
    log = app.log
    if log is not None:
        if log.set_aside:
            what = ", ".join(log.set_aside_events[:3])
            notes.append(f"{log.set_aside} implausible timestamps set aside ({what})")
        if not log.app_end:
            notes.append("the log has no ApplicationEnd: the run may not have ended")
        if log.cut_last_line:
            notes.append("the log's last line is cut mid-event")
        if log.bad_environment:
            notes.append(
                f"the EnvironmentUpdate at {log.bad_environment} could not be read: "
                "the application's settings are unknown"
            )
    return Integrity(
        tuple(notes),
        frozenset(partial),
        log.set_aside if log else 0,
        log.app_end if log else True,
        log.after_end if log else 0,
    )


def _dstream_interval(app: AppContext) -> int | None:
    """The batch interval of a DStream application: the most common gap
    between its batches' times (``None``: no DStream batch)."""
    times = sorted({j.batch_time_ns for j in app.jobs if j.batch_time_ns is not None})
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return int(statistics.mode(gaps)) if gaps else None


def _is_dstream(app: AppContext) -> bool:
    return any(
        j.batch_time_ns is not None or _DSTREAM_JOB.match(j.description or "")
        for j in app.jobs
    )


def _kind(app: AppContext, signs: list[str]) -> str:
    if app.queries or any(j.query_id for j in app.jobs):
        return "structured_streaming"
    if _is_dstream(app):
        return "dstream"
    if signs:
        return "interactive"
    return "batch"


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


#: spark.sql.files.maxPartitionBytes' default.
SCAN_CAP = 128 << 20
_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)b?\s*")


def size_bytes(text: str | None) -> int | None:
    """A size setting (``128m``, ``1g``, ``134217728``) in bytes; ``None``
    when unset or unreadable.

    >>> size_bytes("64m"), size_bytes("2GB"), size_bytes("x")
    (67108864, 2147483648, None)
    """
    found = _SIZE.fullmatch((text or "").lower())
    if not found:
        return None
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    return int(found.group(1)) * scale[found.group(2)]


def duration_ns(text: str | None, default_unit: str = "s") -> int | None:
    """A Spark duration setting (``60s``, ``100ms``, ``2min``, a bare number
    in ``default_unit``) in ns (``None``: unset or unreadable).

    >>> duration_ns("100ms"), duration_ns("2min"), duration_ns("30")
    (100000000, 120000000000, 30000000000)
    """
    if text is None:
        return None
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if not found:
        return None
    units = {
        "ns": 1,
        "us": 1_000,
        "ms": 1_000_000,
        "s": 10**9,
        "": None,
        "m": 60 * 10**9,
        "min": 60 * 10**9,
        "h": 3600 * 10**9,
        "d": 86_400 * 10**9,
    }
    unit = found.group(2)
    scale = units.get(unit) if unit else units[default_unit]
    if scale is None:
        return None
    return int(float(found.group(1)) * scale)


def _dynamic_allocation(app: AppContext) -> DynamicAllocation:
    setting = app.setting
    enabled = bool(app.flag("spark.dynamicAllocation.enabled"))
    tracking = app.flag("spark.dynamicAllocation.shuffleTracking.enabled")
    service = app.flag("spark.shuffle.service.enabled")
    can_release = (
        None if tracking is None and service is None else bool(tracking or service)
    )
    first_job = app.first_job_ns
    end = app.end_ns
    released = sum(
        1
        for e in app.executors
        if e.removed_ns is not None
        and _DRIVER_KILLED.search(e.removed_reason or "")
        and (end is None or e.removed_ns < end - 1_000_000_000)
    )
    added_late = sum(
        1
        for e in app.executors
        if e.executor_id != "driver"
        and e.added_ns is not None
        and first_job is not None
        and e.added_ns > first_job
    )
    return DynamicAllocation(
        enabled,
        _int(setting("spark.dynamicAllocation.minExecutors")),
        _int(setting("spark.dynamicAllocation.maxExecutors")),
        _int(setting("spark.dynamicAllocation.initialExecutors")),
        duration_ns(setting("spark.dynamicAllocation.executorIdleTimeout"))
        or (60 * 10**9 if enabled else None),
        can_release,
        released,
        added_late,
    )


def _stage_counts(tasks: Any) -> dict[int, tuple[int, int, int, int]]:
    """``stage -> (attempts, settled attempts, partitions settled, partitions
    of any attempt)`` of the task facts (a polars frame with ``stage_id``,
    ``partition``, and ``status`` when known)."""
    import polars as pl

    if tasks is None or tasks.is_empty() or "stage_id" not in tasks.columns:
        return {}
    failed = (
        pl.col("status").is_in(["failed", "killed"]).fill_null(False)
        if "status" in tasks.columns
        else pl.lit(False)
    )
    counts = (
        tasks.lazy()
        .filter(pl.col("stage_id").is_not_null())
        .group_by("stage_id")
        .agg(
            pl.len().alias("n"),
            (~failed).sum().alias("settled"),
            pl.col("partition").filter(~failed).n_unique().alias("parts"),
            pl.col("partition").n_unique().alias("all_parts"),
        )
        .collect()
    )
    columns = ("stage_id", "n", "settled", "parts", "all_parts")
    return {
        int(s): (int(n), int(k), int(p), int(a))
        for s, n, k, p, a in counts.select(columns).iter_rows()
    }


def run_facts(app: AppContext, tasks: Any = None, call_sites: Any = ()) -> RunFacts:
    """The facts of a run from its context and task facts (see the module).

    ``call_sites`` are the stages' call sites (what tells a shell's).

    >>> f = run_facts(AppContext(master="local[2]", spark_version="2.4.0",
    ...     app_name="PySparkShell"))
    >>> f.kind, f.platform, str(f.version), f.integrity.whole
    ('interactive', 'local', '2.4.0', True)
    """
    counts = _stage_counts(tasks)
    gpu = _gpu_app(app)
    job_sql = {j.job_id: j.sql_id for j in app.jobs}
    infos = {s.stage_id: s for s in app.stages}
    failed = {f.stage_id for f in app.failures if f.kind == "StageFailed"}
    descriptions = {j.job_id: j.description for j in app.jobs}
    stages: dict[int, StageFacts] = {}
    for sid in sorted(set(infos) | set(counts)):
        info = infos.get(sid)
        n, settled, parts, all_parts = counts.get(sid, (0, 0, 0, 0))
        job = info.job_id if info is not None else None
        completed = (
            info is not None and info.completed_ns is not None and sid not in failed
        )
        stages[sid] = StageFacts(
            sid,
            info.declared_tasks if info is not None else None,
            n,
            settled,
            parts,
            stage_engine(info, gpu),
            stage_reads(info),
            info.name if info is not None else None,
            info.rdds if info is not None else (),
            job,
            info.attempts if info is not None else 1,
            job_sql.get(job) if job is not None else None,
            all_parts,
            completed,
            stage_purpose(info, descriptions.get(job) if job is not None else None),
        )
    sites = [*call_sites, *(s.name for s in app.stages)]
    signs = interactive_signs(app, sites)
    text = " ".join(
        [*(s.name or "" for s in app.stages), *(j.call_site or "" for j in app.jobs)]
    )
    return RunFacts(
        app=app,
        integrity=_integrity(app, stages),
        kind=_kind(app, signs),
        interactive_signs=tuple(signs),
        dstream_interval_ns=_dstream_interval(app),
        iterative_ml=len(_ML_SITES.findall(text)) >= 3,
        graphx=bool(_GRAPHX.search(text))
        or any(_GRAPHX.search(n) for s in app.stages for n in s.rdds),
        version=Version.parse(app.spark_version),
        platform=cluster_manager(app),
        dynamic_allocation=_dynamic_allocation(app),
        stages=stages,
    )
