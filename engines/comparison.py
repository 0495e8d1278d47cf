"""Two runs of one application compared: did the fix work? (DESIGN §11)

:func:`compare` takes two saved :class:`~sparktrail.engines.profiler.Profile`
records, BEFORE and AFTER, and returns a :class:`Comparison`: the wall-time
delta decomposed on the critical path by operator and by activity, the
settings that differ, and each shown hint of BEFORE checked in AFTER
(applied or not; if applied, its predicted saving against the measured
one), with the regressions. :meth:`Comparison.save` / :meth:`Comparison.load`
own its folder (a Parquet file per frame and :data:`COMPARISON_FILE`), and
:meth:`Comparison.to_json` is the ``sparktrail compare --json`` contract.

Definitions
-----------
* **Wall time** of a run is the span its windows cover
  (``windows.window_end_ns.max() - windows.window_start_ns.min()``), the
  clock the critical seconds are counted on, so a run's critical time never
  exceeds it; a profile without windows falls back on its context's start
  and end (:func:`wall_ns`). Windows round the run up to whole windows:
  ``--window`` sets how finely two runs' wall times are told apart.
* **Critical seconds** of an operator are its ``cp_ns`` in the whole-run
  operator frame (CP × window length, summed); the operators' critical
  seconds add up to the run's critical time (a mismatch over 1 ms is a
  warning). The operator rows' deltas plus the :data:`UNATTRIBUTED` row
  (the ``(no stage: driver, idle)`` critical time, plus the wall time no
  window's critical path covers) sum exactly to the wall-time delta; the
  activity rows the same, with :data:`NO_PATH` as their rest.
* Operators are matched by their label (DESIGN §8: stage ids differ from
  run to run) with the partition count of a closing exchange left out
  (:func:`operator_key`: ``→ Exchange hashpartitioning(k, 200)`` and
  ``(k, 8)`` are one operator, as a fix of the partition count must not
  make a new one). Operators left unmatched on both sides are then paired
  by :func:`loose_operator_key` (the call site without its line, the plan
  without column lists and without its closing exchange) where that key
  names one operator on each side: a fix that salts a join's keys
  (``[key]`` → ``[key, salt]``, now ending in an exchange) or moves the
  call a few lines keeps its operator. An operator of one run only is
  compared with 0.
* A hint is **applied** when AFTER shows its change (:func:`applied_by`):
  a ``spark.key=value`` its action recommends is in force, the operator's
  partition count changed (``parallelism``, ``over_partitioned``,
  ``scheduling_bound``), speculation is on (``straggler_task``), the
  ``driver`` activity's critical time fell (``driver_bound``), the records
  of the operator's hottest partition or its longest task over its median
  fell (``hotspot``, ``skew_unsplittable``, ``moving_hotspot``; the
  latter also ``straggler_task``, whose fix may be in the slow partition's
  own work). Its **measured saving** is the
  matched operator's critical seconds before − after (the ``driver``
  activity's for ``driver_bound``; the wall-time delta for a hint that
  names no operator), judged by :func:`verdict_of`.
* A **regression** is an operator whose critical time grew by more than
  max(10%, 1 s): its cause is ``regression`` when its input (records, else
  bytes) grew by less than 10%, else ``input volume``; and every shown hint
  of AFTER whose kind and operator BEFORE did not have.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from sparktrail.errors import InputError
from sparktrail.pag.context import AppContext, local_cores
from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS
from sparktrail.summaries.frames import CP_NS, CP_TOTAL, HAS_PATHS
from sparktrail.summaries.run_shares import windows_extent
from sparktrail.units import duration, duration_s

from .profiler import Profile

__all__ = [
    "COMPARISON_FILE",
    "COMPARISON_FORMAT",
    "NO_PATH",
    "UNATTRIBUTED",
    "Comparison",
    "applied_by",
    "compare",
    "operator_key",
    "settings_diff",
    "unrelated",
    "verdict_of",
    "wall_ns",
]

#: The JSON file of a saved comparison (its scalars, settings and warnings).
COMPARISON_FILE = "comparison.json"
#: The version of a saved comparison's layout.
COMPARISON_FORMAT = 1
#: The operator row of what the critical path spent outside any stage
#: (driver code, idle slots), plus wall time no window's path covers.
UNATTRIBUTED = "(unattributed: driver, idle, no path)"
#: The activity row of wall time no window's critical path covers.
NO_PATH = "(no critical path)"
#: Pseudo-setting of the executors and their cores (not a Spark property).
EXECUTORS_KEY = "(executors × cores)"

NS = 1e9
#: Regression: critical time grew by more than this share and ...
REGRESSION_SHARE = 0.10
#: ... by more than this many seconds; input growth under this is not volume.
REGRESSION_S = 1.0
VOLUME_SHARE = 0.10
#: A measured saving within max(this share of the prediction, NOISE_S) of 0
#: is "no effect"; at least EFFECTIVE of the prediction is "effective".
NOISE_SHARE = 0.05
NOISE_S = 0.2
EFFECTIVE = 0.5
#: A hotspot's skew (longest task / median) counts as fallen below this
#: share of before.
SKEW_FELL = 0.9

#: Verdicts of a checked hint.
EFFECTIVE_V, PARTLY_V, NONE_V, WORSE_V, NOT_APPLIED_V = (
    "effective",
    "partly effective",
    "no effect",
    "made it worse",
    "not applied",
)
PARTITION_KINDS = frozenset({"parallelism", "over_partitioned", "scheduling_bound"})
SKEW_KINDS = frozenset({"hotspot", "skew_unsplittable", "moving_hotspot"})

#: Spark properties that differ between any two runs (ids, times, ports,
#: hosts, where logs go): left out of the settings diff.
_ALWAYS_DIFFERENT = re.compile(
    r"^spark\.app\.(id|name|startTime|submitTime|attempt\.id)$"
    r"|\.port$|\.host$|\.hostname$|Address$|^spark\.eventLog\.dir$"
    r"|^spark\.repl\.class\.|^spark\.sql\.execution\.id$|^spark\.app\.initial\."
    r"|^spark\.fileserver\.uri$|^spark\.tachyonStore\.folderName$"
)
#: ``spark.key=value`` in a hint's action (bench/public_hints.py's rule).
_SETTING = re.compile(r"\b(spark\.[A-Za-z0-9_.]+)=([^\s,;)]+)")
_TRUE = {"true", "1", "yes", "on"}
#: The partition count of the exchange that ends an operator's label.
_EXCHANGE_COUNT = re.compile(
    r"(→ Exchange (?:hash|range)partitioning\(.*), \d+\)$"
    r"|(→ Exchange RoundRobinPartitioning\()\d+\)$"
)
#: What :func:`loose_operator_key` leaves out: a call site's line, a plan
#: node's bracketed column lists, and the exchange an operator ends in.
_CALL_LINE = re.compile(r"^(\S+ at \S+?):\d+")
_COLUMN_LISTS = re.compile(r" ?\[[^\]]*\]")
_CLOSING_EXCHANGE = re.compile(r" → Exchange .*$")

_OPERATOR_SCHEMA: dict[str, pl.DataType] = {
    "operator": pl.String(),
    "before_s": pl.Float64(),
    "after_s": pl.Float64(),
    "delta_s": pl.Float64(),
    "records_before": pl.Int64(),
    "records_after": pl.Int64(),
    "bytes_before": pl.Int64(),
    "bytes_after": pl.Int64(),
    "tasks_before": pl.Int64(),
    "tasks_after": pl.Int64(),
    "matched": pl.Boolean(),
}
_ACTIVITY_SCHEMA: dict[str, pl.DataType] = {
    "activity": pl.String(),
    "before_s": pl.Float64(),
    "after_s": pl.Float64(),
    "delta_s": pl.Float64(),
}
_SETTINGS_SCHEMA: dict[str, pl.DataType] = {
    "key": pl.String(),
    "before": pl.String(),
    "after": pl.String(),
}
_HINT_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String(),
    "severity": pl.String(),
    "stage_id": pl.Int64(),
    "operator": pl.String(),
    "applied": pl.Boolean(),
    "how": pl.String(),
    "predicted_saving_s": pl.Float64(),
    "measured_saving_s": pl.Float64(),
    "wall_saving_s": pl.Float64(),
    "verdict": pl.String(),
    "action": pl.String(),
}
_REGRESSION_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String(),
    "operator": pl.String(),
    "before_s": pl.Float64(),
    "after_s": pl.Float64(),
    "delta_s": pl.Float64(),
    "input_growth": pl.Float64(),
    "cause": pl.String(),
    "detail": pl.String(),
}
#: Frames of a :class:`Comparison`, saved as ``<name>.parquet``.
FRAMES: dict[str, dict[str, pl.DataType]] = {
    "operators": _OPERATOR_SCHEMA,
    "activities": _ACTIVITY_SCHEMA,
    "settings": _SETTINGS_SCHEMA,
    "hints": _HINT_SCHEMA,
    "regressions": _REGRESSION_SCHEMA,
}


@dataclass(frozen=True)
class Comparison:
    """BEFORE against AFTER (see the module docstring for each number).

    Attributes
    ----------
    before_name, after_name
        What was profiled.
    wall_before_ns, wall_after_ns
        Each run's wall time (:func:`wall_ns`).
    operators
        One row per operator label of either run (and :data:`UNATTRIBUTED`
        last): critical seconds before, after and their delta, records,
        bytes and tasks of each run, whether both ran it. The deltas sum
        to :attr:`wall_delta_s`.
    activities
        The same by activity (:data:`NO_PATH` last).
    settings
        Spark properties that differ (``None``: unset in that run), and
        :data:`EXECUTORS_KEY` when the executors or their cores differ.
    hints
        BEFORE's shown hints, each checked in AFTER.
    regressions
        Operators that grew (cause ``regression`` or ``input volume``) and
        hints new in AFTER (kind ``new hint``).
    matched_operators
        Operator labels both runs ran.
    warnings
        What makes the comparison doubtful (two applications, few matches).
    """

    before_name: str
    after_name: str
    wall_before_ns: int
    wall_after_ns: int
    operators: pl.DataFrame
    activities: pl.DataFrame
    settings: pl.DataFrame
    hints: pl.DataFrame
    regressions: pl.DataFrame
    matched_operators: int
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def wall_delta_s(self) -> float:
        """AFTER's wall time − BEFORE's, seconds (negative: faster)."""
        return (self.wall_after_ns - self.wall_before_ns) / NS

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every frame by name (:data:`FRAMES`)."""
        return {name: getattr(self, name) for name in FRAMES}

    def to_json(self) -> dict[str, Any]:
        """The ``sparktrail compare --json`` contract (README, "Comparing runs")."""
        operators = self.operators.select(
            "operator",
            "before_s",
            "after_s",
            "delta_s",
            "records_before",
            "records_after",
        )
        hints = self.hints.select(
            "kind",
            "operator",
            "applied",
            "predicted_saving_s",
            "measured_saving_s",
            "verdict",
        )
        return {
            "wall_delta_s": self.wall_delta_s,
            "operators": operators.to_dicts(),
            "activities": self.activities.to_dicts(),
            "settings_changed": {
                row["key"]: [row["before"], row["after"]]
                for row in self.settings.iter_rows(named=True)
            },
            "hints": hints.to_dicts(),
            "regressions": self.regressions.to_dicts(),
            "matched_operators": self.matched_operators,
            "warnings": list(self.warnings),
        }

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``folder/<frame>.parquet`` and :data:`COMPARISON_FILE`."""
        root = Path(folder)
        root.mkdir(parents=True, exist_ok=True)
        for name, frame in self.frames().items():
            frame.write_parquet(root / f"{name}.parquet")
        meta = {
            "format": COMPARISON_FORMAT,
            "before_name": self.before_name,
            "after_name": self.after_name,
            "wall_before_ns": self.wall_before_ns,
            "wall_after_ns": self.wall_after_ns,
            "matched_operators": self.matched_operators,
            "warnings": list(self.warnings),
        }
        (root / COMPARISON_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        return root

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> Comparison:
        """The comparison :meth:`save` wrote in ``folder``.

        Raises
        ------
        InputError
            If a file is missing or not what :meth:`save` writes.
        """
        root = Path(folder)
        path = root / COMPARISON_FILE
        try:
            meta = json.loads(path.read_text())
        except FileNotFoundError as err:
            raise InputError(f"{path}: missing; not a sparktrail comparison") from err
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: not a sparktrail comparison ({err})") from err
        if not isinstance(meta, dict) or meta.get("format") != COMPARISON_FORMAT:
            raise InputError(f"{path}: not a comparison of format {COMPARISON_FORMAT}")
        frames = {}
        for name, schema in FRAMES.items():
            frame_path = root / f"{name}.parquet"
            try:
                frame = pl.read_parquet(frame_path)
            except (FileNotFoundError, pl.exceptions.PolarsError, OSError) as err:
                raise InputError(
                    f"{frame_path}: not a comparison frame ({err})"
                ) from err
            if dict(frame.schema) != schema:
                raise InputError(f"{frame_path}: columns are not a comparison's")
            frames[name] = frame
        return cls(
            before_name=str(meta["before_name"]),
            after_name=str(meta["after_name"]),
            wall_before_ns=int(meta["wall_before_ns"]),
            wall_after_ns=int(meta["wall_after_ns"]),
            matched_operators=int(meta["matched_operators"]),
            warnings=tuple(str(w) for w in meta.get("warnings") or ()),
            **frames,
        )


def operator_key(label: str) -> str:
    """The label two runs' operators are matched by: the label, with the
    partition count of the exchange it ends in as ``n``.

    >>> operator_key("collect at a.py:3 · Sort → Exchange hashpartitioning(k, 200)")
    'collect at a.py:3 · Sort → Exchange hashpartitioning(k, n)'
    >>> operator_key("x → Exchange RoundRobinPartitioning(8)")
    'x → Exchange RoundRobinPartitioning(n)'
    """
    return _EXCHANGE_COUNT.sub(
        lambda m: f"{m.group(1)}, n)" if m.group(1) else f"{m.group(2)}n)", label
    )


def loose_operator_key(label: str) -> str:
    """The key of the second matching pass: :func:`operator_key` without
    the call site's line, the plan's column lists and its closing exchange.

    >>> loose_operator_key("collect at a.py:7 · ShuffledHashJoin [key, salt], "
    ...     "[key, salt], Inner, BuildRight → Exchange hashpartitioning(key, 8)")
    'collect at a.py · ShuffledHashJoin,, Inner, BuildRight'
    """
    label = _CALL_LINE.sub(r"\1", operator_key(label))
    return _CLOSING_EXCHANGE.sub("", _COLUMN_LISTS.sub("", label))


def loose_matches(before: Iterable[str], after: Iterable[str]) -> dict[str, str]:
    """AFTER's operator keys that only :func:`loose_operator_key` matches,
    each to BEFORE's key: among the keys of one side only, those whose
    loose key is one operator's on each side.

    >>> loose_matches(["run at a.py:3 · Join [k]", "run at a.py:9 · Scan"],
    ...               ["run at a.py:5 · Join [k, salt]", "run at a.py:9 · Scan"])
    {'run at a.py:5 · Join [k, salt]': 'run at a.py:3 · Join [k]'}
    """
    b, a = set(before), set(after)

    def unique(keys: set[str]) -> dict[str, str]:
        loose: dict[str, list[str]] = {}
        for key in sorted(keys):
            loose.setdefault(loose_operator_key(key), []).append(key)
        return {k: v[0] for k, v in loose.items() if len(v) == 1}

    only_b, only_a = unique(b - a), unique(a - b)
    return {only_a[k]: only_b[k] for k in only_a.keys() & only_b.keys()}


def _keyed(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its ``operator`` labels as :func:`operator_key`."""
    return frame.with_columns(
        pl.col("operator").map_elements(operator_key, return_dtype=pl.String)
    )


def _operator_keys(profile: Profile) -> set[str]:
    op = profile.summaries.operator["operator"].drop_nulls().unique().to_list()
    return {operator_key(str(label)) for label in op}


def _renamed(profile: Profile, renames: dict[str, str]) -> Profile:
    """``profile`` with the operator and stage labels whose key
    (:func:`operator_key`) ``renames`` pairs given BEFORE's key: the AFTER
    run as BEFORE names its operators (the others keep their labels, which
    every reader keys itself)."""
    if not renames:
        return profile
    s = profile.summaries

    def rename(frame: pl.DataFrame) -> pl.DataFrame:
        if frame.is_empty() or "operator" not in frame.columns:
            return frame
        labels = frame["operator"].drop_nulls().unique().to_list()
        to = {label: renames.get(operator_key(label)) for label in labels}
        return frame.with_columns(
            pl.col("operator").replace({k: v for k, v in to.items() if v})
        )

    summaries = replace(s, operator=rename(s.operator), stages=rename(s.stages))
    return replace(profile, summaries=summaries)


# -- wall and critical time ------------------------------------------------------


def wall_ns(profile: Profile) -> int:
    """A run's wall time: the span its windows cover, or, with no window,
    its context's end − start (0 when neither is known).

    >>> from sparktrail.engines.profiler import profile
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [25], "activity": ["processing"]})
    >>> wall_ns(profile(t, 10))
    30
    """
    extent = windows_extent(profile.summaries.windows)
    if extent is not None:
        return extent[1] - extent[0]
    ctx = profile.summaries.context
    if ctx.start_ns is not None and ctx.end_ns is not None:
        return max(0, ctx.end_ns - ctx.start_ns)
    return 0


def _windows_critical_ns(profile: Profile) -> float:
    """Critical ns by the windows frame: CP total × length of windows with paths."""
    windows = profile.summaries.windows.filter(pl.col(HAS_PATHS))
    if windows.is_empty():
        return 0.0
    length = pl.col(WINDOW_END_NS) - pl.col(WINDOW_START_NS)
    return float(windows.select((pl.col(CP_TOTAL) * length).sum()).item())


# -- settings --------------------------------------------------------------------


def _comparable(
    key: str, before: str | None, after: str | None, a: AppContext, b: AppContext
) -> bool:
    if _ALWAYS_DIFFERENT.search(key):
        return False
    # A value naming its own application (a proxy URI, a staging dir)
    return not (
        a.app_id
        and b.app_id
        and a.app_id != b.app_id
        and a.app_id in (before or "")
        and b.app_id in (after or "")
    )


def executors_text(ctx: AppContext) -> str | None:
    """``"N × C cores"`` (or ``"N executors, C cores"`` when they differ);
    ``local[N]``'s cores; ``None`` when nothing is known.

    >>> from sparktrail.pag.context import ExecutorLife
    >>> two = (ExecutorLife("1", 4), ExecutorLife("2", 4))
    >>> executors_text(AppContext(executors=two))
    '2 × 4 cores'
    >>> executors_text(AppContext(master="local[2]"))
    'local, 2 cores'
    """
    lives = [e for e in ctx.executors if e.executor_id != "driver"]
    if lives:
        cores = [e.cores for e in lives]
        if all(c is not None for c in cores) and len(set(cores)) == 1:
            return f"{len(lives)} × {cores[0]} cores"
        known = sum(c for c in cores if c)
        return f"{len(lives)} executors, {known} cores"
    if ctx.is_local:
        n = local_cores(ctx.master)
        driver = [
            e.cores for e in ctx.executors if e.executor_id == "driver" and e.cores
        ]
        n = n or (driver[0] if driver else None)
        return f"local, {n} cores" if n else "local"
    return None


def settings_diff(before: AppContext, after: AppContext) -> pl.DataFrame:
    """The Spark properties that differ between two runs (ids, ports, hosts,
    times and log directories left out), then :data:`EXECUTORS_KEY`.

    >>> a = AppContext(app_id="a", properties={"spark.sql.shuffle.partitions": "200",
    ...     "spark.driver.port": "1", "spark.x": "1"})
    >>> b = AppContext(app_id="b", properties={"spark.sql.shuffle.partitions": "8",
    ...     "spark.driver.port": "2", "spark.x": "1", "spark.speculation": "true"})
    >>> settings_diff(a, b).rows()
    [('spark.speculation', None, 'true'), ('spark.sql.shuffle.partitions', '200', '8')]
    """
    rows = []
    for key in sorted(set(before.properties) | set(after.properties)):
        old, new = before.properties.get(key), after.properties.get(key)
        if old != new and _comparable(key, old, new, before, after):
            rows.append((key, old, new))
    old_ex, new_ex = executors_text(before), executors_text(after)
    if old_ex != new_ex:
        rows.append((EXECUTORS_KEY, old_ex, new_ex))
    return pl.DataFrame(rows, schema=_SETTINGS_SCHEMA, orient="row")


# -- decomposition ---------------------------------------------------------------


def _operator_side(profile: Profile) -> pl.DataFrame:
    """Per operator label: critical seconds, records, bytes, tasks."""
    op = _keyed(profile.summaries.operator)
    return (
        op.filter(pl.col("operator").is_not_null())
        .group_by("operator")
        .agg(
            (pl.col(CP_NS).sum() / NS).alias("s"),
            pl.col("records").sum().alias("records"),
            pl.col("bytes").sum().alias("bytes"),
            pl.col("tasks").cast(pl.Int64).sum().alias("tasks"),
            pl.col("records").is_not_null().any().alias("has_records"),
            pl.col("bytes").is_not_null().any().alias("has_bytes"),
        )
        .with_columns(
            pl.when(pl.col("has_records")).then(pl.col("records")).alias("records"),
            pl.when(pl.col("has_bytes")).then(pl.col("bytes")).alias("bytes"),
        )
        .drop("has_records", "has_bytes")
    )


def _unstaged_s(profile: Profile) -> float:
    op = profile.summaries.operator
    return float(op.filter(pl.col("operator").is_null())[CP_NS].sum()) / NS


def _operators(before: Profile, after: Profile) -> pl.DataFrame:
    b, a = _operator_side(before), _operator_side(after)
    joined = b.join(a, on="operator", how="full", coalesce=True, suffix="_after")
    frame = joined.select(
        "operator",
        pl.col("s").fill_null(0.0).alias("before_s"),
        pl.col("s_after").fill_null(0.0).alias("after_s"),
        pl.col("records").alias("records_before"),
        pl.col("records_after"),
        pl.col("bytes").alias("bytes_before"),
        pl.col("bytes_after"),
        pl.col("tasks").alias("tasks_before"),
        pl.col("tasks_after"),
        (pl.col("s").is_not_null() & pl.col("s_after").is_not_null()).alias("matched"),
    ).with_columns((pl.col("after_s") - pl.col("before_s")).alias("delta_s"))
    frame = frame.sort(pl.col("delta_s").abs(), "operator", descending=[True, False])
    # The rest: critical time outside any stage, plus wall time outside every
    # path; chosen so that the rows sum exactly to the wall-time delta.
    wall_b, wall_a = wall_ns(before) / NS, wall_ns(after) / NS
    rest_b = wall_b - float(frame["before_s"].sum())
    rest_a = wall_a - float(frame["after_s"].sum())
    rest = pl.DataFrame(
        [
            {
                "operator": UNATTRIBUTED,
                "before_s": rest_b,
                "after_s": rest_a,
                "delta_s": (wall_a - wall_b) - float(frame["delta_s"].sum()),
                "matched": True,
            }
        ],
        schema={
            k: _OPERATOR_SCHEMA[k]
            for k in ("operator", "before_s", "after_s", "delta_s", "matched")
        },
    )
    return pl.concat([frame, rest], how="diagonal").select(
        [pl.col(c).cast(t) for c, t in _OPERATOR_SCHEMA.items()]
    )


def _activities(before: Profile, after: Profile) -> pl.DataFrame:
    def side(p: Profile) -> pl.DataFrame:
        return p.summaries.activity.group_by("activity").agg(
            (pl.col(CP_NS).sum() / NS).alias("s")
        )

    joined = side(before).join(
        side(after), on="activity", how="full", coalesce=True, suffix="_after"
    )
    frame = joined.select(
        "activity",
        pl.col("s").fill_null(0.0).alias("before_s"),
        pl.col("s_after").fill_null(0.0).alias("after_s"),
    ).with_columns((pl.col("after_s") - pl.col("before_s")).alias("delta_s"))
    frame = frame.sort(pl.col("delta_s").abs(), "activity", descending=[True, False])
    wall_b, wall_a = wall_ns(before) / NS, wall_ns(after) / NS
    rest = pl.DataFrame(
        [
            {
                "activity": NO_PATH,
                "before_s": wall_b - float(frame["before_s"].sum()),
                "after_s": wall_a - float(frame["after_s"].sum()),
                "delta_s": (wall_a - wall_b) - float(frame["delta_s"].sum()),
            }
        ],
        schema=_ACTIVITY_SCHEMA,
    )
    return pl.concat([frame.select(list(_ACTIVITY_SCHEMA)), rest])


# -- checked savings -------------------------------------------------------------


def _operator_of(
    profile: Profile, stage_id: int | None, evidence: dict[str, Any]
) -> str | None:
    """The operator label of a hint: its stage's, else its evidence's."""
    if stage_id is not None:
        stages = profile.summaries.stages
        if not stages.is_empty():
            found = stages.filter(pl.col("stage_id") == stage_id)["operator"]
            if len(found) and found[0] is not None:
                return operator_key(str(found[0]))
        op = profile.summaries.operator.filter(
            pl.col("stage_ids").list.contains(stage_id)
        )["operator"]
        if len(op) and op[0] is not None:
            return operator_key(str(op[0]))
    label = evidence.get("operator")
    return operator_key(label) if isinstance(label, str) else None


def _stage_rows(profile: Profile, operator: str | None) -> pl.DataFrame:
    stages = profile.summaries.stages
    if operator is None or stages.is_empty():
        return stages.clear()
    return _keyed(stages).filter(pl.col("operator") == operator)


def _median(values: Iterable[Any]) -> float | None:
    found = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return statistics.median(found) if found else None


def _same(value: str, now: str) -> bool:
    v, n = value.strip().lower(), now.strip().lower()
    if v == n:
        return True
    if v in _TRUE | {"false", "0", "no", "off"} and n in _TRUE | {
        "false",
        "0",
        "no",
        "off",
    }:
        return (v in _TRUE) == (n in _TRUE)
    return False


def _activity_s(profile: Profile, activity: str) -> float:
    frame = profile.summaries.activity
    return float(frame.filter(pl.col("activity") == activity)[CP_NS].sum()) / NS


def applied_by(
    hint: dict[str, Any], operator: str | None, before: Profile, after: Profile
) -> str | None:
    """How AFTER shows that ``hint`` (a row of BEFORE's hints) was applied,
    or ``None`` when it does not (see the module docstring).

    >>> from sparktrail.engines.profiler import profile
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
    >>> p = profile(t, 4)
    >>> hint = {"kind": "gc_bound", "action": "set spark.executor.memory=8g"}
    >>> applied_by(hint, None, p, p) is None
    True
    """
    kind = str(hint.get("kind") or "")
    action = str(hint.get("action") or "")
    ctx_b, ctx_a = before.summaries.context, after.summaries.context
    for key, value in _SETTING.findall(action):
        now, was = ctx_a.setting(key), ctx_b.setting(key)
        if (
            now is not None
            and _same(value, now)
            and not (was is not None and _same(value, was))
        ):
            return f"{key}={now}"
    if kind in PARTITION_KINDS:
        stage_id = hint.get("stage_id")
        old_stage = before.summaries.stages.filter(pl.col("stage_id") == stage_id)
        old = (
            _median(old_stage["tasks"])
            if len(old_stage)
            else _median(_stage_rows(before, operator)["tasks"])
        )
        new = _median(_stage_rows(after, operator)["tasks"])
        if old is not None and new is not None and round(old) != round(new):
            return f"{round(old)} → {round(new)} tasks per stage"
    if (
        kind == "straggler_task"
        and ctx_a.flag("spark.speculation")
        and not ctx_b.flag("spark.speculation")
    ):
        return "spark.speculation=true"
    if kind == "driver_bound":
        old_s, new_s = _activity_s(before, "driver"), _activity_s(after, "driver")
        if new_s < old_s - max(NOISE_S, NOISE_SHARE * old_s):
            return f"driver critical time {duration_s(old_s)} → {duration_s(new_s)}"
    if kind in SKEW_KINDS and (fell := _hot_records_fell(hint, operator, after)):
        return fell
    if kind in SKEW_KINDS or kind == "straggler_task":
        stage_id = hint.get("stage_id")
        old_rows = before.summaries.stages.filter(pl.col("stage_id") == stage_id)
        if old_rows.is_empty():
            old_rows = _stage_rows(before, operator)
        old_skew = _median(old_rows["skew"]) if len(old_rows) else None
        new_rows = _stage_rows(after, operator)
        new_skew = (
            max((float(s) for s in new_rows["skew"] if s is not None), default=None)
            if len(new_rows)
            else None
        )
        if (
            old_skew is not None
            and new_skew is not None
            and new_skew < SKEW_FELL * old_skew
        ):
            return f"longest task / median {old_skew:.1f} → {new_skew:.1f}"
    return None


def _hottest_records(evidence: dict[str, Any]) -> int:
    """The records of a skew hint's hottest partition: its ``records``, or
    the largest of a shared tail's list of them (0: none stated).

    >>> _hottest_records({"records": 90}), _hottest_records({"records": [5, 9]})
    (90, 9)
    """
    records = evidence.get("records")
    if isinstance(records, list):
        return max((int(r) for r in records if r is not None), default=0)
    return int(records or 0)


def _hot_records_fell(
    hint: dict[str, Any], operator: str | None, after: Profile
) -> str | None:
    """How the records of ``operator``'s hottest partition fell in AFTER
    (its skew hints' evidence; none there: no partition is hot any more)
    below :data:`SKEW_FELL` of the hint's, else ``None``. A hot partition
    split in two leaves two tasks each many times the median, so the
    longest task over the median need not fall."""
    old = _hottest_records(_evidence(hint))
    if not old or operator is None or _stage_rows(after, operator).is_empty():
        return None
    hot = [
        _hottest_records(_evidence(h))
        for h in after.hints.iter_rows(named=True)
        if h["kind"] in SKEW_KINDS
        and _operator_of(after, h.get("stage_id"), _evidence(h)) == operator
    ]
    new = max(hot, default=0)
    if new >= SKEW_FELL * old:
        return None
    return f"hottest partition {old:,} → {new:,} records"


def verdict_of(predicted_s: float | None, measured_s: float) -> str:
    """A checked saving's verdict: ``effective`` (at least half the
    prediction), ``partly effective``, ``no effect`` (within max(5% of the
    prediction, 0.2 s) of 0) or ``made it worse``.

    >>> [verdict_of(10, m) for m in (6, 2, 0.1, -3)]
    ['effective', 'partly effective', 'no effect', 'made it worse']
    """
    predicted = predicted_s if predicted_s is not None and predicted_s > 0 else 0.0
    if abs(measured_s) <= max(NOISE_SHARE * predicted, NOISE_S):
        return NONE_V
    if measured_s < 0:
        return WORSE_V
    if measured_s >= EFFECTIVE * predicted:
        return EFFECTIVE_V
    return PARTLY_V


def _shown(hints: pl.DataFrame) -> pl.DataFrame:
    return hints.filter(pl.col("severity") != "info")


def _evidence(row: dict[str, Any]) -> dict[str, Any]:
    try:
        found = json.loads(row.get("evidence") or "{}")
    except (json.JSONDecodeError, TypeError):
        return {}
    return found if isinstance(found, dict) else {}


def _checked_hints(
    before: Profile, after: Profile, operators: pl.DataFrame
) -> pl.DataFrame:
    seconds = {
        row["operator"]: (row["before_s"], row["after_s"])
        for row in operators.iter_rows(named=True)
    }
    wall_saving = (wall_ns(before) - wall_ns(after)) / NS
    rows = []
    for hint in _shown(before.hints).iter_rows(named=True):
        operator = _operator_of(before, hint.get("stage_id"), _evidence(hint))
        how = applied_by(hint, operator, before, after)
        predicted = hint.get("predicted_saving_ns")
        predicted_s = None if predicted is None else float(predicted) / NS
        measured = None
        if how is not None:
            if hint["kind"] == "driver_bound":
                measured = _activity_s(before, "driver") - _activity_s(after, "driver")
            elif operator is not None and operator in seconds:
                old, new = seconds[operator]
                measured = old - new
            else:
                measured = wall_saving
        rows.append(
            {
                "kind": hint["kind"],
                "severity": hint["severity"],
                "stage_id": hint.get("stage_id"),
                "operator": operator,
                "applied": how is not None,
                "how": how,
                "predicted_saving_s": predicted_s,
                "measured_saving_s": measured,
                "wall_saving_s": wall_saving,
                "verdict": NOT_APPLIED_V
                if measured is None
                else verdict_of(predicted_s, measured),
                "action": hint.get("action"),
            }
        )
    return (
        pl.DataFrame(rows, schema=_HINT_SCHEMA, orient="row")
        if rows
        else pl.DataFrame(schema=_HINT_SCHEMA)
    )


# -- regressions -----------------------------------------------------------------


def _growth(old: int | None, new: int | None) -> float | None:
    if old is None or new is None:
        return None
    if old == 0:
        return 0.0 if new == 0 else math.inf
    return new / old - 1.0


def _regressions(
    before: Profile, after: Profile, operators: pl.DataFrame
) -> pl.DataFrame:
    rows = []
    for op in operators.filter(pl.col("operator") != UNATTRIBUTED).iter_rows(
        named=True
    ):
        old, new, delta = op["before_s"], op["after_s"], op["delta_s"]
        if delta <= max(REGRESSION_SHARE * old, REGRESSION_S):
            continue
        growth = _growth(op["records_before"], op["records_after"])
        measure = "records"
        if growth is None or (op["records_before"] == 0 and op["records_after"] == 0):
            bytes_growth = _growth(op["bytes_before"], op["bytes_after"])
            if bytes_growth is not None:
                growth, measure = bytes_growth, "bytes"
        if not op["matched"]:
            cause, detail = "regression", "ran in AFTER only"
        elif growth is not None and growth >= VOLUME_SHARE:
            cause = "input volume"
            detail = f"its input ({measure}) grew {_pct(growth)}"
        else:
            cause = "regression"
            detail = (
                "its input is not known"
                if growth is None
                else f"its input ({measure}) changed {_pct(growth)}"
            )
        rows.append(
            {
                "kind": "operator",
                "operator": op["operator"],
                "before_s": old,
                "after_s": new,
                "delta_s": delta,
                "input_growth": None
                if growth is None or math.isinf(growth)
                else growth,
                "cause": cause,
                "detail": f"critical time {duration_s(old)} → "
                f"{duration_s(new)}; {detail}",
            }
        )
    known = {
        (h["kind"], _operator_of(before, h.get("stage_id"), _evidence(h)))
        for h in before.hints.iter_rows(named=True)
    }
    for hint in _shown(after.hints).iter_rows(named=True):
        operator = _operator_of(after, hint.get("stage_id"), _evidence(hint))
        if (hint["kind"], operator) in known:
            continue
        predicted = hint.get("predicted_saving_ns")
        rows.append(
            {
                "kind": "new hint",
                "operator": operator,
                "before_s": None,
                "after_s": None,
                "delta_s": None,
                "input_growth": None,
                "cause": str(hint["kind"]),
                "detail": f"[{hint['severity']}] {hint.get('action') or ''}"
                + (
                    ""
                    if predicted is None
                    else f" (predicted saving {duration(float(predicted))})"
                ),
            }
        )
    return (
        pl.DataFrame(rows, schema=_REGRESSION_SCHEMA, orient="row")
        if rows
        else pl.DataFrame(schema=_REGRESSION_SCHEMA)
    )


def _pct(share: float) -> str:
    return "without bound" if math.isinf(share) else f"{share:+.0%}"


# -- compare ---------------------------------------------------------------------


def unrelated(before: Profile, after: Profile, matched: int) -> str | None:
    """Why BEFORE and AFTER are two different applications, whose comparison
    says nothing (``None``: they may be one application's runs): their
    names differ and no operator of one ran in the other.

    >>> import dataclasses
    >>> from sparktrail.engines.profiler import profile
    >>> from sparktrail.pag.context import AppContext
    >>> p = profile(pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [10], "activity": ["processing"]}), 10)
    >>> def named(name):
    ...     context = AppContext(app_name=name)
    ...     summaries = dataclasses.replace(p.summaries, context=context)
    ...     return dataclasses.replace(p, summaries=summaries)
    >>> unrelated(named("etl"), named("ml"), 0)
    "two applications ('etl' and 'ml') with no operator in common"
    >>> unrelated(named("etl"), named("etl"), 0) is None
    True
    """
    b, a = before.summaries.context.app_name, after.summaries.context.app_name
    if matched or not (a and b) or a == b:
        return None
    return f"two applications ({b!r} and {a!r}) with no operator in common"


def compare(before: Profile, after: Profile) -> Comparison:
    """BEFORE against AFTER: the decomposed wall-time delta, the settings
    diff, BEFORE's hints checked and the regressions (module docstring).

    Two different applications (app names differ, or fewer than half of
    the operators match) are compared where they match, with a warning.

    Examples
    --------
    >>> from sparktrail.engines.profiler import profile
    >>> def run(ms):
    ...     return profile(pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...         "start_ns": [0], "end_ns": [ms * 1_000_000], "activity": ["processing"],
    ...         "operator": ["count at app.py:3"]}), 100_000_000)
    >>> c = compare(run(1000), run(400))
    >>> c.wall_delta_s, c.operators.select("operator", "delta_s").rows()[0]
    (-0.6, ('count at app.py:3', -0.6))
    """
    warnings: list[str] = []
    after = _renamed(
        after, loose_matches(_operator_keys(before), _operator_keys(after))
    )
    operators = _operators(before, after)
    for name, p in (("BEFORE", before), ("AFTER", after)):
        by_ops = float(p.summaries.operator[CP_NS].sum())
        by_windows = _windows_critical_ns(p)
        if abs(by_ops - by_windows) > 1e6:
            warnings.append(
                f"{name}'s operators hold {by_ops / NS:.3f} critical seconds, its "
                f"windows {by_windows / NS:.3f}"
            )
    if before.summaries.window_ns != after.summaries.window_ns:
        warnings.append(
            f"windows differ ({before.summaries.window_ns / NS:g} s and "
            f"{after.summaries.window_ns / NS:g} s): wall times are rounded "
            "up to whole windows differently"
        )
    named = operators.filter(pl.col("operator") != UNATTRIBUTED)
    matched = int(named["matched"].sum())
    n_before = len(_operator_side(before))
    n_after = len(_operator_side(after))
    ctx_b, ctx_a = before.summaries.context, after.summaries.context
    if ctx_b.app_name and ctx_a.app_name and ctx_b.app_name != ctx_a.app_name:
        warnings.append(
            f"two applications ({ctx_b.app_name!r} and {ctx_a.app_name!r}): "
            f"{matched} of {max(n_before, n_after)} operators matched"
        )
    elif 2 * matched < max(n_before, n_after):
        warnings.append(
            f"only {matched} of {n_before} operators (BEFORE) and {n_after} (AFTER) "
            "matched by label: these may be two different applications"
        )
    return Comparison(
        before_name=before.name,
        after_name=after.name,
        wall_before_ns=wall_ns(before),
        wall_after_ns=wall_ns(after),
        operators=operators,
        activities=_activities(before, after),
        settings=settings_diff(ctx_b, ctx_a),
        hints=_checked_hints(before, after, operators),
        regressions=_regressions(before, after, operators),
        matched_operators=matched,
        warnings=tuple(warnings),
    )
