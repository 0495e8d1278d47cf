"""Summaries of critical participation and the rebalancing hints they drive.

Each summary is a small pure transform of the CP table of
:func:`~sparktrail.pag.critical_participation` and, for task facts, the
trace, split in two: a *partial* (per-window sums of CP rows, see
:class:`Partials`) and a *finish* from the partials of every window.
:func:`summarize` computes the partials a batch of windows at a time, so
it never holds the whole CP table, then finishes every summary and runs
the hint rules over them; the Spark engine has Spark compute the same
partials.

Whole-run numbers are sums of per-window CP divided by the number of
windows that have a path, so shares sum to 1 over a run with paths.
"""

from ._table import enrich, executor_of, task_facts
from .activity import activity_summary
from .communication import SHUFFLE_NOTE, communication_summary, shuffle_sources
from .hints import HINT_SCHEMA, RULES, Context, Hint, rebalancing_hints
from .model import HintOptions, Summaries
from .operator import operator_summary, stage_name
from .partials import Partials
from .pipeline import summarize, window_stats
from .straggler import executor_summary, straggler_summary

__all__ = [
    "HINT_SCHEMA",
    "RULES",
    "SHUFFLE_NOTE",
    "Context",
    "Hint",
    "HintOptions",
    "Partials",
    "Summaries",
    "activity_summary",
    "communication_summary",
    "enrich",
    "executor_of",
    "executor_summary",
    "operator_summary",
    "rebalancing_hints",
    "shuffle_sources",
    "stage_name",
    "straggler_summary",
    "summarize",
    "task_facts",
    "window_stats",
]
