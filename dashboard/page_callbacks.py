"""The page's Dash callbacks: each reads ``source.latest()`` and nothing else.

The page's ``dcc.Interval`` (``refresh``, every 250 ms) checks whether a
new snapshot was published; the figures, tables and texts are rebuilt only
when it was (the ``drawn-windows`` store changed), or when another window
is picked.
Every callback hands the snapshot to a pure function of
:mod:`~sparktrail.dashboard.page_content` or
:mod:`~sparktrail.dashboard.window_picker`: callbacks read precomputed
summaries, never files or the trace.
"""

from __future__ import annotations

from typing import Any

import dash
import polars as pl
from dash.exceptions import PreventUpdate

from .live_view import ViewSource
from .over_time_chart import window_shading
from .page_content import (
    GRAPHS,
    TABLES,
    communication_panel,
    headline,
    hints_panel,
    is_whole_run,
    page_figures,
    pick_view,
    sized,
    stream_panel,
    table_data,
    unreadable,
    window_figures,
)
from .page_layout import counters_text, fact_spans
from .window_picker import clicked_batch, clicked_window, picker_options

__all__ = ["add_callbacks"]

#: The two inputs of every callback that redraws for the picked view.
_PICKED = (dash.Input("window-picker", "value"), dash.Input("drawn-windows", "data"))


def add_callbacks(app: dash.Dash, source: ViewSource) -> None:
    """Register every callback of the page on ``app``, reading ``source``."""
    _add_refresh(app, source)
    _add_picker(app, source)
    _add_sections(app, source)
    _add_graphs(app, source)


def _add_refresh(app: dash.Dash, source: ViewSource) -> None:
    """The tick: status and counters, and a new version of the windows."""

    @app.callback(
        dash.Output("status", "children"),
        dash.Output("counters", "children"),
        dash.Output("shown-version", "data"),
        dash.Output("drawn-windows", "data"),
        dash.Input("refresh", "n_intervals"),
        dash.State("shown-version", "data"),
        dash.State("drawn-windows", "data"),
    )
    def refresh(_: Any, shown: Any, drawn: Any) -> tuple[Any, ...]:
        snapshot = source.latest()
        if snapshot.version == shown:
            raise PreventUpdate
        windows = snapshot.windows_version
        return (
            snapshot.status,
            counters_text(snapshot),
            snapshot.version,
            dash.no_update if windows == drawn else windows,
        )


def _add_picker(app: dash.Dash, source: ViewSource) -> None:
    """The picker's options, and the window a click on a chart picks."""

    @app.callback(
        dash.Output("window-picker", "options"),
        dash.Input("drawn-windows", "data"),
        dash.Input("window-picker", "search_value"),
        dash.State("window-picker", "value"),
        prevent_initial_call=True,  # the layout lists them
    )
    def list_windows(_: Any, search: Any, picked: Any) -> list[dict[str, str]]:
        return picker_options(source.latest(), search, picked)

    @app.callback(
        dash.Output("window-picker", "value"),
        dash.Output("window-picker", "options", allow_duplicate=True),
        dash.Input("activity-summary", "clickData"),
        dash.Input("stream-progress", "clickData"),
        prevent_initial_call=True,
    )
    def pick_clicked(click: Any, batch: Any) -> tuple[str, list[dict[str, str]]]:
        snapshot = source.latest()
        if dash.ctx.triggered_id == "stream-progress":
            key = clicked_batch(snapshot, batch)
        else:
            key = clicked_window(snapshot, click)
        if key is None:
            raise PreventUpdate
        return key, picker_options(snapshot, None, key)


def _add_sections(app: dash.Dash, source: ViewSource) -> None:
    """The streaming and communication sections, the header and the tables."""

    @app.callback(
        dash.Output("stream-progress", "figure"),
        dash.Output("stream-progress-section", "style"),
        *_PICKED,
    )
    def stream(key: Any, __: Any) -> tuple[Any, dict[str, str]]:
        figure, style = stream_panel(source.latest(), key)
        return (dash.no_update if figure is None else figure), style

    @app.callback(
        dash.Output("communication-summary-section", "style"),
        dash.Output("communication-note", "children"),
        *_PICKED,
    )
    def hide_communication(key: Any, _: Any) -> tuple[dict[str, str], str]:
        return communication_panel(source.latest(), key)

    @app.callback(
        dash.Output("app-header", "children"),
        dash.Output("verdict", "children"),
        dash.Output("window-line", "children"),
        *_PICKED,
        prevent_initial_call=True,  # the layout has them
    )
    def describe(key: Any, _: Any) -> tuple[list[Any], str, str]:
        facts, sentence, window_line = headline(source.latest(), key)
        return fact_spans(facts), sentence, window_line

    @app.callback(dash.Output("hints", "children"), *_PICKED)
    def list_hints(key: Any, _: Any) -> Any:
        return hints_panel(source.latest(), key)

    @app.callback(
        [dash.Output(key, "data") for key in TABLES]
        + [dash.Output(f"{key}-note", "children") for key in TABLES],
        *_PICKED,
    )
    def tabulate(key: Any, _: Any) -> list[Any]:
        built = table_data(source.latest(), key)
        return [data for data, _ in built] + [note for _, note in built]


def _add_graphs(app: dash.Dash, source: ViewSource) -> None:
    """Every graph: all redrawn when the windows change; when only the
    picked window does, the over-time chart just moves its shading."""

    @app.callback([dash.Output(key, "figure") for key in GRAPHS], *_PICKED)
    def draw(key: Any, _: Any) -> list[Any]:
        snapshot = source.latest()
        view = pick_view(snapshot, key)
        if view is not None and set(dash.ctx.triggered_prop_ids) == {
            "window-picker.value"
        }:  # the windows are those drawn: move the shading, keep the chart
            try:
                whole = is_whole_run(snapshot, view)
                built: dict[str, Any] = sized(window_figures(view, whole))
            except (OSError, pl.exceptions.PolarsError) as err:
                built = unreadable(view, err)
            else:
                shading = dash.Patch()
                shading["layout"]["shapes"] = window_shading(snapshot, view)
                built["activity-summary"] = shading
        else:
            built = page_figures(snapshot, key)
        return [built[name] for name in GRAPHS]
