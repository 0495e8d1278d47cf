"""The page's layout: its sections in order, their styles and captions.

:func:`page_layout` builds the page from the snapshot of the moment it is
loaded: the header and verdict, the window picker and status line, the
hints first, then the over-time chart and the streaming section, the other
graphs and the sortable tables. The callbacks fill it in.
"""

from __future__ import annotations

from typing import Any

from dash import dash_table, dcc, html

from . import spark_tables, stream_figures
from .live_view import LATEST, ViewState
from .page_content import CAPTIONS, GRAPHS, HINTS_HEADING, TABLES, headline
from .window_picker import picker_options

__all__ = ["counters_text", "fact_spans", "page_layout"]

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


_NOTE = {"color": "#555", "fontSize": "0.9em", "margin": "0.2em 0 0.6em"}


#: The picked (or latest) window's state, under the run's verdict.
_WINDOW_LINE = {"color": "#555", "fontSize": "0.95em", "margin": "0 0 0.5em 0"}
_VERDICT = {
    "fontSize": "1.15em",
    "fontWeight": 600,
    "margin": "0.5em 0",
    "padding": "0.5em 0.9em",
    "background": "#fff4e5",
    "borderLeft": "4px solid #e08a00",
}


#: Graphs the page shows first, in this order (then the streaming panel).
_FIRST = ("activity-summary",)


def _stream_section() -> html.Section:
    return html.Section(
        [
            dcc.Graph(id="stream-progress"),
            html.P(stream_figures.STREAM_CAPTION, className="caption", style=_NOTE),
        ],
        id="stream-progress-section",
        title="Structured Streaming micro-batches",
        style={"display": "none"},
    )


def _table_section(key: str) -> html.Section:
    heading, _, columns, caption = TABLES[key]
    return html.Section(
        [
            html.H3(heading, style={"margin": "0.3em 0"}),
            html.Div(id=f"{key}-note", style=_NOTE),
            dash_table.DataTable(  # type: ignore[attr-defined]
                id=key,
                columns=spark_tables.datatable_columns(columns),
                data=[],
                sort_action="native",
                sort_by=[{"column_id": "cp_share", "direction": "desc"}],
                page_size=15,
                tooltip_header={c: col.help for c, col in columns.items()},
                tooltip_delay=300,
                tooltip_duration=None,
                style_table={"overflowX": "auto"},
                style_header={
                    "backgroundColor": "#444",
                    "color": "white",
                    "textDecoration": "underline dotted",
                },
                style_cell_conditional=[
                    {"if": {"column_id": c}, "textAlign": "left"}
                    for c, col in columns.items()
                    if col.unit == "text"
                ],
                style_cell={
                    "fontFamily": "system-ui, sans-serif",
                    "fontSize": "0.85em",
                    "padding": "3px 6px",
                    "maxWidth": "420px",
                    "overflow": "hidden",
                    "textOverflow": "ellipsis",
                },
            ),
            html.P(caption, className="caption", style=_NOTE),
        ],
        id=f"{key}-section",
        title=heading,
        style={"gridColumn": "1 / -1"},
    )


def fact_spans(facts: list[tuple[str, str]]) -> list[Any]:
    return [
        html.Span(
            [html.Span(label, style={"color": "#888", "fontSize": "0.85em"}), " ", v],
            className="fact",
            style={
                "display": "inline-block",
                "marginRight": "1.4em",
                "maxWidth": "100%",
                "overflowWrap": "anywhere",
            },
        )
        for label, v in facts
    ]


def _window_count(snapshot: ViewState) -> int:
    if not snapshot.live and snapshot.windows:
        # A report is one whole-run view of the windows its summaries list.
        return len(snapshot.windows[-1].summaries.windows)
    return len(snapshot.windows)


def counters_text(snapshot: ViewState) -> str:
    return (
        f"windows: {_window_count(snapshot)} · corrupt files skipped: "
        f"{snapshot.corrupt_files} · late rows: {snapshot.late_rows}"
    )


def _hints_section() -> html.Section:
    """The hints as an HTML table (:func:`~.page_content.hints_panel`), its
    caption under it."""
    return html.Section(
        [
            html.H3(HINTS_HEADING, style={"margin": "0.3em 0"}),
            html.Div(id="hints"),
            html.P(CAPTIONS["hints"], className="caption", style=_NOTE),
        ],
        id="hints-section",
        title=HINTS_HEADING,
        style={"gridColumn": "1 / -1"},
    )


def _graph_sections() -> dict[str, html.Section]:
    """Each graph of :data:`GRAPHS` in its section, with its caption."""
    return {
        key: html.Section(
            [
                dcc.Graph(id=key),
                html.P(CAPTIONS[key], className="caption", style=_NOTE),
            ],
            id=f"{key}-section",
            title=heading,
            style={"gridColumn": "1 / -1"}
            if key in ("activity-summary", "critical-timeline")
            else {},
        )
        for key, heading in GRAPHS.items()
    }


def _header(snapshot: ViewState) -> list[Any]:
    """The title, the source, the application's facts and the verdict."""
    facts, sentence, window_line = headline(snapshot, LATEST)
    return [
        html.H1("sparktrail", style={"marginBottom": "0.1em"}),
        html.Div(snapshot.source, id="source", style={"color": "#555"}),
        html.Div(
            fact_spans(facts),
            id="app-header",
            style={"color": "#444", "margin": "0.3em 0"},
        ),
        html.Div(sentence, id="verdict", style=_VERDICT),
        html.Div(window_line, id="window-line", style=_WINDOW_LINE),
    ]


def _picker_row(snapshot: ViewState) -> html.Div:
    """The window picker beside the status line."""
    return html.Div(
        [
            html.Div(
                dcc.Dropdown(
                    id="window-picker",
                    options=picker_options(snapshot),
                    value=LATEST,
                    clearable=False,
                    placeholder="type a time to find older windows",
                ),
                style={"minWidth": "380px"},
            ),
            html.Div(snapshot.status, id="status"),
        ],
        style={"display": "flex", "gap": "1.5em", "alignItems": "center"},
    )


def _sections() -> html.Div:
    """The grid of sections: the hints first (what to change), then the run
    over time and the streaming query's batches, then the rest."""
    graphs = _graph_sections()
    return html.Div(
        [
            _hints_section(),
            graphs["activity-summary"],
            _stream_section(),
            *[g for k, g in graphs.items() if k not in _FIRST],
            *[_table_section(key) for key in TABLES],
        ],
        style=_GRID,
    )


def page_layout(snapshot: ViewState) -> html.Div:
    """The page as of ``snapshot`` (Dash builds it per page load).

    >>> page_layout(ViewState(source="t", status="starting")).children[1].children
    't'
    """
    return html.Div(
        [
            *_header(snapshot),
            _picker_row(snapshot),
            html.Div(
                counters_text(snapshot),
                id="counters",
                style={"color": "#555", "fontSize": "0.9em", "margin": "0.4em 0"},
            ),
            html.Div(id="communication-note", style=_NOTE),
            _sections(),
            # 250 ms: the page tick adds half of it, on average, to the time
            # from a window closing to its figures (bench/online_latency.py).
            dcc.Interval(id="refresh", interval=250, disabled=not snapshot.live),
            # The stores start at this snapshot, so the first tick does not
            # resend it.
            dcc.Store(id="shown-version", data=snapshot.version),
            dcc.Store(id="drawn-windows", data=snapshot.windows_version),
        ],
        style=_STYLE,
    )
