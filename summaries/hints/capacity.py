"""What ``idle_capacity`` needs to price its advice (issue 26).

* :func:`executor_slots`: each executor's lifetime in the run and its slots
  (its cores; on a GPU executor, its GPU slots: :func:`gpu_slots`);
* :func:`busy_rows`: the busy (not ``waiting``) rows of every executor slot;
* :func:`replay_idle_timeout`: the proposed
  ``spark.dynamicAllocation.executorIdleTimeout`` replayed per executor:
  every idle interval between its busy periods longer than the timeout
  would have released it once the timeout passed, and a new executor
  comes back for its next busy period, starting up meanwhile (the start-up
  is a cost, taken off the freed time);
* :func:`recipe`: the action per cluster manager
  (:func:`~.platform.cluster_manager`): what releases idle executors there,
  and which prerequisite is missing.

Assumptions
-----------
* An executor is idle while none of its slots runs a task; Spark releases
  it after ``executorIdleTimeout`` of that (``cachedExecutorIdleTimeout``
  keeps one that caches blocks, default forever; the log does not say
  which executors cache, so the replay may over-count there, and the
  action says so).
* An executor's start-up (request to registration) is taken from the log:
  the earliest any executor registered after the application started
  (which also counts the driver's own start: an upper bound, so the
  saving is a lower one), else :data:`DEFAULT_STARTUP_NS`.
* A GPU executor (``spark.executor.resource.gpu.amount``) runs
  ``spark.rapids.sql.concurrentGpuTasks`` tasks on its GPU at a time (the
  RAPIDS plugin), else ``gpu amount / spark.task.resource.gpu.amount``:
  those are its slots; CPU cores idle beside a busy GPU are not spare.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import polars as pl

from sparktrail.pag.context import AppContext
from sparktrail.pag.trace import collect_slices
from sparktrail.units import duration

from .inputs import Context
from .platform import spark_at_least
from .wording import settings_text

__all__ = [
    "DEFAULT_STARTUP_NS",
    "DEFAULT_TIMEOUT_NS",
    "PROPOSED_TIMEOUT_NS",
    "Life",
    "Replayed",
    "busy_rows",
    "busy_slots",
    "duration_ns",
    "executor_slots",
    "gpu_slots",
    "idle_timeout_ns",
    "max_executors",
    "recipe",
    "replay_idle_timeout",
    "startup_ns",
]

#: Spark's default ``spark.dynamicAllocation.executorIdleTimeout``.
DEFAULT_TIMEOUT_NS = 60_000_000_000
#: The timeout the hint proposes (when below the one in force).
PROPOSED_TIMEOUT_NS = 30_000_000_000
#: An executor's start-up when the log does not show one.
DEFAULT_STARTUP_NS = 5_000_000_000

_UNITS = {
    "us": 1e3,
    "ms": 1e6,
    "s": 1e9,
    "m": 60e9,
    "min": 60e9,
    "h": 3600e9,
    "d": 86400e9,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def duration_ns(text: str | None, unit_ns: float = 1e9) -> int | None:
    """A Spark time setting in ns (a bare number is in ``unit_ns``, seconds
    for the dynamic-allocation timeouts); ``None`` if unset or unreadable.

    >>> duration_ns("150"), duration_ns("30s"), duration_ns("2min"), duration_ns("x")
    (150000000000, 30000000000, 120000000000, None)
    """
    found = _DURATION.match((text or "").lower())
    if not found:
        return None
    scale = _UNITS.get(found.group(2)) if found.group(2) else unit_ns
    if scale is None:
        return None
    return int(float(found.group(1)) * scale)


def idle_timeout_ns(app: AppContext) -> int:
    """``executorIdleTimeout`` in force (Spark's 60 s when unset)."""
    key = "spark.dynamicAllocation.executorIdleTimeout"
    return duration_ns(app.setting(key)) or DEFAULT_TIMEOUT_NS


def _number(app: AppContext, key: str) -> float | None:
    try:
        return float(app.setting(key) or "")
    except ValueError:
        return None


def gpu_slots(app: AppContext, cores: int | None = None) -> int | None:
    """Tasks an executor runs on its GPU at a time (``None``: no GPU).

    >>> gpu_slots(AppContext(properties={"spark.executor.resource.gpu.amount": "1",
    ...     "spark.task.resource.gpu.amount": "0.0625",
    ...     "spark.rapids.sql.concurrentGpuTasks": "2"}))
    2
    >>> gpu_slots(AppContext(properties={"spark.executor.resource.gpu.amount": "1",
    ...     "spark.task.resource.gpu.amount": "0.25"}), cores=8)
    4
    """
    gpus = _number(app, "spark.executor.resource.gpu.amount")
    if not gpus or gpus <= 0:
        return None
    concurrent = _number(app, "spark.rapids.sql.concurrentGpuTasks")
    rapids = concurrent is not None or any(
        k.startswith("spark.rapids.") for k in app.properties
    )
    if rapids:
        # The RAPIDS plugin's default is 2 (1 before 21.x); per GPU.
        return max(1, int((concurrent or 2) * gpus))
    per_task = _number(app, "spark.task.resource.gpu.amount")
    slots = int(gpus / per_task + 1e-9) if per_task and per_task > 0 else int(gpus)
    return max(1, min(slots, cores) if cores else slots)


@dataclass(frozen=True)
class Life:
    """One executor in the run: ``[start_ns, end_ns)``, its ``cores`` and the
    ``slots`` counted as capacity (its cores, or its GPU slots)."""

    executor: str
    start_ns: int
    end_ns: int
    cores: int
    slots: int

    @property
    def lived_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


def executor_slots(ctx: Context, gpu: int | None) -> tuple[list[Life], list[str]]:
    """Each executor's life in the trace's span and its slots, and what
    could not be checked (executors the log does not state: lifetimes and
    cores taken from the trace's own slot timelines)."""
    start, end = ctx.span_ns
    timelines = dict(
        ctx.slot_time.group_by("executor")
        .agg(pl.col("src_worker").n_unique())
        .iter_rows()
    )
    lives: list[Life] = []
    unchecked = []
    known = {e.executor_id: e for e in ctx.app.executors if e.executor_id != "driver"}
    for executor, e in known.items():
        cores = e.cores or timelines.get(executor)
        if not cores:
            continue
        a = max(start, e.added_ns if e.added_ns is not None else start)
        b = min(end, e.removed_ns if e.removed_ns is not None else end)
        lives.append(Life(executor, a, max(a, b), cores, gpu or cores))
    missing = sorted(set(timelines) - set(known))
    if missing:
        unchecked.append(
            "the log states no ExecutorAdded for executor(s) "
            f"{', '.join(missing[:5])}: their lifetimes are the whole run"
        )
        for executor in missing:
            cores = int(timelines[executor])
            lives.append(Life(executor, start, end, cores, gpu or cores))
    return lives, unchecked


def busy_rows(ctx: Context) -> pl.DataFrame:
    """``executor, start_ns, end_ns`` of every busy (not ``waiting``) row of
    positive length on an executor slot."""
    return collect_slices(
        ctx.trace,
        lambda _, frame: (
            ctx.slot_rows(frame)
            .filter(
                (pl.col("activity") != "waiting")
                & (pl.col("end_ns") > pl.col("start_ns"))
            )
            .select("executor", "start_ns", "end_ns")
        ),
    )


def busy_slots(busy: pl.DataFrame, caps: dict[str, int]) -> tuple[float, int]:
    """Busy slot-ns and the peak of busy slots, an executor's running tasks
    counted up to its slots (``caps``: a GPU executor runs more tasks than
    its GPU slots)."""
    if busy.is_empty():
        return 0.0, 0
    events = (
        pl.concat(
            [
                busy.select(
                    "executor", pl.col("start_ns").alias("t"), pl.lit(1).alias("d")
                ),
                busy.select(
                    "executor", pl.col("end_ns").alias("t"), pl.lit(-1).alias("d")
                ),
            ]
        )
        .with_columns(
            pl.col("executor")
            .replace_strict(caps, default=1 << 30, return_dtype=pl.Int64)
            .alias("cap")
        )
        .sort("executor", "t", "d")
        .with_columns(pl.col("d").cum_sum().over("executor").alias("level"))
        .with_columns(pl.min_horizontal("level", "cap").alias("held"))
        .with_columns(
            (pl.col("t").shift(-1).over("executor") - pl.col("t"))
            .fill_null(0)
            .alias("dt"),
            (
                pl.col("held") - pl.col("held").shift(1).over("executor").fill_null(0)
            ).alias("step"),
        )
    )
    busy_ns = float(events.select((pl.col("held") * pl.col("dt")).sum()).item() or 0)
    peak = events.sort("t", "step").select(pl.col("step").cum_sum().max()).item()
    return busy_ns, int(peak or 0)


def startup_ns(app: AppContext, start_ns: int) -> tuple[int, str]:
    """An executor's start-up, and where it comes from."""
    first = app.start_ns if app.start_ns is not None else None
    added = [
        e.added_ns
        for e in app.executors
        if e.executor_id != "driver" and e.added_ns is not None
    ]
    if first is not None and added and min(added) > first:
        took = min(added) - first
        return took, (
            f"the first executor registered {duration(took)} after the "
            "application started"
        )
    assumed = duration(DEFAULT_STARTUP_NS)
    return DEFAULT_STARTUP_NS, f"assumed {assumed} (the log shows none)"


@dataclass(frozen=True)
class Replayed:
    """The timeout replayed: slot-ns and core-ns freed (net of start-ups),
    before the start-ups, how many releases and cold starts, and per
    executor the slot-ns freed."""

    freed_slot_ns: float
    freed_core_ns: float
    gross_core_ns: float
    releases: int
    cold_starts: int
    by_executor: dict[str, float]


def replay_idle_timeout(
    lives: list[Life], busy: pl.DataFrame, timeout_ns: int, startup: int
) -> Replayed:
    """The idle timeout replayed on each executor's busy periods.

    An idle interval of length ``g > timeout`` releases the executor after
    the timeout: ``g - timeout`` is freed; when a busy period follows, a new
    executor is requested for it and starts up meanwhile, so ``g - timeout
    - startup`` (at least 0) is freed. An executor that never ran a task is
    one idle interval, its whole life.

    >>> busy = pl.DataFrame({"executor": ["1", "1"], "start_ns": [0, 100],
    ...     "end_ns": [10, 110]})
    >>> r = replay_idle_timeout([Life("1", 0, 200, 2, 2)], busy, 30, 20)
    >>> (r.freed_slot_ns, r.releases, r.cold_starts)  # (90-30-20 + 90-30) x 2
    (200.0, 2, 1)
    """
    by_executor: dict[str, float] = {}
    gross = net_slots = net_cores = 0.0
    releases = cold = 0
    periods = {
        str(key[0]): frame
        for key, frame in busy.sort("executor", "start_ns")
        .partition_by("executor", as_dict=True)
        .items()
    }
    for life in lives:
        if life.lived_ns <= 0:
            continue
        rows = periods.get(life.executor)
        gaps: list[tuple[int, bool]] = []  # (length, a busy period follows)
        if rows is None or rows.is_empty():
            gaps.append((life.lived_ns, False))
        else:
            starts = rows["start_ns"].to_numpy()
            ends = rows["end_ns"].to_numpy()
            cursor = life.start_ns
            for s, e in zip(starts, ends, strict=True):
                s, e = int(s), int(e)
                if e <= life.start_ns or s >= life.end_ns:
                    continue
                if s > cursor:
                    gaps.append((s - cursor, True))
                cursor = max(cursor, e)
            if life.end_ns > cursor:
                gaps.append((life.end_ns - cursor, False))
        freed = 0.0
        for length, followed in gaps:
            if length <= timeout_ns:
                continue
            releases += 1
            gross += (length - timeout_ns) * life.cores
            kept = length - timeout_ns - (startup if followed else 0)
            if followed:
                cold += 1
            freed += max(0, kept)
        if freed > 0:
            by_executor[life.executor] = freed * life.slots
        net_slots += freed * life.slots
        net_cores += freed * life.cores
    return Replayed(net_slots, net_cores, gross, releases, cold, by_executor)


def _shuffle_prerequisite(app: AppContext, manager: str) -> tuple[dict[str, str], str]:
    """The settings dynamic allocation needs to release executors whose
    shuffle output is still wanted, and what the log shows missing."""
    tracking = app.flag("spark.dynamicAllocation.shuffleTracking.enabled")
    service = app.flag("spark.shuffle.service.enabled")
    if manager == "kubernetes":
        if tracking:
            return {}, ""
        if spark_at_least(app, 3, 0) is False:
            return {}, "Spark before 3.0 has no dynamic allocation on Kubernetes"
        return (
            {"spark.dynamicAllocation.shuffleTracking.enabled": "true"},
            "Kubernetes has no external shuffle service: shuffle tracking is missing",
        )
    if service or tracking:
        return {}, ""
    if spark_at_least(app, 3, 0) is False:
        return (
            {"spark.shuffle.service.enabled": "true"},
            "spark.shuffle.service.enabled is missing (Spark before 3.0 needs "
            "the external shuffle service running on every node)",
        )
    return (
        {"spark.dynamicAllocation.shuffleTracking.enabled": "true"},
        "neither spark.shuffle.service.enabled nor "
        "spark.dynamicAllocation.shuffleTracking.enabled is set (Spark refuses "
        "dynamic allocation without one; shuffle tracking keeps executors "
        "whose shuffle output a job still reads, the external shuffle "
        "service lets them go)",
    )


def _setting_value(ns: int) -> str:
    """A duration as a Spark setting's value (``60s``), not for reading."""
    return f"{round(ns / 1e9)}s"


def recipe(
    app: AppContext, manager: str, timeout_ns: int, high: int, executors: int
) -> tuple[str, dict[str, object]]:
    """What releases idle executors on ``manager``, as an action, and the
    evidence behind it (``missing``: a prerequisite the log shows unset)."""
    timeout = _setting_value(timeout_ns)
    bound = f"{high} executor(s) were the most busy at once (of {executors})"
    if manager == "databricks":
        tags = "spark.databricks.clusterUsageTags."
        low_now = app.setting(tags + "clusterMinWorkers")
        high_now = app.setting(tags + "clusterMaxWorkers")
        now = (
            f"autoscaling is on ({low_now}-{high_now} workers)"
            if low_now and high_now
            else "turn on the cluster's autoscaling"
        )
        return (
            f"on Databricks {now}: set its min workers to 0-1 and max workers "
            f"to {high} ({bound}); Databricks ignores spark.dynamicAllocation.*",
            {},
        )
    if manager == "emr-serverless":
        return (
            "on EMR Serverless dynamic allocation is on by default: pass "
            f"--conf spark.dynamicAllocation.executorIdleTimeout={timeout} and "
            f"spark.dynamicAllocation.maxExecutors={high} in the job's "
            "sparkSubmitParameters, and size the application's initialCapacity "
            f"(pre-initialized workers) and maximumCapacity to it ({bound})",
            {},
        )
    if manager == "glue":
        return (
            "on AWS Glue turn on Auto Scaling (--enable-auto-scaling true, Glue "
            f"3.0 or later) with NumberOfWorkers={high + 1} as its maximum "
            f"(driver included; {bound})",
            {},
        )
    if manager == "dataproc-serverless":
        return (
            "on Dataproc Serverless autoscaling is dynamic allocation: set the "
            f"batch properties spark.dynamicAllocation.executorIdleTimeout={timeout} "
            f"and spark.dynamicAllocation.maxExecutors={high} ({bound}), and "
            "spark.dataproc.scaling.version=2 to scale down without waiting for "
            "shuffle migration",
            {},
        )
    # yarn, standalone, kubernetes, mesos: Spark's own dynamic allocation.
    prerequisite, missing = _shuffle_prerequisite(app, manager)
    if missing and not prerequisite:  # no dynamic allocation there at all
        return f"{missing}: upgrade to Spark 3.0 or later", {"missing": missing}
    wanted = {"spark.dynamicAllocation.enabled": "true"}
    wanted |= prerequisite
    wanted["spark.dynamicAllocation.executorIdleTimeout"] = timeout
    now_max = _number(app, "spark.dynamicAllocation.maxExecutors")
    if high < executors and (now_max is None or now_max > high):  # never a raise
        wanted["spark.dynamicAllocation.maxExecutors"] = str(high)
    text = f"set {settings_text(app, wanted)}"
    if missing:
        text += f" ({missing})"
    text += (
        f"; {bound}. Executors that cache blocks stay unless "
        "spark.dynamicAllocation.cachedExecutorIdleTimeout is set"
    )
    evidence: dict[str, object] = {"missing": missing} if missing else {}
    return text, evidence


def max_executors(peak_slots: int, slots: int) -> int:
    """Executors that hold ``peak_slots`` busy slots.

    >>> max_executors(17, 16)
    2
    """
    return max(1, math.ceil(peak_slots / max(1, slots)))
