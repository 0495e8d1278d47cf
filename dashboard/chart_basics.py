"""What every chart shares: activity colours, worker labels, the empty figure.

Conventions
-----------
* Shares are fractions of the critical path (0..1), shown as percentages.
* Times on the x axis are window starts as UTC datetimes (trace timestamps
  are ns since the Unix epoch); inside one window, ms since its start.
* Every activity type has one colour (:data:`ACTIVITY_COLOURS`) in every
  figure; CP itself is drawn with :data:`CP_COLOURSCALE`.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from sparktrail.pag.workers import worker_label, worker_text
from sparktrail.units import percent

__all__ = [
    "ACTIVITY_COLOURS",
    "ACTIVITY_TEXT",
    "CP_COLOURSCALE",
    "NO_STAGE",
    "activity_colour",
    "activity_text",
    "empty_figure",
    "no_stage_label",
    "worker_label",
    "worker_text",
]

#: How every page names an activity (DESIGN §3), as a sentence starts.
ACTIVITY_TEXT: dict[str, str] = {
    "startup": "Start-up",
    "driver": "Driver code between jobs",
    "processing": "Task computation",
    "scheduling": "Task scheduling",
    "deserialization": "Task deserialization",
    "serialization": "Result serialization",
    "shuffle_read": "Shuffle reads",
    "shuffle_write": "Shuffle writes",
    "result": "Sending task results",
    "gc": "Garbage collection",
    "waiting": "Waiting for work",
    "trigger_wait": "Waiting for the next trigger",
    "control": "Messages between driver and executors",
    "data": "Data transfers",
}

#: The operator row of edges outside any stage, when its parts are unknown.
NO_STAGE = "(no stage: driver, idle)"


def activity_text(activity: str) -> str:
    """An activity in words, as a sentence starts.

    >>> activity_text("driver"), activity_text("custom")
    ('Driver code between jobs', 'custom')
    """
    return ACTIVITY_TEXT.get(activity, activity)


def no_stage_label(parts: list[dict[str, Any]] | None, most: int = 3) -> str:
    """The operator row outside any stage, named by its largest ``parts``
    (``activity, cp_share``: :func:`~sparktrail.summaries.operator.
    with_no_stage_parts`), else :data:`NO_STAGE`.

    >>> no_stage_label([{"activity": "waiting", "cp_share": 0.38},
    ...     {"activity": "driver", "cp_share": 0.1}])
    '(no stage: waiting for work 38%, driver code between jobs 10%)'
    >>> no_stage_label(None) == NO_STAGE
    True
    """
    if not parts:
        return NO_STAGE
    shown = [
        f"{activity_text(p['activity']).lower()} {percent(p['cp_share'])}"
        for p in parts[:most]
    ]
    more = "" if len(parts) <= most else ", …"
    return f"(no stage: {', '.join(shown)}{more})"


#: One colour per activity type (DESIGN §3), the same in every figure.
ACTIVITY_COLOURS: dict[str, str] = {
    "processing": "#1f77b4",
    "gc": "#d62728",
    "scheduling": "#ff7f0e",
    "deserialization": "#bcbd22",
    "serialization": "#17becf",
    "shuffle_read": "#9467bd",
    "shuffle_write": "#8c564b",
    "result": "#e377c2",
    "driver": "#2ca02c",
    "startup": "#98df8a",
    "waiting": "#c7c7c7",
    "trigger_wait": "#dbdb8d",
    "control": "#7f7f7f",
    "data": "#393b79",
}


_OTHER_COLOUR = "#aec7e8"


#: Colour scale of CP (0 = off the critical path).
CP_COLOURSCALE = "YlOrRd"


def empty_figure(message: str) -> go.Figure:
    """A figure with no data that shows ``message`` in its middle.

    Parameters
    ----------
    message
        What is missing, e.g. "no shuffle on the critical path".

    Returns
    -------
    plotly.graph_objects.Figure
        No traces, hidden axes, one annotation.

    Examples
    --------
    >>> fig = empty_figure("nothing to show")
    >>> len(fig.data), fig.layout.annotations[0].text
    (0, 'nothing to show')
    """
    fig = go.Figure()
    fig.add_annotation(
        text=message,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font={"size": 16, "color": "#555"},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=240, plot_bgcolor="white")
    return fig


def activity_colour(activity: str) -> str:
    """The colour of an activity type (a neutral one for unknown names).

    >>> activity_colour("gc"), activity_colour("something-else")
    ('#d62728', '#aec7e8')
    """
    return ACTIVITY_COLOURS.get(activity, _OTHER_COLOUR)
