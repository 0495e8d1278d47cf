"""Summaries of critical participation and the rebalancing hints they drive.

Each summary is a small pure transform of the CP table of
:func:`~sparktrail.pag.critical_participation` and, for task facts, the
trace, split in two: a *partial* (per-window sums of CP rows, see
:class:`Partials`) and a *finish* from the partials of every window
(:func:`summaries_from_partials`). The engines that run them over a whole
trace, a live trace directory or Spark live in :mod:`sparktrail.engines`.

Whole-run numbers are sums of per-window CP divided by the number of
windows that have a path, so shares sum to 1 over a run with paths.
"""

from sparktrail.pag.workers import EXECUTOR_PATTERN, executor_of

from .activity import activity_summary
from .charge import enrich
from .communication import SHUFFLE_NOTE, communication_summary, shuffle_sources
from .finish import summaries_from_cp, summaries_from_partials, warn_pathless
from .hints import HINT_SCHEMA, RULES, Context, Hint, rebalancing_hints
from .operator import operator_summary, stage_name
from .partials import Partials, window_stats
from .result import HintOptions, Summaries
from .run_shares import n_path_windows, path_windows
from .straggler import executor_summary, straggler_summary
from .task_table import task_facts

__all__ = [
    "EXECUTOR_PATTERN",
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
    "n_path_windows",
    "operator_summary",
    "path_windows",
    "rebalancing_hints",
    "shuffle_sources",
    "stage_name",
    "straggler_summary",
    "summaries_from_cp",
    "summaries_from_partials",
    "task_facts",
    "warn_pathless",
    "window_stats",
]
