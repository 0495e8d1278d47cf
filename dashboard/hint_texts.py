"""The rebalancing hints as people read them: their saving and cells.

:func:`saving_text` says a hint's predicted saving by what its share is
of (the hints frame's ``share_of``); :func:`hint_cells` is a hint as the
page's and the report's tables show it (the verdict uses the same saving
text). A rule's evidence is in its action's words, with units; the raw
numbers are for machines (``profile --json``, the hints frame).
"""

from __future__ import annotations

from typing import Any

from sparktrail.summaries.hints import severity_legend, share_of_saved
from sparktrail.units import duration

from .chart_basics import worker_text

__all__ = [
    "HINT_COLUMNS",
    "HINT_HELP",
    "NO_HINT",
    "SHARE_ONLY",
    "hint_cells",
    "saving_text",
]

#: What the page and the report say when no hint is shown.
NO_HINT = "No rebalancing hint: no rule's numbers crossed its threshold."

#: Hint columns the page and the report show: frame column -> heading.
#: The rule's evidence is in its action's words; the raw numbers stay in
#: ``--json`` and the hints frame.
HINT_COLUMNS: dict[str, str] = {
    "severity": "severity",
    "kind": "kind",
    "saving": "predicted saving",
    "stage_id": "stage",
    "executor_id": "executor",
    "partition": "partition",
    "action": "what was found, and what to change",
}


#: What each hint column means (hover text of its heading).
HINT_HELP: dict[str, str] = {
    "kind": "which rule fired: straggler, hotspot, parallelism, scheduling-, "
    "shuffle- or driver-bound, idle capacity, failures",
    "severity": "high, medium or low: the predicted saving's share of the run "
    f"({severity_legend()})",
    "saving": "how much shorter the run would be after the action, replayed "
    "on the traced tasks (idle capacity: executor core time freed)",
    "stage_id": "the Spark stage the hint is about (blank: the whole run)",
    "executor_id": "the executor the hint is about (blank: none in particular)",
    "partition": "the task's partition, for a hotspot (a skewed key)",
    "action": "what the rule found, with its numbers, and what to change: the "
    "Spark setting or code pattern to try (every number the rule read is in "
    "profile --json)",
}


def hint_cells(hint: dict[str, Any]) -> list[str]:
    """A hint (a row of the hints frame) as the cells of
    :data:`HINT_COLUMNS`: blanks for nulls, workers as Spark names them.

    >>> cells = hint_cells({"kind": "straggler_executor", "severity": "high",
    ...     "predicted_saving_ns": 1.5e9, "saving_share": 0.12, "share_of": "run",
    ...     "stage_id": None, "executor_id": "3", "partition": None,
    ...     "action": "exec-3/0 is slow"})
    >>> cells[:3]
    ['high', 'straggler_executor', '1.5 s (12% of the run)']
    >>> cells[3:6], cells[6]
    (['', '3', ''], 'executor 3 · core 0 is slow')
    """
    cells = []
    for column in HINT_COLUMNS:
        value = hint.get(column)
        if column == "saving":
            cells.append(saving_text(hint))
        elif value is None:
            cells.append("")
        else:
            cells.append(worker_text(str(value)))
    return cells


#: Hints whose "saving" is a share of something else than a time (a
#: streaming query's input or trigger), by their ``share_of``, with how to
#: say it.
SHARE_ONLY: dict[str, str] = {
    "input": "{share:.0%} of the input falls behind",
    "trigger": "batches run {share:.0%} over their trigger",
}


#: How a saving's share reads, by the hints frame's ``share_of``.
_SHARE_OF_TEXT: dict[str, str] = {
    "run": "of the run",
    "slot_time": "of slot time",
    "query_batch_time": "of the query's batch time",
    "job_time": "of the time jobs ran",
    "batch_job_time": "of the batch jobs' time",
}


def saving_text(hint: dict[str, Any]) -> str:
    """A hint's predicted saving for a table cell, by what its share is of
    (its ``share_of``; a row saved without one reads it from its kind).

    >>> saving_text({"kind": "straggler_task", "predicted_saving_ns": 1.5e9,
    ...     "saving_share": 0.12, "share_of": "run"})
    '1.5 s (12% of the run)'
    >>> saving_text({"kind": "idle_capacity", "predicted_saving_ns": 1.2e11,
    ...     "saving_share": 0.4, "share_of": "slot_time"})
    '2 core-min (40% of slot time)'
    >>> saving_text({"kind": "state_skew", "predicted_saving_ns": 2e9,
    ...     "saving_share": 0.2, "share_of": "query_batch_time"})
    "2 s (20% of the query's batch time)"
    >>> saving_text({"kind": "stream_backlog", "saving_share": 0.4})
    '40% of the input falls behind'
    """
    saving, share = hint.get("predicted_saving_ns"), hint.get("saving_share")
    share_of = share_of_saved(hint)
    if share is not None and share_of in SHARE_ONLY:
        return SHARE_ONLY[share_of].format(share=share)
    if saving is None or share is None:
        return ""
    of = _SHARE_OF_TEXT.get(share_of, _SHARE_OF_TEXT["run"])
    if share_of == "slot_time":
        return f"{saving / 6e10:.3g} core-min ({share:.0%} {of})"
    return f"{duration(saving)} ({share:.0%} {of})"
