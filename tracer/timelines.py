"""Slots, their gaps and the driver's timeline as trace rows (DESIGN §5).

* Slots: an executor has ``Total Cores`` slots (``ExecutorAdded``); the local
  executor ``driver`` falls back to ``local[N]`` of ``spark.master``; with no
  core count the slots grow to the highest concurrency seen. A launch takes
  the lowest free slot; with none free (and the cap reached) it takes the
  slot that frees first and the task there is *clipped*: it ends at this
  launch, and the clipped time (driver-side result handling, part of Spark's
  scheduler delay) is taken from that task's ``scheduling`` piece first
  (:mod:`~sparktrail.tracer.task_pieces`).
* A slot's gap between two tasks is ``scheduling`` while some submitted
  stage has partitions not yet launched, else ``waiting``. Before its first
  and after its last task a slot has no rows (uncovered: waiting).
* Driver: each gap between consecutive driver events (application start,
  job start/end, launches, completions, application end) is named by the
  event that ends it: a launch -> ``scheduling``, a completion ->
  ``waiting``, the first job's start -> ``startup`` (the application
  starting: no advice about driver code may be drawn from it), anything
  else -> ``scheduling`` while a job runs, else ``driver``; but time
  while no job runs in which a Structured Streaming query waited for its
  next trigger (``waits``, :mod:`~sparktrail.tracer.streaming`) is
  ``trigger_wait`` (idle, but on the path: nothing else runs): a
  ``driver`` gap is cut there, and its pieces' vertices
  inside the gap take the seq of the gap's first event (their times are
  the gap's own), so seqs of later events never depend on the cuts.
* seq: every vertex of a worker gets the next value of that worker's
  counter (the driver's events in (time, log order)), so equal timestamps
  never make a cycle.

Assumptions
-----------
* Tasks come in launch order, ``(launch_ms, order)``.
* Times are ms in the records and ns in the rows; ``INF`` is the end of a
  task that has not finished while the log still grows.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sparktrail.pag.context import AppContext, local_cores
from sparktrail.pag.workers import worker_name

from .app_records import JobRecord, StageRecord, TaskRecord
from .fields import INF, MS
from .task_pieces import Label, task_rows
from .trace_rows import TraceRows

__all__ = [
    "Slots",
    "assign_slots",
    "driver_rows",
    "fix_driver_seqs",
    "master_cores",
    "pending_intervals",
    "slot_rows",
]

_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*\d+\s*,\s*(\d+)\s*,")

# Driver event kinds, in tie order they never need (order breaks ties).
_START, _JOB_START, _JOB_END, _LAUNCH, _COMPLETION, _END = range(6)

#: Each slot's (task, end_ns, clipped_ns) in launch order, by worker name.
Slots = dict[str, list[tuple[TaskRecord, int, int]]]


def master_cores(master: str | None) -> int | None:
    """Cores per executor that ``spark.master`` implies, if it says.

    >>> master_cores("local[4]"), master_cores("local"), master_cores("local[*]")
    (4, 1, None)
    """
    if not master:
        return None
    master = master.strip()
    if AppContext(master=master).is_local:
        return local_cores(master)
    match = _LOCAL_CLUSTER.match(master)
    return int(match.group(1)) if match else None


def assign_slots(
    ordered: list[TaskRecord],
    final: bool,
    end_ms: int,
    cores: Callable[[str], int | None],
) -> tuple[Slots, int, int]:
    """Map each slot to its (task, end_ns, clipped_ns) in launch order.

    ``cores`` gives an executor's slot count (``None``: unknown, grow).
    Also returns the number of finished tasks clipped and the ns clipped.

    >>> t = [TaskRecord(i, 0, 0, i, i, 0, "1", False, 10 * i, i, finish_ms=15)
    ...     for i in range(2)]
    >>> slots, tasks, ns = assign_slots(t, True, 20, lambda ex: 1)
    >>> [(w, [(r.task_id, e // MS, c // MS) for r, e, c in s])
    ...     for w, s in slots.items()], tasks, ns // MS
    ([('exec-1/0', [(0, 10, 5), (1, 15, 0)])], 1, 5)
    """
    free_at: dict[str, list[int]] = {}
    placed: dict[str, list[list[Any]]] = {}
    clipped_tasks = clipped_ns = 0
    for task in ordered:
        ex = task.executor_id
        busy = free_at.setdefault(ex, [])
        launch = task.launch_ms * MS
        slot = next((k for k, t in enumerate(busy) if t <= launch), None)
        if slot is None:
            cap = cores(ex)
            if cap is None or len(busy) < cap:
                slot = len(busy)
                busy.append(0)
                placed[worker_name(ex, slot)] = []
            else:
                slot = min(range(len(busy)), key=busy.__getitem__)
                previous = placed[worker_name(ex, slot)][-1]
                previous[2] = busy[slot] - launch
                previous[1] = launch
        finish = task.finish_ms if task.finish_ms is not None else None
        end = (end_ms * MS if final else INF) if finish is None else finish * MS
        busy[slot] = end
        placed[worker_name(ex, slot)].append([task, end, 0])
    out: Slots = {}
    for worker, items in placed.items():
        out[worker] = [(t, e, c) for t, e, c in items]
        for t, _, c in items:
            if c > 0 and t.finish_ms is not None:
                clipped_tasks += 1
                clipped_ns += c
    return out, clipped_tasks, clipped_ns


def pending_intervals(
    stages: Iterable[StageRecord], final: bool, end_ms: int
) -> list[tuple[int, int]]:
    """Merged times (ns) when some submitted stage has unlaunched tasks.

    >>> pending_intervals([StageRecord(submitted_ms=1, all_launched_ms=3),
    ...     StageRecord(submitted_ms=2, completed_ms=4)], True, 9)
    [(1000000, 4000000)]
    """
    spans = []
    for stage in stages:
        if stage.submitted_ms is None:
            continue
        stop = stage.all_launched_ms
        if stop is None:
            stop = stage.completed_ms
        if stop is None:
            stop = end_ms if final else INF // MS
        spans.append((stage.submitted_ms * MS, stop * MS))
    merged: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        elif stop > start:
            merged.append((start, stop))
    return merged


def slot_rows(
    rows: TraceRows,
    worker: str,
    tasks: list[tuple[TaskRecord, int, int]],
    pending: list[tuple[int, int]],
    label: Callable[[TaskRecord], Label],
    counted: set[int],
) -> None:
    """Add a slot's rows: its tasks and the gaps between them.

    ``label`` names a task's operator, job and stage; ``counted`` holds the
    task ids whose records count.
    """
    seq = 0
    prev_end: int | None = None
    for task, end, clipped in tasks:
        launch = task.launch_ms * MS
        task_label = label(task)
        if prev_end is not None:
            seq = _gap_rows(rows, worker, prev_end, launch, seq, pending, task_label)
        seq = task_rows(
            rows,
            worker,
            task,
            end,
            clipped,
            seq,
            task_label,
            task.task_id in counted,
        )
        # The next gap starts where this task left the slot, if it did.
        prev_end = None if end >= INF else end


def _gap_rows(
    rows: TraceRows,
    worker: str,
    start: int,
    stop: int,
    seq: int,
    pending: list[tuple[int, int]],
    label: Label,
) -> int:
    """Rows for a slot's idle gap [start, stop]; returns the seq after it."""
    if stop <= start:
        rows.add(
            worker,
            worker,
            start,
            start,
            "scheduling",
            seq,
            seq + 1,
            job_stage=label,
            settled=stop,
        )
        return seq + 1
    for a, b in itertools.pairwise(_cut_points(pending, start, stop)):
        if _covered(pending, a, b):
            rows.add(
                worker,
                worker,
                a,
                b,
                "scheduling",
                seq,
                seq + 1,
                job_stage=label,
                settled=stop,
            )
        else:
            rows.add(worker, worker, a, b, "waiting", seq, seq + 1, settled=stop)
        seq += 1
    return seq


def _cut_points(spans: list[tuple[int, int]], start: int, stop: int) -> list[int]:
    """``start``, where the sorted, merged ``spans`` begin and end inside
    ``[start, stop]``, and ``stop``: the pieces a gap is cut into (one
    piece, ``[start, start]``, when the gap is empty).

    >>> _cut_points([(2, 4), (6, 20)], 0, 10)
    [0, 2, 4, 6, 10]
    >>> _cut_points([(2, 4)], 5, 5)
    [5, 5]
    """
    cuts = [start]
    k = max(0, bisect.bisect_right(spans, (start, INF)) - 1)
    while k < len(spans) and spans[k][0] < stop:
        lo, hi = max(spans[k][0], start), min(spans[k][1], stop)
        if lo < hi:
            cuts.extend(x for x in (lo, hi) if x != cuts[-1])
        k += 1
    if cuts[-1] != stop or len(cuts) == 1:
        cuts.append(stop)
    return cuts


def _covered(pending: list[tuple[int, int]], a: int, b: int) -> bool:
    k = bisect.bisect_right(pending, (a, INF)) - 1
    return k >= 0 and pending[k][0] <= a and b <= pending[k][1]


@dataclass
class _DriverEvent:
    time_ms: int
    order: int
    kind: int
    task: TaskRecord | None = None
    job_id: int | None = None


def driver_rows(
    rows: TraceRows,
    jobs: dict[int, JobRecord],
    ordered: list[TaskRecord],
    app_start_ms: int | None,
    final: bool,
    end_ms: int,
    waits: list[tuple[int, int]] | None = None,
    settle: Callable[[int, int], int] | None = None,
) -> dict[tuple[int, int], int]:
    """Add the driver's rows; returns its seq for each launch and completion.

    The returned map, keyed by (task id, event kind), is what
    :func:`fix_driver_seqs` needs. ``waits`` (merged ns spans) are trigger
    waits; ``settle(start, end)`` says when how a ``driver`` gap is cut
    became known (default: its end).
    """
    events = _driver_events(jobs, ordered, app_start_ms, final, end_ms)
    seq_of: dict[tuple[int, int], int] = {}
    for i, ev in enumerate(events):
        if ev.task is not None:
            seq_of[(ev.task.task_id, ev.kind)] = i
    running: dict[int, int] = {}
    last_job: int | None = None
    started = False  # a job (or, attached late, a task) has started
    for i in range(len(events) - 1):
        ev, nxt = events[i], events[i + 1]
        if ev.kind == _JOB_START and ev.job_id is not None:
            running[ev.job_id] = running.get(ev.job_id, 0) + 1
            last_job = ev.job_id
        elif ev.kind == _JOB_END and ev.job_id in running:
            running.pop(ev.job_id)
        started = started or ev.kind in (_JOB_START, _LAUNCH)
        if nxt.kind == _LAUNCH:
            activity = "scheduling"
        elif nxt.kind == _COMPLETION:
            activity = "waiting"
        elif not started and nxt.kind == _JOB_START:
            activity = "startup"
        else:
            activity = "scheduling" if running else "driver"
        job = (last_job if last_job in running else max(running)) if running else None
        start, end = ev.time_ms * MS, nxt.time_ms * MS
        if activity == "driver" and (waits or settle):
            _idle_rows(rows, start, end, i, waits or [], settle)
            continue
        rows.add(
            "driver",
            "driver",
            start,
            end,
            activity,
            i,
            i + 1,
            job_stage=(None, job, None),
        )
    return seq_of


def _idle_rows(
    rows: TraceRows,
    start: int,
    end: int,
    seq: int,
    waits: list[tuple[int, int]],
    settle: Callable[[int, int], int] | None,
) -> None:
    """A driver gap with no job running: ``driver``, but ``trigger_wait`` where
    a query waited for its next trigger. Cut vertices keep ``seq``."""
    cuts = _cut_points(waits, start, end)
    last = len(cuts) - 2
    # Where the gap is cut depends on all of it: its pieces settle together.
    fixed = settle(start, end) if settle is not None else end
    for n, (a, b) in enumerate(itertools.pairwise(cuts)):
        activity = "trigger_wait" if _covered(waits, a, b) and a < b else "driver"
        rows.add(
            "driver",
            "driver",
            a,
            b,
            activity,
            seq,
            seq + 1 if n == last else seq,
            settled=fixed,
        )


def _driver_events(
    jobs: dict[int, JobRecord],
    ordered: list[TaskRecord],
    app_start_ms: int | None,
    final: bool,
    end_ms: int,
) -> list[_DriverEvent]:
    events: list[_DriverEvent] = []
    for job, rec in jobs.items():
        if rec.start_ms is not None:
            events.append(
                _DriverEvent(rec.start_ms, rec.start_order, _JOB_START, job_id=job)
            )
        if rec.end_ms is not None:
            events.append(_DriverEvent(rec.end_ms, rec.end_order, _JOB_END, job_id=job))
    for task in ordered:
        events.append(_DriverEvent(task.launch_ms, task.order, _LAUNCH, task))
        if task.finish_ms is not None:
            events.append(
                _DriverEvent(task.finish_ms, task.end_order, _COMPLETION, task)
            )
    first = min((e.time_ms for e in events), default=end_ms)
    start = app_start_ms if app_start_ms is not None else first
    events.append(_DriverEvent(min(start, first), -1, _START))
    if final:
        events.append(_DriverEvent(end_ms, 1 << 62, _END))
    events.sort(key=lambda e: (e.time_ms, e.order, e.kind))
    return events


def fix_driver_seqs(rows: TraceRows, seq_of: dict[tuple[int, int], int]) -> None:
    """Put the driver's seq on control rows (added with -1 as a placeholder)."""
    c = rows.cols
    for i, activity in enumerate(c["activity"]):
        if activity != "control":
            continue
        tid = c["task_id"][i]
        if c["src_worker"][i] == "driver":
            c["src_seq"][i] = seq_of[(tid, _LAUNCH)]
        else:
            c["dst_seq"][i] = seq_of[(tid, _COMPLETION)]
