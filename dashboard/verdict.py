"""The first thing a user reads: the application header and the verdict.

Pure functions of :class:`~sparktrail.summaries.Summaries` (its frames and
its :class:`~sparktrail.pag.context.AppContext`), shared by the report,
the dashboard and ``sparktrail profile``'s terminal summary:

* :func:`header_facts`: what ran: the application's name and id, Spark
  version, master and deploy mode, wall time, executors × cores, and how
  many jobs, stages and tasks;
* :func:`verdict`: one sentence: what holds the run back and what the top
  shown hint's change saves (what to change is that hint's own action);
  without one, what
  the critical path was made of; without any Spark job, that there was
  nothing to profile.

Assumptions
-----------
* Hints come most severe first (:func:`~sparktrail.summaries.hints.
  rebalancing_hints` sorts them); ``info`` hints are not shown.
* Any context field may be missing (a hand-made trace has none): a fact
  that is not known is left out, never guessed.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from sparktrail.pag.context import AppContext, local_cores
from sparktrail.summaries import Summaries
from sparktrail.summaries.frames import CP_SHARE
from sparktrail.summaries.hints import share_of_saved, shown_hints
from sparktrail.summaries.hints.facts import run_facts
from sparktrail.summaries.operator import stage_label
from sparktrail.summaries.run_shares import job_time_ns, run_span
from sparktrail.units import duration

from .chart_basics import activity_text
from .figures import SHARE_ONLY, saving_text

__all__ = [
    "NO_JOB",
    "header_facts",
    "header_line",
    "run_wall_ns",
    "verdict",
    "window_state",
]

#: The verdict of a run in which no Spark job (or no task) ran.
NO_JOB = "No Spark job ran: nothing to profile."

#: What a hint of each kind says holds the run back: a fact, true of every
#: variant of its rule. What to change is the rule's own action, in the
#: hint itself (a fixed remedy per kind here would contradict the rule
#: where the facts picked another: no speculation on a local master, a
#: file layout rather than a hot key). ``{stage}``, ``{executor}``,
#: ``{partition}``, ``{in_stage}`` and ``{operator}`` (the evidence's, else
#: the stage) name what the hint names.
_PROBLEM: dict[str, str] = {
    "straggler_executor": "executor {executor} runs its tasks slower than the others",
    "straggler_task": "a slow task{partition} of {stage} holds its stage back",
    "hotspot": "{partitions} of {stage} {have} far more data than the others",
    "skew_unsplittable": "a skewed key{partition} of {stage} holds its stage back",
    "parallelism": "{stage} has too few tasks for the slots it could use",
    "over_partitioned": "{stage} runs many tiny tasks whose fixed costs dominate",
    "scheduling_bound": "scheduling and deserializing short tasks of {stage} dominate",
    "shuffle_bound": "fetching shuffle blocks{in_stage} holds the run back",
    "driver_bound": "driver code between Spark jobs holds the run back",
    "driver_phase": "the driver's own work before or between jobs holds the run back",
    "idle_capacity": "executor slots sit idle much of the run",
    "capacity_bound": "the jobs kept every executor slot busy: the run needs more",
    "cold_start": "executors starting cold hold the jobs back",
    "gc_bound": "JVM garbage collection{in_stage} holds the run back",
    "spill": "tasks of {stage} spill to disk",
    "re_read": "the same input is read and parsed again by several stages",
    "moving_hotspot": "the hot partition of {operator} moves from run to run",
    "state_skew": "one state partition{partition} of {stage} holds most of the state",
    "stream_backlog": "a streaming query falls behind its input",
    "trigger_bound": "a streaming query's batches outlast its trigger interval",
    "failures": "tasks, executors or a job failed{in_stage}",
    "planning_bound": (
        "a streaming query spends its triggers planning and tracking offsets"
    ),
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def run_wall_ns(summaries: Summaries) -> int | None:
    """The run's wall time (:func:`~sparktrail.summaries.run_shares.run_span`)."""
    span = run_span(summaries.context, summaries.windows)
    return None if span is None else span[1] - span[0]


def _executors(context: AppContext) -> str | None:
    """Executors × cores, or ``local, N cores`` (``None``: unknown).

    >>> from sparktrail.pag.context import ExecutorLife
    >>> _executors(AppContext(master="local[*]",
    ...     executors=(ExecutorLife("driver", 4),)))
    'local, 4 cores'
    >>> _executors(AppContext(master="yarn",
    ...     executors=(ExecutorLife("1", 2), ExecutorLife("2", 2))))
    '2 executors × 2 cores'
    >>> _executors(AppContext(master="yarn",
    ...     executors=(ExecutorLife("1", 2), ExecutorLife("2", 4))))
    '2 executors, 6 cores'
    """
    if context.is_local:
        local = context.executor_cores().get("driver") or local_cores(context.master)
        return f"local, {_plural(local, 'core')}" if local else "local"
    lives = [e for e in context.executors if e.executor_id != "driver"]
    if not lives:
        return None
    count = _plural(len(lives), "executor")
    cores = [e.cores for e in lives]
    if any(c is None for c in cores):
        return count
    if len(set(cores)) == 1:
        return f"{count} × {_plural(int(cores[0] or 0), 'core')}"
    return f"{count}, {sum(c or 0 for c in cores)} cores"


def _counts(summaries: Summaries) -> tuple[int | None, int, int | None]:
    """``(jobs, stages, tasks)`` of the run (``None``: not known)."""
    operator = summaries.operator
    jobs: int | None = len(summaries.context.jobs) or None
    if "stage_id" not in operator.columns:
        if "stage_ids" in operator.columns:  # the live whole run: stages listed
            ran = operator["stage_ids"].explode().drop_nulls().n_unique()
            return jobs, ran, None
        return jobs, 0, None
    stages = operator.filter(pl.col("stage_id").is_not_null())
    if jobs is None and "job_id" in stages.columns:
        jobs = stages["job_id"].drop_nulls().n_unique() or None
    tasks = int(stages["tasks"].sum()) if "tasks" in stages.columns else None
    ids = stages["stage_id"]
    if "stage_ids" in stages.columns:  # one row per operator, its stages listed
        ids = pl.concat([ids, stages["stage_ids"].list.explode().drop_nulls()])
    return jobs, ids.n_unique(), tasks


def header_facts(
    summaries: Summaries, *, live: bool = False, window: bool | None = None
) -> list[tuple[str, str]]:
    """What ran, as ``(label, value)`` pairs; unknown facts are left out.

    ``live``: the run may still be going: its wall time is "so far" until
    the log's end is read. ``window`` (default: ``live``): ``summaries``
    are the newest window's, so only the jobs (the context's) are
    counted, since a window's stages and tasks are not the run's.

    Examples
    --------
    >>> from sparktrail.pag.context import ExecutorLife
    >>> from sparktrail.summaries.frames import SUMMARY_SCHEMAS
    >>> frames = {n: pl.DataFrame(schema=s) for n, s in SUMMARY_SCHEMAS.items()}
    >>> frames["operator"] = pl.DataFrame({"stage_id": [0, 1], "job_id": [0, 0],
    ...     "tasks": [200, 8]})
    >>> context = AppContext(app_id="app-1", app_name="etl", spark_version="3.5.1",
    ...     master="yarn", deploy_mode="cluster", start_ns=0, end_ns=90 * 10**9,
    ...     executors=(ExecutorLife("1", 4), ExecutorLife("2", 4)))
    >>> s = Summaries(**frames, window_ns=10**9, origin_ns=0, context=context)
    >>> for label, value in header_facts(s):
    ...     print(f"{label}: {value}")
    application: etl (app-1)
    Spark: 3.5.1
    master: yarn (cluster mode)
    wall time: 1 min 30 s
    executors: 2 executors × 4 cores
    work: 1 job, 2 stages, 208 tasks
    """
    context = summaries.context
    facts = _app_facts(context)
    window = live if window is None else window
    span = run_wall_ns(summaries)
    if window and context.start_ns is None:
        span = None  # one window's span is not the run's
    if span is not None:
        so_far = " so far" if live and context.end_ns is None else ""
        facts.append(("wall time", duration(span) + so_far))
    executors = _executors(context)
    if executors:
        facts.append(("executors", executors))
    work = _work(summaries, window)
    if work is not None:
        facts.append(("work", work))
    return facts


def _app_facts(context: AppContext) -> list[tuple[str, str]]:
    """The application's name and id, its Spark version and master."""
    facts: list[tuple[str, str]] = []
    name, app_id = context.app_name, context.app_id
    if name and app_id:
        facts.append(("application", f"{name} ({app_id})"))
    elif name or app_id:
        facts.append(("application", str(name or app_id)))
    if context.spark_version:
        facts.append(("Spark", context.spark_version))
    if context.master:
        mode = f" ({context.deploy_mode} mode)" if context.deploy_mode else ""
        facts.append(("master", context.master + mode))
    return facts


def _work(summaries: Summaries, live: bool) -> str | None:
    """The jobs, stages and tasks that ran (``None``: nothing to say); while
    live, only the context's jobs (a window's stages are not the run's)."""
    if live:
        ran = len(summaries.context.jobs)
        return _plural(ran, "job") if ran else None
    jobs, stages, tasks = _counts(summaries)
    if stages == 0 and not jobs:
        return "no Spark job"
    work = [_plural(jobs, "job")] if jobs is not None else []
    work.append(_plural(stages, "stage"))
    if tasks is not None:
        work.append(_plural(tasks, "task"))
    return ", ".join(work)


def header_line(summaries: Summaries, *, live: bool = False) -> str:
    """:func:`header_facts` on one line, for a terminal.

    >>> from sparktrail.summaries.frames import SUMMARY_SCHEMAS
    >>> frames = {n: pl.DataFrame(schema=s) for n, s in SUMMARY_SCHEMAS.items()}
    >>> s = Summaries(**frames, window_ns=10**9, origin_ns=0,
    ...     context=AppContext(app_name="etl", spark_version="3.5.1"))
    >>> header_line(s)
    'etl · Spark 3.5.1 · no Spark job'
    """
    parts = []
    for label, value in header_facts(summaries, live=live):
        if label == "Spark":
            parts.append(f"Spark {value}")
        elif label == "wall time":
            parts.append(f"{value} wall time")
        else:
            parts.append(value)
    return " · ".join(parts)


def _stage_name(summaries: Summaries, stage_id: Any) -> str:
    if stage_id is None:
        return stage_label(None)
    operator = summaries.operator
    if "stage_id" in operator.columns and "name" in operator.columns:
        ran = pl.col("stage_id") == stage_id
        if "stage_ids" in operator.columns:  # one row per operator
            ran = ran | pl.col("stage_ids").list.contains(stage_id).fill_null(False)
        rows = operator.filter(ran)["name"].drop_nulls()
        if len(rows):
            return stage_label(stage_id, rows[0])
    return stage_label(stage_id)


def _evidence(hint: dict[str, Any]) -> dict[str, Any]:
    """A hints frame row's evidence (JSON), ``{}`` when it holds none."""
    try:
        found = json.loads(hint.get("evidence") or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _hint_verdict(summaries: Summaries, hint: dict[str, Any]) -> str:
    """What the top hint says holds the run back and what its change saves;
    what to change is the hint's own action, named, not restated."""
    problem = _problem(summaries, hint)
    saving = saving_text(hint)
    if not saving:
        return f"{problem}: the first hint says what to change."
    if share_of_saved(hint) in SHARE_ONLY:
        return f"{problem} ({saving}): the first hint says what to change."
    verb = "frees" if share_of_saved(hint) == "slot_time" else "saves"
    return f"{problem}: the first hint's change {verb} {saving}."


def _problem(summaries: Summaries, hint: dict[str, Any]) -> str:
    """What a hint says holds the run back (:data:`_PROBLEM`), capitalised."""
    kind = str(hint.get("kind"))
    stage_id = hint.get("stage_id")
    partition = hint.get("partition")
    stage = _stage_name(summaries, stage_id)
    names = {
        "stage": stage,
        "executor": str(hint.get("executor_id") or "?"),
        "partition": f" (partition {partition})" if partition is not None else "",
        "partitions": "a few partitions"
        if partition is None
        else f"partition {partition}",
        "have": "have" if partition is None else "has",
        "in_stage": f" in {stage}" if stage_id is not None else "",
        "operator": _evidence(hint).get("operator") or stage,
    }
    problem = _PROBLEM.get(
        kind, f"the {kind.replace('_', ' ')} hint holds the run back"
    )
    problem = problem.format(**names)
    return f"{problem[0].upper()}{problem[1:]}"


def window_state(summaries: Summaries) -> str:
    """One window of a live run in a sentence, for the line under the run's
    verdict: what its top shown hint says holds it back, else what its
    critical path was mostly made of (never the run's jobs or shares).

    >>> from sparktrail.summaries.frames import SUMMARY_SCHEMAS
    >>> frames = {n: pl.DataFrame(schema=s) for n, s in SUMMARY_SCHEMAS.items()}
    >>> window_state(Summaries(**frames, window_ns=1, origin_ns=0))
    'No Spark task ran in it.'
    """
    _, stages, tasks = _counts(summaries)
    if stages == 0 or tasks == 0:
        return "No Spark task ran in it."
    hints = shown_hints(summaries.hints)
    if not hints.is_empty():
        return f"{_problem(summaries, hints.row(0, named=True))}."
    top = summaries.activity.filter(pl.col(CP_SHARE) > 0).head(1)
    if top.is_empty():
        return "It has no path from start to end."
    activity, share = top.row(0)[0], float(top[CP_SHARE][0])
    name = activity_text(activity)
    return f"{name} made {share:.0%} of its critical path."


def _idle_text(summaries: Summaries, share: float) -> str | None:
    """The driver's time between jobs said for what it is where that is not
    the program's code: a person at a shell or notebook, a DStream waiting
    for its next batch (``None``: a batch program's driver code)."""
    sites = (
        summaries.operator["call_site"].to_list()
        if "call_site" in (summaries.operator.columns)
        else []
    )
    kind = run_facts(summaries.context, None, sites).kind
    if kind == "interactive":
        return (
            f"The session waited between its commands (a person at the shell or "
            f"notebook) for {share:.0%} of the run"
        )
    if kind == "dstream":
        return f"The stream waited for its next batch for {share:.0%} of the run"
    return None


def _activity_verdict(summaries: Summaries, jobs: int | None) -> str:
    top = summaries.activity.filter(pl.col(CP_SHARE) > 0).head(1)
    if top.is_empty():
        return "No critical path was found: no window has a path from start to end."
    activity, share = top.row(0)[0], float(top[CP_SHARE][0])
    name = activity_text(activity)
    head = f"{name} took {share:.0%} of the run"
    if activity == "driver":
        head = _idle_text(summaries, share) or head
    time = job_time_ns(summaries.context)
    if jobs is not None and time is not None:
        ran = f"the {_plural(jobs, 'job')} ran {duration(time)}"
        if jobs == 1:
            ran = f"the one job ran {duration(time)}"
    elif jobs is not None:
        ran = f"the {_plural(jobs, 'job')} ran"
    else:
        ran = "the run had"
    return f"{head}; {ran} with no bottleneck worth acting on."


def verdict(
    summaries: Summaries, *, hints_known: bool = True, window: bool = False
) -> str:
    """One sentence: what holds the run back and what fixing it saves.

    From the top shown hint (most severe first) with its predicted saving,
    pointing at the hint for what to change (its rule's action, the one
    voice on remedies);
    with no hint shown, what the critical path was mostly made of; with no
    Spark job (or no task) in the run, :data:`NO_JOB`. ``hints_known``
    False (a view without hints, e.g. the live dashboard's whole run) says
    what the critical path was made of and where hints are. ``window``:
    ``summaries`` are one window of a live run (a window without tasks
    says so, not that the run had none).

    Examples
    --------
    >>> from sparktrail.summaries.frames import SUMMARY_SCHEMAS
    >>> frames = {n: pl.DataFrame(schema=s) for n, s in SUMMARY_SCHEMAS.items()}
    >>> verdict(Summaries(**frames, window_ns=1, origin_ns=0))
    'No Spark job ran: nothing to profile.'
    """
    jobs, stages, tasks = _counts(summaries)
    context = summaries.context
    if window and (stages == 0 or tasks == 0):
        return "No Spark task ran in this window."
    if context.known and not context.jobs:
        return NO_JOB
    if stages == 0 or tasks == 0:
        if jobs:  # the header counts them: say what they lacked
            return f"The {_plural(jobs, 'job')} ran no task: nothing to profile."
        return NO_JOB
    if not hints_known:
        return (
            _activity_verdict(summaries, jobs).split(";")[0]
            + "; pick a window for its hints."
        )
    hints = shown_hints(summaries.hints)
    if not hints.is_empty():
        return _hint_verdict(summaries, hints.row(0, named=True))
    return _activity_verdict(summaries, jobs)
