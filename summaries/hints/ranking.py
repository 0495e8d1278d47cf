"""What every rule's hints go through last: savings, severity, repeats.

* Each hint's ``predicted_saving_ns`` (the what-if replay of its change,
  :mod:`~sparktrail.whatif`, else the rule's own estimate) becomes
  ``saving_share``, its share of the run's wall time, and the severity
  follows from that share (``hint.rated``, the one place severity is
  decided): a hint that saves under 2% is ``info``, kept in the frame
  (and ``--json``) but not shown. A rule
  that sets ``saving_share`` itself (``idle_capacity``,
  whose saving is capacity, not wall time) keeps it. A hint on a stage
  of a Structured Streaming query's micro-batch takes its share of the
  query's busy time instead (its batches' trigger time): such a run
  lasts until the query is stopped, so its wall time says nothing.
* Findings of one kind on one operator (the same call site in several
  stages, DESIGN §8) become one hint: the one that saves most, with
  ``occurrences``, the stages, and the summed share and saving.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

from sparktrail.errors import InputError
from sparktrail.whatif import predict

from ..operator import stage_label
from ..run_shares import batch_job_time_ns
from .hint import STAGE_TIME_SHARES, Hint, rated
from .inputs import Context
from .over_time import (
    behind_cause,
    first_batch_stages,
    operator_keys,
    stage_batches,
    streaming_busy_ns,
)

__all__ = [
    "finish_hints",
    "merge_repeats",
    "on_job_time",
    "on_streaming_stages",
    "one_churn",
    "without_static_fixes",
]

#: Kinds that name a stage and repeat when an operator runs again.
STAGE_KINDS = frozenset(
    {
        "hotspot",
        "skew_unsplittable",
        "straggler_task",
        "parallelism",
        "over_partitioned",
        "scheduling_bound",
        "gc_bound",
        "spill",
        "state_skew",
    }
)
#: Static fixes of one run's hot partition, which a moving hotspot of the
#: same stages replaces.
STATIC_SKEW_KINDS = frozenset({"hotspot", "skew_unsplittable"})
#: Stages listed in a merged hint's evidence.
MAX_LISTED = 20


def _replayed(ctx: Context, hint: Hint) -> Hint:
    """The hint with the replay's saving for its change, when it has one
    the replay can run; the rule's own estimate is kept in the evidence."""
    if hint.change is None or ctx.replay is None:
        return hint
    changes = hint.change if isinstance(hint.change, tuple) else (hint.change,)
    try:
        predictions = [predict(ctx.replay, change) for change in changes]
        no_lag = [predict(ctx.replay, change, lags=False) for change in changes]
    except InputError:
        return hint  # a change the replay cannot make: the estimate stands
    saving = float(sum(max(0, p.saving_ns) for p in predictions))
    # A change to one stage saves at most that stage's time: the replay's
    # launch lags of tasks it drops or moves may say more.
    spans = [p.stage_before_ns for p in predictions]
    if all(s is not None for s in spans):
        saving = min(saving, float(sum(spans)))  # type: ignore[arg-type]
    run_saving = saving
    stage_saving = _stage_saving(predictions)
    if hint.share_of in STAGE_TIME_SHARES and stage_saving is not None:
        # Weighed against a busy time, not the run: the run ends when the
        # streaming query is stopped, whatever its stages save.
        saving = stage_saving
    if hint.max_saving_ns is not None:
        saving = min(saving, hint.max_saving_ns)
    evidence = hint.evidence | {
        "estimated_saving_ns": hint.predicted_saving_ns,
        "replayed_saving_ns": saving,
        "replay_error": predictions[0].replay_error,
        # the same replay with no launch lags (sparklens' model), beside it
        "replayed_saving_no_lag_ns": float(sum(max(0, p.saving_ns) for p in no_lag)),
    }
    if saving != run_saving:
        evidence |= {"replayed_run_saving_ns": run_saving}
    first = predictions[0]
    if first.stage_before_ns is not None and first.stage_after_ns is not None:
        evidence |= {
            "replayed_stage_ns": first.stage_before_ns,
            "predicted_stage_ns_after": first.stage_after_ns,
        }
    return replace(hint, predicted_saving_ns=saving, evidence=evidence)


def _stage_saving(predictions: list[Any]) -> float | None:
    """The time the changes take off their stages (each stage's replayed
    span before minus after, none below 0); ``None`` when a change names no
    stage."""
    spans = [(p.stage_before_ns, p.stage_after_ns) for p in predictions]
    if not spans or any(b is None or a is None for b, a in spans):
        return None
    return float(sum(max(0, b - a) for b, a in spans))


def _with_saving(hint: Hint, wall_ns: int) -> Hint:
    if hint.saving_share is not None:
        return hint
    return hint.with_saving(hint.predicted_saving_ns, wall_ns)


def merge_repeats(
    hints: list[Hint],
    keys: dict[int, str],
    wall_ns: int,
    batches: dict[int, int] | None = None,
    min_saving_ns: float = 0.0,
    per_job: bool = False,
) -> list[Hint]:
    """One hint per (kind, operator) for the kinds of :data:`STAGE_KINDS`,
    or per (kind, setting) for findings whose remedy is one setting of the
    run (``setting`` in their evidence: 200 shuffle partitions behind three
    operators' tiny tasks is one cause).

    ``keys`` maps a stage id to its operator; ``batches`` a streaming
    query's stage to its micro-batch (a merged hint then names the first
    and last batch); hints are finished (saving and severity set). A merged
    hint is rated on its summed saving, ``info`` under ``min_saving_ns``
    like any hint; with ``per_job`` (an interactive session: a user waits
    command by command), also when none of its findings alone saves that.

    >>> a = Hint("hotspot", 0.1, {}, "split it", stage_id=1, severity="low",
    ...     predicted_saving_ns=3.0, saving_share=0.03)
    >>> b = replace(a, stage_id=2, predicted_saving_ns=5.0, saving_share=0.05)
    >>> [merged] = merge_repeats([a, b], {1: "f.py:3", 2: "f.py:3"}, 100)
    >>> merged.occurrences, merged.stage_id, merged.predicted_saving_ns, merged.severity
    (2, 2, 8.0, 'medium')
    >>> merge_repeats([a, b], {1: "f.py:3", 2: "f.py:3"}, 100, None, 10)[0].severity
    'info'
    """
    groups: dict[tuple[str, str], list[Hint]] = defaultdict(list)
    out: list[Hint] = []
    for hint in hints:
        if hint.kind in STAGE_KINDS and hint.stage_id is not None:
            # One setting behind several operators' findings is one cause.
            key = hint.evidence.get("setting") or keys.get(
                hint.stage_id, stage_label(hint.stage_id)
            )
            groups[(hint.kind, key)].append(hint)
        else:
            out.append(hint)
    for (_, operator), found in groups.items():
        if len(found) == 1:
            out.append(found[0])
            continue
        merged = _merged(found, operator, wall_ns, batches or {}, min_saving_ns)
        most = max(h.predicted_saving_ns or 0.0 for h in found)
        if per_job and most < min_saving_ns:
            merged = replace(merged, severity="info")
        out.append(merged)
    return out


def _merged(
    found: list[Hint],
    operator: str,
    wall_ns: int,
    batches: dict[int, int],
    min_saving_ns: float,
) -> Hint:
    best = max(found, key=lambda h: (h.predicted_saving_ns or 0.0, h.cp_share))
    stages = sorted({h.stage_id for h in found if h.stage_id is not None})
    saving = sum(h.predicted_saving_ns or 0.0 for h in found)
    base = best.share_of_ns or wall_ns
    share = saving / base if base > 0 else None
    evidence = best.evidence | {
        "occurrences": len(found),
        "operator": operator,
        "stages": stages[:MAX_LISTED],
        "first_stage": stages[0] if stages else None,
        "last_stage": stages[-1] if stages else None,
        "total_cp_share": sum(h.cp_share for h in found),
    }
    ran = sorted({batches[s] for s in stages if s in batches})
    if ran:
        evidence |= {"first_batch": ran[0], "last_batch": ran[-1]}
    if len(stages) == 1:
        action = (
            f"{len(found)} tasks of stage {stages[0]} with the same finding; "
            f"the worst: {best.action}"
        )
    else:
        where = (
            f"micro-batches {ran[0]}..{ran[-1]}"
            if ran
            else f"stages {stages[0]}..{stages[-1]}"
        )
        if operator == best.evidence.get("setting"):
            listed = ", ".join(str(s) for s in stages[:8])
            more = " and more" if len(stages) > 8 else ""
            action = (
                f"{len(stages)} stages ({listed}{more}) with the same finding, from "
                f"one cause ({operator}); the worst, in stage {best.stage_id}: "
                f"{best.action}"
            )
        else:
            action = (
                f"{operator} ran in {len(stages)} stages ({where}) with the same "
                f"finding; the worst, in stage {best.stage_id}: {best.action}"
            )
    merged = replace(
        best,
        evidence=evidence,
        action=action,
        cp_share=sum(h.cp_share for h in found),
        predicted_saving_ns=saving,
        saving_share=share,
        occurrences=len(found),
    )
    # Rated again on the summed saving: findings each under the wall-time
    # floor may add up to a hint worth showing, but a sum under it is not.
    return replace(merged, severity=rated(merged, min_saving_ns))


def without_static_fixes(
    hints: list[Hint], keys: dict[int, str] | None = None
) -> list[Hint]:
    """``hints`` without the static skew fixes of the operators (or the
    stages) a ``moving_hotspot`` names: splitting one run's hot partition
    is the wrong advice there. By operator (``keys``: stage id -> operator,
    :func:`~.over_time.operator_keys`) where known: the evidence lists the
    first stages only.

    >>> moving = Hint("moving_hotspot", 0.5, {"stages": [1, 2], "operator": "j"},
    ...     "salt")
    >>> static = Hint("hotspot", 0.2, {}, "split", stage_id=2)
    >>> later = Hint("hotspot", 0.2, {}, "split", stage_id=90)
    >>> [h.kind for h in without_static_fixes([moving, static, later], {90: "j"})]
    ['moving_hotspot']
    """
    moving = [h.evidence for h in hints if h.kind == "moving_hotspot"]
    stages = {stage for e in moving for stage in e.get("stages", ())}
    operators = {e["operator"] for e in moving if e.get("operator")}

    keys = keys or {}

    def covered(h: Hint) -> bool:
        if h.stage_id is None:
            return False
        return h.stage_id in stages or keys.get(h.stage_id) in operators

    return [h for h in hints if not (h.kind in STATIC_SKEW_KINDS and covered(h))]


def on_streaming_stages(ctx: Context, hints: list[Hint]) -> list[Hint]:
    """``hints`` whose stage ran in a streaming query's micro-batch with
    their saving a share of the query's busy time after each run's first
    batch (:func:`~sparktrail.summaries.hints.over_time.streaming_busy_ns`),
    not of the run, which lasts until the query is stopped; ``busy_ns`` in
    their evidence. A hint on a stage of a run's first batch (its start-up,
    a one-off) is marked ``startup_batch`` and kept as ``info``. Where the
    query outlived the other jobs, a hint on their stages is a share of
    their time (``batch_job_time``, :func:`~..run_shares.batch_job_time_ns`):
    the run ended when the query was stopped."""
    if not ctx.app.batches:
        return hints
    stages = {h.stage_id for h in hints if h.stage_id is not None}
    busy = {stage: streaming_busy_ns(ctx, [stage]) for stage in stages}
    firsts = first_batch_stages(ctx) if stages else set()
    batch_ns = batch_job_time_ns(ctx.app)
    out = []
    for h in hints:
        if h.stage_id is None:
            out.append(h)
            continue
        if not busy[h.stage_id]:
            beside = batch_ns and h.share_of == "run" and not h.share_of_ns
            share_of_ns = float(batch_ns or 0)
            out.append(
                replace(h, share_of="batch_job_time", share_of_ns=share_of_ns)
                if beside
                else h
            )
            continue
        evidence = h.evidence
        if "busy_ns" not in evidence:
            evidence = evidence | {"busy_ns": busy[h.stage_id]}
        if h.stage_id in firsts:
            evidence = evidence | {"startup_batch": True}
        if h.share_of_ns:  # the rule's own base and share_of stand
            out.append(replace(h, evidence=evidence))
            continue
        out.append(
            replace(
                h,
                share_of_ns=busy[h.stage_id],
                share_of="query_batch_time",
                evidence=evidence,
            )
        )
    return out


#: Kinds whose saving the rule sets itself (not replayed, nor a share of
#: a streaming query's time).
_OWN_SAVING = frozenset({"failures"})


#: Kinds of skew: while one holds a stage back, the other slots' wait is
#: its tail, not spare capacity.
_SKEW_KINDS = frozenset({"hotspot", "skew_unsplittable"})


def without_skew_idle(hints: list[Hint]) -> list[Hint]:
    """``hints`` without ``idle_capacity`` when a skew hint explains the
    idle slots (they waited for the hot task: fix the skew first)."""
    if not any(h.kind in _SKEW_KINDS for h in hints):
        return hints
    return [h for h in hints if h.kind != "idle_capacity"]


def one_churn(hints: list[Hint], floor: float) -> list[Hint]:
    """The cold starts of executors that dynamic allocation released and
    started again as one hint (one cause): the largest, its saving the sum
    and the others' words added. One-off cold starts stay apart (info).

    >>> a = Hint("cold_start", 0.0, {}, "jobs waited", predicted_saving_ns=5.0)
    >>> b = Hint("cold_start", 0.0, {}, "a first task", stage_id=3,
    ...     predicted_saving_ns=2.0)
    >>> [(h.predicted_saving_ns, h.occurrences) for h in one_churn([b, a], 0)]
    [(7.0, 2)]
    """
    churn = [
        h for h in hints if h.kind == "cold_start" and not h.evidence.get("one_off")
    ]
    if len(churn) < 2:
        return hints
    churn.sort(key=lambda h: -(h.predicted_saving_ns or 0.0))
    first = churn[0]
    # The others' words only where they add a saving of their own.
    rest = [
        h
        for h in churn[1:]
        if (h.predicted_saving_ns or 0.0) >= 0.05 * (first.predicted_saving_ns or 0.0)
    ]
    total = sum(h.predicted_saving_ns or 0.0 for h in churn)
    base = first.share_of_ns
    merged = replace(
        first,
        predicted_saving_ns=total,
        saving_share=None
        if first.saving_share is None or not first.predicted_saving_ns
        else first.saving_share * total / first.predicted_saving_ns,
        occurrences=len(churn),
        evidence=first.evidence | {"also": [h.action[:200] for h in rest][:5]},
        action=first.action
        + "; the same cold starts also held "
        + "; ".join(
            f"stage {h.stage_id} for {(h.predicted_saving_ns or 0) / 1e9:.3g} s"
            if h.stage_id is not None
            else f"{(h.predicted_saving_ns or 0) / 1e9:.3g} s more"
            for h in rest[:4]
        ),
        share_of_ns=base,
    )
    kept = [h for h in hints if h not in churn]
    return [merged, *kept]


def on_job_time(ctx: Context, hints: list[Hint]) -> list[Hint]:
    """In an interactive session (a shell, a notebook), ``hints`` whose
    saving is a share of the run with it a share of the time jobs ran
    instead (``job_time``, :attr:`~.inputs.Context.judged_ns`): the rest
    of such a run is a person thinking, and what a fix saves is time the
    person waited for."""
    if ctx.judged_ns == ctx.wall_ns:
        return hints
    return [
        replace(h, share_of="job_time", share_of_ns=float(ctx.judged_ns))
        if h.share_of == "run" and not h.share_of_ns and h.kind not in _OWN_SAVING
        else h
        for h in hints
    ]


def finish_hints(ctx: Context, hints: list[Hint]) -> list[Hint]:
    """Savings, severity and merged repeats of the rules' ``hints``."""
    keys = operator_keys(ctx)
    kept = without_skew_idle(without_static_fixes(hints, keys))
    kept = on_streaming_stages(ctx, kept)
    kept = on_job_time(ctx, kept)
    floor = ctx.options.min_saving_s * 1e9
    saved = [
        h if h.kind in _OWN_SAVING else _with_saving(_replayed(ctx, h), ctx.wall_ns)
        for h in kept
    ]
    finished = [replace(h, severity=rated(h, floor)) for h in one_churn(saved, floor)]
    startup = [h for h in finished if h.evidence.get("startup_batch")]
    trend = [h for h in finished if not h.evidence.get("startup_batch")]
    merged = merge_repeats(
        trend,
        keys,
        ctx.wall_ns,
        stage_batches(ctx),
        floor,
        per_job=ctx.judged_ns != ctx.wall_ns,
    )
    return behind_cause(ctx, merged) + startup
