"""``parallelism`` hint: DS2's slot count for stages on the critical path.

DS2 (Kalavri et al., OSDI 2018) sizes an operator by its *true* rate, the
rate it processes at while doing useful work, not its observed rate, which
also counts time spent waiting. For a stage (operator) whose whole-run CP
share is at least ``parallelism_min_share``:

* true rate per slot = records / useful time, summed over the stage's
  tasks; useful time is deserialization + processing + GC + shuffle write +
  result serialization (not scheduler delay, fetch wait or result fetch);
* target time ``T*`` = ``target_stage_seconds`` if given; target rate =
  records / ``T*``. Without a target the only evidence for more slots is
  capacity the stage left idle: when it ran on fewer slots than the
  application has, ``T*`` is its useful time spread over all of them (so
  ``pi`` = every slot); when it used them all, there is no hint;
* ``pi = ceil(target rate / true rate per slot)`` (= ceil(useful time /
  ``T*``)) slots, and at least ``pi`` partitions so every slot has a task.

The hint fires only when ``pi`` exceeds the slots the stage ran on (more
slots would help). Slots are the cores of the executors alive while the
stage ran (``ExecutorAdded``), not the task timelines it happened to use:
a one-task stage on a two-core executor left a slot idle. Records only
give the rates in the evidence: ``pi = ceil(useful time / T*)`` needs
none, so a CPU-bound stage that reads nothing is sized too. When ``pi``
fits in the slots the application has, the action is more partitions;
beyond them, more executors (``local[pi]`` on a local master).

Before it says slots were free, the rule takes off the slots that other
stages' tasks held while the stage ran (concurrent jobs, or parallel
stages of one job): a slot is free only if it was free for the whole
stage, on average (``free_slots`` = floor(slots - their busy slot time /
the stage's time)).

Where its split comes from:

* the program called ``repartition(n)`` itself (the stage reads an
  exchange ``RoundRobinPartitioning(n)`` or ``..., REPARTITION_BY_NUM`` of
  n = its task count, DESIGN §8's plan node in the label of the stage that
  wrote it): the action is that call with a new ``n``, which
  ``spark.sql.shuffle.partitions`` does not change; the shuffle is there
  already, so it costs nothing more;
* it reads a shuffle (an earlier stage wrote one and the stage scans no
  input): ``spark.sql.shuffle.partitions`` / ``spark.default.parallelism``,
  more reducers of the same shuffle;
* it reads input or cached blocks: a ``repartition(n)`` before it adds a
  shuffle of its bytes, priced as a write and a read of them at the
  trace's own shuffle rate per slot (:func:`reshuffle_price`) spread over
  the slots it would run on. The hint
  fires only when the replayed saving exceeds that price, and its saving
  is the difference.
"""

from __future__ import annotations

import math
import re
from typing import Any

import polars as pl

from sparktrail.errors import InputError
from sparktrail.whatif import predict
from sparktrail.whatif.changes import StagePartitions

from ..operator import stage_label
from .hint import Hint
from .inputs import Context
from .wording import fmt_s

__all__ = [
    "NEGLIGIBLE_PRICE",
    "REFERENCE_SHUFFLE_RATE",
    "explicit_repartition",
    "held_slots",
    "parallelism",
    "reshuffle_price",
]

#: The number of an exchange the program asked for: ``repartition(n)``
#: (``RoundRobinPartitioning(n)``, or ``hashpartitioning(k, n),
#: REPARTITION_BY_NUM`` for ``repartition(n, k)``).
_REPARTITION = re.compile(
    r"RoundRobinPartitioning\((\d+)\)|(\d+)\)\s*,\s*REPARTITION_BY_NUM"
)
#: Shuffle bytes a slot writes (or reads) per second when the trace has no
#: shuffle to measure: the order of Spark's serialized, compressed shuffle
#: on one core.
REFERENCE_SHUFFLE_RATE = 100e6
#: A reshuffle price under this share of the stage's time is not worth
#: weighing (the replay's saving stands, as for any other change).
NEGLIGIBLE_PRICE = 0.01
#: A plan node that reads input, not a shuffle.
_SCAN = re.compile(r"\bScan\b|FileScan|InMemoryTableScan|BatchScan|HiveTableScan")


def _stage(ctx: Context, stage_id: int) -> tuple[dict[str, float], int | None]:
    """The stage's task numbers, and its first task's launch (None: no task)."""
    # A stage whose rows carry no task ids (a hand-made trace) has no tasks.
    row = ctx.stage_row(stage_id)
    if row is None:
        zero = {"tasks": 0, "records": 0.0, "useful_ns": 0.0}
        return zero | {"stage_time_ns": 0.0, "slots_now": 0}, None
    numbers = {
        "tasks": row["tasks"],
        "records": float(row["records"]),
        "useful_ns": float(row["useful_ns"]),
        "stage_time_ns": float(row["end_ns"] - row["launch_ns"]),
        "slots_now": row["workers"],
    }
    numbers["bytes"] = float(row["bytes"] or 0)
    return numbers, row["launch_ns"]


def _labels(ctx: Context) -> dict[int, str]:
    """Each stage's whole operator label (call site · plan node → exchange)."""
    first = (
        ctx.tasks.select("stage_id", "operator")
        .drop_nulls()
        .group_by("stage_id", maintain_order=True)
        .agg(pl.col("operator").first())
    )
    return {int(k): str(v) for k, v in first.iter_rows()}


def explicit_repartition(
    ctx: Context, stage_id: int, tasks: int, launch_ns: int, labels: dict[int, str]
) -> int | None:
    """``n`` of the program's ``repartition(n)`` whose output the stage reads:
    the latest earlier stage whose output exchange is one of ``n = tasks``
    partitions (``None``: none).

    >>> _REPARTITION.search("FileScan → Exchange RoundRobinPartitioning(2), "
    ...     "REPARTITION_BY_NUM").group(1)
    '2'
    """
    best: tuple[int, int] | None = None
    for row in ctx.stage_facts.select("stage_id", "end_ns").iter_rows():
        other, end = row
        if other == stage_id or end is None or end > launch_ns:
            continue
        label = labels.get(int(other), "")
        if "→" not in label:
            continue
        found = _REPARTITION.search(label.split("→", 1)[1])
        asked = int(found.group(1) or found.group(2)) if found else None
        if asked == tasks and (best is None or end > best[0]):
            best = (int(end), tasks)
    return None if best is None else best[1]


def _reads_shuffle(
    ctx: Context, stage_id: int, launch_ns: int, labels: dict[int, str]
) -> bool:
    """Whether the stage reads a shuffle: it scans no input and an earlier
    stage wrote shuffle output."""
    label = labels.get(stage_id, "")
    if _SCAN.search(label.split("→", 1)[0]):
        return False
    if "shuffle_write_bytes" not in ctx.tasks.columns:
        return False
    wrote = ctx.tasks.filter(
        (pl.col("stage_id") != stage_id)
        & (pl.col("end_ns") <= launch_ns)
        & (pl.col("shuffle_write_bytes").fill_null(0) > 0)
    )
    return not wrote.is_empty()


def held_slots(ctx: Context, stage_id: int, start_ns: int, end_ns: int) -> float:
    """Slots other stages' tasks held on average in ``[start_ns, end_ns)``."""
    if end_ns <= start_ns:
        return 0.0
    overlap = pl.min_horizontal(pl.col("end_ns"), pl.lit(end_ns)) - pl.max_horizontal(
        pl.col("launch_ns"), pl.lit(start_ns)
    )
    held = (
        ctx.tasks.filter(
            pl.col("stage_id").is_not_null()
            & (pl.col("stage_id") != stage_id)
            & (pl.col("launch_ns") < end_ns)
            & (pl.col("end_ns") > start_ns)
        )
        .select(overlap.clip(lower_bound=0).sum())
        .item()
    )
    return float(held or 0) / (end_ns - start_ns)


def reshuffle_price(ctx: Context, s: dict[str, Any], slots: int) -> dict[str, Any]:
    """The wall time a ``repartition`` of the stage's bytes adds: a shuffle
    write and a read of them, over ``slots``.

    The rate per slot is the trace's own shuffle throughput: the stage's
    (bytes it wrote / its useful time) if it wrote a shuffle, else the
    run's shuffle writers', else :data:`REFERENCE_SHUFFLE_RATE`; the read
    is priced as the write. Useful time counts the writers' other work
    too, so the price is on the high side: the rule advises a split only
    when it clearly pays.

    >>> round(2 * 1e9 / REFERENCE_SHUFFLE_RATE, 3)  # 1 GB on one slot, in s
    20.0
    """
    nbytes = float(s.get("bytes") or 0.0)
    if nbytes <= 0:
        return {"reshuffle_bytes": 0.0, "reshuffle_ns": 0.0}
    rate, source = REFERENCE_SHUFFLE_RATE / 1e9, "reference"  # bytes per ns
    if "shuffle_write_bytes" in ctx.tasks.columns:
        writers = ctx.tasks.filter(pl.col("shuffle_write_bytes").fill_null(0) > 0)
        own = writers.filter(pl.col("stage_id") == s["stage_id"])
        for frame, name in ((own, "stage"), (writers, "run")):
            written = float(frame["shuffle_write_bytes"].sum() or 0)
            useful = float(frame["useful_ns"].sum() or 0)
            if written > 0 and useful > 0:
                rate, source = written / useful, name
                break
    cost = 2 * nbytes / rate / max(1, slots)
    return {
        "reshuffle_bytes": nbytes,
        "reshuffle_ns": cost,
        "shuffle_bytes_per_slot_s": rate * 1e9,
        "shuffle_rate_from": source,
    }


def _split(s: dict[str, Any], partitions: int) -> str:
    """How to give the stage ``partitions`` tasks, by where its split comes
    from (``s["source"]``)."""
    if s["source"] == "repartition":
        n = s["repartition_n"]
        return (
            f"{partitions} partitions: the program calls repartition({n}) before "
            f"it; make it repartition({partitions}) (spark.sql.shuffle.partitions "
            "does not change an explicit repartition)"
        )
    if s["source"] == "shuffle":
        return (
            f"at least {partitions} partitions (spark.sql.shuffle.partitions="
            f"{partitions} / spark.default.parallelism={partitions}: more reducers "
            "of the shuffle it reads)"
        )
    price = ""
    if s.get("reshuffle_bytes"):
        price = (
            f"; that adds a shuffle of {s['reshuffle_bytes'] / 1e9:.3g} GB, about "
            f"{fmt_s(s['reshuffle_ns'])} at this run's shuffle rates, already "
            "taken off the saving"
        )
    return (
        f"at least {partitions} partitions (repartition({partitions}) before it: "
        f"it reads input or cached blocks, not a shuffle{price})"
    )


def _action(
    ctx: Context, op: dict[str, Any], s: dict[str, Any], pi: int, partitions: int
) -> str:
    where = stage_label(op["stage_id"], op["call_site"] or op["name"])
    head = f"{where} is {op['cp_share']:.0%} of the critical path"
    if s["records"] > 0:
        head += (
            f"; its true rate is {s['true_rate']:.3g} records/s per slot "
            f"(observed {s['observed_rate']:.3g}/s on {s['slots_now']} slots)"
        )
    split = _split(s, partitions)
    held = ""
    if s["held_slots"] >= 0.05:
        held = f", other stages holding {s['held_slots']:.2g} of them meanwhile"
    if pi <= s["free_slots"]:
        return (
            f"{head}. It ran {s['tasks']} task(s) on {s['slots_now']} of the "
            f"{s['slots']} slots the application had{held}: split its work into "
            f"{split}"
        )
    cores = ctx.slots_per_executor()
    if ctx.app.is_local:
        more = f"run with local[{pi}] on a machine with {pi} cores"
    else:
        executors = math.ceil(pi / cores)
        more = (
            f"spark.executor.cores={cores} with spark.executor.instances={executors} "
            f"(or spark.dynamicAllocation.maxExecutors={executors})"
        )
    return (
        f"{head}. To finish in {fmt_s(s['target_ns'])} it needs pi = {pi} slots "
        f"(it had {s['free_slots']} free of {s['slots']}{held}): {more}, and {split}"
    )


def _priced(
    ctx: Context, change: StagePartitions, estimate: float, cost_ns: float
) -> tuple[float, dict[str, Any]]:
    """The saving net of a reshuffle's price (the replay's saving when the
    trace replays, else the rule's estimate), with the replay's numbers."""
    saving = estimate
    evidence: dict[str, Any] = {"estimated_saving_ns": estimate}
    if ctx.replay is not None:
        try:
            found = predict(ctx.replay, change)
        except InputError:
            found = None
        if found is not None:
            saving = max(0.0, float(found.saving_ns))
            no_lag = predict(ctx.replay, change, lags=False)
            evidence |= {
                "replayed_saving_ns": saving,
                "replayed_saving_no_lag_ns": max(0.0, float(no_lag.saving_ns)),
                "replay_error": found.replay_error,
                "replayed_stage_ns": found.stage_before_ns,
                "predicted_stage_ns_after": found.stage_after_ns,
            }
    return saving - cost_ns, evidence


def parallelism(ctx: Context) -> list[Hint]:
    """Slot counts and partitions (DS2) for stages that dominate the path."""
    opts = ctx.options
    stages = ctx.operator.filter(
        pl.col("stage_id").is_not_null()
        & (pl.col("cp_share") >= opts.parallelism_min_share)
    )
    if stages.is_empty():
        return []
    labels: dict[int, str] | None = None
    hints = []
    for op in stages.iter_rows(named=True):
        numbers, first = _stage(ctx, op["stage_id"])
        s: dict[str, Any] = dict(numbers) | {"stage_id": op["stage_id"]}
        if s["tasks"] == 0 or s["useful_ns"] <= 0 or s["stage_time_ns"] <= 0:
            continue
        start = int(first)  # type: ignore[arg-type]
        end = start + int(s["stage_time_ns"])
        s["slots"] = ctx.slots_during(start, end)
        # Slots other stages held meanwhile were not free for this one.
        s["held_slots"] = held_slots(ctx, op["stage_id"], start, end)
        s["free_slots"] = max(1, math.floor(s["slots"] - s["held_slots"] + 1e-6))
        if opts.target_stage_seconds is not None:
            target_ns = opts.target_stage_seconds * 1e9
        elif s["slots_now"] < s["free_slots"]:
            target_ns = s["useful_ns"] / s["free_slots"]
        else:
            continue
        # DS2: pi = target rate / true rate per slot = useful time / target.
        pi = math.ceil(s["useful_ns"] / target_ns - 1e-9)
        if pi <= s["slots_now"]:
            continue
        partitions = max(int(s["tasks"]), pi)
        if labels is None:
            labels = _labels(ctx)
        n = explicit_repartition(ctx, op["stage_id"], int(s["tasks"]), start, labels)
        if n is not None:
            s |= {"source": "repartition", "repartition_n": n}
        elif _reads_shuffle(ctx, op["stage_id"], start, labels):
            s["source"] = "shuffle"
        else:
            s["source"] = "input"
            s |= reshuffle_price(ctx, s, min(pi, s["free_slots"]))
        s |= {
            "target_ns": target_ns,
            "true_rate": s["records"] / s["useful_ns"] * 1e9,
            "observed_rate": s["records"] / s["stage_time_ns"] * 1e9,
        }
        evidence = {k: v for k, v in s.items() if k not in ("true_rate",)} | {
            "cp_share": op["cp_share"],
            "true_rate_per_slot": s["true_rate"] if s["records"] > 0 else None,
            "observed_rate": s["observed_rate"] if s["records"] > 0 else None,
            "target_stage_ns": target_ns,
            "target_rate": s["records"] / target_ns * 1e9 if s["records"] > 0 else None,
            "pi": pi,
            "partitions": partitions,
        }
        predicted = s["useful_ns"] / min(pi, s["free_slots"])
        critical_ns = op["cp_share"] * ctx.wall_ns
        saving = min(critical_ns, max(0.0, s["stage_time_ns"] - predicted))
        change: StagePartitions | None = StagePartitions(op["stage_id"], partitions)
        if s.get("reshuffle_ns", 0.0) > NEGLIGIBLE_PRICE * s["stage_time_ns"]:
            # The split adds a shuffle: the hint stands only if it pays.
            saving, replayed = _priced(ctx, change, saving, s["reshuffle_ns"])  # type: ignore[arg-type]
            if saving <= 0:
                continue
            evidence |= replayed
            change = None  # the priced saving stands
        hints.append(
            Hint(
                "parallelism",
                op["cp_share"],
                evidence,
                _action(ctx, op, s, pi, partitions),
                stage_id=op["stage_id"],
                predicted_saving_ns=saving,
                change=change,
            )
        )
    return hints
