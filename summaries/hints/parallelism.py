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
from sparktrail.units import count, duration, size
from sparktrail.whatif import predict
from sparktrail.whatif.changes import StagePartitions

from ..operator import stage_label
from .hint import Hint
from .inputs import Context
from .remedies import NOTES, remedies, remedy_text

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


def _fallback_split(s: dict[str, Any], partitions: int, reads: str | None) -> str:
    """How to give the stage ``partitions`` tasks where the run's facts name
    no remedy (a trace without its context): by where its split comes from
    (``s["source"]``, as the trace shows it; what the stage ``reads``, when
    the context says, first)."""
    if s["source"] == "repartition":
        n = s["repartition_n"]
        return (
            f"{partitions} partitions: the program calls repartition({n}) before "
            f"it; make it repartition({partitions}) (spark.sql.shuffle.partitions "
            "does not change an explicit repartition)"
        )
    if s["source"] == "shuffle" and reads in (None, "shuffle"):
        return (
            f"at least {partitions} partitions (spark.sql.shuffle.partitions="
            f"{partitions} / spark.default.parallelism={partitions}: more reducers "
            "of the shuffle it reads)"
        )
    if s["source"] == "unknown":
        return (
            f"{partitions} partitions (the partition count of the call that "
            f"makes its data, or repartition({partitions}) before it)"
        )
    price = ""
    if s.get("reshuffle_bytes"):
        price = (
            f"; that adds a shuffle of {s['reshuffle_bytes'] / 1e9:.3g} GB, about "
            f"{duration(s['reshuffle_ns'])} at this run's shuffle rates, already "
            "taken off the saving"
        )
    return (
        f"{partitions} partitions (repartition({partitions}) before it: "
        f"it reads input or cached blocks, not a shuffle{price})"
    )


#: Splits this many times the scan's cap (or more) were not cut: the files
#: do not split (gzip, a format read whole), so no split setting helps.
UNSPLIT_RATIO = 1.2


def split_advice(ctx: Context, stage_id: int, partitions: int) -> str:
    """How to run stage ``stage_id`` as ``partitions`` tasks, for rules
    other than this one (spill, out of memory): :func:`_split` on the
    stage's facts.

    Examples
    --------
    See ``tests/summaries/test_memory_pressure.py``.
    """
    row = ctx.stage_row(stage_id) or {}
    declared = ctx.facts.partition_count(stage_id)
    tasks = int(row.get("tasks") or 0) if declared is None else declared
    reads = ctx.facts.reads(stage_id)
    s = {
        "stage_id": stage_id,
        "tasks": tasks,
        "bytes": float(row.get("bytes") or 0),
        # A log that names neither its RDDs nor its parents (Spark 1.3)
        # does not say whether the stage reads a shuffle.
        "source": "unknown"
        if reads is None
        else "shuffle"
        if reads == "shuffle"
        else "input",
    }
    return _split(ctx, s, partitions)


#: RDDs of a Kafka read (a DStream's direct stream, a Structured Streaming
#: Kafka source).
KAFKA_RDDS = ("KafkaRDD", "KafkaSourceRDD")
#: A scope name of the RDD API's own repartitioning call.
_RDD_CALLS = ("coalesce", "repartition", "partitionBy")


def _split(ctx: Context, s: dict[str, Any], partitions: int) -> str:
    """How to give the stage ``partitions`` tasks: the remedies of the
    catalogue that fit its engine, input, Spark version and platform
    (:mod:`.remedies`), else what the trace shows (:func:`_fallback_split`)."""
    facts = ctx.facts
    stage = facts.stage(s["stage_id"])
    call = call_new = None
    if s["source"] == "repartition":
        call = f"repartition({s['repartition_n']})"
        call_new = f"repartition({partitions})"
    elif stage is not None:
        # PySpark's own shuffles (groupByKey, reduceByKey) call partitionBy
        # themselves: a scope of that name is no call of the program's.
        calls = _RDD_CALLS if stage.engine != "pyspark_rdd" else _RDD_CALLS[:2]
        asked = [n for n in stage.rdds if n in calls]
        if asked:
            call, call_new = f"{asked[0]}({s['tasks']})", f"{asked[0]}({partitions})"
    engine = stage.engine if stage else None
    reads = stage.reads if stage else None
    if reads is None and s["source"] == "shuffle":
        reads = "shuffle"
    cap = facts.scan_cap(s["stage_id"])
    per_task = s["bytes"] / max(1, s["tasks"])
    # A Kafka read splits by the topic's partitions, not by files.
    kafka = stage is not None and any(n.startswith(KAFKA_RDDS) for n in stage.rdds)
    values = {
        "kafka": kafka,
        "engine": engine,
        "reads": reads,
        "stage_id": s["stage_id"],
        "n": partitions,
        "now": s["tasks"],
        "tasks": s["tasks"],
        "call": call,
        "call_new": call_new,
        "split": f"{max(1, int(per_task * s['tasks'] / partitions) >> 20)}m",
        "split_now": size(cap),
        # Splits near the cap: the files are large enough to cut smaller;
        # well over it, the scan could not cut them (gzip, one file a task).
        "splittable_input": not kafka and 0.5 * cap <= per_task <= UNSPLIT_RATIO * cap,
        # The scan's cap splits a DataFrame's files; the RDD API splits by
        # the file system's blocks and minPartitions, which it does not know.
        "unsplittable_input": reads == "input"
        and not kafka
        and engine not in ("rdd", "pyspark_rdd")
        and per_task > UNSPLIT_RATIO * cap,
        "aqe_coalesced": reads == "shuffle"
        and call is None
        and facts.aqe(s["stage_id"])
        and stage is not None
        and any(
            n.startswith(("AQEShuffleRead", "CustomShuffleReader")) for n in stage.rdds
        )
        and s["tasks"] < _shuffle_partitions(facts, s["stage_id"]),
        # A larger shuffle.partitions acts only where the shuffle ran with
        # fewer (AQE's coalescing aside).
        "shuffle_below": partitions > _shuffle_partitions(facts, s["stage_id"]),
        "advisory": f"{max(1, int(per_task / 2) >> 20)}m",
    }
    # Fewer, larger tasks (one wave fewer) or more, smaller ones.
    problem = "fewer_partitions" if partitions < s["tasks"] else "more_partitions"
    if problem == "fewer_partitions":
        values["split"] = (
            f"{max(1, -(-int(per_task * s['tasks'] / partitions) >> 20))}m"
        )
    found = remedies(problem, facts, **values)
    if not values["splittable_input"] and (
        s.get("reshuffle_bytes") or values["unsplittable_input"]
    ):
        found = [r for r in found if not r.startswith("spark.sql.files.")]
    if all(r in NOTES for r in found):
        return remedy_text(found, _fallback_split(s, partitions, reads))
    return f"{partitions} partitions: " + remedy_text(found, "")


def _shuffle_partitions(facts: Any, stage_id: int) -> int:
    value = facts.setting("spark.sql.shuffle.partitions", stage_id)
    try:
        return int(value) if value is not None else 200
    except ValueError:
        return 200


def _action(
    ctx: Context, op: dict[str, Any], s: dict[str, Any], pi: int, partitions: int
) -> str:
    where = stage_label(op["stage_id"], op["call_site"] or op["name"])
    head = f"{where} is {op['cp_share']:.0%} of the critical path"
    if s["records"] > 0 and s.get("case") != "tail":
        head += (
            f"; its true rate is {count(s['true_rate'])} records/s per slot "
            f"(observed {count(s['observed_rate'])}/s on {s['slots_now']} slots)"
        )
    split = _split(ctx, s, partitions)
    held = ""
    if s["held_slots"] >= 0.05:
        held = f", other stages holding {s['held_slots']:.2g} of them meanwhile"
    if s.get("case") == "tail":
        return (
            f"{head}. It ran {s['tasks']} tasks on {s['free_slots']} slots{held}: "
            f"{s['waves']} waves, the last of {s['last_wave']} task(s) while the "
            f"other slots idled; {partitions} partitions fill every wave: {split}"
        )
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
        f"{head}. To finish in {duration(s['target_ns'])} it needs pi = {pi} slots "
        f"(it had {s['free_slots']} free of {s['slots']}{held}): {more}, and {split}"
    )


def _priced(
    ctx: Context, change: StagePartitions, estimate: float, cost_ns: float
) -> tuple[float, dict[str, Any]]:
    """The saving net of a reshuffle's price (the replay's saving when the
    trace replays, else the rule's estimate), with the replay's numbers."""
    saving = estimate
    evidence: dict[str, Any] = {"estimated_saving_ns": estimate}
    found = _replayed(ctx, change)
    if found is not None:
        saving = max(0.0, float(found.saving_ns))
        no_lag = predict(ctx.replay, change, lags=False)  # type: ignore[arg-type]
        evidence |= {
            "replayed_saving_ns": saving,
            "replayed_saving_no_lag_ns": max(0.0, float(no_lag.saving_ns)),
            "replay_error": found.replay_error,
            "replayed_stage_ns": found.stage_before_ns,
            "predicted_stage_ns_after": found.stage_after_ns,
        }
    return saving - cost_ns, evidence


def _replayed(ctx: Context, change: StagePartitions) -> Any:
    if ctx.replay is None:
        return None
    try:
        return predict(ctx.replay, change)
    except InputError:
        return None


#: A wave tail worth a look: the last wave holds at most this share of the
#: slots, and the stage ran at most this many waves (past that, one
#: partial wave is a small part of the stage).
TAIL_FILL, TAIL_WAVES = 0.5, 8
#: Stages a run's parallelism pass looks at, at most (by CP share).
MAX_STAGES = 2000
#: A saving, as a share of the run (of the jobs' time in an interactive
#: session), under which a stage's task count is no finding: a few idle
#: slots in a small stage, a partial wave, are how stages run.
MIN_SAVING_SHARE = 0.05
#: Task rows the pass reads in all, at most (stages x tasks).
TASK_READS = 20_000_000
#: An operator whose stages together hold this share of the critical path
#: has each of them looked at, however small (an iterative fit runs one
#: stage per iteration, each a sliver of the run).
OPERATOR_MIN_SHARE = 0.05


def _candidates(ctx: Context) -> pl.DataFrame:
    """The per-stage rows of the operator frame worth a look: a stage with
    ``parallelism_min_share`` of the path, or one of an operator whose
    stages together hold :data:`OPERATOR_MIN_SHARE`."""
    opts = ctx.options
    staged = ctx.operator.filter(pl.col("stage_id").is_not_null())
    if staged.is_empty():
        return staged
    total = pl.col("cp_share").sum().over("operator")
    keep = (pl.col("cp_share") >= opts.parallelism_min_share) | (
        (total >= max(OPERATOR_MIN_SHARE, opts.parallelism_min_share))
        & (pl.col("cp_share") > 0)
    )
    # Each stage looked at reads the run's tasks a few times: a long run
    # (millions of tasks) has its most critical stages looked at only.
    most = min(MAX_STAGES, max(50, TASK_READS // max(1, len(ctx.tasks))))
    return (
        staged.filter(keep)
        .sort([pl.col("cp_share"), "stage_id"], descending=[True, False])
        .head(most)
    )


def _tail(s: dict[str, Any], reads: str | None) -> list[int]:
    """Partition counts that even out a stage's waves (a sparse last wave):
    one wave fewer of larger tasks, or full waves of smaller ones; for a
    stage that reads files only the latter (its splits are as large as its
    files allow: the scan packs small files up to its cap already)."""
    free, tasks = s["free_slots"], int(s["tasks"])
    if free < 2 or tasks <= free:
        return []
    waves = -(-tasks // free)
    last = tasks - (waves - 1) * free
    if waves > TAIL_WAVES or last > TAIL_FILL * free:
        return []
    s |= {"waves": waves, "last_wave": last, "case": "tail"}
    if reads == "input":
        return [free * waves]
    return [free * (waves - 1), free * waves]


def parallelism(ctx: Context) -> list[Hint]:
    """Slot counts and partitions (DS2) for stages that leave slots idle:
    fewer tasks than free slots, or a sparse last wave; each saving
    replayed with the stage re-divided (:class:`~sparktrail.whatif.changes.
    StagePartitions`)."""
    opts = ctx.options
    stages = _candidates(ctx)
    if stages.is_empty():
        return []
    labels: dict[int, str] | None = None
    hints = []
    for op in stages.iter_rows(named=True):
        if not ctx.facts.whole_stage(op["stage_id"]):
            continue  # its tasks are not all in the log: no count to judge
        stage = ctx.facts.stage(op["stage_id"])
        if stage is not None and stage.purpose is not None:
            continue  # Spark's own listing or schema job: no split of the program's
        if ctx.uneven(op["stage_id"]):
            continue  # a tail of slow tasks holds it: their cause, not the count
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
        tail: list[int] = []
        if opts.target_stage_seconds is not None:
            target_ns = opts.target_stage_seconds * 1e9
        elif s["slots_now"] < s["free_slots"] and s["tasks"] < s["free_slots"]:
            target_ns = s["useful_ns"] / s["free_slots"]
        else:
            tail = _tail(s, ctx.facts.reads(op["stage_id"]))
            if not tail or ctx.replay is None:
                continue
            if not _ends_in_a_later_wave(ctx, op["stage_id"]):
                continue  # a first-wave task holds it: no wave to even out
            target_ns = s["useful_ns"] / s["free_slots"]
        # DS2: pi = target rate / true rate per slot = useful time / target.
        pi = math.ceil(s["useful_ns"] / target_ns - 1e-9)
        if not tail and pi <= s["slots_now"]:
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
            if _needs_reshuffle(ctx, s):
                s |= reshuffle_price(ctx, s, min(pi, s["free_slots"]))
        s |= {
            "target_ns": target_ns,
            "true_rate": s["records"] / s["useful_ns"] * 1e9,
            "observed_rate": s["records"] / s["stage_time_ns"] * 1e9,
        }
        predicted = s["useful_ns"] / min(pi, s["free_slots"])
        critical_ns = op["cp_share"] * ctx.wall_ns
        saving = min(critical_ns, max(0.0, s["stage_time_ns"] - predicted))
        if tail:
            partitions, saving = _best_tail(ctx, op["stage_id"], tail)
            if partitions is None or saving < MIN_SAVING_SHARE * ctx.judged_ns:
                continue  # a partial wave of a small stage: no finding
            saving = min(critical_ns, saving)
        evidence = {k: v for k, v in s.items() if k not in ("true_rate",)} | {
            "cp_share": op["cp_share"],
            "true_rate_per_slot": s["true_rate"] if s["records"] > 0 else None,
            "observed_rate": s["observed_rate"] if s["records"] > 0 else None,
            "target_stage_ns": target_ns,
            "target_rate": s["records"] / target_ns * 1e9 if s["records"] > 0 else None,
            "pi": pi,
            "partitions": partitions,
            "engine": ctx.facts.engine(op["stage_id"]),
            "min_share": MIN_SAVING_SHARE,
        }
        if not tail:
            # Stages of several operators that all ran as few tasks on as
            # many slots share one cause (an input's partitions, carried
            # through every stage): one hint.
            evidence["setting"] = f"{int(s['tasks'])} tasks on {s['free_slots']} slots"
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
                # A stage off the critical path saves nothing by running
                # faster: the replay's saving is capped as the estimate is.
                max_saving_ns=critical_ns,
            )
        )
    return hints


def _needs_reshuffle(ctx: Context, s: dict[str, Any]) -> bool:
    """Whether more tasks for a stage that reads input cost a shuffle: not
    where the input splits for free (a parallelized collection, a range,
    files read by the RDD API with ``minPartitions``, file splits at the
    scan's cap)."""
    stage = ctx.facts.stage(s["stage_id"])
    if stage is None or stage.reads is None:
        return True  # unknown: priced, as the rule always did
    if stage.reads in ("collection", "receiver"):
        return False
    if stage.reads == "input":
        cap = ctx.facts.scan_cap()
        if stage.engine in ("rdd", "pyspark_rdd"):
            return False  # textFile(path, minPartitions) splits it
        return bool(s["bytes"] / max(1, s["tasks"]) < 0.5 * cap)
    return stage.reads == "cache"


def _ends_in_a_later_wave(ctx: Context, stage_id: int) -> bool:
    """Whether the task that ends the stage launched after its first task
    ended (in a later wave): a sparse last wave can hold a stage only then."""
    tasks = ctx.tasks.filter(pl.col("stage_id") == stage_id).select(
        "launch_ns", "end_ns"
    )
    if tasks.is_empty() or tasks["end_ns"].null_count() == len(tasks):
        return True
    first_end = tasks["end_ns"].min()
    last = tasks.sort("end_ns", descending=True, nulls_last=True).row(0)
    return bool(last[0] is not None and last[0] >= first_end)


def _best_tail(
    ctx: Context, stage_id: int, counts: list[int]
) -> tuple[int | None, float]:
    """The partition count of ``counts`` whose replay saves most, and that
    saving (``None``: none saves), at most the last wave's longest task: an
    even split cannot save more than the wave it removes (the replay's
    launch lags of tasks it drops may say more)."""
    best: tuple[int | None, float] = (None, 0.0)
    bound = _last_wave_ns(ctx, stage_id)
    for n in counts:
        found = _replayed(ctx, StagePartitions(stage_id, n))
        if found is not None and min(found.saving_ns, bound) > best[1]:
            best = (n, float(min(found.saving_ns, bound)))
    return best


def _last_wave_ns(ctx: Context, stage_id: int) -> float:
    """The longest task of a stage (what its last wave lasts at most)."""
    row = ctx.stage_row(stage_id)
    return float(row["longest_ns"] or 0.0) if row is not None else 0.0
