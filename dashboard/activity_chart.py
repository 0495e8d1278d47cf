"""The critical path by activity over time: a stacked bar per window."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import polars as pl

from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS
from sparktrail.summaries.frames import CP_NS, CP_SHARE

from .chart_basics import activity_colour, empty_figure

__all__ = ["activity_over_time"]


def _datetimes(frame: pl.DataFrame, column: str) -> list[Any]:
    return frame.select(pl.from_epoch(column, time_unit="ns")).to_series().to_list()


def _largest_first(frame: pl.DataFrame) -> list[str]:
    """The activities of ``frame``, the largest share over all windows first."""
    order = (
        frame.group_by("activity")
        .agg(pl.col(CP_SHARE).sum())
        .sort([CP_SHARE, "activity"], descending=[True, False])["activity"]
    )
    return order.to_list()


def activity_over_time(activity_by_window: pl.DataFrame) -> go.Figure:
    """Stacked bars of each activity's share of the critical path per window.

    Parameters
    ----------
    activity_by_window
        ``Summaries.activity_by_window``: ``window_start_ns, window_end_ns,
        activity, cp_share, cp_ns`` (windows with paths only).

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace per activity type, largest overall share first, each
        bar as wide as its window; windows with no path leave a gap.

    Examples
    --------
    >>> f = pl.DataFrame({"window_start_ns": [0, 0, 10], "window_end_ns": [10, 10, 20],
    ...     "activity": ["processing", "gc", "processing"],
    ...     "cp_share": [0.75, 0.25, 1.0], "cp_ns": [7.5, 2.5, 10.0]})
    >>> [t.name for t in activity_over_time(f).data]
    ['processing', 'gc']
    """
    if activity_by_window.is_empty():
        return empty_figure("no window has a critical path")
    frame = activity_by_window.sort(WINDOW_START_NS)
    fig = go.Figure()
    for activity in _largest_first(frame):
        rows = frame.filter(pl.col("activity") == activity)
        width_ms = (rows[WINDOW_END_NS] - rows[WINDOW_START_NS]) / 1e6
        fig.add_bar(
            x=_datetimes(rows, WINDOW_START_NS),
            y=rows[CP_SHARE].to_list(),
            width=width_ms.to_list(),
            offset=0,
            name=activity,
            marker_color=activity_colour(activity),
            # The window start in ns rides along, so a click picks the window.
            customdata=rows.select(
                pl.col(CP_NS) / 1e9, pl.col(WINDOW_START_NS).cast(pl.String)
            ).rows(),
            hovertemplate=(
                f"{activity}<br>window %{{x}}<br>CP share %{{y:.1%}}"
                "<br>critical time %{customdata[0]:.3g} s<extra></extra>"
            ),
        )
    fig.update_layout(
        barmode="stack",
        title="Critical path by activity over time",
        xaxis_title="window start (UTC)",
        yaxis_title="share of the critical path",
        yaxis_tickformat=".0%",
        bargap=0,
        legend_title="activity",
    )
    return fig
