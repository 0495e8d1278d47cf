"""What each part of the page holds for the picked view.

Pure functions of a :class:`~sparktrail.dashboard.live_view.ViewState` and
the picker's value: the graphs (component ids in :data:`GRAPHS`), the
tables (:data:`TABLES`), the header and verdict, the communication and
streaming sections. The callbacks of
:mod:`~sparktrail.dashboard.page_callbacks` only call these; each reads
the snapshot's precomputed summaries and the pure builders of
:mod:`~sparktrail.dashboard.figures`.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import polars as pl
from dash import html

from sparktrail.pag.schemas import WINDOW_START_NS
from sparktrail.summaries import Summaries
from sparktrail.summaries.hints import shown_hints

from . import figures, spark_tables, stream_figures
from .live_view import LATEST, ViewState, WindowView, closed_label, utc
from .over_time_chart import activity_figure, window_shading
from .verdict import header_facts, verdict, window_state
from .whole_run import WHOLE_RUN, WHOLE_RUN_HINTS, profile_pending, whole_run_view

__all__ = [
    "CAPTIONS",
    "DEFAULT_HEIGHT",
    "GRAPHS",
    "HINTS_HEADING",
    "TABLES",
    "WAITING",
    "WHOLE_RUN_TABLES",
    "communication_panel",
    "headline",
    "hints_panel",
    "is_whole_run",
    "page_figures",
    "pick_view",
    "sized",
    "stream_panel",
    "table_data",
    "unreadable",
    "window_figures",
]

#: Graph component id -> what it shows, in page order.
GRAPHS: dict[str, str] = {
    "activity-summary": "Critical path by activity over time",
    "straggler-summary": "Workers: share of the critical path vs fair share",
    "operator-summary": "Operators (call site and plan node, across stages)",
    "communication-summary": "Communication channels",
    "critical-timeline": "Timeline of the selected window",
}

#: The hints' section heading (an HTML table: its rows grow with the text).
HINTS_HEADING = "Rebalancing hints"


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
    "the run's tables come with its first whole-run profile (every few "
    "seconds while it runs); pick a window for its tables"
)


DEFAULT_HEIGHT = 420


WAITING = "waiting for the first window to close…"


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


def pick_view(snapshot: ViewState, key: object) -> WindowView | None:
    """The view a picker value names: the whole run, or a window."""
    if key == WHOLE_RUN and snapshot.live:
        return whole_run_view(snapshot)
    return snapshot.window(key)


def is_whole_run(snapshot: ViewState, view: WindowView) -> bool:
    """Whether ``view`` is the whole run (a report's one view is)."""
    return view.key == WHOLE_RUN or not snapshot.live


def window_figures(view: WindowView, whole: bool = False) -> dict[str, go.Figure]:
    summaries = view.summaries
    return {
        "straggler-summary": figures.straggler_bars(summaries.straggler),
        "operator-summary": figures.operator_bars(summaries.operator),
        "communication-summary": figures.communication_heatmap(summaries.communication),
        "critical-timeline": _timeline(view, whole),
    }


def hints_panel(snapshot: ViewState, key: object) -> Any:
    """The shown hints of the picked view as an HTML table (its rows grow
    with their text; the cells are :func:`~.figures.hint_cells`, the
    report's), or the sentence saying why there is none. While live, once
    the run so far is profiled, the latest window and the whole run show
    the run's hints (the verdict above them is the run's); a picked window
    shows its own, said to be that window's.

    >>> hints_panel(ViewState(source="t", status="starting"), None).children
    'waiting for the first window to close…'
    """
    view = pick_view(snapshot, key)
    if view is None:
        return html.P(WAITING if snapshot.live else snapshot.status, style=_NOTE)
    if _run_known(snapshot, key) and snapshot.run is not None:
        # The verdict above is the run's: so are the hints under it.
        return [html.P(RUN_HINTS, style=_NOTE), _hints_table(snapshot.run.hints)]
    if profile_pending(view):
        return html.P(WHOLE_RUN_HINTS, style=_NOTE)
    try:
        table = _hints_table(view.summaries.hints)
    except (OSError, pl.exceptions.PolarsError) as err:  # a store window gone
        return html.P(f"window {view.label} could not be read: {type(err).__name__}")
    if view.key == WHOLE_RUN or not snapshot.live:
        return table
    return [html.P(f"Window {view.label} alone:", style=_NOTE), table]


#: What the live page's hints are, on the latest window or the whole run.
RUN_HINTS = "The run so far (what sparktrail profile prints for it):"
_RUN_KEYS = (LATEST, WHOLE_RUN, None)


def _hints_table(frame: pl.DataFrame) -> Any:
    hints = shown_hints(frame)
    if hints.is_empty():
        return html.P(figures.NO_HINT, style=_NOTE)
    head = html.Tr(
        [
            html.Th(heading, title=figures.HINT_HELP[column], style=_HEAD)
            for column, heading in figures.HINT_COLUMNS.items()
        ]
    )
    rows = [
        html.Tr(
            [
                html.Td(text, style=_cell(i, row.get("severity")))
                for i, text in enumerate(figures.hint_cells(row))
            ],
            className=f"severity-{row.get('severity')}",
        )
        for row in hints.iter_rows(named=True)
    ]
    return html.Table([html.Thead(head), html.Tbody(rows)], style=_TABLE)


_NOTE = {"color": "#555"}
_TABLE = {"borderCollapse": "collapse", "width": "100%", "fontSize": "0.9em"}
_HEAD = {
    "background": "#444",
    "color": "white",
    "textAlign": "left",
    "padding": "4px 6px",
    "cursor": "help",
}
_SEVERITY_COLOURS = {"high": "#b00", "medium": "#c60"}
#: Columns of a word or a number (severity, kind, stage, executor,
#: partition): never broken inside; the saving and the text wrap.
_ONE_LINE = frozenset({0, 1, 3, 4, 5})


def _cell(column: int, severity: Any) -> dict[str, str]:
    """A hint cell's style: text wraps (the row grows); the severity in its
    colour."""
    style = {
        "border": "1px solid #ddd",
        "padding": "4px 6px",
        "verticalAlign": "top",
        "whiteSpace": "normal",
        "overflowWrap": "anywhere",
    }
    if column in _ONE_LINE:
        style |= {"whiteSpace": "nowrap"}
    if column == 0 and severity in _SEVERITY_COLOURS:
        style |= {"color": _SEVERITY_COLOURS[str(severity)], "fontWeight": "bold"}
    return style


def unreadable(view: WindowView, err: Exception) -> dict[str, go.Figure]:
    message = f"window {view.label} could not be read: {type(err).__name__}"
    return {key: figures.empty_figure(message) for key in GRAPHS}


def sized(built: dict[str, go.Figure]) -> dict[str, go.Figure]:
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
    view = pick_view(snapshot, key)
    if view is None:
        return _empty(snapshot)
    try:
        built = window_figures(view, is_whole_run(snapshot, view))
    except (OSError, pl.exceptions.PolarsError) as err:  # a store window gone
        return unreadable(view, err)
    return sized({"activity-summary": activity_figure(snapshot, view)} | built)


def communication_panel(snapshot: ViewState, key: object) -> tuple[dict[str, str], str]:
    """The communication section's style and note for the picked view.

    Hidden, with :data:`~sparktrail.dashboard.figures.ONE_EXECUTOR_NOTE`,
    when the view's channels touch one executor (local mode): the heatmap
    would be a blank 2×2 of the driver and that executor.
    """
    view = pick_view(snapshot, key)
    try:
        single = view is not None and figures.one_executor(view.summaries.communication)
    except (OSError, pl.exceptions.PolarsError):
        single = False
    if single:
        return {"display": "none"}, figures.ONE_EXECUTOR_NOTE
    return {}, ""


def headline(
    snapshot: ViewState, key: object
) -> tuple[list[tuple[str, str]], str, str]:
    """The application header's facts, the verdict and the window line.

    A report's header and verdict are its whole run's (as in the report),
    with no window line. While live, the page leads with the run: once the
    snapshot carries the run so far (``ViewState.run``), the header counts
    its jobs, stages and tasks and the verdict is its top hint's, whatever
    window is picked; the window line, smaller, says how the picked window
    (or, on the whole run, the latest) went, and once the log's end is read,
    that the application ended. Before that first profile the header is
    the newest window's context and the verdict the picked view's (the
    windows' mean has no hints: :data:`WHOLE_RUN_HINTS`). Nothing before
    the first window.

    >>> headline(ViewState(source="t", status="starting"), None)
    ([], '', '')
    """
    view = pick_view(snapshot, key)
    if view is None or not snapshot.windows:
        return [], "", ""
    try:
        if not snapshot.live:
            return header_facts(view.summaries), verdict(view.summaries), ""
        run = snapshot.run
        if run is not None:
            facts = header_facts(run, live=True, window=False)
            return facts, verdict(run), _window_line(snapshot, view, run)
        facts = header_facts(snapshot.windows[-1].summaries, live=True)
        if view.key == WHOLE_RUN:
            return facts, verdict(view.summaries, hints_known=False), ""
        return facts, f"This window: {verdict(view.summaries, window=True)}", ""
    except (OSError, pl.exceptions.PolarsError):  # a store window gone
        return [], "", ""


def _window_line(snapshot: ViewState, view: WindowView, run: Summaries) -> str:
    """The smaller line under the run's verdict: the application's end, or
    the picked window (the latest on the whole run) in its own words."""
    end = run.context.end_ns
    ended = f"The application ended at {utc(end)} UTC" if end is not None else ""
    if view.key == WHOLE_RUN and ended:
        return f"{ended}: this is its whole run."
    shown = snapshot.windows[-1] if view.key == WHOLE_RUN else view
    which = "Latest window" if shown is snapshot.windows[-1] else "This window"
    said = window_state(shown.summaries)
    line = f"{which} ({closed_label(shown.start_ns, shown.end_ns)}): {said}"
    return f"{ended}. {line}" if ended else line


def table_data(
    snapshot: ViewState, key: object
) -> list[tuple[list[dict[str, Any]], str]]:
    """Each table's records and note for the picked view, in :data:`TABLES` order.

    The note says why a table is empty: nothing closed yet, the live whole
    run (:data:`WHOLE_RUN_TABLES`), or no task in the view.

    >>> [note for _, note in table_data(ViewState(source="t", status="x"), None)]
    ['waiting for the first window to close…', 'waiting for the first window to close…']
    """
    view = pick_view(snapshot, WHOLE_RUN if _run_known(snapshot, key) else key)
    # (on "whole run" the tables are the run's, as picked)
    run_note = RUN_TABLES if _run_known(snapshot, key) and key != WHOLE_RUN else ""
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
            pending = snapshot.live and profile_pending(view)
            out.append(
                ([], WHOLE_RUN_TABLES if pending else "no task ran in this view")
            )
            continue
        out.append((spark_tables.table_records(frame, columns), run_note))
    return out


def _run_known(snapshot: ViewState, key: object) -> bool:
    """Whether the picked view shows the run so far: live, the run profiled
    and the latest window (or the whole run) picked, as the verdict above
    the tables is the run's."""
    return snapshot.live and snapshot.run is not None and key in _RUN_KEYS


#: The note over a live page's tables of the run so far.
RUN_TABLES = "The run so far (pick a window for its own)."


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
    view = pick_view(snapshot, key)
    if view is not None:
        figure.update_layout(shapes=window_shading(snapshot, view, yref="paper"))
    return figure, {"gridColumn": "1 / -1"}
