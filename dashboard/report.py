"""The batch report: one self-contained HTML file and the summaries as Parquet.

:func:`write_report` lays the figures of :mod:`~sparktrail.dashboard.figures`
out in sections (ids in :data:`SECTIONS`) with plotly.js inlined once, so
the file opens offline; the hints are also an HTML table, readable without
JavaScript, and the stage and executor tables (:mod:`~sparktrail.dashboard.
spark_tables`) are HTML tables that sort when a heading is clicked.

It renders a :class:`~sparktrail.engines.profiler.Profile`: the Gantt
chart's window is the profile's most critical one
(:func:`~sparktrail.engines.profiler.most_critical_window`), whose CP rows
the profile holds.
"""

from __future__ import annotations

import datetime as dt
import html
import os
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
import polars as pl

from sparktrail.engines.profiler import REPORT_FILE, Profile
from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS
from sparktrail.summaries import SHUFFLE_NOTE, Summaries
from sparktrail.summaries.frames import CP_SHARE, HAS_PATHS, SUMMARY_FRAMES
from sparktrail.summaries.hints import integrity_notes, shown_hints
from sparktrail.summaries.run_shares import run_span
from sparktrail.units import duration

from . import figures, spark_tables, stream_figures
from .html_pages import write_page
from .verdict import header_facts, verdict

__all__ = [
    "SECTIONS",
    "SUMMARY_FRAMES",
    "TABLES",
    "notebook_html",
    "window_text",
    "write_report",
]


#: Section ids of the report, in page order: id -> heading.
SECTIONS: dict[str, str] = {
    "overview": "Overview",
    "hints": "Rebalancing hints",
    "streaming": "Structured Streaming micro-batches",
    "activity": "Critical path by activity over time",
    "straggler": "Stragglers: workers vs fair share",
    "executors": "Executors",
    "operator": "Operators (call site and plan node, across stages)",
    "stages": "Stages",
    "communication": "Communication",
    "gantt": "The most critical window",
}

#: Section id -> the one line under its chart (figures.CAPTIONS).
_CAPTIONS = {
    "hints": figures.CAPTIONS["hints"],
    "activity": figures.CAPTIONS["activity"],
    "straggler": figures.CAPTIONS["straggler"],
    "operator": figures.CAPTIONS["operator"],
    "communication": figures.CAPTIONS["communication"],
    "gantt": figures.CAPTIONS["timeline"],
    "stages": spark_tables.STAGE_TABLE_CAPTION,
    "streaming": stream_figures.STREAM_CAPTION,
    "executors": spark_tables.EXECUTOR_TABLE_CAPTION,
}
#: Sections that are sortable tables (:mod:`~sparktrail.dashboard.spark_tables`).
TABLES = {
    "stages": ("stages", spark_tables.STAGE_COLUMNS),
    "executors": ("executors", spark_tables.EXECUTOR_COLUMNS),
}


def _utc(ns: int) -> str:
    moment = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def window_text(summaries: Summaries) -> str:
    """The windows' length: ``1 s``, or for windows of several lengths (one
    per streaming micro-batch, ``--window batch``) their median.

    >>> from sparktrail import summarize
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4_000_000_000], "activity": ["processing"]})
    >>> window_text(summarize(t, 1_000_000_000))
    '1 s'
    """
    windows = summaries.windows
    lengths = windows[WINDOW_END_NS] - windows[WINDOW_START_NS]
    if "span" in windows.columns:  # a quiet stretch stands for `span` windows
        lengths = lengths // windows["span"].fill_null(1).clip(1)
    if set(lengths.to_list()) <= {summaries.window_ns}:  # the fixed windows
        return duration(summaries.window_ns)
    return (
        "micro-batches and the waits between them "
        f"(median {duration(summaries.window_ns)})"
    )


def _overview(summaries: Summaries, title: str, window: tuple[int, int] | None) -> str:
    windows = summaries.windows
    rows = [("input", title), ("window size", window_text(summaries))]
    span = run_span(summaries.context, windows)
    if windows.is_empty():
        rows.append(("windows", "0"))
    else:
        with_paths = int(windows[HAS_PATHS].sum())
        rows.append(("windows", f"{len(windows)} ({with_paths} with a critical path)"))
    if span is not None:
        first, last = span
        rows.append(
            ("time span", f"{_utc(first)} – {_utc(last)} ({duration(last - first)})")
        )
    if window is not None:
        rows.append(("most critical window", f"{_utc(window[0])} (see the last chart)"))
    top = summaries.activity.head(3).select("activity", CP_SHARE).rows()
    rows.append(("top activities", ", ".join(f"{a} {s:.1%}" for a, s in top) or "–"))
    cells = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows
    )
    return f'<table class="facts">{cells}</table>'


def _headline(summaries: Summaries, title: str) -> str:
    """What ran and the verdict: the first thing in the report."""
    facts = header_facts(summaries)
    cells = " ".join(
        f'<span class="fact"><span class="label">{html.escape(k)}</span> '
        f"{html.escape(v)}</span>"
        for k, v in facts
    )
    notes = integrity_notes(summaries.hints)
    whole = (
        f'<p id="log-integrity" class="warning">The log is not whole: '
        f"{html.escape('; '.join(notes))}.</p>"
        if notes
        else ""
    )
    return (
        f"<header><h1>sparktrail profile: {html.escape(title)}</h1>"
        f'<p id="app-header" class="app-header">{cells}</p>{whole}'
        f'<p id="verdict" class="verdict">{html.escape(verdict(summaries))}</p>'
        "</header>"
    )


def _hints_html(hints: pl.DataFrame) -> str:
    if hints.is_empty():
        return f"<p>{html.escape(figures.NO_HINT)}</p>"
    head = "".join(
        f'<th title="{html.escape(figures.HINT_HELP[c])}">{html.escape(h)}</th>'
        for c, h in figures.HINT_COLUMNS.items()
    )
    body = []
    for row in hints.iter_rows(named=True):
        cells = "".join(
            f"<td>{html.escape(text)}</td>" for text in figures.hint_cells(row)
        )
        severity = html.escape(str(row.get("severity") or ""))
        body.append(f'<tr class="severity-{severity}">{cells}</tr>')
    return (
        f'<table class="hints"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _table_html(
    frame: pl.DataFrame, columns: dict[str, spark_tables.Column], section: str
) -> str:
    if frame.is_empty():
        return f"<p class='note'>No {section}: no task ran in this trace.</p>"
    return spark_tables.html_table(frame, columns, f"{section}-table")


def _shuffle_note(communication: pl.DataFrame) -> str:
    notes: list[str] = []
    if "kind" in communication.columns:
        shuffle = communication.filter(pl.col("kind") == "shuffle")
        notes = shuffle["note"].drop_nulls().unique().sort().to_list()
    if not notes:
        return (
            "<p class='note'>No shuffle read on the critical path in this run. "
            f"When there is one: {html.escape(SHUFFLE_NOTE)}.</p>"
        )
    return "".join(f"<p class='note'>Shuffle: {html.escape(n)}.</p>" for n in notes)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; }
h1 { margin-bottom: 0.2em; }
section { margin-top: 2.5em; }
table.facts th { text-align: left; padding-right: 1.5em; color: #555; }
table.hints { border-collapse: collapse; width: 100%; font-size: 0.9em; }
table.hints th, table.hints td { border: 1px solid #ddd; padding: 4px 6px;
       vertical-align: top; text-align: left; }
table.hints th { background: #444; color: white; }
tr.severity-high td:nth-child(1) { color: #b00; font-weight: bold; }
tr.severity-medium td:nth-child(1) { color: #c60; }
code { font-size: 0.85em; word-break: break-word; }
p.note { color: #555; font-size: 0.9em; }
p.caption { color: #555; font-size: 0.9em; margin: 0.2em 0 0; }
th[title] { cursor: help; }
table.sortable { border-collapse: collapse; width: 100%; font-size: 0.85em; }
table.sortable th, table.sortable td { border: 1px solid #ddd; padding: 3px 6px; }
table.sortable th { background: #444; color: white; cursor: pointer; }
table.sortable td[data-sort] { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th[aria-sort=descending]::after { content: " ▼"; }
table.sortable th[aria-sort=ascending]::after { content: " ▲"; }
p.app-header { color: #444; margin: 0.3em 0; }
span.fact { display: inline-block; margin-right: 1.4em; max-width: 100%;
       overflow-wrap: anywhere; }
span.fact span.label { color: #888; font-size: 0.85em; }
p.warning { color: #8a4b00; margin: 0.4em 0; }
p.verdict { font-size: 1.2em; font-weight: 600; margin: 0.6em 0;
       padding: 0.6em 0.9em; background: #fff4e5; border-left: 4px solid #e08a00; }
"""


def _figures(
    summaries: Summaries, cp_table: pl.DataFrame, window: tuple[int, int] | None
) -> dict[str, go.Figure]:
    if window is None:
        gantt = figures.empty_figure("no window has a critical path")
    else:
        rows = cp_table.filter(pl.col(WINDOW_START_NS) == window[0])
        gantt = figures.critical_gantt(rows)
    return {
        "activity": figures.activity_over_time(summaries.activity_by_window),
        "straggler": figures.straggler_bars(summaries.straggler),
        "operator": figures.operator_bars(summaries.operator),
        "communication": figures.communication_heatmap(summaries.communication),
        "gantt": gantt,
        "streaming": stream_figures.stream_progress(summaries.context),
    }


def _sections(summaries: Summaries, built: dict[str, go.Figure]) -> list[str]:
    """Every section after the overview, in :data:`SECTIONS` order; plotly.js
    is inlined in the first chart only."""
    parts = []
    first = True
    for section, heading in SECTIONS.items():
        if section == "overview":
            continue
        if section == "streaming" and not summaries.context.batches:
            continue  # a batch application: no word of streaming
        body = _plain_body(section, summaries)
        if body is None:  # a chart
            body = _chart_body(section, summaries, built[section], first)
            first = False
        parts.append(
            f'<section id="{section}"><h2>{html.escape(heading)}</h2>{body}</section>'
        )
    return parts


def _caption(section: str) -> str:
    return f'<p class="caption">{html.escape(_CAPTIONS[section])}</p>'


def _plain_body(section: str, summaries: Summaries) -> str | None:
    """The body of a section that shows no chart: the hints and the stage
    and executor tables (HTML, readable without JavaScript), or a note
    instead of the communication chart; ``None`` for a chart."""
    if section == "hints":
        # The dashboard shows the same cells (figures.hint_cells).
        return _hints_html(shown_hints(summaries.hints)) + _caption(section)
    if section in TABLES:
        frame, columns = TABLES[section]
        table = _table_html(getattr(summaries, frame), columns, section)
        return table + _caption(section)
    if section == "communication" and figures.one_executor(summaries.communication):
        return (
            f'<p class="note">{html.escape(figures.ONE_EXECUTOR_NOTE)}</p>'
            f"{_shuffle_note(summaries.communication)}"
        )
    return None


def _chart_body(
    section: str, summaries: Summaries, figure: go.Figure, with_plotlyjs: bool
) -> str:
    """A chart section's body: the chart (the communication's shuffle note
    above it) and its caption."""
    extra = ""
    if section == "communication":
        extra = _shuffle_note(summaries.communication)
    plot = pio.to_html(
        figure,
        full_html=False,
        include_plotlyjs=with_plotlyjs,
        div_id=f"{section}-figure",
        default_height="480px",
        config={"displaylogo": False},
    )
    return f"{extra}{plot}{_caption(section)}"


#: A notebook's cell has no report page around it: the few rules that
#: keep what ran, the verdict and the hints apart, scoped to the cell.
_NOTEBOOK_STYLE = (
    ".sparktrail h1{font-size:1.25em;margin:0.2em 0}"
    ".sparktrail .fact{margin-right:1.2em;white-space:nowrap}"
    ".sparktrail .fact .label{color:#666;font-size:0.85em}"
    ".sparktrail .verdict{font-weight:600}"
    ".sparktrail .warning{color:#a94400}"
    ".sparktrail table.hints td,.sparktrail table.hints th"
    "{text-align:left;vertical-align:top;padding:2px 8px}"
)


def notebook_html(profile: Profile) -> str:
    """``profile`` as a notebook cell shows it: what ran, the verdict and
    the shown hints (the report's own parts, no charts).

    Examples
    --------
    >>> from sparktrail.engines.profiler import profile
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
    >>> 'id="verdict"' in notebook_html(profile(t, 4, name="t"))
    True
    """
    summaries = profile.summaries
    return (
        f'<div class="sparktrail"><style>{_NOTEBOOK_STYLE}</style>'
        + _headline(summaries, profile.name)
        + f"<h3>{html.escape(SECTIONS['hints'])}</h3>"
        + _hints_html(shown_hints(summaries.hints))
        + "</div>"
    )


def write_report(profile: Profile, out_dir: str | os.PathLike[str]) -> Path:
    """Write ``out_dir/report.html`` of ``profile``: every figure, the hints
    and an overview.

    Parameters
    ----------
    profile
        The run's profile (:func:`~sparktrail.engines.profiler.profile`).
    out_dir
        Directory to write to (created if missing).

    Returns
    -------
    Path
        The report written. It needs no network: plotly.js is inlined once.

    Examples
    --------
    >>> import tempfile
    >>> from sparktrail.engines.profiler import profile
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     page = write_report(profile(t, 4, name="t"), d)
    ...     'id="gantt"' in page.read_text()
    True
    """
    summaries, cp_table, title = profile.summaries, profile.critical_cp, profile.name
    window = profile.critical_window
    parts = [
        _headline(summaries, title),
        f'<section id="overview"><h2>{SECTIONS["overview"]}</h2>'
        f"{_overview(summaries, title, window)}</section>",
        *_sections(summaries, _figures(summaries, cp_table, window)),
    ]
    return write_page(
        Path(out_dir) / REPORT_FILE,
        f"sparktrail: {title}",
        _STYLE,
        "".join(parts),
        spark_tables.SORT_SCRIPT,
    )
