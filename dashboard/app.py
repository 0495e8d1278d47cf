"""The live Dash dashboard: a read-only view of the latest snapshot.

:func:`create_app` lays out one graph per summary, a window picker and a
status line (:mod:`~sparktrail.dashboard.page_layout`), and registers the
callbacks (:mod:`~sparktrail.dashboard.page_callbacks`). Callbacks only
read ``source.latest()`` (see :mod:`~sparktrail.dashboard.live_view`) and
call pure functions of it (:mod:`~sparktrail.dashboard.page_content`,
:mod:`~sparktrail.dashboard.window_picker`,
:mod:`~sparktrail.dashboard.over_time_chart`), which call the figure
builders of :mod:`~sparktrail.dashboard.figures`. The server, its routes
and its guard are :mod:`~sparktrail.dashboard.dash_server`'s.

Many windows
------------
The window picker lists the newest
:data:`~sparktrail.dashboard.window_picker.PICKER_WINDOWS` windows and
finds older ones by the text typed into it; its options are sent when the
windows change or the search does, not on every tick. The over-time chart
merges runs of windows into at most
:data:`~sparktrail.dashboard.over_time_chart.MAX_BARS` bars, and picking a
window moves its shading with a patch instead of sending the chart again.
"""

from __future__ import annotations

import dash

from sparktrail.engines.comparison import Comparison

from .compare_report import PAGE_STYLE, compare_layout
from .dash_server import dash_app, guard, serve
from .live_view import ViewSource
from .metrics import METRICS_PATH, add_metrics_route
from .page_callbacks import add_callbacks
from .page_layout import page_layout

__all__ = ["create_app", "create_compare_app", "serve"]


def create_compare_app(comparison: Comparison) -> dash.Dash:
    """A Dash app that shows one comparison (``sparktrail serve --compare``):
    the verdict, the waterfall, the settings diff and the checked savings
    (:func:`~sparktrail.dashboard.compare_report.compare_layout`), in the
    report's style; no callback, the same routes and guard as
    :func:`create_app`. Run it with :func:`serve`."""
    title = f"{comparison.before_name} → {comparison.after_name}"
    app = dash_app(f"sparktrail compare: {title}")
    app.index_string = app.index_string.replace(
        "{%css%}", "{%css%}<style>" + PAGE_STYLE + "</style>"
    )
    app.layout = compare_layout(comparison)
    guard(app)
    return app


def create_app(source: ViewSource) -> dash.Dash:
    """A Dash app that shows ``source``'s latest snapshot.

    Parameters
    ----------
    source
        Hands out the snapshot to show (an
        :class:`~sparktrail.dashboard.live_view.UpdateThread` while live).

    Returns
    -------
    dash.Dash
        Run it with :func:`serve`; the layout is built per page load from
        the snapshot of that moment.
    """
    app = dash_app("sparktrail")
    app.layout = lambda: page_layout(source.latest())
    add_metrics_route(
        app.server, source, app.config.routes_pathname_prefix + METRICS_PATH
    )
    guard(app)
    add_callbacks(app, source)
    return app
