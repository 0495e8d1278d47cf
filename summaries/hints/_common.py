"""What every hint rule shares: its input (:class:`Context`) and its row."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import polars as pl

from .._table import executor_of, task_facts
from ..model import HintOptions

__all__ = [
    "HIGH_OVER",
    "HINT_SCHEMA",
    "MEDIUM_OVER",
    "Context",
    "Hint",
    "fmt_s",
    "hint_frame",
    "severity",
]

#: Severity from how far a value is over its threshold (value / threshold).
HIGH_OVER = 2.0
MEDIUM_OVER = 1.4

HINT_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String(),
    "severity": pl.String(),
    "stage_id": pl.Int64(),
    "executor_id": pl.String(),
    "partition": pl.Int64(),
    "cp_share": pl.Float64(),
    "evidence": pl.String(),
    "action": pl.String(),
}
_RANK = {"high": 0, "medium": 1, "low": 2}


def severity(value: float, threshold: float) -> str:
    """``high``/``medium``/``low`` from how far ``value`` is over ``threshold``.

    >>> severity(0.45, 0.2), severity(0.3, 0.2), severity(0.21, 0.2)
    ('high', 'medium', 'low')
    """
    over = value / threshold if threshold > 0 else math.inf
    if over >= HIGH_OVER:
        return "high"
    return "medium" if over >= MEDIUM_OVER else "low"


def fmt_s(ns: float) -> str:
    """A duration in ns as seconds for a sentence.

    >>> fmt_s(1_234_000_000), fmt_s(12_000_000)
    ('1.23 s', '0.012 s')
    """
    seconds = ns / 1e9
    return f"{seconds:.3g} s" if seconds >= 0.1 else f"{seconds:.2g} s"


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 6)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


@dataclass(frozen=True)
class Hint:
    """One rebalancing hint; ``evidence`` holds the numbers that fired it."""

    kind: str
    severity: str
    cp_share: float
    evidence: dict[str, Any]
    action: str
    stage_id: int | None = None
    executor_id: str | None = None
    partition: int | None = None

    def row(self) -> dict[str, Any]:
        """The hint as a row of :data:`HINT_SCHEMA` (evidence as JSON)."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "stage_id": self.stage_id,
            "executor_id": self.executor_id,
            "partition": self.partition,
            "cp_share": float(self.cp_share),
            "evidence": json.dumps(_clean(self.evidence), sort_keys=True),
            "action": self.action,
        }


def hint_frame(hints: list[Hint]) -> pl.DataFrame:
    """Hints as a frame, most severe and largest CP share first.

    >>> hint_frame([]).columns[:3]
    ['kind', 'severity', 'stage_id']
    """
    frame = pl.DataFrame([h.row() for h in hints], schema=HINT_SCHEMA, orient="row")
    rank = pl.col("severity").replace_strict(_RANK, return_dtype=pl.Int64)
    return frame.sort(rank, -pl.col("cp_share"), "kind", maintain_order=True)


@dataclass(frozen=True)
class Context:
    """The inputs of the hint rules, computed once.

    ``cp`` is the enriched CP table, ``trace`` the validated trace, the
    frames are the whole-run summaries, ``facts`` is
    :func:`~sparktrail.summaries._table.task_facts` of the trace if the
    caller has it (else computed here), ``tasks`` has one row per task
    attempt with its ``cp_share`` of the run.
    """

    cp: pl.DataFrame
    trace: pl.DataFrame
    activity: pl.DataFrame
    executor: pl.DataFrame
    operator: pl.DataFrame
    communication: pl.DataFrame
    n_windows: int
    options: HintOptions
    facts: pl.DataFrame | None = None

    def activity_share(self, *names: str) -> float:
        """Whole-run CP share of the given activity types."""
        rows = self.activity.filter(pl.col("activity").is_in(names))
        return float(rows["cp_share"].sum())

    @cached_property
    def tasks(self) -> pl.DataFrame:
        """Task facts with each task's CP shares (computed once, on first use).

        ``cp_share`` is the task's share of the whole run's critical path;
        ``running_cp_share`` its share in the windows it ran in, which is what
        "a task with high CP" means: a 2 s straggler is most of the critical
        path while it runs, however long the application was idle before.
        """
        # Lazy: only three columns of the CP table are read and filtered.
        cp = self.cp.lazy().select("window_start_ns", "task_id", "cp")
        with_paths = (
            cp.group_by("window_start_ns")
            .agg((pl.col("cp").sum() > 0).alias("has_paths"))
            .filter("has_paths")
            .select("window_start_ns")
        )
        shares = (
            cp.filter(pl.col("task_id").is_not_null())
            .join(with_paths, on="window_start_ns", how="semi")
            .group_by("task_id")
            .agg(
                (pl.col("cp").sum() / self.n_windows).alias("cp_share"),
                (pl.col("cp").sum() / pl.col("window_start_ns").n_unique()).alias(
                    "running_cp_share"
                ),
            )
            .collect()
        )
        return (
            (task_facts(self.trace) if self.facts is None else self.facts)
            .join(shares, on="task_id", how="left")
            .with_columns(pl.col("cp_share", "running_cp_share").fill_null(0.0))
        )

    @cached_property
    def slot_rows(self) -> pl.DataFrame:
        """Local rows of executor slots (computed once, on first use).

        Columns ``src_worker, dst_worker, activity, start_ns, end_ns,
        executor``: the timelines of the ``exec-<id>/<slot>`` workers only.
        """
        return (
            self.trace.lazy()
            .select("src_worker", "dst_worker", "activity", "start_ns", "end_ns")
            .filter(pl.col("src_worker") == pl.col("dst_worker"))
            .with_columns(executor_of(pl.col("src_worker")).alias("executor"))
            .filter(pl.col("executor").is_not_null())
            .collect()
        )

    def slots_per_executor(self) -> int:
        """The most slots any executor has in the trace (its core count)."""
        slots = self.executor.filter(pl.col("role") == "executor")["slots"]
        return max(1, int(slots.max() or 1))  # type: ignore[arg-type]

    def total_slots(self) -> int:
        """Executor slots (task timelines) in the trace."""
        slots = self.executor.filter(pl.col("role") == "executor")["slots"]
        return max(1, int(slots.sum()))
