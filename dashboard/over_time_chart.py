"""The over-time chart of the page: windows merged into bars, the picked one shaded.

The chart merges runs of windows into at most :data:`MAX_BARS` bars
(:func:`coarsen_activity`), and picking a window moves its shading
(:func:`window_shading`) with a patch instead of sending the chart again.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import plotly.graph_objects as go
import polars as pl

from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS
from sparktrail.summaries.frames import CP_NS, CP_SHARE, TIME_NS

from . import figures
from .live_view import ViewState, WindowView
from .whole_run import WHOLE_RUN

__all__ = [
    "MAX_BARS",
    "activity_figure",
    "coarsen_activity",
    "window_shading",
    "windows_per_bar",
]

#: Bars of the over-time chart, at most (runs of windows are merged): about
#: 2 px each across the page, one point per bar and activity.
MAX_BARS = 500


def windows_per_bar(activity_by_window: pl.DataFrame, max_bars: int) -> int:
    """How many windows :func:`coarsen_activity` merges into one bar.

    >>> f = pl.DataFrame({"window_start_ns": [0, 10, 20],
    ...     "window_end_ns": [10, 20, 30]})
    >>> windows_per_bar(f, 3), windows_per_bar(f, 2), windows_per_bar(f, 1)
    (1, 2, 3)
    """
    frame = activity_by_window
    if frame.is_empty() or frame[WINDOW_START_NS].n_unique() <= max_bars:
        return 1
    first = int(frame[WINDOW_START_NS].min())  # type: ignore[arg-type]
    last = int(frame[WINDOW_END_NS].max())  # type: ignore[arg-type]
    lengths = frame[WINDOW_END_NS] - frame[WINDOW_START_NS]
    window = max(1, int(lengths.min()))  # type: ignore[arg-type]
    return math.ceil((last - first) / window / max_bars)


def coarsen_activity(activity_by_window: pl.DataFrame, max_bars: int) -> pl.DataFrame:
    """Merge runs of consecutive windows until at most ``max_bars`` remain.

    Time is cut into runs of :func:`windows_per_bar` windows from the first
    window on; each run becomes one row per activity spanning the run's
    windows, with the activity's share of the run's critical path
    (``cp_ns`` and ``time_ns`` summed). Fewer windows come back unchanged.

    Examples
    --------
    >>> f = pl.DataFrame({"window_start_ns": [0, 10, 20, 30],
    ...     "window_end_ns": [10, 20, 30, 40], "activity": ["gc"] * 4,
    ...     "cp_share": [1.0] * 4, "cp_ns": [10.0] * 4, "time_ns": [10] * 4})
    >>> coarsen_activity(f, 2).select("window_start_ns", "window_end_ns").rows()
    [(0, 20), (20, 40)]
    """
    frame = activity_by_window
    per_bar = windows_per_bar(frame, max_bars)
    if per_bar == 1:
        return frame
    first = int(frame[WINDOW_START_NS].min())  # type: ignore[arg-type]
    lengths = frame[WINDOW_END_NS] - frame[WINDOW_START_NS]
    span = per_bar * max(1, int(lengths.min()))  # type: ignore[arg-type]
    run = first + (pl.col(WINDOW_START_NS) - first) // span * span
    merged = (
        frame.with_columns(run.alias("run"))
        .with_columns(
            pl.col(WINDOW_START_NS).min().over("run"),
            pl.col(WINDOW_END_NS).max().over("run"),
        )
        .group_by("run", WINDOW_START_NS, WINDOW_END_NS, "activity")
        .agg(pl.col(CP_NS).sum(), pl.col(TIME_NS).sum())
        .with_columns(
            cp_share=pl.col(CP_NS) / pl.col(CP_NS).sum().over("run"),
        )
        .sort(WINDOW_START_NS, "activity")
    )
    return merged.select(frame.columns).with_columns(pl.col(CP_SHARE).fill_nan(0.0))


def _ms(ns: int) -> str:
    """A trace time as plotly's date string (UTC, microseconds)."""
    moment = dt.datetime.fromtimestamp(ns // 1000 / 1e6, tz=dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def window_shading(
    snapshot: ViewState, view: WindowView, yref: str = "y domain"
) -> list[dict[str, Any]]:
    """The over-time charts' shapes: the picked window shaded (the height
    of the axis ``yref`` names, or of the whole figure: ``paper``)."""
    if len(snapshot.windows) < 2 or view.key == WHOLE_RUN:
        return []
    shape = {
        "type": "rect",
        "xref": "x",
        "yref": yref,
        "x0": _ms(view.start_ns),
        "x1": _ms(view.end_ns),
        "y0": 0,
        "y1": 1,
        "fillcolor": "#000",
        "opacity": 0.08,
        "line": {"width": 0},
    }
    return [shape]


def activity_figure(snapshot: ViewState, view: WindowView) -> go.Figure:
    frame = snapshot.activity_by_window
    fig = figures.activity_over_time(coarsen_activity(frame, MAX_BARS))
    per_bar = windows_per_bar(frame, MAX_BARS)
    if per_bar > 1:
        fig.update_layout(
            title=f"Critical path by activity over time ({per_bar} windows per bar)"
        )
    fig.update_layout(uirevision="activity", shapes=window_shading(snapshot, view))
    return fig
