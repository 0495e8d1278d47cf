"""The timeline of one window: a row per worker, a bar per activity by CP.

:func:`critical_gantt` draws one window's CP rows; past
:data:`MAX_TIMELINE_BARS` activities, :func:`timeline_rows` keeps the
critical ones and merges the rest per worker and pixel, so the draw is
bounded by the screen, not the trace.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import plotly.graph_objects as go
import polars as pl

from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS

from .chart_basics import CP_COLOURSCALE, empty_figure, worker_label

__all__ = [
    "MAX_TIMELINE_BARS",
    "MAX_TIMELINE_MESSAGES",
    "MERGED_BAR_BUDGET",
    "critical_gantt",
    "ms_text",
    "timeline_rows",
]

#: Activities a timeline draws one bar each. Beyond it, the draw is bounded
#: by the screen, not the trace: the critical activities (CP > 0, largest
#: first, up to half of it) keep their bars, the rest are merged per worker
#: and pixel (:func:`timeline_rows`).
MAX_TIMELINE_BARS = 5000


#: Merged bars per window, at most about: the pixels across a worker's row
#: times the rows, a worker's row getting at least 20 and at most 1,000.
MERGED_BAR_BUDGET = 10000


#: Messages a timeline draws; beyond it, the critical ones (largest CP).
MAX_TIMELINE_MESSAGES = 2500


def _natural(label: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"([0-9]+)", label)]


def _labels(workers: pl.Series) -> np.ndarray:
    names = {w: worker_label(w) for w in workers.unique().drop_nulls().to_list()}
    labels = workers.replace_strict(names, default="driver", return_dtype=pl.String)
    return labels.to_numpy()


def timeline_rows(
    local: pl.DataFrame, window_start_ns: int, window_end_ns: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The activities a timeline draws one by one, and the rest merged.

    Parameters
    ----------
    local
        One window's local CP rows (``src_worker, start_ns, end_ns,
        activity, cp`` ...).
    window_start_ns, window_end_ns
        The window.

    Returns
    -------
    (drawn, merged)
        ``drawn``: rows of ``local`` with a bar each: all of them when
        there are at most :data:`MAX_TIMELINE_BARS`; else the critical
        ones (the largest CP, about half of it) and every activity at
        least a pixel long. ``merged``: the others, one row per worker
        and pixel: ``src_worker, activity`` (the one that took most of it),
        ``edges, busy_ns, cp`` (the largest merged) and ``start_ns,
        end_ns`` (the pixel).

    Examples
    --------
    >>> n = MAX_TIMELINE_BARS + 1
    >>> local = pl.DataFrame({"src_worker": ["exec-1/0"] * n,
    ...     "start_ns": list(range(n)), "end_ns": list(range(1, n + 1)),
    ...     "activity": ["processing"] * n, "cp": [1.0] + [0.0] * (n - 1)})
    >>> drawn, merged = timeline_rows(local, 0, n)
    >>> len(drawn), int(merged["edges"].sum()), len(merged) <= 1000
    (1, 5000, True)
    """
    if len(local) <= MAX_TIMELINE_BARS:
        return local, local.clear().select("src_worker", "start_ns", "end_ns")
    cp = local["cp"]
    critical = pl.col("cp") > 0
    if int((cp > 0).sum()) > MAX_TIMELINE_BARS // 2:  # the largest CP only
        threshold = cp.top_k(MAX_TIMELINE_BARS // 2).min()
        critical = critical & (pl.col("cp") >= threshold)
    workers = max(1, int(local.select(pl.col("src_worker").approx_n_unique()).item()))
    pixels = max(20, min(1000, MERGED_BAR_BUDGET // workers))
    pixel_ns = max(1, -(-(window_end_ns - window_start_ns) // pixels))
    # A worker runs one thing at a time: its activities of a pixel or more
    # are at most its pixels, so they keep their bars.
    own_bar = critical | ((pl.col("end_ns") - pl.col("start_ns")) >= pixel_ns)
    marked = local.with_columns(own_bar.alias("_own"))
    merged = _merged_per_pixel(marked, window_start_ns, pixel_ns)
    drawn = marked.filter("_own").drop("_own")
    return drawn, merged


def _merged_per_pixel(
    marked: pl.DataFrame, window_start_ns: int, pixel_ns: int
) -> pl.DataFrame:
    """The activities without a bar of their own (``_own`` false), one row
    per worker and pixel: the activity that took most of it, the edges and
    busy time summed, the largest CP."""
    span = pl.col("end_ns") - pl.col("start_ns")
    return (
        marked.lazy()
        .filter(~pl.col("_own"))
        .group_by(
            "src_worker",
            ((pl.col("start_ns") - window_start_ns) // pixel_ns).alias("_pixel"),
            "activity",
        )
        .agg(pl.len().alias("edges"), span.sum().alias("busy_ns"), pl.col("cp").max())
        .sort("busy_ns", descending=True)
        .group_by("src_worker", "_pixel")
        .agg(
            pl.col("activity").first(),  # the one that took most of the pixel
            pl.col("edges", "busy_ns").sum(),
            pl.col("cp").max(),
        )
        .with_columns(
            (window_start_ns + pl.col("_pixel") * pixel_ns).alias("start_ns"),
        )
        .with_columns((pl.col("start_ns") + pixel_ns).alias("end_ns"))
        .drop("_pixel")
        .sort("src_worker", "start_ns")
        .collect()
    )


def _worker_order(labels: list[str]) -> list[str]:
    # The driver on top, then slots in executor and core order (plotly draws
    # the first category at the bottom, hence the reversal).
    ordered = sorted(set(labels), key=lambda w: (w != "driver", _natural(w)))
    return ordered[::-1]


def critical_gantt(cp_rows: pl.DataFrame, title: str | None = None) -> go.Figure:
    """Timeline of one window: a row per worker, a bar per edge coloured by CP.

    Parameters
    ----------
    cp_rows
        Rows of :func:`~sparktrail.pag.critical_participation` for exactly
        one window: ``window_start_ns, window_end_ns, src_worker,
        dst_worker, start_ns, end_ns, activity, operator, stage_id,
        task_id, cp``.
    title
        The chart's title (default: the most critical window's); what was
        merged or left out (:func:`timeline_rows`) is appended to it.

    Returns
    -------
    plotly.graph_objects.Figure
        A horizontal bar trace of the local activities (x in ms since the
        window start, colour = CP, ``waiting`` drawn faint) and, when the
        window has messages, a line trace from sender to receiver.

    Raises
    ------
    ValueError
        If ``cp_rows`` holds more than one window.

    Examples
    --------
    >>> rows = pl.DataFrame({"window_start_ns": [0, 0], "window_end_ns": [10, 10],
    ...     "src_worker": ["exec-1/0", "exec-1/1"],
    ...     "dst_worker": ["exec-1/0", "exec-1/1"], "start_ns": [0, 0],
    ...     "end_ns": [10, 4], "activity": ["processing", "processing"],
    ...     "operator": [None, None], "stage_id": [0, 0], "task_id": [1, 2],
    ...     "cp": [1.0, 0.0]})
    >>> fig = critical_gantt(rows)
    >>> len(fig.data), fig.data[0].marker.color.tolist()
    (1, [1.0, 0.0])
    """
    if cp_rows.is_empty():
        return empty_figure("no window to draw")
    origin, end_ns = _one_window(cp_rows)
    local = cp_rows.filter(
        (pl.col("src_worker") == pl.col("dst_worker"))
        & (pl.col("end_ns") > pl.col("start_ns"))
    )
    messages = cp_rows.filter(pl.col("src_worker") != pl.col("dst_worker"))
    n_messages = len(messages)
    if n_messages > MAX_TIMELINE_MESSAGES:
        messages = messages.top_k(MAX_TIMELINE_MESSAGES, by="cp")
    local, merged = timeline_rows(local, origin, end_ns)
    fig = go.Figure(_gantt_traces(local, merged, messages, origin))
    order = _drawn_workers(local, merged, messages)
    end_ms = (end_ns - origin) / 1e6
    title = title or "Most critical window: edges coloured by critical participation"
    notes = _left_out(merged, len(messages), n_messages)
    fig.update_layout(
        title=f"{title} ({'; '.join(notes)})" if notes else title,
        xaxis_title="ms since window start",
        yaxis_title="worker",
        xaxis_range=[0, end_ms],
        yaxis={"categoryorder": "array", "categoryarray": order},
        height=max(320, 26 * len(order) + 160),
        barmode="overlay",
        showlegend=False,
    )
    return fig


def _one_window(cp_rows: pl.DataFrame) -> tuple[int, int]:
    """The start and end of the one window of ``cp_rows`` (else ValueError)."""
    windows = cp_rows[WINDOW_START_NS].unique()
    if len(windows) != 1:
        raise ValueError(
            f"critical_gantt draws one window, got {len(windows)} "
            f"(window starts {sorted(windows.to_list())[:3]}...)"
        )
    return int(windows[0]), int(cp_rows[WINDOW_END_NS][0])


def _gantt_traces(
    local: pl.DataFrame, merged: pl.DataFrame, messages: pl.DataFrame, origin: int
) -> list[go.Bar | go.Scatter]:
    """The activities' bars, the merged bars and the messages' lines (those
    with rows)."""
    traces: list[go.Bar | go.Scatter] = []
    if not local.is_empty():
        traces.append(_gantt_bars(local, origin))
    if not merged.is_empty():
        traces.append(_merged_bars(merged, origin))
    if not messages.is_empty():
        traces.append(_gantt_messages(messages, origin))
    return traces


def _drawn_workers(
    local: pl.DataFrame, merged: pl.DataFrame, messages: pl.DataFrame
) -> list[str]:
    """The labels of the workers drawn, in the timeline's row order."""
    # From the rows drawn, not all of them: a large window's unique worker
    # names cost more than its whole figure.
    workers = pl.concat(
        [
            local["src_worker"],
            merged["src_worker"],
            messages["src_worker"],
            messages["dst_worker"],
        ]
    ).unique()
    return _worker_order([worker_label(w) for w in workers.to_list()])


def _left_out(merged: pl.DataFrame, shown: int, n_messages: int) -> list[str]:
    """What the title says was merged or left out of the timeline."""
    notes = []
    if not merged.is_empty():
        notes.append(f"{int(merged['edges'].sum()):,} activities merged per pixel")
    if n_messages > shown:
        notes.append(f"the {shown:,} most critical of {n_messages:,} messages")
    return notes


def ms_text(ms: float) -> str:
    """A time in ms with at most 3 decimals and no trailing zeros.

    >>> ms_text(451.0), ms_text(0.25), ms_text(1234.5678)
    ('451 ms', '0.25 ms', '1234.568 ms')
    """
    return f"{ms:.3f}".rstrip("0").rstrip(".") + " ms"


def _ms(expr: pl.Expr) -> pl.Expr:
    # ms_text as one polars expression: a Python f-string per edge would add
    # ~50 ms to a 10,000-edge timeline.
    text = expr.round(3).cast(pl.String).str.replace(r"\.0$", "")
    return pl.concat_str(text, pl.lit(" ms"))


def _spans(origin: int) -> pl.Expr:
    start = (pl.col("start_ns") - origin) / 1e6
    end = (pl.col("end_ns") - origin) / 1e6
    return pl.concat_str(
        _ms(start), pl.lit(" → "), _ms(end), pl.lit(" ("), _ms(end - start), pl.lit(")")
    ).alias("span")


def _hover_facts(rows: pl.DataFrame, origin: int) -> np.ndarray:
    # A 2-D numpy array, not a list of tuples: plotly validates arrays
    # without a Python loop (a 10,000-edge window drew in 0.3 s with lists).
    # Strings only: plotly deep-copies an object array element by element
    # (most of a large timeline's draw), so CP travels as a float array.
    return rows.select(
        "activity",
        pl.col("operator").cast(pl.String).fill_null("–"),
        pl.col("stage_id").cast(pl.String).fill_null("–"),
        pl.col("task_id").cast(pl.String).fill_null("–"),
        _spans(origin),
    ).to_numpy()


def _gantt_bars(local: pl.DataFrame, origin: int) -> go.Bar:
    cp = local["cp"].to_numpy()
    waiting = (local["activity"] == "waiting").to_numpy()
    return go.Bar(
        y=_labels(local["src_worker"]),
        base=((local["start_ns"] - origin) / 1e6).to_numpy(),
        x=((local["end_ns"] - local["start_ns"]) / 1e6).to_numpy(),
        orientation="h",
        name="activities",
        marker={
            "color": cp,
            "colorscale": CP_COLOURSCALE,
            "cmin": 0.0,
            "cmax": max(float(cp.max()), 1e-12),
            "colorbar": {"title": "CP"},
            "opacity": np.where(waiting, 0.3, 1.0),
            "line": {"width": 0.5, "color": "#555"},
        },
        customdata=_hover_facts(local, origin),
        hovertemplate=(
            "%{y}<br>%{customdata[0]}<br>%{customdata[1]}"
            "<br>stage %{customdata[2]}, task %{customdata[3]}"
            "<br>%{customdata[4]}<br>CP %{marker.color:.3f}"
            "<extra></extra>"
        ),
    )


def _merged_bars(merged: pl.DataFrame, origin: int) -> go.Bar:
    # One hover string per bar (plotly deep-copies object arrays element by
    # element, and these bars are most of a large window's).
    hover = merged.select(
        pl.concat_str(
            pl.col("edges").cast(pl.String),
            pl.lit(" activities merged in "),
            _spans(origin),
            pl.lit("<br>mostly "),
            pl.col("activity"),
            pl.lit(", busy "),
            _ms(pl.col("busy_ns") / 1e6),
            pl.lit("<br>largest CP "),
            pl.col("cp").round(3).cast(pl.String),
        )
    ).to_series()
    return go.Bar(
        y=_labels(merged["src_worker"]),
        base=((merged["start_ns"] - origin) / 1e6).to_numpy(),
        x=((merged["end_ns"] - merged["start_ns"]) / 1e6).to_numpy(),
        orientation="h",
        name="merged activities",
        marker={"color": "#b0b0b0", "line": {"width": 0}},
        hovertext=hover.to_numpy(),
        hovertemplate="%{y}<br>%{hovertext}<extra></extra>",
    )


def _gantt_messages(messages: pl.DataFrame, origin: int) -> go.Scatter:
    # One (send, receive, gap) triple per message, as numpy arrays: plotly
    # validates Python lists element by element (0.5 s for 5,000 messages).
    n = len(messages)
    xs = np.full(3 * n, np.nan)
    xs[0::3] = ((messages["start_ns"] - origin) / 1e6).to_numpy()
    xs[1::3] = ((messages["end_ns"] - origin) / 1e6).to_numpy()
    ys = np.full(3 * n, None, dtype=object)
    ys[0::3] = _labels(messages["src_worker"])
    ys[1::3] = _labels(messages["dst_worker"])
    hover = _hover_facts(messages, origin)
    facts = np.full((3 * n, hover.shape[1]), None, dtype=object)
    facts[0::3] = hover
    facts[1::3] = hover
    cp = np.full(3 * n, np.nan)
    cp[0::3] = cp[1::3] = messages["cp"].to_numpy()
    return go.Scatter(
        x=xs,
        y=ys,
        mode="lines+markers",
        name="messages",
        line={"color": "#7f7f7f", "width": 1},
        marker={"size": 4},
        customdata=facts,
        text=cp,  # shown only in the hover (mode has no text)
        hovertemplate=(
            "%{customdata[0]} message<br>stage %{customdata[2]}, "
            "task %{customdata[3]}<br>sent → received: %{customdata[4]}"
            "<br>CP %{text:.3f}<extra></extra>"
        ),
    )
