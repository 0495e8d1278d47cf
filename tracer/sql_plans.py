"""Stable operator labels: a stage's call site plus its SQL plan node (DESIGN §8).

A Spark stage id names one run of an operator; the same code run again in a
later job gets a new stage. The label this module builds names what the user
wrote instead, so that every run of it carries the same label:

``<action> at <file>:<line> · <plan node>[ → <exchange it writes>]``, e.g.
``collect at workloads.py:76 · ShuffledHashJoin [key], [key], Inner,
BuildRight → Exchange hashpartitioning(key, 4)``.

How a stage is mapped to the plan nodes it runs: a job's properties carry
``spark.sql.execution.id``; the execution's plan (``sparkPlanInfo`` of
``SQLExecutionStart``, replaced by each ``SQLAdaptiveExecutionUpdate``) is
cut at its exchanges into fragments, one per stage; each of the stage's RDDs
names the plan node that created it (``RDD Info`` ``Scope``, e.g.
``WholeStageCodegen (2)``, ``Exchange``), and the stage runs the fragment
whose node names it shares most.

Assumptions
-----------
* The label is fixed when the stage is submitted, from the plan known then
  (AQE posts its plan update before it submits the new stages), so a live
  trace, whose rows are written as they settle, and an import of the whole
  log give the same label. Stage accumulables (``StageCompleted``) would map
  stages to nodes too, but arrive after the stage's tasks have settled.
* Expression ids (``key#12L``), plan ids (``[id=#5]``), object hashes,
  UUIDs and streaming state versions are stripped: they change from one run
  of the same code to the next.
* A call site in Spark's or the JDK's code (``NativeMethodAccessorImpl.java:0``
  from PySpark's py4j calls, ``FutureTask.java:266`` of AQE's map stages,
  line 0) says nothing about user code: the execution's description (the
  action's call site) replaces it, else the plan node stands alone.
* A stage outside SQL (plain RDD jobs) is labelled by its call site.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SQL_END",
    "SQL_EVENTS",
    "SQL_PLAN_UPDATE",
    "SQL_START",
    "SqlPlans",
    "call_site",
    "clean_plan_text",
    "fragments",
    "operator_label",
    "scope_names",
    "stage_fragment",
    "telling_node",
]

_SQL_UI = "org.apache.spark.sql.execution.ui."
#: The SQL events read: an execution's plan, and AQE's replacement plans.
SQL_START = _SQL_UI + "SparkListenerSQLExecutionStart"
SQL_PLAN_UPDATE = _SQL_UI + "SparkListenerSQLAdaptiveExecutionUpdate"
SQL_END = _SQL_UI + "SparkListenerSQLExecutionEnd"
SQL_EVENTS = frozenset({SQL_START, SQL_PLAN_UPDATE, SQL_END})
#: Executions whose plans are kept (the newest), for a long streaming run.
MAX_PLANS = 1000
#: SQL executions whose times and run-time settings a context keeps.
MAX_EXECUTIONS = 20_000
#: Longest plan-node text in a label (characters, before the ``…``).
MAX_NODE_CHARS = 80
#: Separates the call site from the plan node in a label.
SEPARATOR = " · "
WRITES = " → "

_IDS = [
    re.compile(r",?\s*\[(?:plan_)?id=#?\d+\]"),  # Exchange [id=#15], [plan_id=42]
    re.compile(r"#\d+L?"),  # expression ids: key#12L
    re.compile(r",?\s*state info \[[^\]]*\]"),  # checkpoint path, runId, version
    re.compile(r"@[0-9a-f]{4,}\b"),  # object hashes: MicroBatchWrite@27fafcca
    re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    re.compile(r", ENSURE_REQUIREMENTS"),
]
_SPACES = re.compile(r"\s+")
_SITE = re.compile(r"^(?P<action>.*?) at (?P<file>[^\s:]+):(?P<line>\d+)$")
#: Files of Spark's and the JDK's own frames in a call site.
_FOREIGN_FILES = frozenset(
    {
        "NativeMethodAccessorImpl.java",
        "DirectMethodHandleAccessor.java",
        "FutureTask.java",
        "CompletableFuture.java",
        "ThreadPoolExecutor.java",
        "Thread.java",
        "ForkJoinTask.java",
        "<unknown>",
    }
)
#: Plan nodes that only carry rows between the nodes that do the work.
_PLUMBING = re.compile(
    r"^(WholeStageCodegen|InputAdapter|AdaptiveSparkPlan|\w*QueryStage|AQEShuffleRead"
    r"|CustomShuffleReader|ColumnarToRow|RowToColumnar|Gpu(ColumnarToRow|RowToColumnar"
    r"|CoalesceBatches|ShuffleCoalesce)|Project|GpuProject|Filter|GpuFilter"
    r"|DeserializeToObject|SerializeFromObject|mapPartitionsInternal)\b"
)
#: How telling a node is (lower: more), by words in its name.
_RANKS = (
    ("join", "cartesian"),
    ("aggregate",),
    ("window", "statestore", "flatmapgroups", "evalpython", "inpandas", "inarrow"),
    ("generate", "expand", "sort", "topn", "takeordered", "limit", "union"),
    ("scan", "range", "write", "insert", "execute", "command"),
)


def clean_plan_text(text: str) -> str:
    """A plan node's text without what changes between runs of the same code.

    >>> clean_plan_text("Exchange hashpartitioning(key#12L, 4), "
    ...     "ENSURE_REQUIREMENTS, [plan_id=42]")
    'Exchange hashpartitioning(key, 4)'
    >>> clean_plan_text("HashAggregate(keys=[k#3], functions=[count(1)])")
    'HashAggregate(keys=[k], functions=[count(1)])'
    """
    for pattern in _IDS:
        text = pattern.sub("", text)
    return _SPACES.sub(" ", text).strip()


def _short(text: str) -> str:
    return text if len(text) <= MAX_NODE_CHARS else text[: MAX_NODE_CHARS - 1] + "…"


def call_site(name: str | None) -> str | None:
    """The user-code call site of a stage name or execution description.

    ``<action> at <file>:<line>`` with the file's folders dropped; ``None``
    when the name is no call site or points into Spark's or the JDK's code.

    >>> call_site("collect at /home/me/jobs/etl.py:76")
    'collect at etl.py:76'
    >>> call_site("count at NativeMethodAccessorImpl.java:0") is None
    True
    >>> call_site("$anonfun$withThreadLocalCaptured$1 at FutureTask.java:266") is None
    True
    """
    if not name:
        return None
    found = _SITE.match(name.strip())
    if found is None:
        return None
    file = found["file"].rsplit("/", 1)[-1]
    action, line = found["action"], found["line"]
    if file in _FOREIGN_FILES or line == "0" or "$anonfun$" in action:
        return None
    return f"{action} at {file}:{line}"


def is_exchange(name: str) -> bool:
    """Whether a plan node (or RDD scope) of this name ends a stage.

    >>> is_exchange("Exchange"), is_exchange("GpuColumnarExchange")
    (True, True)
    >>> is_exchange("ReusedExchange")
    False
    """
    return name.endswith("Exchange") and not name.startswith("Reused")


@dataclass
class Fragment:
    """The plan nodes one stage runs: from a root (or the exchange the stage
    writes, ``writes``) down to the exchanges it reads."""

    writes: dict[str, Any] | None
    nodes: list[dict[str, Any]] = field(default_factory=list)

    def names(self) -> set[str]:
        return {_name(str(n.get("nodeName", ""))) for n in self.nodes}


def _name(name: str) -> str:
    # RDD scopes of scans drop the table ("GpuScan parquet "): compare the
    # first two words of a scan.
    name = name.strip()
    return " ".join(name.split()[:2]) if "Scan" in name.split(" ", 1)[0] else name


def _children(node: dict[str, Any]) -> list[dict[str, Any]]:
    kids = node.get("children")
    return [k for k in kids if isinstance(k, dict)] if isinstance(kids, list) else []


def fragments(plan: dict[str, Any]) -> list[Fragment]:
    """A ``sparkPlanInfo`` tree cut at its exchanges, the root's fragment first.

    >>> plan = {"nodeName": "HashAggregate", "children": [{"nodeName":
    ...     "Exchange", "children": [{"nodeName": "Range", "children": []}]}]}
    >>> [(f.writes is not None, sorted(f.names())) for f in fragments(plan)]
    [(False, ['HashAggregate']), (True, ['Range'])]
    """
    out = [Fragment(None)]
    stack: list[tuple[dict[str, Any], Fragment]] = [(plan, out[0])]
    while stack:
        node, fragment = stack.pop()
        fragment.nodes.append(node)
        for child in reversed(_children(node)):
            name = str(child.get("nodeName", ""))
            if name.startswith("Reused"):
                continue  # run by the stage of the exchange it reuses
            if is_exchange(name):
                below = Fragment(child)
                out.append(below)
                stack.extend((g, below) for g in reversed(_children(child)))
            else:
                stack.append((child, fragment))
    return out


def scope_names(rdd_infos: list[Any]) -> list[str]:
    """The plan node names of a stage's RDDs (``RDD Info`` ``Scope``), by RDD id.

    >>> scope_names([{"RDD ID": 2, "Scope": '{"id":"4","name":"Exchange"}'},
    ...     {"RDD ID": 1, "Scope": '{"id":"5","name":"WholeStageCodegen (1)"}'}])
    ['WholeStageCodegen (1)', 'Exchange']
    """
    named: list[tuple[int, str]] = []
    for info in rdd_infos:
        if not isinstance(info, dict) or not isinstance(info.get("Scope"), str):
            continue
        try:
            scope = json.loads(info["Scope"])
        except ValueError:
            continue
        rdd = info.get("RDD ID")
        if isinstance(scope, dict) and isinstance(scope.get("name"), str):
            named.append((rdd if isinstance(rdd, int) else 0, scope["name"]))
    return [name for _, name in sorted(named)]


def stage_fragment(plan: dict[str, Any], scopes: list[str]) -> Fragment | None:
    """The fragment of ``plan`` a stage with RDD scopes ``scopes`` runs.

    The one sharing most node names with the stage (Jaccard), preferring one
    that writes an exchange exactly when the stage's last RDD does; ``None``
    when no fragment shares a name.

    >>> plan = {"nodeName": "HashAggregate", "children": [{"nodeName":
    ...     "Exchange", "children": [{"nodeName": "Range", "children": []}]}]}
    >>> sorted(stage_fragment(plan, ["Range", "Exchange"]).names())
    ['Range']
    """
    body = {_name(s) for s in scopes if not is_exchange(s)}
    writes = bool(scopes) and is_exchange(scopes[-1])
    best, best_score = None, 0.0
    for fragment in fragments(plan):
        names = {n for n in fragment.names() if not is_exchange(n)}
        shared = len(body & names)
        if not shared:
            continue
        written = fragment.writes
        # A broadcast is collected by a job on its child's RDDs: Spark may
        # or may not name the exchange among the stage's scopes.
        broadcast = written is not None and "Broadcast" in str(written.get("nodeName"))
        agrees = broadcast or (written is not None) == writes
        score = shared / len(body | names) + agrees
        if score > best_score:
            best, best_score = fragment, score
    return best


def _rank(name: str) -> int:
    if _PLUMBING.match(name):
        return len(_RANKS) + 1
    lower = name.lower()
    for rank, words in enumerate(_RANKS):
        if any(word in lower for word in words):
            return rank
    return len(_RANKS)


def node_text(node: dict[str, Any]) -> str:
    """A node's label text: its cleaned ``simpleString``, what a scan reads.

    >>> node_text({"nodeName": "Scan parquet db.t", "simpleString":
    ...     "FileScan parquet db.t[a#1] Location: InMemoryFileIndex[...]"})
    'FileScan parquet db.t'
    """
    name = clean_plan_text(str(node.get("nodeName", "")))
    text = clean_plan_text(str(node.get("simpleString") or name))
    if "scan" in name.lower():  # what it reads, not its files and filters
        return _short(" ".join(text.split("[", 1)[0].split()[:3]))
    if is_exchange(name) and "Broadcast" in name:
        return name  # not its key expressions
    return _short(text)


def telling_node(fragment: Fragment) -> dict[str, Any] | None:
    """The node that says most about a fragment's work: a join before an
    aggregate, before a window, a sort, a scan; the topmost on a tie.

    >>> f = Fragment(None, [{"nodeName": "Project"}, {"nodeName":
    ...     "HashAggregate"}, {"nodeName": "SortMergeJoin"}])
    >>> telling_node(f)["nodeName"]
    'SortMergeJoin'
    """
    if not fragment.nodes:
        return None
    return min(
        enumerate(fragment.nodes),
        key=lambda pair: (_rank(str(pair[1].get("nodeName", ""))), pair[0]),
    )[1]


def operator_label(site: str | None, fragment: Fragment | None) -> str | None:
    """``<call site> · <node>[ → <exchange>]``, either part alone if the
    other is unknown, ``None`` if both are.

    >>> f = Fragment({"nodeName": "Exchange", "simpleString":
    ...     "Exchange hashpartitioning(k#3, 4), [id=#9]"}, [{"nodeName":
    ...     "HashAggregate", "simpleString": "HashAggregate(keys=[k#3])"}])
    >>> operator_label("collect at a.py:7", f)
    'collect at a.py:7 · HashAggregate(keys=[k]) → Exchange hashpartitioning(k, 4)'
    >>> operator_label("collect at a.py:7", None)
    'collect at a.py:7'
    """
    node = telling_node(fragment) if fragment is not None else None
    plan = None
    if node is not None and fragment is not None:
        plan = node_text(node)
        if fragment.writes is not None:
            plan += WRITES + node_text(fragment.writes)
    parts = [part for part in (site, plan) if part]
    return SEPARATOR.join(parts) if parts else None


@dataclass
class SqlPlans:
    """The SQL executions of an application: each one's newest plan and
    description, and which execution each job ran for.

    >>> plans = SqlPlans()
    >>> plans.execution_start({"executionId": 1, "description": "collect at a.py:7",
    ...     "sparkPlanInfo": {"nodeName": "HashAggregate", "simpleString":
    ...     "HashAggregate(keys=[k#1])", "children": []}})
    >>> plans.job_start(4, {"spark.sql.execution.id": "1"})
    >>> plans.stage_label(4, "collect at a.py:7",
    ...     [{"RDD ID": 0, "Scope": '{"name": "HashAggregate"}'}])
    'collect at a.py:7 · HashAggregate(keys=[k])'
    """

    plans: dict[int, dict[str, Any]] = field(default_factory=dict)
    descriptions: dict[int, str] = field(default_factory=dict)
    job_execution: dict[int, int] = field(default_factory=dict)
    #: Each execution's start and end (ms) and the settings it ran with
    #: that the session changed (``modifiedConfigs``); the newest
    #: :data:`MAX_EXECUTIONS` executions.
    starts: dict[int, int | None] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)
    modified: dict[int, dict[str, str]] = field(default_factory=dict)

    def execution_start(self, event: dict[str, Any]) -> None:
        """Take a ``SQLExecutionStart`` (or an AQE plan update) event."""
        execution = event.get("executionId")
        plan = event.get("sparkPlanInfo")
        if not isinstance(execution, int) or isinstance(execution, bool):
            return
        if event.get("Event") == SQL_START:
            self._started(execution, event)
        if isinstance(plan, dict):
            self.plans.pop(execution, None)  # the newest plan goes last
            self.plans[execution] = plan
        description = event.get("description")
        if isinstance(description, str):
            self.descriptions.setdefault(execution, description)
        # A long streaming run starts an execution per micro-batch: keep the
        # newest ones (their stages follow their start within seconds).
        while len(self.plans) > MAX_PLANS:
            oldest = next(iter(self.plans))
            del self.plans[oldest]
            self.descriptions.pop(oldest, None)

    def _started(self, execution: int, event: dict[str, Any]) -> None:
        time = event.get("time")
        self.starts[execution] = time if isinstance(time, int) else None
        configs = event.get("modifiedConfigs")
        if isinstance(configs, dict) and configs:
            self.modified[execution] = {
                str(k): str(v) for k, v in configs.items() if isinstance(k, str)
            }
        while len(self.starts) > MAX_EXECUTIONS:
            oldest = next(iter(self.starts))
            del self.starts[oldest]
            self.modified.pop(oldest, None)
            self.ends.pop(oldest, None)

    def execution_end(self, event: dict[str, Any]) -> None:
        """Take a ``SQLExecutionEnd`` event: when the execution ended."""
        execution, time = event.get("executionId"), event.get("time")
        if not isinstance(execution, int) or not isinstance(time, int):
            return
        if execution in self.starts:
            self.ends[execution] = time

    def job_start(self, job: int, properties: dict[str, Any] | None) -> None:
        """Note the execution a job runs for (its ``spark.sql.execution.id``)."""
        value = str((properties or {}).get("spark.sql.execution.id"))
        if value.isdigit():  # None or not a number: no SQL execution
            self.job_execution[job] = int(value)

    def stage_label(
        self, job: int | None, stage_name: str | None, rdd_infos: list[Any]
    ) -> str | None:
        """The operator label of a stage of ``job`` (see the module docstring)."""
        execution = self.job_execution.get(job) if job is not None else None
        plan = self.plans.get(execution) if execution is not None else None
        site = call_site(stage_name)
        if plan is None:
            return site or stage_name
        if site is None and execution is not None:
            site = call_site(self.descriptions.get(execution))
        fragment = stage_fragment(plan, scope_names(rdd_infos))
        return operator_label(site, fragment) or stage_name
