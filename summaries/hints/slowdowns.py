"""An executor's slowdown at the same work: its median task time over its
peers', stage by stage (the evidence of ``straggler_executor``).

In each stage where an executor and its peers (the other executors, or
those of its own host) each ran a warm, settled task or more: its median
task time over theirs; the slowdown is the median of those ratios over the
stages. Settled: successful or of unknown status, with an executor and a
stage. Cold, and left out: each executor's first wave (launched before
any task there finished) and, in its first stage, the tasks that spent
most of their time before running.

A long run's tasks (more than a slice, :func:`~sparktrail.pag.trace.maps_in_place`)
are read a slice at a time: the executors' first ends and first stages
are aggregates of a group-by over slices, and the warm tasks' times go to
two arrays of packed keys in mapped files, sorted by (stage, executor)
and by (stage, peers) (:class:`~sparktrail.pag.sorted_groups.SortedGroups`),
whose medians and peers' medians are exact (DESIGN §10). A short run, or
one whose settled tasks lack a time, takes them in memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl

from sparktrail.pag.sorted_groups import SortedGroups, packing
from sparktrail.pag.trace import (
    mapped_array,
    maps_in_place,
    release_if_long,
    slices_group_by,
    trace_slices,
)
from sparktrail.whatif.replay import int_median

__all__ = ["COLD_SHARE", "slowdowns"]

#: Attempts that say something of an executor's speed: successful (or of
#: unknown status), with an executor and a stage.
_SETTLED = (
    pl.col("executor").is_not_null()
    & pl.col("stage_id").is_not_null()
    & (pl.col("status").is_null() | (pl.col("status") == "success"))
)


def slowdowns(
    tasks: pl.DataFrame, min_tasks: int, hosts: dict[str, str] | None = None
) -> dict[str, float]:
    """Each executor's median over stages of (its median task time / the
    other executors' median task time in the same stage), over the stages
    where each side ran a task or more, once those stages hold
    ``min_tasks`` of its tasks and ``min_tasks`` of the others' in all;
    failed attempts and cold tasks (:func:`_cold`) left out.

    With ``hosts`` (executor -> host), "the others" are the executors on
    its own host; an executor alone on its host has no slowdown.
    """
    if maps_in_place(len(tasks)):
        measured = _sorted_slowdowns(tasks, min_tasks, hosts)
        if measured is not None:
            return measured
    return _slowdowns_in_memory(tasks, min_tasks, hosts)


def _of_executor(tasks: pl.DataFrame, value: pl.Expr) -> pl.Expr:
    """``value`` aggregated over each executor's tasks, as a column of
    ``tasks``: what ``value.over("executor")`` gives (the executor is never
    null), from a group-by of one row per executor: the window expression
    held ~50 bytes a task while it ran (1.7 GB at 3.3·10^7 tasks)."""
    of = tasks.group_by("executor").agg(value.alias("value"))
    if of.is_empty():  # polars' replace_strict fails on an empty mapping
        return pl.lit(None, dtype=of["value"].dtype)
    return pl.col("executor").replace_strict(
        of["executor"], of["value"], return_dtype=of["value"].dtype
    )


def _first_waves(tasks: pl.DataFrame) -> pl.Expr:
    """Tasks launched on an executor before any task there finished: they
    carry its start-up (JVM, Python workers), not its speed."""
    return pl.col("launch_ns") < _of_executor(tasks, pl.col("end_ns").min())


#: A task of an executor's first stage that spent this share of its time
#: before running (scheduling, deserialization) is a cold start.
COLD_SHARE = 0.5


def _cold(tasks: pl.DataFrame) -> pl.Series:
    """Tasks that carry their executor's start-up, not its speed: its first
    wave, and the tasks of its first stage that spent most of their time
    before running (a new executor deserializing its first task binaries
    and broadcasts: churn of dynamic allocation). A mask of ``tasks``' rows,
    its two parts computed one after the other: each takes a column of
    every attempt while it runs."""
    cold = tasks.select(_first_waves(tasks)).to_series()
    # Each part reads columns of every attempt: a long trace's mapped facts
    # keep their pages only while a part reads them (DESIGN §10).
    release_if_long(len(tasks))
    if "overhead_ns" not in tasks.columns:
        return cold
    if tasks["launch_ns"].null_count() or tasks["stage_id"].null_count():
        first_stage = (
            pl.col("stage_id").sort_by("launch_ns", "stage_id").first().over("executor")
        )
    else:
        # The same stage without sorting each executor's attempts (~200
        # against ~90 MB at 3.3·10^6 tasks): the least stage id among its
        # earliest launches, which is what sorts first when neither is null.
        earliest = pl.col("launch_ns") == _of_executor(tasks, pl.col("launch_ns").min())
        first_stage = _of_executor(tasks.filter(earliest), pl.col("stage_id").min())
    overhead = pl.col("overhead_ns").fill_null(0)
    before_run = overhead >= COLD_SHARE * pl.col("duration_ns")
    first = (pl.col("stage_id") == first_stage) & before_run
    cold = cold | tasks.select(first).to_series()
    release_if_long(len(tasks))
    return cold


def _executor_codes(executors: pl.Series) -> tuple[list[str], np.ndarray[Any, Any]]:
    """The distinct names of ``executors`` (none null) and each attempt's
    index among them (int32), read off the categorical's codes: 8 bytes an
    attempt, where replacing the names took ~40.

    >>> names, code = _executor_codes(pl.Series(["2", "1", "2"]))
    >>> [names[c] for c in code]
    ['2', '1', '2']
    """
    coded = executors.cast(pl.Categorical)
    distinct = coded.unique()
    physical = distinct.to_physical().to_numpy()
    index = np.zeros(int(physical.max()) + 1 if len(physical) else 0, dtype=np.int32)
    index[physical] = np.arange(len(physical), dtype=np.int32)
    names = [str(n) for n in distinct.cast(pl.String).to_list()]
    return names, index[coded.to_physical().to_numpy()]


def _slowdowns_in_memory(
    tasks: pl.DataFrame, min_tasks: int, hosts: dict[str, str] | None = None
) -> dict[str, float]:
    """:func:`slowdowns` with the warm tasks' columns in memory."""
    # Only the columns read are filtered (selecting them copies nothing).
    wanted = ["executor", "stage_id", "status", "duration_ns", "launch_ns", "end_ns"]
    tasks = tasks.select(
        *wanted, *(["overhead_ns"] if "overhead_ns" in tasks.columns else [])
    )
    settled = tasks.filter(_SETTLED)
    # Of the warm ones, only the three columns read on are filtered.
    done = settled.select("stage_id", "executor", "duration_ns").filter(~_cold(settled))
    release_if_long(len(settled))
    del settled
    if done.is_empty():
        return {}
    # The others' medians in numpy, over executor codes: a polars filter
    # per (stage, executor) was a query each (~0.2 ms).
    names, code = _executor_codes(done["executor"])
    stage_of = done["stage_id"].to_numpy()
    durations = done["duration_ns"].to_numpy()
    del done  # in numpy now
    own = _own_medians(stage_of, code, durations, names)
    host_code = host_of = np.zeros(0, dtype=np.int32)
    if hosts is not None:
        # Each task's host as a small integer (its executor's host's index
        # among the distinct ones): the host names themselves were a numpy
        # string array of 3.3·10^6 x 28 bytes.
        host_names = [hosts.get(n) or f"?{n}" for n in names]
        host_index = {h: i for i, h in enumerate(dict.fromkeys(host_names))}
        host_code = np.array([host_index[h] for h in host_names], dtype=np.int32)
        host_of = host_code[code]
    measured = []
    for stage, executor, median_own, n in own.rows():
        executor = str(executor)
        peers = (stage_of == stage) & (code != names.index(executor))
        if hosts is not None:
            peers &= host_of == host_code[names.index(executor)]
        others = durations[peers]
        if len(others) == 0:
            continue
        median = float(int_median(others, in_place=True))  # a copy already
        measured.append((executor, float(median_own), median, int(n), len(others)))
    return _pooled(measured, min_tasks)


def _pooled(
    measured: Iterable[tuple[str, float, float, int, int]], min_tasks: int
) -> dict[str, float]:
    """Each executor's slowdown from its stages' ``(executor, own median,
    peers' median, own tasks, peers' tasks)``: the median of its ratios
    over the stages where the peers' median is above 0, once those stages
    hold ``min_tasks`` of its tasks and ``min_tasks`` of its peers'.

    >>> _pooled([("1", 4.0, 2.0, 3, 5), ("1", 9.0, 3.0, 2, 1)], 3)
    {'1': 3.0}
    """
    ratios: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}  # [own tasks, others' tasks]
    for executor, own, others, n, m in measured:
        if others > 0:
            ratios.setdefault(executor, []).append(own / others)
            seen = counts.setdefault(executor, [0, 0])
            seen[0] += n
            seen[1] += m
    return {
        ex: sorted(r)[len(r) // 2]
        for ex, r in ratios.items()
        if min(counts[ex]) >= min_tasks
    }


def _own_medians(
    stage_of: np.ndarray[Any, Any],
    code: np.ndarray[Any, Any],
    durations: np.ndarray[Any, Any],
    names: list[str],
) -> pl.DataFrame:
    """``stage_id, executor, own, n``: the median task time and the tasks of
    each (stage, executor code) pair (codes index ``names``).

    Grouped by one integer per pair, not by the two keys: polars' median
    over a group-by of two keys took 280 MB beside 3.3·10^6 tasks.
    """
    width = max(1, len(names))
    pairs = pl.DataFrame({"pair": stage_of * width + code, "duration_ns": durations})
    own = pairs.group_by("pair").agg(
        pl.col("duration_ns").median().alias("own"), pl.len().alias("n")
    )
    stage, executor = np.divmod(own["pair"].to_numpy(), width)
    return own.select(
        pl.Series("stage_id", stage),
        pl.Series("executor", np.array(names, dtype=object)[executor], pl.String),
        "own",
        "n",
    )


def _sorted_slowdowns(
    tasks: pl.DataFrame, min_tasks: int, hosts: dict[str, str] | None
) -> dict[str, float] | None:
    """:func:`slowdowns` a slice at a time, with the medians taken from
    sorted packed keys in mapped files; None where the in-memory path must
    take them (a settled task without a time, values too wide to pack)."""
    pairs = _settled_pairs(tasks)
    if pairs is None:
        return None
    if pairs.is_empty():
        return {}
    executors = pairs["executor"].unique(maintain_order=True)
    names = [str(n) for n in executors.cast(pl.String).to_list()]
    stages = pairs["stage_id"].unique().sort()
    if hosts is None:
        host_of = np.zeros(len(names), dtype=np.int64)
    else:
        host_names = [hosts.get(n) or f"?{n}" for n in names]
        index = {h: i for i, h in enumerate(dict.fromkeys(host_names))}
        host_of = np.array([index[h] for h in host_names], dtype=np.int64)
    n_ex, n_hosts = len(names), int(host_of.max()) + 1
    lo, hi = pairs.select(pl.col("lo").min(), pl.col("hi").max()).row(0)
    pack = packing(len(stages) * n_ex, int(lo), int(hi))
    if pack is None:
        return None
    by_pair, by_peers = _warm_keys(tasks, pairs, executors, stages, host_of, pack)
    own = SortedGroups.of(by_pair, pack, len(stages) * n_ex)
    release_if_long(len(by_pair))
    peers = SortedGroups.of(by_peers, pack, len(stages) * n_hosts)
    release_if_long(len(by_peers))
    pair = np.flatnonzero(own.counts())
    stage, executor = np.divmod(pair, n_ex)
    peer = stage * n_hosts + host_of[executor]
    n_own = own.counts()[pair]
    n_others = peers.counts()[peer] - n_own
    has = n_others > 0
    pair, executor, peer, n_own, n_others = (
        a[has] for a in (pair, executor, peer, n_own, n_others)
    )
    lower = peers.kth_without(peer, (n_others - 1) // 2, own, pair)
    upper = peers.kth_without(peer, n_others // 2, own, pair)
    others = (lower + upper) / 2
    mine = own.medians()[pair]
    measured = zip(
        (names[ex] for ex in executor.tolist()),
        mine.tolist(),
        others.tolist(),
        n_own.tolist(),
        n_others.tolist(),
        strict=True,
    )
    return _pooled(measured, min_tasks)


def _settled_pairs(tasks: pl.DataFrame) -> pl.DataFrame | None:
    """Per (executor, stage) of the settled tasks, a slice at a time: their
    number, first launch and first end, least and greatest time; None when
    one of them lacks a launch, an end or a time."""
    times = ["launch_ns", "end_ns", "duration_ns"]
    pairs = slices_group_by(
        tasks.select("executor", "stage_id", "status", *times),
        ["executor", "stage_id"],
        [
            pl.len().alias("n"),
            pl.col("launch_ns", "end_ns").min(),
            pl.col("duration_ns").min().alias("lo"),
            pl.col("duration_ns").max().alias("hi"),
            pl.sum_horizontal(pl.col(times).null_count()).alias("nulls"),
        ],
        [
            pl.col("n").sum(),
            pl.col("launch_ns", "end_ns", "lo").min(),
            pl.col("hi").max(),
            pl.col("nulls").sum(),
        ],
        where=_SETTLED,
    ).collect()
    return None if pairs["nulls"].sum() else pairs


def _warm_keys(
    tasks: pl.DataFrame,
    pairs: pl.DataFrame,
    executors: pl.Series,
    stages: pl.Series,
    host_of: np.ndarray[Any, Any],
    pack: Any,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The warm tasks' times packed by (stage, executor) and by (stage,
    host of the executor), in two mapped arrays filled a slice at a time."""
    firsts = pairs.group_by("executor").agg(
        pl.col("end_ns").min().alias("first_end"),
        pl.col("launch_ns").min().alias("first_launch"),
    )
    # The least stage among an executor's earliest launches: each pair
    # knows its own earliest launch.
    first_stage = (
        pairs.join(firsts, on="executor")
        .filter(pl.col("launch_ns") == pl.col("first_launch"))
        .group_by("executor")
        .agg(pl.col("stage_id").min().alias("first_stage"))
    )
    firsts = firsts.join(first_stage, on="executor")

    def of_executor(column: str) -> pl.Expr:
        # (None for an executor with no settled task: its rows are not warm.)
        return pl.col("executor").replace_strict(
            firsts["executor"],
            firsts[column],
            default=None,
            return_dtype=firsts[column].dtype,
        )

    warm = _SETTLED & (pl.col("launch_ns") >= of_executor("first_end"))
    if "overhead_ns" in tasks.columns:
        before_run = pl.col("overhead_ns").fill_null(0) >= COLD_SHARE * pl.col(
            "duration_ns"
        )
        warm &= ~((pl.col("stage_id") == of_executor("first_stage")) & before_run)
    n_ex, n_hosts = len(executors), int(host_of.max()) + 1
    columns = ["executor", "stage_id", "status", "launch_ns", "end_ns", "duration_ns"]
    columns += ["overhead_ns"] if "overhead_ns" in tasks.columns else []
    upper = int(pairs["n"].sum())
    by_pair, by_peers = mapped_array(upper, np.uint64), mapped_array(upper, np.uint64)
    filled = 0
    for _, part in trace_slices(tasks.select(columns)):
        rows = (
            part.lazy()
            .filter(warm)
            .select(
                pl.col("stage_id").replace_strict(
                    stages, range(len(stages)), return_dtype=pl.Int64
                ),
                pl.col("executor").replace_strict(
                    executors, range(n_ex), return_dtype=pl.Int64
                ),
                "duration_ns",
            )
            .collect()
        )
        stage = rows["stage_id"].to_numpy()
        executor = rows["executor"].to_numpy()
        times = rows["duration_ns"].to_numpy()
        end = filled + len(rows)
        by_pair[filled:end] = pack.keys(stage * n_ex + executor, times)
        by_peers[filled:end] = pack.keys(stage * n_hosts + host_of[executor], times)
        filled = end
    return by_pair[:filled], by_peers[:filled]
