"""The rebalancing hints as people read them: saving, evidence, the table.

:func:`saving_text` says a hint's predicted saving by what its share is
of (the hints frame's ``share_of``), :func:`evidence_text` its evidence
JSON as ``key=value`` pairs in units; :func:`hints_table` draws the hints
with both (the report's HTML table and the verdict use the same texts).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import plotly.graph_objects as go
import polars as pl

from sparktrail.summaries.hints import severity_legend, share_of_saved
from sparktrail.units import duration, significant, size

from .chart_basics import empty_figure, worker_text

__all__ = [
    "HINT_COLUMNS",
    "HINT_HELP",
    "SHARE_ONLY",
    "evidence_text",
    "hints_table",
    "saving_text",
]

#: Hint columns shown by :func:`hints_table`: frame column -> heading.
HINT_COLUMNS: dict[str, str] = {
    "kind": "kind",
    "severity": "severity",
    "saving": "predicted saving",
    "stage_id": "stage",
    "executor_id": "executor",
    "partition": "partition",
    "evidence": "evidence",
    "action": "action",
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
    "evidence": "the numbers that fired the rule (shares of the critical path "
    "as %, durations, times of day in UTC)",
    "action": "what to change: the Spark setting or code pattern to try",
}


def _time_of_day(ns: float) -> str:
    moment = dt.datetime.fromtimestamp(int(ns) // 1000 / 1e6, tz=dt.UTC)
    return moment.strftime("%H:%M:%S.%f")[:-3]


def _evidence_value(key: str, value: Any) -> str:
    """One evidence value in units, by its key's naming convention."""
    if value is None:
        return "–"
    if isinstance(value, dict):
        return "{" + _evidence_pairs(value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_evidence_value(key, v) for v in value) + "]"
    if isinstance(value, str):
        return worker_text(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return json.dumps(value)
    if key in ("start_ns", "end_ns"):
        return _time_of_day(value) + " UTC"
    if key.endswith("_ns"):
        return duration(value)
    if key.endswith("_bytes"):
        return size(value)
    if "rate" in key:
        return f"{significant(value)} rows/s"
    if "share" in key:
        return f"{significant(value * 100)}%"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return significant(value)


def _evidence_pairs(data: dict[str, Any]) -> str:
    return ", ".join(
        f"{re.sub(r'_(ns|bytes)$', '', k)}={_evidence_value(k, v)}"
        for k, v in data.items()
    )


def evidence_text(evidence: str | None) -> str:
    """A hint's evidence JSON as ``key=value`` pairs in units, on one line.

    Durations (``*_ns``) in s or ms, sizes (``*_bytes``) in MB or kB, rates
    in rows/s, all to 3 significant digits; ``start_ns``/``end_ns`` as times
    of day (UTC), shares as %, workers as
    :func:`~sparktrail.dashboard.chart_basics.worker_label` shows them.
    The unit suffix leaves the key. The raw numbers stay in the hints frame
    (``--json``, Parquet); this is only how they are shown.

    >>> evidence_text('{"share": 0.5, "tasks": [1, 2], "target_stage_ns": 2.875e8}')
    'share=50%, tasks=[1, 2], target_stage=288 ms'
    >>> evidence_text('{"start_ns": 1795463597412000000, "observed_rate": 125754.5}')
    'start=19:53:17.412 UTC, observed_rate=126,000 rows/s'
    >>> evidence_text(None)
    ''
    """
    if not evidence:
        return ""
    try:
        data = json.loads(evidence)
    except ValueError:
        return evidence
    if not isinstance(data, dict):
        return json.dumps(data)
    return _evidence_pairs(data)


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


def hints_table(hints: pl.DataFrame) -> go.Figure:
    """The rebalancing hints as a table, most severe first.

    Parameters
    ----------
    hints
        ``Summaries.hints`` (columns of
        :data:`~sparktrail.summaries.HINT_SCHEMA`).

    Returns
    -------
    plotly.graph_objects.Figure
        One :class:`plotly.graph_objects.Table` with the columns of
        :data:`HINT_COLUMNS`; nulls are blank, evidence is ``key=value``.

    Examples
    --------
    >>> h = pl.DataFrame({"kind": ["driver_bound"], "severity": ["high"],
    ...     "stage_id": [None], "executor_id": [None], "partition": [None],
    ...     "evidence": ['{"driver_share": 0.9}'], "action": ["move work"]})
    >>> fig = hints_table(h)
    >>> list(fig.data[0].header.values)[:2], list(fig.data[0].cells.values[6])
    (['kind', 'severity'], ['driver_share=90%'])
    """
    if hints.is_empty():
        return empty_figure("no rebalancing hint: no threshold was crossed")
    columns: list[list[str]] = []
    for column in HINT_COLUMNS:
        if column == "saving":
            columns.append([saving_text(row) for row in hints.iter_rows(named=True)])
            continue
        values = hints[column].to_list() if column in hints.columns else []
        if column == "evidence":
            columns.append([evidence_text(v) for v in values])
        elif column == "action":
            columns.append(["" if v is None else worker_text(str(v)) for v in values])
        else:
            columns.append(["" if v is None else str(v) for v in values])
    fig = go.Figure(
        go.Table(
            columnwidth=[1.3, 0.8, 1.1, 0.6, 0.8, 0.8, 3.5, 4.5],
            header={
                "values": list(HINT_COLUMNS.values()),
                "fill_color": "#444",
                "font": {"color": "white"},
                "align": "left",
            },
            cells={"values": columns, "align": "left", "height": 24},
        )
    )
    fig.update_layout(
        title="Rebalancing hints",
        height=min(900, 160 + 90 * len(hints)),
        margin={"l": 10, "r": 10},
    )
    return fig
