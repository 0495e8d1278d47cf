"""A hint's row and its severity: what every rule returns.

Severity has one owner, :func:`rated`, from one table,
:data:`SEVERITY_SHARES`: a rule builds its hint without one, and the
ranking (:func:`~sparktrail.summaries.hints.ranking.finish_hints`) rates it
once its saving is known. :func:`severity_legend` says the same table in
words for the dashboard and the command line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from ..frames import HINTS, OLDER_SHARE_OF

__all__ = [
    "HINT_SCHEMA",
    "SEVERITY_SHARES",
    "SHARE_OF",
    "SHOWN_SHARE",
    "STAGE_TIME_SHARES",
    "Hint",
    "hint_frame",
    "rated",
    "saving_severity",
    "severity_legend",
    "share_of_saved",
]


#: Severity from the predicted saving's share of the run (DESIGN §6): a
#: hint that saves less than the last bound is ``info`` (kept, not shown).
SEVERITY_SHARES = (("high", 0.15), ("medium", 0.05), ("low", 0.02))
#: The smallest share of a hint shown (the last bound of the table).
SHOWN_SHARE = SEVERITY_SHARES[-1][1]

#: What a hint's saving is a share of (the hints frame's ``share_of``):
#: ``run`` the run's wall time; ``slot_time`` the executors' slot time
#: (``idle_capacity``, whose saving is capacity); ``query_batch_time`` a
#: streaming query's busy time (its batches' trigger time, for a hint on
#: its stages or its planning); ``input`` the input of a streaming query
#: (``stream_backlog``); ``trigger`` its trigger interval
#: (``trigger_bound``); ``job_time`` the time some job ran (an interactive
#: session's: the rest is a person thinking); ``batch_job_time`` the time
#: the jobs of no streaming query ran, in an application that ran a
#: streaming query beside them (its end is the query's stop).
SHARE_OF = (
    "run",
    "slot_time",
    "query_batch_time",
    "input",
    "trigger",
    "job_time",
    "batch_job_time",
)
#: Shares of a busy time whose end the run's end does not follow (a
#: streaming query runs until stopped): a change's saving on them is the
#: time it takes off its stages, not off the run.
STAGE_TIME_SHARES = frozenset({"query_batch_time", "batch_job_time"})


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


def severity_legend() -> str:
    """The severities in words, from :data:`SEVERITY_SHARES` (and
    :func:`rated`'s exception), for the dashboard's and the command line's
    help.

    >>> severity_legend()
    'high >= 15%, medium >= 5%, low >= 2%; smaller savings are not shown; \
failures that failed a job are high'
    """
    bounds = ", ".join(f"{name} >= {bound:.0%}" for name, bound in SEVERITY_SHARES)
    return (
        f"{bounds}; smaller savings are not shown; failures that failed a job are high"
    )


def share_of_saved(hint: dict[str, Any]) -> str:
    """What ``hint``'s (a row of the hints frame) saving is a share of, one
    of :data:`SHARE_OF`; a row saved by an older sparktrail, without the
    ``share_of`` column, reads it from its kind.

    >>> share_of_saved({"kind": "hotspot", "share_of": "query_batch_time"})
    'query_batch_time'
    >>> share_of_saved({"kind": "idle_capacity"}), share_of_saved({"kind": "spill"})
    ('slot_time', 'run')
    """
    return hint.get("share_of") or OLDER_SHARE_OF.get(str(hint.get("kind")), "run")


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
    share of what ``share_of`` names (:data:`SHARE_OF`); ``severity`` is
    ``None`` until the hints are finished, then :func:`rated` sets it from
    that share. ``occurrences`` counts the findings merged into one hint
    (the same operator in several stages).
    """

    kind: str
    cp_share: float
    evidence: dict[str, Any]
    action: str
    stage_id: int | None = None
    executor_id: str | None = None
    partition: int | None = None
    predicted_saving_ns: float | None = None
    saving_share: float | None = None
    occurrences: int = 1
    #: Set once, by :func:`rated` (``None``: not rated yet).
    severity: str | None = None
    #: What the saving is a share of, one of :data:`SHARE_OF`.
    share_of: str = "run"
    #: The :mod:`~sparktrail.whatif` change the action makes (or a tuple
    #: of changes whose savings add up), replayed to predict the saving
    #: (``None``: the rule's own estimate stands).
    change: Any = field(default=None, compare=False)
    #: The time the saving is a share of, when not the run's wall time: a
    #: streaming query's busy time (its batches' trigger time), since the
    #: run of a streaming query lasts until it is stopped.
    share_of_ns: float | None = None
    #: The most the change can save, whatever the replay says (``None``:
    #: the changed stages' time bounds it): a rule that judged a stage by
    #: its share of the critical path caps the saving at that share's time.
    max_saving_ns: float | None = None

    def with_saving(self, saving_ns: float | None, wall_ns: float) -> Hint:
        """The hint with its predicted saving and its share of ``wall_ns``
        (or of :attr:`share_of_ns`); unchanged when there is none."""
        base = self.share_of_ns or wall_ns
        if saving_ns is None or not math.isfinite(saving_ns) or base <= 0:
            return self
        saving_ns = max(0.0, float(saving_ns))
        share = saving_ns / base
        return replace(self, predicted_saving_ns=saving_ns, saving_share=share)

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
            "share_of": self.share_of,
            "occurrences": self.occurrences,
            "evidence": json.dumps(_clean(self.evidence), sort_keys=True),
            "action": self.action,
        }


def rated(hint: Hint, min_saving_ns: float) -> str:
    """The severity of a hint whose saving is known: the one place it is
    decided. From :data:`SEVERITY_SHARES` by the saving's share, ``info``
    (kept, not shown) under ``min_saving_ns`` of wall time whatever its
    share (0.4 s of a 2 s toy run is no finding), for a cause the rule
    could not check (``unchecked`` in its evidence), on a streaming
    query's first batch (``startup_batch``, a one-off), for a cost with
    no remedy to act on (``one_off``: executors starting once), for a
    streaming query's cost that delays nothing while it keeps up with its
    trigger (``keeps_up``: latency, not throughput), and under
    the rule's own floor (``min_share`` in its evidence); except a
    ``failures`` hint on a failed job, ``high`` whatever time it cost (the
    run did not finish its work), and otherwise rated on its saving alone.

    >>> rated(Hint("spill", 0.3, {}, "", predicted_saving_ns=3e9,
    ...     saving_share=0.3), 1e9)
    'high'
    >>> rated(Hint("spill", 0.3, {}, "", predicted_saving_ns=3e8,
    ...     saving_share=0.3), 1e9)
    'info'
    >>> rated(Hint("failures", 0.0, {"failed_job": 3}, ""), 1e9)
    'high'
    """
    if hint.kind == "failures" and "failed_job" in hint.evidence:
        return "high"
    severity = saving_severity(hint.saving_share)
    if severity == "info":
        return severity
    if (hint.saving_share or 0.0) < hint.evidence.get("min_share", 0.0):
        return "info"  # the rule's own floor: a smaller finding is no finding
    if hint.kind != "failures" and (
        "unchecked" in hint.evidence
        or hint.evidence.get("startup_batch")
        or hint.evidence.get("one_off")
        or hint.evidence.get("keeps_up")
    ):
        return "info"
    saving = hint.predicted_saving_ns
    return "info" if saving is not None and saving < min_saving_ns else severity


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
