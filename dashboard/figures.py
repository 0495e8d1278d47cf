"""Figure builders: pure functions from summary frames to plotly figures.

Each builder takes the frames of :class:`~sparktrail.summaries.Summaries`
(or the CP rows of one window) and returns a new
:class:`plotly.graph_objects.Figure`; none reads files, keeps state or
knows where the figure goes, so the batch report and the live Dash app
share them. An empty frame gives :func:`empty_figure` with a message
instead of an empty plot.

The builders live in one module per view; this module names them all:

* :mod:`~sparktrail.dashboard.chart_basics`: activity colours, worker
  labels, the empty figure (and the conventions every chart follows);
* :mod:`~sparktrail.dashboard.activity_chart`: the critical path by
  activity over time;
* :mod:`~sparktrail.dashboard.worker_bars`: workers against their fair share;
* :mod:`~sparktrail.dashboard.operator_chart`: the critical path by operator;
* :mod:`~sparktrail.dashboard.channel_heatmap`: by communication channel;
* :mod:`~sparktrail.dashboard.timeline_gantt`: one window's timeline;
* :mod:`~sparktrail.dashboard.hint_texts`: the hints' cells and savings
  as text;
* :mod:`~sparktrail.dashboard.chart_captions`: the line under each chart;
* :mod:`~sparktrail.dashboard.stream_figures`: Structured Streaming's
  micro-batches.
"""

from __future__ import annotations

from .activity_chart import activity_over_time
from .channel_heatmap import (
    ONE_EXECUTOR_NOTE,
    communication_heatmap,
    one_executor,
    share_tickformat,
)
from .chart_basics import (
    ACTIVITY_COLOURS,
    CP_COLOURSCALE,
    activity_colour,
    empty_figure,
    worker_label,
    worker_text,
)
from .chart_captions import CAPTIONS
from .hint_texts import (
    HINT_COLUMNS,
    HINT_HELP,
    NO_HINT,
    SHARE_ONLY,
    hint_cells,
    saving_text,
)
from .operator_chart import LABEL_CHARS, NO_STAGE, operator_bars, short_labels
from .timeline_gantt import (
    MAX_TIMELINE_BARS,
    MAX_TIMELINE_MESSAGES,
    MERGED_BAR_BUDGET,
    critical_gantt,
    ms_text,
    timeline_rows,
)
from .worker_bars import straggler_bars

__all__ = [
    "ACTIVITY_COLOURS",
    "CAPTIONS",
    "CP_COLOURSCALE",
    "HINT_COLUMNS",
    "HINT_HELP",
    "LABEL_CHARS",
    "MAX_TIMELINE_BARS",
    "MAX_TIMELINE_MESSAGES",
    "MERGED_BAR_BUDGET",
    "NO_HINT",
    "NO_STAGE",
    "ONE_EXECUTOR_NOTE",
    "SHARE_ONLY",
    "activity_colour",
    "activity_over_time",
    "communication_heatmap",
    "critical_gantt",
    "empty_figure",
    "hint_cells",
    "ms_text",
    "one_executor",
    "operator_bars",
    "saving_text",
    "share_tickformat",
    "short_labels",
    "straggler_bars",
    "timeline_rows",
    "worker_label",
    "worker_text",
]
