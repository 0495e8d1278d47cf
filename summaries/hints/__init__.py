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

from ._common import HINT_SCHEMA, Context, Hint, hint_frame, severity, task_shares
from .bound import driver_bound, scheduling_bound, shuffle_bound
from .executors import idle_capacity, straggler_executor
from .memory_pressure import gc_bound, spill
from .parallelism import parallelism
from .tasks import task_hints

__all__ = [
    "HINT_SCHEMA",
    "RULES",
    "Context",
    "Hint",
    "hint_frame",
    "rebalancing_hints",
    "severity",
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
    idle_capacity,
    gc_bound,
    spill,
)


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
        Columns of :data:`HINT_SCHEMA`, most severe first; empty when no
        rule's numbers cross its threshold.

    Examples
    --------
    >>> import polars as pl
    >>> from sparktrail import summarize
    >>> t = pl.DataFrame({"src_worker": ["driver"], "dst_worker": ["driver"],
    ...     "start_ns": [0], "end_ns": [10], "activity": ["driver"]})
    >>> summarize(t, 10).hints["kind"].to_list()
    ['driver_bound']
    """
    hints = [hint for rule in RULES for hint in rule(context)]
    return hint_frame(hints)
