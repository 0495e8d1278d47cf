"""The live Dash dashboard: a read-only view of the latest snapshot.

:func:`create_app` lays out one graph per summary (component ids in
:data:`GRAPHS`), a window picker and a status line. Callbacks only read
``source.latest()`` (see :mod:`~sparktrail.dashboard.live_view`) and call the
pure builders of :mod:`~sparktrail.dashboard.figures`: a 1 s
``dcc.Interval`` checks whether a new snapshot was published, and the
figures are rebuilt only when it was, or when another window is picked.

Safety
------
No path from a request reaches the file system: the server answers only
the page itself and Dash's routes (layout, dependencies, callbacks, the
component scripts registered by its packages) and ``/metrics`` (the
snapshot's numbers for Prometheus, :mod:`~sparktrail.dashboard.metrics`),
anything else with 404; no
assets folder, no Flask static folder. A callback request must name a
callback of the page with its declared inputs (else 400), and a window key
from the page only selects among the snapshot's windows
(:meth:`~sparktrail.dashboard.live_view.ViewState.window`). :func:`serve` binds
127.0.0.1 unless told otherwise, with Dash's dev tools off whatever the
``DASH_*`` environment says.

Many windows
------------
The window picker lists the newest :data:`PICKER_WINDOWS` windows and
finds older ones by the text typed into it; its options are sent when the
windows change or the search does, not on every tick. The over-time chart
merges runs of windows into at most :data:`MAX_BARS` bars
(:func:`coarsen_activity`), and picking a window moves its shading with a
patch instead of sending the chart again.
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import math
from pathlib import Path
from typing import Any

import dash
import flask
import plotly.graph_objects as go
import polars as pl
from dash import dash_table, dcc, html
from dash.exceptions import DependencyException, PreventUpdate

from sparktrail.engines.comparison import Comparison
from sparktrail.errors import InputError
from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS
from sparktrail.summaries.frames import CP_NS, CP_SHARE, TIME_NS
from sparktrail.summaries.hints import shown_hints

from . import figures, spark_tables, stream_figures
from .compare_report import PAGE_STYLE, compare_layout
from .live_view import (
    LATEST,
    ViewSource,
    ViewState,
    WindowView,
    closed_label,
    window_start,
)
from .metrics import METRICS_PATH, add_metrics_route
from .verdict import header_facts, verdict
from .whole_run import WHOLE_RUN, WHOLE_RUN_HINTS, whole_run_view

__all__ = [
    "CAPTIONS",
    "GRAPHS",
    "MAX_BARS",
    "PICKER_WINDOWS",
    "TABLES",
    "clicked_batch",
    "clicked_window",
    "coarsen_activity",
    "communication_panel",
    "create_app",
    "headline",
    "page_figures",
    "picker_options",
    "serve",
    "stream_panel",
    "table_data",
    "well_formed",
    "windows_per_bar",
]

#: Graph component id -> what it shows, in page order.
GRAPHS: dict[str, str] = {
    "activity-summary": "Critical path by activity over time",
    "straggler-summary": "Workers: share of the critical path vs fair share",
    "operator-summary": "Operators (call site and plan node, across stages)",
    "communication-summary": "Communication channels",
    "critical-timeline": "Timeline of the selected window",
    "hints": "Rebalancing hints",
}
#: Graph component id -> the one line under it (figures.CAPTIONS).
CAPTIONS: dict[str, str] = {
    "activity-summary": figures.CAPTIONS["activity"]
    + " Click a bar to show its window below.",
    "straggler-summary": figures.CAPTIONS["straggler"],
    "operator-summary": figures.CAPTIONS["operator"],
    "communication-summary": figures.CAPTIONS["communication"],
    "critical-timeline": figures.CAPTIONS["timeline"],
    "hints": figures.CAPTIONS["hints"],
}
#: Table component id -> (heading, Summaries frame, columns, caption).
TABLES: dict[str, tuple[str, str, dict[str, spark_tables.Column], str]] = {
    "stage-table": (
        "Stages",
        "stages",
        spark_tables.STAGE_COLUMNS,
        spark_tables.STAGE_TABLE_CAPTION,
    ),
    "executor-table": (
        "Executors",
        "executors",
        spark_tables.EXECUTOR_COLUMNS,
        spark_tables.EXECUTOR_TABLE_CAPTION,
    ),
}
#: What a table says when the view has no rows for it.
WHOLE_RUN_TABLES = (
    "whole-run tables need the whole trace: `sparktrail profile` writes them; "
    "pick a window for its tables"
)
DEFAULT_HEIGHT = 420
#: The hints panel's height when it holds a sentence instead of a table.
EMPTY_HINTS_HEIGHT = 160
WAITING = "waiting for the first window to close…"
#: Windows the picker lists without a search (the newest).
PICKER_WINDOWS = 200
#: Bars of the over-time chart, at most (runs of windows are merged): about
#: 2 px each across the page, one point per bar and activity.
MAX_BARS = 500
#: Longest request body the server reads (callback requests are small).
MAX_REQUEST_BYTES = 1 << 20
_SEARCH_CHARS = 64
_NO_ASSETS = Path(__file__).parent / "_no_assets"  # never created
#: The routes the page uses, under Dash's routes prefix; any other is 404.
_ROUTES = (
    "",
    "_dash-layout",
    "_dash-dependencies",
    "_dash-update-component",
    "_dash-component-suites/<string:package_name>/<path:fingerprinted_path>",
    "_favicon.ico",
    METRICS_PATH,  # Prometheus' scrapes (dashboard/metrics.py)
)

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


def _empty(snapshot: ViewState) -> dict[str, go.Figure]:
    message = WAITING if snapshot.live else snapshot.status
    if snapshot.status.startswith(("error", snapshot.source)):
        message = snapshot.status
    return {key: figures.empty_figure(message) for key in GRAPHS}


def _timeline(view: WindowView, whole: bool) -> go.Figure:
    rows = view.cp
    if rows is None:
        return figures.empty_figure(
            "no CP rows for this view (a report without critical_window.parquet)"
        )
    if rows[WINDOW_START_NS].n_unique() > 1:  # a report's CP of several windows
        rows = rows.filter(pl.col(WINDOW_START_NS) == rows[WINDOW_START_NS].max())
    label = view.label
    if not rows.is_empty():
        start, end = int(rows["window_start_ns"][0]), int(rows["window_end_ns"][0])
        if whole:  # the timeline of the whole run is its most critical window
            label = f"{closed_label(start, end)}, the most critical of the run"
    fig = figures.critical_gantt(
        rows, f"Window {label}: edges coloured by critical participation"
    )
    fig.update_layout(uirevision=view.key)
    return fig


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


def _shading(
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


def _activity_figure(snapshot: ViewState, view: WindowView) -> go.Figure:
    frame = snapshot.activity_by_window
    fig = figures.activity_over_time(coarsen_activity(frame, MAX_BARS))
    per_bar = windows_per_bar(frame, MAX_BARS)
    if per_bar > 1:
        fig.update_layout(
            title=f"Critical path by activity over time ({per_bar} windows per bar)"
        )
    fig.update_layout(uirevision="activity", shapes=_shading(snapshot, view))
    return fig


def _pick(snapshot: ViewState, key: object) -> WindowView | None:
    """The view a picker value names: the whole run, or a window."""
    if key == WHOLE_RUN and snapshot.live:
        return whole_run_view(snapshot)
    return snapshot.window(key)


def _whole(snapshot: ViewState, view: WindowView) -> bool:
    """Whether ``view`` is the whole run (a report's one view is)."""
    return view.key == WHOLE_RUN or not snapshot.live


def _window_figures(view: WindowView, whole: bool = False) -> dict[str, go.Figure]:
    summaries = view.summaries
    hints = figures.hints_table(shown_hints(summaries.hints))
    if view.key == WHOLE_RUN:
        hints = figures.empty_figure(WHOLE_RUN_HINTS)
    if len(hints.data) == 0:  # a sentence, first on the page: keep it short
        hints.update_layout(height=EMPTY_HINTS_HEIGHT)
    elif not summaries.hints.is_empty():  # long evidence wraps to several lines
        hints.update_layout(height=min(1200, 150 + 110 * len(summaries.hints)))
    return {
        "straggler-summary": figures.straggler_bars(summaries.straggler),
        "operator-summary": figures.operator_bars(summaries.operator),
        "communication-summary": figures.communication_heatmap(summaries.communication),
        "critical-timeline": _timeline(view, whole),
        "hints": hints,
    }


def _unreadable(view: WindowView, err: Exception) -> dict[str, go.Figure]:
    message = f"window {view.label} could not be read: {type(err).__name__}"
    return {key: figures.empty_figure(message) for key in GRAPHS}


def _sized(built: dict[str, go.Figure]) -> dict[str, go.Figure]:
    for fig in built.values():  # a graph keeps an earlier figure's height
        fig.update_layout(height=fig.layout.height or DEFAULT_HEIGHT)
    return built


def page_figures(snapshot: ViewState, key: object) -> dict[str, go.Figure]:
    """Every graph of the page for the window picked by ``key``.

    A pure function of the snapshot: the over-time chart shows every
    window (runs of them merged into at most :data:`MAX_BARS` bars, the
    picked one shaded), the others the picked window.

    Examples
    --------
    >>> figs = page_figures(ViewState(source="t", status="starting"), None)
    >>> sorted(figs) == sorted(GRAPHS)
    True
    """
    view = _pick(snapshot, key)
    if view is None:
        return _empty(snapshot)
    try:
        built = _window_figures(view, _whole(snapshot, view))
    except (OSError, pl.exceptions.PolarsError) as err:  # a store window gone
        return _unreadable(view, err)
    return _sized({"activity-summary": _activity_figure(snapshot, view)} | built)


_WHOLE_RUN_LABEL = "whole run (all closed windows)"


def picker_options(
    snapshot: ViewState, search: object = None, picked: object = None
) -> list[dict[str, str]]:
    """The window picker's options: follow-latest, then windows newest first.

    Parameters
    ----------
    snapshot
        Its windows are the choice.
    search
        Text typed into the picker: windows whose label holds it (at most
        :data:`PICKER_WINDOWS`); without it, the newest windows.
    picked
        The picker's value; its window stays listed, so it stays shown.

    Examples
    --------
    >>> [o["value"] for o in picker_options(ViewState(source="t", status="s"))]
    ['latest', 'whole-run']
    """
    if not snapshot.live:
        return [{"label": "whole run", "value": LATEST}]
    options = [{"label": "latest window (follow)", "value": LATEST}]
    newest = reversed(snapshot.windows)
    text = search.strip()[:_SEARCH_CHARS] if isinstance(search, str) else ""
    if text in _WHOLE_RUN_LABEL:  # a search filters this choice too
        options.append({"label": _WHOLE_RUN_LABEL, "value": WHOLE_RUN})
    views = [v for v in newest if text in v.label] if text else list(newest)
    views = views[:PICKER_WINDOWS]
    kept = snapshot.window(picked)
    if kept is not None and kept.key == picked and kept not in views:
        views.append(kept)
    options += [{"label": view.label, "value": view.key} for view in views]
    return options


def _clicked_data(click: object) -> object:
    """The ``customdata`` of the first point of a Dash ``clickData``."""
    points = click.get("points") if isinstance(click, dict) else None
    if not isinstance(points, list) or not points or not isinstance(points[0], dict):
        return None
    return points[0].get("customdata")


def clicked_window(snapshot: ViewState, click: object) -> str | None:
    """The picker value of the window a click on the over-time chart hit.

    Each bar carries its window's start in ns (``customdata[1]``, see
    :func:`~sparktrail.dashboard.figures.activity_over_time`); a bar of
    merged windows picks the first of them. Anything else gives ``None``.

    >>> clicked_window(ViewState(source="t", status="s"), {"points": []}) is None
    True
    """
    data = _clicked_data(click)
    start = window_start(data[1]) if isinstance(data, list) and len(data) > 1 else None
    view = snapshot.window(str(start)) if start is not None else None
    if view is None or view.start_ns != start:
        return None
    return view.key if snapshot.live else LATEST


def clicked_batch(snapshot: ViewState, click: object) -> str | None:
    """The picker value of the window a click on a micro-batch selects: the
    closed window its trigger started in (``customdata[1]``, in ms, see
    :mod:`~sparktrail.dashboard.stream_figures`); ``None`` when there is
    none (yet).

    >>> clicked_batch(ViewState(source="t", status="s"), {"points": []}) is None
    True
    """
    data = _clicked_data(click)
    ms = data[1] if isinstance(data, list) and len(data) > 1 else None
    if not isinstance(ms, int | float) or isinstance(ms, bool) or ms != ms:
        return None
    at = int(ms) * 1_000_000
    for view in reversed(snapshot.windows):  # recent batches are clicked most
        if view.start_ns <= at < view.end_ns and view.key != WHOLE_RUN:
            return view.key if snapshot.live else LATEST
    return None


def communication_panel(snapshot: ViewState, key: object) -> tuple[dict[str, str], str]:
    """The communication section's style and note for the picked view.

    Hidden, with :data:`~sparktrail.dashboard.figures.ONE_EXECUTOR_NOTE`,
    when the view's channels touch one executor (local mode): the heatmap
    would be a blank 2×2 of the driver and that executor.
    """
    view = _pick(snapshot, key)
    try:
        single = view is not None and figures.one_executor(view.summaries.communication)
    except (OSError, pl.exceptions.PolarsError):
        single = False
    if single:
        return {"display": "none"}, figures.ONE_EXECUTOR_NOTE
    return {}, ""


def headline(snapshot: ViewState, key: object) -> tuple[list[tuple[str, str]], str]:
    """The application header's facts and the verdict for the picked view.

    A report's header and verdict are its whole run's (as in the report).
    While live, the header is the newest window's context (the run so far)
    and the verdict the picked window's; the whole run has no hints
    (:data:`~sparktrail.dashboard.whole_run.WHOLE_RUN_HINTS`), so its
    verdict says what the critical path was made of. Nothing before the
    first window.

    >>> headline(ViewState(source="t", status="starting"), None)
    ([], '')
    """
    view = _pick(snapshot, key)
    if view is None or not snapshot.windows:
        return [], ""
    try:
        if not snapshot.live:
            return header_facts(view.summaries), verdict(view.summaries)
        facts = header_facts(snapshot.windows[-1].summaries, live=True)
        if view.key == WHOLE_RUN:
            return facts, verdict(view.summaries, hints_known=False)
        return facts, f"This window: {verdict(view.summaries, window=True)}"
    except (OSError, pl.exceptions.PolarsError):  # a store window gone
        return [], ""


def table_data(
    snapshot: ViewState, key: object
) -> list[tuple[list[dict[str, Any]], str]]:
    """Each table's records and note for the picked view, in :data:`TABLES` order.

    The note says why a table is empty: nothing closed yet, the live whole
    run (:data:`WHOLE_RUN_TABLES`), or no task in the view.

    >>> [note for _, note in table_data(ViewState(source="t", status="x"), None)]
    ['waiting for the first window to close…', 'waiting for the first window to close…']
    """
    view = _pick(snapshot, key)
    out: list[tuple[list[dict[str, Any]], str]] = []
    for _, frame_name, columns, _ in TABLES.values():
        if view is None:
            out.append(([], WAITING if snapshot.live else snapshot.status))
            continue
        try:
            frame = getattr(view.summaries, frame_name)
        except (OSError, pl.exceptions.PolarsError) as err:  # a store window gone
            out.append(([], f"window {view.label} could not be read: {err}"))
            continue
        if frame.is_empty():
            whole = snapshot.live and view.key == WHOLE_RUN
            out.append(([], WHOLE_RUN_TABLES if whole else "no task ran in this view"))
            continue
        out.append((spark_tables.table_records(frame, columns), ""))
    return out


def stream_panel(
    snapshot: ViewState, key: object = None
) -> tuple[go.Figure | None, dict[str, str]]:
    """The streaming section's figure and style: Spark's progress of the
    run so far (the newest window's context), hidden without micro-batches;
    the window the picker's ``key`` names is shaded, as on the over-time
    chart.

    >>> stream_panel(ViewState(source="t", status="starting"))
    (None, {'display': 'none'})
    """
    if not snapshot.windows:
        return None, {"display": "none"}
    try:
        app = snapshot.windows[-1].summaries.context
    except (OSError, pl.exceptions.PolarsError):  # a store window gone
        return None, {"display": "none"}
    if not app.batches:
        return None, {"display": "none"}
    figure = stream_figures.stream_progress(app)
    view = _pick(snapshot, key)
    if view is not None:
        figure.update_layout(shapes=_shading(snapshot, view, yref="paper"))
    return figure, {"gridColumn": "1 / -1"}


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


def _facts(facts: list[tuple[str, str]]) -> list[Any]:
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


_VERDICT = {
    "fontSize": "1.15em",
    "fontWeight": 600,
    "margin": "0.5em 0",
    "padding": "0.5em 0.9em",
    "background": "#fff4e5",
    "borderLeft": "4px solid #e08a00",
}


def _window_count(snapshot: ViewState) -> int:
    if not snapshot.live and snapshot.windows:
        # A report is one whole-run view of the windows its summaries list.
        return len(snapshot.windows[-1].summaries.windows)
    return len(snapshot.windows)


def _counters(snapshot: ViewState) -> str:
    return (
        f"windows: {_window_count(snapshot)} · corrupt files skipped: "
        f"{snapshot.corrupt_files} · late rows: {snapshot.late_rows}"
    )


_NOTE = {"color": "#555", "fontSize": "0.9em", "margin": "0.2em 0 0.6em"}
#: Graphs the page shows first, in this order (then the streaming panel).
_FIRST = ("hints", "activity-summary")


def _caption(key: str) -> Any:
    if key != "hints":
        return CAPTIONS[key]
    # The hints table is drawn by plotly, whose headings take no hover text:
    # the column names are listed under it, each with its meaning on hover.
    names = [
        html.Abbr(heading, title=figures.HINT_HELP[column])
        for column, heading in figures.HINT_COLUMNS.items()
    ]
    columns: list[Any] = [" Columns: "]
    for i, name in enumerate(names):
        columns += [", " if i else "", name]
    return [CAPTIONS[key], *columns, "."]


def _layout(snapshot: ViewState) -> html.Div:
    # The stores start at this snapshot, so the first tick does not resend it.
    head = headline(snapshot, LATEST)
    graphs = {
        key: html.Section(
            [
                dcc.Graph(id=key),
                html.P(_caption(key), className="caption", style=_NOTE),
            ],
            id=f"{key}-section",
            title=heading,
            style={"gridColumn": "1 / -1"}
            if key in ("activity-summary", "critical-timeline", "hints")
            else {},
        )
        for key, heading in GRAPHS.items()
    }
    return html.Div(
        [
            html.H1("sparktrail", style={"marginBottom": "0.1em"}),
            html.Div(snapshot.source, id="source", style={"color": "#555"}),
            html.Div(
                _facts(head[0]),
                id="app-header",
                style={"color": "#444", "margin": "0.3em 0"},
            ),
            html.Div(head[1], id="verdict", style=_VERDICT),
            html.Div(
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
            ),
            html.Div(
                _counters(snapshot),
                id="counters",
                style={"color": "#555", "fontSize": "0.9em", "margin": "0.4em 0"},
            ),
            html.Div(id="communication-note", style=_NOTE),
            html.Div(
                [
                    # The hints first (what to change), then the run over
                    # time and the streaming query's batches, then the rest.
                    graphs["hints"],
                    graphs["activity-summary"],
                    _stream_section(),
                    *[g for k, g in graphs.items() if k not in _FIRST],
                    *[_table_section(key) for key in TABLES],
                ],
                style=_GRID,
            ),
            # 250 ms: the page tick adds half of it, on average, to the time
            # from a window closing to its figures (bench/online_latency.py).
            dcc.Interval(id="refresh", interval=250, disabled=not snapshot.live),
            dcc.Store(id="shown-version", data=snapshot.version),
            dcc.Store(id="drawn-windows", data=snapshot.windows_version),
        ],
        style=_STYLE,
    )


def _declared(output: str) -> list[tuple[str, str]]:
    """``(id, property)`` of each output of a ``callback_map`` key."""
    names = output.strip(".").split("...") if output.startswith("..") else [output]
    return [(id_, prop) for id_, _, prop in (n.rpartition(".") for n in names)]


def _ids(items: Any) -> list[tuple[Any, Any]] | None:
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return None
    return [(i.get("id"), i.get("property")) for i in items]


def well_formed(app: dash.Dash, body: Any) -> bool:
    """Whether ``body`` asks for a callback of ``app`` with its declared props.

    Dash runs what a callback request names; this checks the names (the
    values are the callbacks' business): the output is a callback's, and
    the outputs, inputs, state and changed props are the ones it declared.
    """
    if not isinstance(body, dict) or not isinstance(body.get("output"), str):
        return False
    spec = app.callback_map.get(body["output"])
    if spec is None:
        return False
    outputs = body.get("outputs")
    inputs = [(d["id"], d["property"]) for d in spec["inputs"]]
    state = [(d["id"], d["property"]) for d in spec["state"]]
    changed = body.get("changedPropIds", [])
    return (
        _ids(outputs if isinstance(outputs, list) else [outputs])
        == _declared(body["output"])
        and _ids(body.get("inputs")) == inputs
        and _ids(body.get("state", [])) == state
        and isinstance(changed, list)
        and all(c in {f"{i}.{p}" for i, p in inputs} for c in changed)
    )


#: Dash options that newer versions have and that must stay off here
#: (``DASH_MCP_ENABLED`` would add a route that describes the callbacks).
_OFF: dict[str, Any] = {
    name: False
    for name in ("enable_mcp",)
    if name in inspect.signature(dash.Dash).parameters
}


def _guard(app: dash.Dash) -> None:
    """Answer only the page's routes and well-formed callback requests."""
    server: flask.Flask = app.server
    server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    prefix = app.config.routes_pathname_prefix
    allowed = {prefix + route for route in _ROUTES}

    @server.before_request
    def only_the_page() -> None:
        rule = flask.request.url_rule
        if rule is None or rule.rule not in allowed:
            flask.abort(404)

    @server.errorhandler(DependencyException)
    def not_a_component_script(_: Exception) -> tuple[str, int]:
        return "not found", 404

    endpoint = prefix + "_dash-update-component"
    dispatch = server.view_functions[endpoint]

    def checked_dispatch(*args: Any, **kwargs: Any) -> Any:
        if not well_formed(app, flask.request.get_json(silent=True)):
            flask.abort(400)
        return dispatch(*args, **kwargs)

    server.view_functions[endpoint] = checked_dispatch


def _dash_app(title: str) -> dash.Dash:
    """A Dash app on its own Flask server: no assets, no static folder."""
    server = flask.Flask(__name__, static_folder=None)
    return dash.Dash(
        __name__,
        server=server,  # type: ignore[arg-type]
        title=title,
        assets_folder=str(_NO_ASSETS),
        include_assets_files=False,
        serve_locally=True,
        compress=False,
        suppress_callback_exceptions=False,
        update_title=None,  # type: ignore[arg-type]
        **_OFF,
    )


def create_compare_app(comparison: Comparison) -> dash.Dash:
    """A Dash app that shows one comparison (``sparktrail serve --compare``):
    the verdict, the waterfall, the settings diff and the checked savings
    (:func:`~sparktrail.dashboard.compare_report.compare_layout`), in the
    report's style; no callback, the same routes and guard as
    :func:`create_app`. Run it with :func:`serve`."""
    title = f"{comparison.before_name} → {comparison.after_name}"
    app = _dash_app(f"sparktrail compare: {title}")
    app.index_string = app.index_string.replace(
        "{%css%}", "{%css%}<style>" + PAGE_STYLE + "</style>"
    )
    app.layout = compare_layout(comparison)
    _guard(app)
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
    app = _dash_app("sparktrail")
    server = app.server
    app.layout = lambda: _layout(source.latest())
    add_metrics_route(server, source, app.config.routes_pathname_prefix + METRICS_PATH)
    _guard(app)

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
            _counters(snapshot),
            snapshot.version,
            dash.no_update if windows == drawn else windows,
        )

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

    @app.callback(
        dash.Output("stream-progress", "figure"),
        dash.Output("stream-progress-section", "style"),
        dash.Input("window-picker", "value"),
        dash.Input("drawn-windows", "data"),
    )
    def stream(key: Any, __: Any) -> tuple[Any, dict[str, str]]:
        figure, style = stream_panel(source.latest(), key)
        return (dash.no_update if figure is None else figure), style

    @app.callback(
        dash.Output("communication-summary-section", "style"),
        dash.Output("communication-note", "children"),
        dash.Input("window-picker", "value"),
        dash.Input("drawn-windows", "data"),
    )
    def hide_communication(key: Any, _: Any) -> tuple[dict[str, str], str]:
        return communication_panel(source.latest(), key)

    @app.callback(
        dash.Output("app-header", "children"),
        dash.Output("verdict", "children"),
        dash.Input("window-picker", "value"),
        dash.Input("drawn-windows", "data"),
        prevent_initial_call=True,  # the layout has them
    )
    def describe(key: Any, _: Any) -> tuple[list[Any], str]:
        facts, sentence = headline(source.latest(), key)
        return _facts(facts), sentence

    @app.callback(
        [dash.Output(key, "data") for key in TABLES]
        + [dash.Output(f"{key}-note", "children") for key in TABLES],
        dash.Input("window-picker", "value"),
        dash.Input("drawn-windows", "data"),
    )
    def tabulate(key: Any, _: Any) -> list[Any]:
        built = table_data(source.latest(), key)
        return [data for data, _ in built] + [note for _, note in built]

    @app.callback(
        [dash.Output(key, "figure") for key in GRAPHS],
        dash.Input("window-picker", "value"),
        dash.Input("drawn-windows", "data"),
    )
    def draw(key: Any, _: Any) -> list[Any]:
        snapshot = source.latest()
        view = _pick(snapshot, key)
        if view is not None and set(dash.ctx.triggered_prop_ids) == {
            "window-picker.value"
        }:  # the windows are those drawn: move the shading, keep the chart
            try:
                whole = _whole(snapshot, view)
                built: dict[str, Any] = _sized(_window_figures(view, whole))
            except (OSError, pl.exceptions.PolarsError) as err:
                built = _unreadable(view, err)
            else:
                shading = dash.Patch()
                shading["layout"]["shapes"] = _shading(snapshot, view)
                built["activity-summary"] = shading
        else:
            built = page_figures(snapshot, key)
        return [built[name] for name in GRAPHS]

    return app


def serve(
    app: dash.Dash,
    host: str = "127.0.0.1",
    port: int = 8050,
    *,
    verbose: bool = False,
) -> None:
    """Serve ``app`` on ``host:port`` with Flask's threaded server until stopped.

    The host is 127.0.0.1 unless told otherwise. Dash's dev tools (error
    pages with tracebacks, hot reload) and Flask's debugger and reloader
    stay off, whatever the ``DASH_*`` and ``FLASK_*`` environment says.
    Unless ``verbose``, the terminal gets neither an access-log line per
    request nor the development server's banners: the caller prints the
    one line a user needs (the URL).

    Raises
    ------
    ValueError
        If ``host`` is empty (Dash would take ``$HOST`` instead).
    """
    if not host:
        raise InputError("the host to bind must not be empty (e.g. 127.0.0.1)")
    if not verbose:
        _quiet_server(app)
    app.run(
        host=host,
        port=port,
        debug=False,
        dev_tools_ui=False,
        dev_tools_props_check=False,
        dev_tools_serve_dev_bundles=False,
        dev_tools_hot_reload=False,
        use_reloader=False,
        use_debugger=False,
        load_dotenv=False,
    )


def _quiet_server(app: dash.Dash) -> None:
    # werkzeug logs every request at INFO, Dash its URL; Flask prints a
    # banner through flask.cli, which has no switch but this one.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app.logger.setLevel(logging.WARNING)
    flask.cli.show_server_banner = lambda *args, **kwargs: None
