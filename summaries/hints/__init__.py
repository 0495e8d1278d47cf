"""Rebalancing hints (DESIGN §6): rules over the summaries, with evidence.

Each rule is a function ``rule(context) -> list[Hint]`` in a small module;
:func:`rebalancing_hints` runs them all. A rule fires only when its numbers
cross a threshold of :class:`~sparktrail.summaries.HintOptions`, and puts
those numbers in the hint's ``evidence`` (a JSON object, so the frame
round-trips through Parquet, Arrow and JSON).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from sparktrail.pag.trace import release_if_long

from .bound import driver_bound, scheduling_bound, shuffle_bound
from .dstreams import dstream_backlog
from .executors import idle_capacity, straggler_executor
from .failures import failures
from .hint import HINT_SCHEMA, Hint, hint_frame, severity_legend, share_of_saved
from .inputs import Context, task_shares
from .integrity import INTEGRITY_KIND, integrity_notes, log_integrity
from .memory_pressure import gc_bound, spill
from .over_time import moving_hotspot, state_skew
from .parallelism import parallelism
from .partitions import over_partitioned
from .phases import driver_phases
from .ranking import finish_hints
from .reread import re_read
from .saturation import capacity_bound
from .stream_progress import planning_bound, stream_backlog, trigger_bound
from .tasks import task_hints

__all__ = [
    "HINT_SCHEMA",
    "INTEGRITY_KIND",
    "RULES",
    "Context",
    "Hint",
    "hint_frame",
    "integrity_notes",
    "ranked_hints",
    "rebalancing_hints",
    "rule_hints",
    "severity_legend",
    "share_of_saved",
    "shown_hints",
    "task_shares",
]

#: Every rule, in the order of the DESIGN §6 table.
RULES: tuple[Callable[[Context], list[Hint]], ...] = (
    straggler_executor,
    task_hints,  # straggler_task and hotspot
    parallelism,
    scheduling_bound,
    shuffle_bound,
    driver_bound,
    driver_phases,
    idle_capacity,
    capacity_bound,
    over_partitioned,
    gc_bound,
    spill,
    re_read,
    moving_hotspot,
    stream_backlog,
    dstream_backlog,
    state_skew,
    trigger_bound,
    planning_bound,
    failures,
    log_integrity,
)


def shown_hints(hints: pl.DataFrame) -> pl.DataFrame:
    """The hints worth showing: all but ``info`` (a saving under 2%, or a
    note of the log's integrity, shown beside the verdict).

    >>> h = pl.DataFrame({"kind": ["a", "b"], "severity": ["info", "low"]})
    >>> shown_hints(h)["kind"].to_list()
    ['b']
    """
    return hints.filter(pl.col("severity") != "info")


def rebalancing_hints(context: Context) -> pl.DataFrame:
    """Run every rule of :data:`RULES` and collect their hints.

    Parameters
    ----------
    context
        The summaries and tables the rules read (built by
        :func:`~sparktrail.engines.summarize`).

    Returns
    -------
    polars.DataFrame
        Columns of :data:`HINT_SCHEMA`, most severe first (severity from
        the predicted saving's share of the run, see
        :mod:`~sparktrail.summaries.hints.ranking`); empty when no rule's
        numbers cross its threshold.

    Examples
    --------
    One of four tasks runs 1 s, the others 0.1 s: a speculative copy
    would end it after (3 + 1) x 0.1 s, saving 0.6 s of the run.

    >>> import polars as pl
    >>> from sparktrail import summarize
    >>> workers = [f"exec-1/{i}" for i in range(4)]
    >>> ms = 1_000_000
    >>> t = pl.DataFrame({"src_worker": workers, "dst_worker": workers,
    ...     "start_ns": [0] * 4, "end_ns": [1000 * ms, 100 * ms, 100 * ms, 100 * ms],
    ...     "activity": ["processing"] * 4, "task_id": [0, 1, 2, 3],
    ...     "stage_id": [0] * 4})
    >>> summarize(t, 1000 * ms).hints.select("kind", "predicted_saving_ns").row(0)
    ('straggler_task', 600000000.0)
    """
    found = rule_hints(context)
    return ranked_hints(context.for_ranking(), found)


def rule_hints(context: Context) -> list[Hint]:
    """What every rule of :data:`RULES` finds, before the ranking.

    The pages a rule read of a mapped table (a long trace's task facts,
    :func:`~sparktrail.pag.trace.mapped_concat`) are released before the
    next rule reads its own (DESIGN §10).
    """
    found = []
    for rule in RULES:
        found.extend(rule(context))
        release_if_long(len(context.tasks))
    return found


def ranked_hints(ranking: Context, found: list[Hint]) -> pl.DataFrame:
    """The frame of :func:`rebalancing_hints` from the rules' hints
    ``found``: savings replayed, severity, repeats merged
    (:func:`~.ranking.finish_hints`). ``ranking`` is the rules' context or
    its :meth:`~.inputs.Context.for_ranking`."""
    return hint_frame(finish_hints(ranking, found))
