"""The comparison report: did the fix work? One self-contained HTML page.

:func:`write_compare_report` renders a
:class:`~sparktrail.engines.comparison.Comparison` as ``report.html``: the
verdict (:func:`comparison_verdict`, the sentence ``sparktrail compare``
prints first), a waterfall of critical seconds by operator from BEFORE's
wall time to AFTER's (:func:`waterfall`), the settings diff, the checked
savings of BEFORE's hints and the regressions. plotly.js is inlined, as in
the profile report (:mod:`~sparktrail.dashboard.report`), whose style it
shares, so the page opens offline. :func:`write_series_report` is the page
of a series of runs (:mod:`~sparktrail.engines.series`): a line chart of
critical seconds across the runs per top operator, the run its regression
began in marked, and the table of operators by run.
"""

from __future__ import annotations

import html
import os
import statistics
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
import polars as pl

from sparktrail.engines.comparison import UNATTRIBUTED, Comparison
from sparktrail.engines.profiler import REPORT_FILE
from sparktrail.engines.series import RunSeries, start_text
from sparktrail.units import duration_s

from .html_pages import write_page
from .report import _STYLE

__all__ = [
    "LABEL_CHARS",
    "PAGE_STYLE",
    "compare_layout",
    "comparison_verdict",
    "series_chart",
    "series_verdict",
    "short_label",
    "waterfall",
    "write_compare_report",
    "write_series_report",
]

#: The report's style (the same as the profile report's), also the served
#: comparison page's (``sparktrail serve --compare``).
PAGE_STYLE = _STYLE
#: An operator label longer than this is cut (the whole label on hover).
LABEL_CHARS = 48
#: Operators drawn in the waterfall; the rest are one bar.
WATERFALL_TOP = 12
#: Wall-time deltas under this share of BEFORE's wall time (or 0.2 s) are
#: "as fast".
SAME_SHARE, SAME_S = 0.02, 0.2


def short_label(label: str, chars: int = LABEL_CHARS) -> str:
    """``label`` cut to ``chars`` characters with an ellipsis.

    >>> short_label("collect at etl.py:76 · HashAggregate [k]", 20)
    'collect at etl.py:7…'
    """
    return label if len(label) <= chars else label[: chars - 1] + "…"


def _same(c: Comparison) -> bool:
    before = c.wall_before_ns / 1e9
    return abs(c.wall_delta_s) < max(SAME_S, SAME_SHARE * before)


def comparison_verdict(c: Comparison) -> str:
    """One sentence: how much faster or slower, which operator made most of
    it, and what the first applied hint predicted against what it saved.

    >>> from sparktrail.engines.comparison import FRAMES
    >>> frames = {n: pl.DataFrame(schema=s) for n, s in FRAMES.items()}
    >>> frames["operators"] = pl.DataFrame({"operator": ["agg at etl.py:76",
    ...     UNATTRIBUTED], "delta_s": [-35.0, -3.0], "matched": [True, True]})
    >>> c = Comparison("a", "b", 100 * 10**9, 62 * 10**9, matched_operators=1,
    ...     **frames)
    >>> comparison_verdict(c)
    '38 s faster (1 min 40 s → 1 min 2 s): 35 s of it is agg at etl.py:76.'
    """
    before, after = c.wall_before_ns / 1e9, c.wall_after_ns / 1e9
    span = f"({duration_s(before)} → {duration_s(after)})"
    if _same(c):
        head = f"As fast as before {span}"
    else:
        way = "faster" if c.wall_delta_s < 0 else "slower"
        head = f"{duration_s(abs(c.wall_delta_s))} {way} {span}"
        sign = -1.0 if c.wall_delta_s < 0 else 1.0
        ops = c.operators.filter(pl.col("delta_s") * sign > 0).sort(
            pl.col("delta_s").abs(), descending=True
        )
        if len(ops):
            top = ops.row(0, named=True)
            where = (
                "outside any stage (driver, idle)"
                if top["operator"] == UNATTRIBUTED
                else short_label(str(top["operator"]), 60)
            )
            head += f": {duration_s(abs(top['delta_s']))} of it is {where}"
    return head + _hint_clause(c.hints) + "."


def _hint_clause(hints: pl.DataFrame) -> str:
    if hints.is_empty():
        return ""
    applied = hints.filter(pl.col("applied")).sort(
        pl.col("predicted_saving_s").fill_null(0.0), descending=True
    )
    if applied.is_empty():
        n = len(hints)
        return f"; {'the' if n == 1 else f'none of the {n}'} hint" + (
            " of the first run was not applied"
            if n == 1
            else "s of the first run was applied"
        )
    row = applied.row(0, named=True)
    kind = str(row["kind"]).replace("_", " ")
    predicted = row["predicted_saving_s"]
    said = "" if predicted is None else f" predicted {duration_s(predicted)},"
    measured = row["measured_saving_s"] or 0.0
    saved = "saved" if measured >= 0 else "lost"
    amount = duration_s(abs(measured))
    return f"; the {kind} hint{said} {saved} {amount} ({row['verdict']})"


def waterfall(c: Comparison, top: int = WATERFALL_TOP) -> go.Figure:
    """BEFORE's wall time, each operator's change of critical seconds (the
    largest ``top``; the rest one bar), the unattributed rest, AFTER's
    wall time. Labels are cut to :data:`LABEL_CHARS`; the hover has the
    whole label, before, after and records."""
    labels, full, values, hover = _waterfall_bars(c, top)
    # Two labels may cut to the same text: plotly would merge their bars.
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[i] = f"{label} ({seen[label]})"
    measure = ["absolute", *["relative"] * (len(values) - 2), "total"]
    fig = go.Figure(
        go.Waterfall(
            x=labels,
            y=values,
            measure=measure,
            customdata=list(zip(full, hover, strict=True)),
            hovertemplate="%{customdata[0]}<br>%{y:+.3g} s<br>%{customdata[1]}"
            "<extra></extra>",
            decreasing={"marker": {"color": "#2ca02c"}},
            increasing={"marker": {"color": "#d62728"}},
            totals={"marker": {"color": "#1f77b4"}},
            connector={"line": {"color": "#999"}},
        )
    )
    fig.update_layout(
        title="Wall time, BEFORE to AFTER, by operator on the critical path",
        yaxis_title="seconds",
        xaxis_tickangle=-30,
        margin={"b": 200},
        showlegend=False,
    )
    return fig


def _waterfall_bars(
    c: Comparison, top: int
) -> tuple[list[str], list[str], list[float], list[str]]:
    """The waterfall's bars in order: label, whole label, seconds, hover."""
    ops = c.operators.filter(pl.col("operator") != UNATTRIBUTED)
    rest = c.operators.filter(pl.col("operator") == UNATTRIBUTED)
    shown = ops.head(top)
    others = ops.slice(top)
    labels, full, values, hover = (
        ["BEFORE"],
        ["BEFORE: " + c.before_name],
        [c.wall_before_ns / 1e9],
        [""],
    )
    for row in shown.iter_rows(named=True):
        labels.append(short_label(str(row["operator"])))
        full.append(str(row["operator"]))
        values.append(row["delta_s"])
        hover.append(
            f"{duration_s(row['before_s'])} → {duration_s(row['after_s'])}; records "
            f"{_count(row['records_before'])} → {_count(row['records_after'])}"
        )
    if len(others):
        labels.append(f"{len(others)} other operators")
        full.append(f"{len(others)} other operators")
        values.append(float(others["delta_s"].sum()))
        hover.append("")
    for row in rest.iter_rows(named=True):
        labels.append("unattributed")
        full.append(UNATTRIBUTED)
        values.append(row["delta_s"])
        hover.append(f"{duration_s(row['before_s'])} → {duration_s(row['after_s'])}")
    labels.append("AFTER")
    full.append("AFTER: " + c.after_name)
    values.append(c.wall_after_ns / 1e9)
    hover.append("")
    return labels, full, values, hover


def _count(value: Any) -> str:
    return "–" if value is None else f"{value:,}"


def _table(rows: list[list[str]], head: list[str], css: str = "hints") -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    return (
        f'<table class="{css}"><thead><tr>{th}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def _setting(value: str | None) -> str:
    return "(unset)" if value is None else value or '""'


#: A table of the page: its heading cells, its rows, and the note shown
#: instead when it has no row.
Table = tuple[list[str], list[list[str]], str]


def settings_table(c: Comparison) -> Table:
    """The settings diff: setting, BEFORE, AFTER."""
    rows = [
        [str(r["key"]), _setting(r["before"]), _setting(r["after"])]
        for r in c.settings.iter_rows(named=True)
    ]
    note = "No Spark setting, executor or core count differs."
    return ["setting", "BEFORE", "AFTER"], rows, note


def hints_table(c: Comparison) -> Table:
    """BEFORE's shown hints, checked in AFTER."""
    rows = [
        [
            str(r["kind"]),
            short_label(r["operator"] or "–", 70),
            r["how"] or "no",
            duration_s(r["predicted_saving_s"]),
            duration_s(r["measured_saving_s"]),
            str(r["verdict"]),
            str(r["action"] or ""),
        ]
        for r in c.hints.iter_rows(named=True)
    ]
    head = ["hint", "operator", "applied", "predicted", "measured", "verdict", "action"]
    return head, rows, "The first run had no hint worth showing."


def operators_table(c: Comparison, top: int = 20) -> Table:
    """The operators with the largest change, input volume beside them."""
    rows = [
        [
            short_label(str(r["operator"]), 70),
            duration_s(r["before_s"]),
            duration_s(r["after_s"]),
            f"{r['delta_s']:+.2f} s",
            f"{_count(r['records_before'])} → {_count(r['records_after'])}",
            f"{_count(r['bytes_before'])} → {_count(r['bytes_after'])}",
        ]
        for r in c.operators.head(top).iter_rows(named=True)
    ]
    head = ["operator", "BEFORE", "AFTER", "change", "records", "bytes"]
    return head, rows, "No operator ran."


def regressions_table(c: Comparison) -> Table:
    """Operators that grew (and why) and hints new in AFTER."""
    rows = [
        [
            str(r["kind"]),
            short_label(r["operator"] or "–", 70),
            str(r["cause"]),
            str(r["detail"]),
        ]
        for r in c.regressions.iter_rows(named=True)
    ]
    note = "No operator grew by more than max(10%, 1 s); no new hint."
    return ["what", "operator", "cause", "detail"], rows, note


def _html_of(table: Table) -> str:
    head, rows, note = table
    if not rows:
        return f"<p class='note'>{html.escape(note)}</p>"
    return _table(rows, head)


def settings_html(c: Comparison) -> str:
    """The settings diff as an HTML table (or a sentence when none differs)."""
    return _html_of(settings_table(c))


def hints_html(c: Comparison) -> str:
    """BEFORE's shown hints, checked in AFTER, as an HTML table."""
    return _html_of(hints_table(c))


def operators_caption(c: Comparison) -> str:
    """How the operators were matched, under their table (page and report)."""
    return (
        "Operators are matched by label (call site and plan node); those left "
        "over, by the label without its line, column lists and closing "
        "exchange, where that pairs them one to one (a salted join); "
        f"{c.matched_operators} ran in both runs."
    )


def operators_html(c: Comparison, top: int = 20) -> str:
    """The operators with the largest change, input volume beside them."""
    return _html_of(operators_table(c, top))


def regressions_html(c: Comparison) -> str:
    """Operators that grew (and why) and hints new in AFTER."""
    return _html_of(regressions_table(c))


def compare_layout(c: Comparison) -> Any:
    """The comparison as a Dash layout (``sparktrail serve --compare``): the
    verdict, the waterfall, the settings diff, the checked savings, then the
    operators and the regressions; the element ids are the report's."""
    from dash import html as dhtml

    title = f"{c.before_name} → {c.after_name}"
    return dhtml.Div(
        [
            dhtml.Header(
                [
                    dhtml.H1(f"sparktrail compare: {title}"),
                    dhtml.P(comparison_verdict(c), id="verdict", className="verdict"),
                    *[
                        dhtml.P(f"Warning: {w}", className="note warning")
                        for w in c.warnings
                    ],
                ]
            ),
            _waterfall_section(c),
            dhtml.Section(
                [dhtml.H2("Settings that differ"), _dash_table(settings_table(c))],
                id="settings",
            ),
            dhtml.Section(
                [
                    dhtml.H2("Checked savings: the first run's hints"),
                    _dash_table(hints_table(c)),
                ],
                id="hints",
            ),
            dhtml.Section(
                [
                    dhtml.H2("Operators and their input"),
                    _dash_table(operators_table(c)),
                    dhtml.P(operators_caption(c), className="caption"),
                ],
                id="operators",
            ),
            dhtml.Section(
                [dhtml.H2("Regressions"), _dash_table(regressions_table(c))],
                id="regressions",
            ),
        ]
    )


def _dash_table(built: Table) -> Any:
    """A table of the comparison as a Dash table (its note when it has no row)."""
    from dash import html as dhtml

    head, rows, note = built
    if not rows:
        return dhtml.P(note, className="note")
    return dhtml.Table(
        [
            dhtml.Thead(dhtml.Tr([dhtml.Th(h) for h in head])),
            dhtml.Tbody([dhtml.Tr([dhtml.Td(v) for v in row]) for row in rows]),
        ],
        className="hints",
    )


def _waterfall_section(c: Comparison) -> Any:
    """The waterfall's section of the Dash layout, with its caption."""
    from dash import dcc
    from dash import html as dhtml

    caption = (
        "Each bar is an operator's change of critical seconds (time the "
        "critical path spent in it); the changes and the unattributed rest add "
        "up to the change of wall time."
    )
    return dhtml.Section(
        [
            dhtml.H2("Where the wall time went"),
            dcc.Graph(
                id="waterfall-figure",
                figure=waterfall(c),
                style={"height": "520px"},
                config={"displaylogo": False},
            ),
            dhtml.P(caption, className="caption"),
        ],
        id="waterfall",
    )


def write_compare_report(c: Comparison, out_dir: str | os.PathLike[str]) -> Path:
    """Write ``out_dir/report.html`` of ``c``; returns its path.

    Examples
    --------
    >>> import tempfile
    >>> from sparktrail.engines.comparison import compare
    >>> from sparktrail.engines.profiler import profile
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     page = write_compare_report(compare(profile(t, 4), profile(t, 4)), d)
    ...     'id="waterfall"' in page.read_text()
    True
    """
    title = f"{c.before_name} → {c.after_name}"
    plot = pio.to_html(
        waterfall(c),
        full_html=False,
        include_plotlyjs=True,
        div_id="waterfall-figure",
        default_height="520px",
        config={"displaylogo": False},
    )
    warnings = "".join(
        f"<p class='note warning'>Warning: {html.escape(w)}</p>" for w in c.warnings
    )
    parts = [
        f"<header><h1>sparktrail compare: {html.escape(title)}</h1>",
        f'<p id="verdict" class="verdict">{html.escape(comparison_verdict(c))}</p>',
        f"{warnings}</header>",
        '<section id="waterfall"><h2>Where the wall time went</h2>',
        plot,
        "<p class='caption'>Each bar is an operator's change of critical seconds "
        "(time the critical path spent in it); the changes and the unattributed "
        "rest add up to the change of wall time.</p></section>",
        '<section id="operators"><h2>Operators and their input</h2>',
        operators_html(c),
        f"<p class='caption'>{html.escape(operators_caption(c))}</p></section>",
        '<section id="settings"><h2>Settings that differ</h2>',
        settings_html(c),
        "</section>",
        '<section id="hints"><h2>Checked savings: the first run\'s hints</h2>',
        hints_html(c),
        "</section>",
        '<section id="regressions"><h2>Regressions</h2>',
        regressions_html(c),
        "</section>",
    ]
    return write_page(
        Path(out_dir) / REPORT_FILE,
        f"sparktrail compare: {title}",
        _STYLE,
        "".join(parts),
    )


# -- a series of runs --------------------------------------------------------------

#: Operators given a line chart on the series page (regressed ones first).
SERIES_CHARTS = 6
#: Operator rows of the series page's table.
SERIES_ROWS = 30
_SERIES_STYLE = (
    _STYLE
    + """
table.hints td.regressed { color: #b00; font-weight: bold; background: #fdecea; }
table.hints td.num { text-align: right; font-variant-numeric: tabular-nums; }
"""
)


def series_verdict(s: RunSeries) -> str:
    """One sentence: which operators regressed and from which run.

    >>> runs = pl.DataFrame({"run": ["a", "b"]})
    >>> ops = pl.DataFrame({"operator": ["agg"], "critical_s": [[1.0, 3.0]],
    ...     "records": [[10, 10]], "regression_from": ["b"]})
    >>> series_verdict(RunSeries(runs, ops))
    '1 operator regressed: agg from run #2 b (1 s → 3 s).'
    """
    found = s.regressions()
    n = len(s.runs)
    if found.is_empty():
        return (
            f"No regression in {n} runs: no operator's critical time rose by more "
            "than max(10%, 1 s) over the runs before it at the same input and "
            "stayed up."
        )
    names = s.names
    parts = []
    for r in found.iter_rows(named=True):
        i = names.index(r["regression_from"])
        seconds = r["critical_s"]
        before = statistics.median(seconds[:i])
        parts.append(
            f"{short_label(str(r['operator']), 60)} from run #{i + 1} "
            f"{r['regression_from']} ({duration_s(before)} → "
            f"{duration_s(seconds[i])})"
        )
    head = f"{len(parts)} operator{'s' if len(parts) > 1 else ''} regressed: "
    return head + "; ".join(parts) + "."


def series_chart(s: RunSeries, operator: str) -> go.Figure:
    """One operator's critical seconds across the runs (in start order), the
    run its regression began in marked; records on hover."""
    row = s.operators.filter(pl.col("operator") == operator).row(0, named=True)
    labels = [f"#{i} {name}" for i, name in enumerate(s.names, start=1)]
    records = [_count(r) for r in row["records"]]
    fig = go.Figure(
        go.Scatter(
            x=labels,
            y=row["critical_s"],
            mode="lines+markers",
            name="critical seconds",
            customdata=records,
            hovertemplate="%{x}<br>%{y:.3g} s<br>records %{customdata}<extra></extra>",
            line={"color": "#1f77b4"},
        )
    )
    start = row["regression_from"]
    if start is not None:
        i = s.names.index(start)
        fig.add_trace(
            go.Scatter(
                x=[labels[i]],
                y=[row["critical_s"][i]],
                mode="markers",
                name="regression began",
                marker={"color": "#d62728", "size": 14, "symbol": "triangle-up"},
                hovertemplate="regression began here<extra></extra>",
            )
        )
        fig.add_vline(x=i, line={"color": "#d62728", "dash": "dash"})
    fig.update_layout(
        title=short_label(operator, 90),
        yaxis_title="critical seconds",
        yaxis_rangemode="tozero",
        showlegend=start is not None,
        margin={"t": 50, "b": 60},
    )
    return fig


def _series_table(s: RunSeries, top: int = SERIES_ROWS) -> str:
    names = s.names
    ops = s.operators
    shown = pl.concat([ops.head(len(ops) - 1).head(top), ops.tail(1)])
    head = "".join(
        f"<th title='{html.escape(n)}'>#{i}</th>" for i, n in enumerate(names, 1)
    )
    body = []
    for r in shown.iter_rows(named=True):
        cells = []
        for name, seconds, records in zip(
            names, r["critical_s"], r["records"], strict=True
        ):
            css = "num regressed" if name == r["regression_from"] else "num"
            mark = " ▲" if name == r["regression_from"] else ""
            title = f"records {_count(records)}"
            cells.append(
                f"<td class='{css}' title='{html.escape(title)}'>"
                f"{seconds:.2f}{mark}</td>"
            )
        label = html.escape(short_label(str(r["operator"]), 70))
        full = html.escape(str(r["operator"]))
        body.append(f"<tr><td title='{full}'>{label}</td>{''.join(cells)}</tr>")
    return (
        "<table class='hints' id='series-table'><thead><tr><th>operator</th>"
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _runs_table(s: RunSeries) -> str:
    rows = [
        [
            f"#{i}",
            str(r["run"]),
            str(r["app_id"] or "–"),
            start_text(r["start_ns"]) or "–",
            duration_s(r["wall_s"]),
        ]
        for i, r in enumerate(s.runs.iter_rows(named=True), start=1)
    ]
    return _table(rows, ["", "run", "application id", "start (UTC)", "wall time"])


def _charted_operators(s: RunSeries) -> list[str]:
    """The operators charted: regressed ones first, at most
    :data:`SERIES_CHARTS` (never the last row: the unattributed rest)."""
    ops = s.operators
    named = ops.head(len(ops) - 1)
    flagged = named.filter(pl.col("regression_from").is_not_null())
    rest = named.filter(pl.col("regression_from").is_null())
    chosen = [str(op) for op in pl.concat([flagged, rest])["operator"]]
    return chosen[:SERIES_CHARTS]


def write_series_report(s: RunSeries, out_dir: str | os.PathLike[str]) -> Path:
    """Write ``out_dir/report.html`` of a series of runs; returns its path:
    the verdict, a line chart per top operator (regressed ones first), the
    runs and the table of critical seconds by operator and run.

    Examples
    --------
    >>> import tempfile
    >>> from sparktrail.engines.series import run_series
    >>> from sparktrail.engines.profiler import profile
    >>> t = pl.DataFrame({"src_worker": ["a"], "dst_worker": ["a"],
    ...     "start_ns": [0], "end_ns": [4], "activity": ["processing"]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     page = write_series_report(run_series([profile(t, 4), profile(t, 4)]), d)
    ...     'id="series-table"' in page.read_text().replace("'", '"')
    True
    """
    names = s.names
    charts = [
        pio.to_html(
            series_chart(s, operator),
            full_html=False,
            include_plotlyjs=k == 0,
            div_id=f"series-chart-{k}",
            default_height="320px",
            config={"displaylogo": False},
        )
        for k, operator in enumerate(_charted_operators(s))
    ]
    warnings = "".join(
        f"<p class='note warning'>Warning: {html.escape(w)}</p>" for w in s.warnings
    )
    title = f"{len(names)} runs ({names[0]} … {names[-1]})"
    parts = [
        f"<header><h1>sparktrail compare: {html.escape(title)}</h1>",
        f'<p id="verdict" class="verdict">{html.escape(series_verdict(s))}</p>',
        f"{warnings}</header>",
        '<section id="charts"><h2>Critical seconds across the runs</h2>',
        "".join(charts) or "<p class='note'>No operator ran on the critical path.</p>",
        "<p class='caption'>Each chart is one operator's critical seconds (time "
        "the critical path spent in it) in each run, in start order; a red "
        "triangle marks the run its regression began in.</p></section>",
        '<section id="runs"><h2>Runs</h2>',
        _runs_table(s),
        "</section>",
        '<section id="table"><h2>Critical seconds by operator and run</h2>',
        _series_table(s),
        "<p class='caption'>▲: the run a regression began in (over the median "
        "of the runs before by more than max(10%, 1 s), its input grown less "
        "than 10%, and still up in the next run). Hover a cell for its "
        "records.</p></section>",
    ]
    return write_page(
        Path(out_dir) / REPORT_FILE,
        f"sparktrail compare: {title}",
        _SERIES_STYLE,
        "".join(parts),
    )
