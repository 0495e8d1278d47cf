"""A task attempt on its slot as trace rows: launch, pieces, completion (DESIGN §5).

A task's pieces (scheduling, deserialization, shuffle_read, processing,
gc, shuffle_write, serialization, result) are computed in ns as Spark's
UI does (scheduler delay = duration - run - deserialize - result
serialization - getting result, floored at 0; processing = run - fetch
wait - shuffle write - GC, floored at 0) and, if floors make them
overrun, scaled so they tile the task exactly. Zero-length pieces are
left out, except ``processing`` when it carries work (below): it stays as
a zero-length row where it would be, so no count vanishes with its time
(a task whose run time is all GC, fetch wait or shuffle write, or that
took no time at all). A clipped task (its slot was taken by the next launch, see
:mod:`~sparktrail.tracer.timelines`) loses the clipped time from its
``scheduling`` piece first; its completion edge runs from the clipped end
to the recorded finish.

``records``/``bytes`` (input plus shuffle read) sit on the task's
``processing`` row only, as does ``shuffle_write_bytes``, and only for
the attempt whose result counts: the first successful attempt of its
partition (in log order) in the stage. Failed, killed and later
duplicate attempts (a speculative copy, a rerun after an executor was
lost) keep their time but carry none, so sums over rows count each
partition once, in a followed trace as in a full import. Spilled bytes
(``memory_bytes_spilled``, ``disk_bytes_spilled``) are a cost of the
attempt, like its time: every attempt's ``processing`` row carries its
own (:func:`task_work`). A stateful task's state (``state_rows``,
``state_updated_rows``, ``state_memory_bytes``: its partition's state
store after the task) counts like its records: once per partition.

Assumptions
-----------
* A task without ``Task Metrics`` is all ``processing``.
* The driver's sequence numbers are not known yet: edges to and from the
  driver carry -1 there, filled in by
  :func:`~sparktrail.tracer.timelines.fix_driver_seqs`.
"""

from __future__ import annotations

from collections.abc import Iterable

from .app_records import TaskRecord
from .fields import INF, MS
from .trace_rows import NO_WORK, TraceRows

__all__ = [
    "PIECES",
    "Label",
    "clip_pieces",
    "counted_attempts",
    "fit",
    "task_pieces",
    "task_rows",
    "task_work",
]

PIECES = (
    "scheduling",
    "deserialization",
    "shuffle_read",
    "processing",
    "gc",
    "shuffle_write",
    "serialization",
    "result",
)

#: A row's ``operator``, ``job_id`` and ``stage_id``.
Label = tuple[str | None, int | None, int | None]


def task_pieces(task: TaskRecord, duration_ns: int) -> list[int]:
    """Split a task's ``duration_ns`` into the eight :data:`PIECES` (ns).

    Follows Spark's UI formulas; if floors at 0 make the pieces overrun the
    duration they are scaled down (cumulative rounding) to tile it exactly.

    >>> t = TaskRecord(0, 0, 0, 0, 0, 0, "1", False, 0, 0, has_metrics=True,
    ...     deserialize_ms=2, run_ms=5, gc_ms=1)
    >>> [p // MS for p in task_pieces(t, 10 * MS)]
    [3, 2, 0, 4, 1, 0, 0, 0]
    """
    if not task.has_metrics:
        return [0, 0, 0, duration_ns, 0, 0, 0, 0]
    getting = 0
    if task.getting_result_at > 0 and task.finish_ms is not None:
        getting = max(0, task.finish_ms - task.getting_result_at) * MS
    deser, run = task.deserialize_ms * MS, task.run_ms * MS
    gc, ser = task.gc_ms * MS, task.serialize_ms * MS
    fetch, write = task.fetch_wait_ms * MS, task.write_ns
    sched = max(0, duration_ns - run - deser - ser - getting)
    proc = max(0, run - fetch - write - gc)
    pieces = [sched, deser, fetch, proc, gc, write, ser, getting]
    return fit(pieces, duration_ns)


def fit(pieces: list[int], total: int) -> list[int]:
    """Scale non-negative ``pieces`` so they sum to ``total`` exactly.

    >>> fit([1, 1, 1], 10)
    [3, 4, 3]
    >>> fit([0, 0], 5)
    [5, 0]
    """
    pieces = [max(0, p) for p in pieces]
    current = sum(pieces)
    if current == total:
        return pieces
    if current == 0:
        return [total] + [0] * (len(pieces) - 1)
    out, acc, prev = [], 0, 0
    for p in pieces:
        acc += p
        edge = (acc * total + current // 2) // current
        out.append(edge - prev)
        prev = edge
    return out


def clip_pieces(pieces: list[int], available: int) -> list[int]:
    """Shorten pieces to ``available`` ns, taking from scheduling first.

    >>> clip_pieces([5, 10, 0, 10, 0, 0, 0, 0], 15)
    [0, 8, 0, 7, 0, 0, 0, 0]
    """
    excess = sum(pieces) - available
    if excess <= 0:
        return pieces
    taken = min(excess, pieces[0])
    pieces = [pieces[0] - taken, *pieces[1:]]
    return fit(pieces, available)


def counted_attempts(tasks: Iterable[TaskRecord]) -> set[int]:
    """Task ids whose records count: each partition's first success per stage.

    >>> ok = [TaskRecord(t, 0, 0, 0, 0, a, "1", False, 0, 0, status="success",
    ...     end_order=o) for t, a, o in [(1, 0, 9), (2, 1, 5)]]
    >>> sorted(counted_attempts(ok))
    [2]
    """
    first: dict[tuple[int, int], TaskRecord] = {}
    counted: set[int] = set()
    for task in tasks:
        if task.status != "success":
            continue
        if task.partition is None:
            counted.add(task.task_id)
            continue
        key = (task.stage_id, task.partition)
        best = first.get(key)
        if best is None or task.end_order < best.end_order:
            first[key] = task
    counted.update(t.task_id for t in first.values())
    return counted


def task_work(task: TaskRecord, counts: bool) -> tuple[int | None, ...]:
    """The :data:`~sparktrail.tracer.trace_rows.WORK_COLUMNS` of a task's
    ``processing`` row; records and bytes only if its records ``counts``.

    >>> t = TaskRecord(0, 0, 0, 0, 0, 0, "1", False, 0, 0, records=3,
    ...     disk_bytes_spilled=8, state_rows=2)
    >>> task_work(t, True)
    (3, None, None, None, 8, 2, None, None)
    >>> task_work(t, False)
    (None, None, None, None, 8, None, None, None)
    """
    spilled = (task.memory_bytes_spilled, task.disk_bytes_spilled)
    if not counts:
        return (None, None, None, *spilled, None, None, None)
    state = (task.state_rows, task.state_updated_rows, task.state_memory_bytes)
    return (task.records, task.bytes, task.shuffle_write_bytes, *spilled, *state)


def task_rows(
    rows: TraceRows,
    worker: str,
    task: TaskRecord,
    end: int,
    clipped: int,
    seq: int,
    label: Label,
    counts: bool,
) -> int:
    """Add a task's rows on slot ``worker``; returns the seq after them.

    ``end`` (ns) is where the task leaves its slot (``INF``: unfinished
    while the log grows, so only its launch edge), ``clipped`` the time cut
    off by the next launch, ``counts`` whether its records count
    (:func:`counted_attempts`).
    """
    launch = task.launch_ms * MS
    ident = (
        task.task_id,
        task.partition,
        task.attempt,
        task.status,
        task.speculative,
        task.executor_id,
        clipped,
        # Spark's own metrics, for the stage and executor tables' GC share
        # (an attempt without metrics states neither).
        task.run_ms * MS if task.has_metrics else None,
        task.gc_ms * MS if task.has_metrics else None,
        task.cpu_ns if task.has_metrics else None,
    )
    fixed = max(end, (task.finish_ms or 0) * MS)
    rows.add(
        "driver",
        worker,
        launch,
        launch,
        "control",
        -1,
        seq,
        ident,
        label,
        settled=fixed,
    )
    if end >= INF:  # unfinished task, log still growing: no rows yet
        return seq + 1
    duration = (task.finish_ms or end // MS) * MS - launch
    pieces = clip_pieces(task_pieces(task, max(duration, 0)), end - launch)
    t = launch
    work = task_work(task, counts)
    carries = any(value is not None for value in work)
    for activity, length in zip(PIECES, pieces, strict=True):
        processing = activity == "processing"
        if length <= 0 and not (processing and carries):
            continue
        rows.add(
            worker,
            worker,
            t,
            t + length,
            activity,
            seq,
            seq + 1,
            ident,
            label,
            work if processing else NO_WORK,
            fixed,
        )
        t += length
        seq += 1
    if task.finish_ms is not None:
        finish = task.finish_ms * MS
        rows.add(
            worker,
            "driver",
            end,
            finish,
            "control",
            seq,
            -1,
            ident,
            label,
            settled=fixed,
        )
    return seq
