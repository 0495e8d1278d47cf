"""A hint's row and its severity: what every rule returns."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from ..frames import HINTS

__all__ = [
    "HINT_SCHEMA",
    "SEVERITY_SHARES",
    "Hint",
    "hint_frame",
    "saving_severity",
    "severity",
]


#: Severity from the predicted saving's share of the run (DESIGN §6): a
#: hint that saves less than the last bound is ``info`` (kept, not shown).
SEVERITY_SHARES = (("high", 0.15), ("medium", 0.05), ("low", 0.02))


#: The hints frame's columns (declared in :mod:`~sparktrail.summaries.frames`).
HINT_SCHEMA = HINTS


_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}


def saving_severity(share: float | None) -> str:
    """``high``/``medium``/``low``/``info`` from a saving's share of the run.

    >>> [saving_severity(s) for s in (0.4, 0.06, 0.02, 0.01, None)]
    ['high', 'medium', 'low', 'info', 'info']
    """
    if share is None or math.isnan(share):
        return "info"
    return next((name for name, bound in SEVERITY_SHARES if share >= bound), "info")


def severity(value: float, threshold: float) -> str:
    """A placeholder severity for a rule's own numbers (``value`` over its
    ``threshold``), replaced by :func:`saving_severity` of the predicted
    saving when the hints are finished.

    >>> severity(0.45, 0.2), severity(0.21, 0.2)
    ('high', 'low')
    """
    over = value / threshold if threshold > 0 else math.inf
    return "high" if over >= 2.0 else "medium" if over >= 1.4 else "low"


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
    """One rebalancing hint; ``evidence`` holds the numbers that fired it.

    ``predicted_saving_ns`` is the wall time the action saves (the what-if
    replay's prediction, :mod:`~sparktrail.whatif`), ``saving_share`` its
    share of the run; the finished hint's ``severity`` comes from that share
    (:func:`saving_severity`). ``occurrences`` counts the findings merged
    into one hint (the same operator in several stages).
    """

    kind: str
    severity: str
    cp_share: float
    evidence: dict[str, Any]
    action: str
    stage_id: int | None = None
    executor_id: str | None = None
    partition: int | None = None
    predicted_saving_ns: float | None = None
    saving_share: float | None = None
    occurrences: int = 1
    #: The :mod:`~sparktrail.whatif` change the action makes (or a tuple
    #: of changes whose savings add up), replayed to predict the saving
    #: (``None``: the rule's own estimate stands).
    change: Any = field(default=None, compare=False)
    #: The time the saving is a share of, when not the run's wall time: a
    #: streaming query's busy time (its batches' trigger time), since the
    #: run of a streaming query lasts until it is stopped.
    share_of_ns: float | None = None

    def with_saving(self, saving_ns: float | None, wall_ns: float) -> Hint:
        """The hint with its predicted saving, share of ``wall_ns`` (or of
        :attr:`share_of_ns`) and the severity that share gives."""
        base = self.share_of_ns or wall_ns
        if saving_ns is None or not math.isfinite(saving_ns) or base <= 0:
            return replace(self, severity="info")
        saving_ns = max(0.0, float(saving_ns))
        share = saving_ns / base
        return replace(
            self,
            predicted_saving_ns=saving_ns,
            saving_share=share,
            severity=saving_severity(share),
        )

    def row(self) -> dict[str, Any]:
        """The hint as a row of :data:`HINT_SCHEMA` (evidence as JSON)."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "stage_id": self.stage_id,
            "executor_id": self.executor_id,
            "partition": self.partition,
            "cp_share": float(self.cp_share),
            "predicted_saving_ns": self.predicted_saving_ns,
            "saving_share": self.saving_share,
            "occurrences": self.occurrences,
            "evidence": json.dumps(_clean(self.evidence), sort_keys=True),
            "action": self.action,
        }


def hint_frame(hints: list[Hint]) -> pl.DataFrame:
    """Hints as a frame, most severe and largest saving (then CP share) first.

    >>> hint_frame([]).columns[:3]
    ['kind', 'severity', 'stage_id']
    """
    frame = pl.DataFrame([h.row() for h in hints], schema=HINT_SCHEMA, orient="row")
    rank = pl.col("severity").replace_strict(_RANK, return_dtype=pl.Int64)
    # Shares rounded for the order: float noise (sums in another order, on
    # another engine) must not swap two hints of equal share.
    saving = -pl.col("saving_share").fill_null(0.0).round(9)
    share = -pl.col("cp_share").round(9)
    # Then by what they name, so equal hints come in one order on every engine.
    named = ["kind", "stage_id", "executor_id", "partition"]
    return frame.sort(rank, saving, share, *named, nulls_last=True, maintain_order=True)
