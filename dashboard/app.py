"""The live Dash dashboard: a read-only view of the latest snapshot.

:func:`create_app` lays out one graph per summary (component ids in
:data:`GRAPHS`), a window picker and a status line. Callbacks only read
``source.latest()`` (see :mod:`~sparktrail.dashboard.live`) and call the
pure builders of :mod:`~sparktrail.dashboard.figures`: a 1 s
``dcc.Interval`` checks whether a new snapshot was published, and the
figures are rebuilt only when it was, or when another window is picked.

The app serves only Dash's own routes: no assets folder and no Flask
static folder, so no path from a request reaches the file system.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
import flask
import plotly.graph_objects as go
import polars as pl
from dash import dcc, html
from dash.exceptions import PreventUpdate

from . import figures
from .live import LATEST, Snapshot, SnapshotSource, WindowView

__all__ = ["GRAPHS", "create_app", "page_figures"]

#: Graph component id -> what it shows, in page order.
GRAPHS: dict[str, str] = {
    "activity-summary": "Critical path by activity over time",
    "straggler-summary": "Workers: share of the critical path vs fair share",
    "operator-summary": "Operators (Spark stages)",
    "communication-summary": "Communication channels",
    "critical-timeline": "Timeline of the selected window",
    "hints": "Rebalancing hints",
}
DEFAULT_HEIGHT = 420
WAITING = "waiting for the first window to close…"
_NO_ASSETS = Path(__file__).parent / "_no_assets"  # never created

_STYLE = {
    "fontFamily": "system-ui, sans-serif",
    "maxWidth": "1400px",
    "margin": "0 auto",
    "padding": "0 1em",
    "color": "#222",
}
_GRID = {
    "display": "grid",
    "gridTemplateColumns": "repeat(auto-fit, minmax(560px, 1fr))",
    "gap": "1em",
}


def _empty(snapshot: Snapshot) -> dict[str, go.Figure]:
    message = WAITING if snapshot.live else snapshot.status
    if snapshot.status.startswith(("error", snapshot.source)):
        message = snapshot.status
    return {key: figures.empty_figure(message) for key in GRAPHS}


def _timeline(view: WindowView) -> go.Figure:
    if view.cp is None:
        return figures.empty_figure(
            "no CP rows for this view (a report without critical_window.parquet)"
        )
    rows = view.cp
    if rows["window_start_ns"].n_unique() > 1:  # a report's CP of several windows
        rows = rows.filter(pl.col("window_start_ns") == rows["window_start_ns"].max())
    fig = figures.critical_gantt(rows)
    fig.update_layout(
        title=f"Window {view.label}: edges coloured by critical participation",
        uirevision=view.key,
    )
    return fig


def page_figures(snapshot: Snapshot, key: str | None) -> dict[str, go.Figure]:
    """Every graph of the page for the window picked by ``key``.

    A pure function of the snapshot: the over-time chart shows every
    window (the picked one shaded), the others the picked window.

    Examples
    --------
    >>> figs = page_figures(Snapshot(source="t", status="starting"), None)
    >>> sorted(figs) == sorted(GRAPHS)
    True
    """
    view = snapshot.window(key)
    if view is None:
        return _empty(snapshot)
    summaries = view.summaries
    activity = figures.activity_over_time(snapshot.activity_by_window)
    if len(snapshot.windows) > 1:
        activity.add_vrect(
            x0=pl.Series([view.start_ns]).cast(pl.Datetime("ns"))[0],
            x1=pl.Series([view.end_ns]).cast(pl.Datetime("ns"))[0],
            fillcolor="#000",
            opacity=0.08,
            line_width=0,
        )
    activity.update_layout(uirevision="activity")
    hints = figures.hints_table(summaries.hints)
    if not summaries.hints.is_empty():  # long evidence wraps to several lines
        hints.update_layout(height=min(1200, 200 + 150 * len(summaries.hints)))
    built = {
        "activity-summary": activity,
        "straggler-summary": figures.straggler_bars(summaries.straggler),
        "operator-summary": figures.operator_bars(summaries.operator),
        "communication-summary": figures.communication_heatmap(summaries.communication),
        "critical-timeline": _timeline(view),
        "hints": hints,
    }
    for fig in built.values():  # a graph keeps an earlier figure's height
        fig.update_layout(height=fig.layout.height or DEFAULT_HEIGHT)
    return built


def _options(snapshot: Snapshot) -> list[dict[str, str]]:
    newest = "latest window (follow)" if snapshot.live else "whole run"
    options = [{"label": newest, "value": LATEST}]
    options += [
        {"label": view.label, "value": view.key} for view in reversed(snapshot.windows)
    ]
    return options if snapshot.live else options[:1]


def _counters(snapshot: Snapshot) -> str:
    return (
        f"windows: {len(snapshot.windows)} · corrupt files skipped: "
        f"{snapshot.corrupt_files} · late rows: {snapshot.late_rows}"
    )


def _layout(snapshot: Snapshot) -> html.Div:
    graphs = [
        html.Section(
            dcc.Graph(id=key),
            title=heading,
            style={"gridColumn": "1 / -1"}
            if key in ("activity-summary", "critical-timeline", "hints")
            else {},
        )
        for key, heading in GRAPHS.items()
    ]
    return html.Div(
        [
            html.H1("sparktrail", style={"marginBottom": "0.1em"}),
            html.Div(snapshot.source, id="source", style={"color": "#555"}),
            html.Div(
                [
                    html.Div(
                        dcc.Dropdown(
                            id="window-picker",
                            options=_options(snapshot),
                            value=LATEST,
                            clearable=False,
                        ),
                        style={"minWidth": "380px"},
                    ),
                    html.Div(snapshot.status, id="status"),
                ],
                style={"display": "flex", "gap": "1.5em", "alignItems": "center"},
            ),
            html.Div(
                _counters(snapshot),
                id="counters",
                style={"color": "#555", "fontSize": "0.9em", "margin": "0.4em 0"},
            ),
            html.Div(graphs, style=_GRID),
            # 250 ms: the page tick adds half of it, on average, to the time
            # from a window closing to its figures (bench/online_latency.py).
            dcc.Interval(id="refresh", interval=250, disabled=not snapshot.live),
            dcc.Store(id="shown-version", data=-1),
            dcc.Store(id="drawn-windows", data=-1),
        ],
        style=_STYLE,
    )


def create_app(source: SnapshotSource) -> dash.Dash:
    """A Dash app that shows ``source``'s latest snapshot.

    Parameters
    ----------
    source
        Hands out the snapshot to show (an
        :class:`~sparktrail.dashboard.live.UpdateThread` while live).

    Returns
    -------
    dash.Dash
        Run it with ``app.run(host=..., port=...)``; the layout is built
        per page load from the snapshot of that moment.
    """
    server = flask.Flask(__name__, static_folder=None)
    app = dash.Dash(
        __name__,
        server=server,  # type: ignore[arg-type]
        title="sparktrail",
        assets_folder=str(_NO_ASSETS),
        serve_locally=True,
        update_title=None,  # type: ignore[arg-type]
    )
    app.layout = lambda: _layout(source.latest())

    @app.callback(
        dash.Output("window-picker", "options"),
        dash.Output("status", "children"),
        dash.Output("counters", "children"),
        dash.Output("shown-version", "data"),
        dash.Output("drawn-windows", "data"),
        dash.Input("refresh", "n_intervals"),
        dash.State("shown-version", "data"),
        dash.State("drawn-windows", "data"),
    )
    def refresh(_: Any, shown: int, drawn: int) -> tuple[Any, ...]:
        snapshot = source.latest()
        if snapshot.version == shown:
            raise PreventUpdate
        windows = snapshot.windows_version
        return (
            _options(snapshot),
            snapshot.status,
            _counters(snapshot),
            snapshot.version,
            dash.no_update if windows == drawn else windows,
        )

    @app.callback(
        [dash.Output(key, "figure") for key in GRAPHS],
        dash.Input("window-picker", "value"),
        dash.Input("drawn-windows", "data"),
    )
    def draw(key: str | None, _: int) -> list[go.Figure]:
        built = page_figures(source.latest(), key)
        return [built[name] for name in GRAPHS]

    return app
