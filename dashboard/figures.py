"""Figure builders: pure functions from summary frames to plotly figures.

Each builder takes the frames of :class:`~sparktrail.summaries.Summaries`
(or the CP rows of one window) and returns a new
:class:`plotly.graph_objects.Figure`; none reads files, keeps state or
knows where the figure goes, so the batch report and the live Dash app
share them. An empty frame gives :func:`empty_figure` with a message
instead of an empty plot.

Conventions
-----------
* Shares are fractions of the critical path (0..1), shown as percentages.
* Times on the x axis are window starts as UTC datetimes (trace timestamps
  are ns since the Unix epoch); inside one window, ms since its start.
* Every activity type has one colour (:data:`ACTIVITY_COLOURS`) in every
  figure; CP itself is drawn with :data:`CP_COLOURSCALE`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Any

import numpy as np
import plotly.graph_objects as go
import polars as pl

from sparktrail.pag.schemas import WINDOW_END_NS, WINDOW_START_NS
from sparktrail.pag.workers import SLOT_IN_TEXT, slot_of
from sparktrail.summaries.frames import CP_NS, CP_SHARE, FAIR_SHARE
from sparktrail.summaries.hints import severity_legend, share_of_saved

__all__ = [
    "ACTIVITY_COLOURS",
    "CAPTIONS",
    "CP_COLOURSCALE",
    "HINT_COLUMNS",
    "HINT_HELP",
    "MAX_TIMELINE_BARS",
    "MAX_TIMELINE_MESSAGES",
    "MERGED_BAR_BUDGET",
    "ONE_EXECUTOR_NOTE",
    "SHARE_ONLY",
    "activity_over_time",
    "communication_heatmap",
    "critical_gantt",
    "empty_figure",
    "evidence_text",
    "hints_table",
    "one_executor",
    "operator_bars",
    "share_tickformat",
    "straggler_bars",
    "timeline_rows",
    "worker_label",
    "worker_text",
]

#: One colour per activity type (DESIGN §3), the same in every figure.
ACTIVITY_COLOURS: dict[str, str] = {
    "processing": "#1f77b4",
    "gc": "#d62728",
    "scheduling": "#ff7f0e",
    "deserialization": "#bcbd22",
    "serialization": "#17becf",
    "shuffle_read": "#9467bd",
    "shuffle_write": "#8c564b",
    "result": "#e377c2",
    "driver": "#2ca02c",
    "startup": "#98df8a",
    "waiting": "#c7c7c7",
    "control": "#7f7f7f",
    "data": "#393b79",
}
_OTHER_COLOUR = "#aec7e8"

#: Colour scale of CP (0 = off the critical path).
CP_COLOURSCALE = "YlOrRd"

#: Hint columns shown by :func:`hints_table`: frame column -> heading.
HINT_COLUMNS: dict[str, str] = {
    "kind": "kind",
    "severity": "severity",
    "saving": "predicted saving",
    "stage_id": "stage",
    "executor_id": "executor",
    "partition": "partition",
    "evidence": "evidence",
    "action": "action",
}

#: What each hint column means (hover text of its heading).
HINT_HELP: dict[str, str] = {
    "kind": "which rule fired: straggler, hotspot, parallelism, scheduling-, "
    "shuffle- or driver-bound, idle capacity, failures",
    "severity": "high, medium or low: the predicted saving's share of the run "
    f"({severity_legend()})",
    "saving": "how much shorter the run would be after the action, replayed "
    "on the traced tasks (idle capacity: executor core time freed)",
    "stage_id": "the Spark stage the hint is about (blank: the whole run)",
    "executor_id": "the executor the hint is about (blank: none in particular)",
    "partition": "the task's partition, for a hotspot (a skewed key)",
    "evidence": "the numbers that fired the rule (shares of the critical path "
    "as %, durations, times of day in UTC)",
    "action": "what to change: the Spark setting or code pattern to try",
}

#: Label of the operator row that collects edges outside any stage.
NO_STAGE = "(no stage: driver, idle)"

#: One line under each chart: what it shows and how to read it, in the words
#: of the README's glossary (shared by the dashboard and the report).
CAPTIONS: dict[str, str] = {
    "activity": "Each bar is a window; its colours split the window's critical "
    "path (CP) by activity and add up to 100%: the tallest colour is what held "
    "the run back then.",
    "straggler": "Each worker's CP share (red) beside its fair share (grey), "
    "the share it would hold if the critical path were spread evenly over the "
    "active workers: red far above grey is a straggler.",
    "operator": f"CP share of each operator (call site and SQL plan node, the "
    f"same across jobs; its stages on hover); {NO_STAGE} is driver code and "
    f"slots waiting for work.",
    "communication": "CP share of the messages and shuffle reads from each "
    "sender (row) to each receiver (column): a dark cell is a channel the "
    "critical path waits on.",
    "timeline": "A row per worker, a bar per activity coloured by critical "
    "participation (CP): dark held the window back; faint: waiting; lines: "
    "messages. Past 5,000 bars, non-critical ones merge per worker and pixel "
    "(grey).",
    "hints": "Rebalancing suggestions drawn from CP, most severe first: the "
    "evidence is the numbers that fired the rule, the action what to change "
    "(hover a column's heading for its meaning).",
}

#: Why the communication chart is hidden for a run with one executor.
ONE_EXECUTOR_NOTE = (
    "Communication chart hidden: the run has one executor (local mode), so "
    "there is no communication between executors."
)


def worker_label(worker: str | None) -> str:
    """How a worker is shown to a user (the data keep its name).

    ``exec-3/1`` is executor 3's core 1; the driver's own timeline is
    ``driver``, and a slot of the executor inside the driver (local mode,
    ``exec-driver/1``) is ``driver, core 1``.

    >>> worker_label("exec-3/1"), worker_label("exec-driver/1")
    ('executor 3, core 1', 'driver, core 1')
    >>> worker_label("driver"), worker_label(None), worker_label("a")
    ('driver', 'driver', 'a')
    """
    if worker is None:
        return "driver"
    slot = slot_of(worker)
    if slot is None:
        return worker
    executor, core = slot
    if executor == "driver":
        return f"driver, core {core}"
    return f"executor {executor}, core {core}"


def worker_text(text: str) -> str:
    """``text`` with every worker name in it shown by :func:`worker_label`.

    >>> worker_text("move work off exec-2/0 (and exec-driver/1)")
    'move work off executor 2, core 0 (and driver, core 1)'
    """
    return SLOT_IN_TEXT.sub(lambda m: worker_label(m.group(0)), text)


def _natural(label: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"([0-9]+)", label)]


def _labels(workers: pl.Series) -> np.ndarray:
    names = {w: worker_label(w) for w in workers.unique().drop_nulls().to_list()}
    labels = workers.replace_strict(names, default="driver", return_dtype=pl.String)
    return labels.to_numpy()


def empty_figure(message: str) -> go.Figure:
    """A figure with no data that shows ``message`` in its middle.

    Parameters
    ----------
    message
        What is missing, e.g. "no shuffle on the critical path".

    Returns
    -------
    plotly.graph_objects.Figure
        No traces, hidden axes, one annotation.

    Examples
    --------
    >>> fig = empty_figure("nothing to show")
    >>> len(fig.data), fig.layout.annotations[0].text
    (0, 'nothing to show')
    """
    fig = go.Figure()
    fig.add_annotation(
        text=message,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font={"size": 16, "color": "#555"},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=240, plot_bgcolor="white")
    return fig


def activity_colour(activity: str) -> str:
    """The colour of an activity type (a neutral one for unknown names).

    >>> activity_colour("gc"), activity_colour("something-else")
    ('#d62728', '#aec7e8')
    """
    return ACTIVITY_COLOURS.get(activity, _OTHER_COLOUR)


def _datetimes(frame: pl.DataFrame, column: str) -> list[Any]:
    return frame.select(pl.from_epoch(column, time_unit="ns")).to_series().to_list()


def activity_over_time(activity_by_window: pl.DataFrame) -> go.Figure:
    """Stacked bars of each activity's share of the critical path per window.

    Parameters
    ----------
    activity_by_window
        ``Summaries.activity_by_window``: ``window_start_ns, window_end_ns,
        activity, cp_share, cp_ns`` (windows with paths only).

    Returns
    -------
    plotly.graph_objects.Figure
        One bar trace per activity type, largest overall share first, each
        bar as wide as its window; windows with no path leave a gap.

    Examples
    --------
    >>> f = pl.DataFrame({"window_start_ns": [0, 0, 10], "window_end_ns": [10, 10, 20],
    ...     "activity": ["processing", "gc", "processing"],
    ...     "cp_share": [0.75, 0.25, 1.0], "cp_ns": [7.5, 2.5, 10.0]})
    >>> [t.name for t in activity_over_time(f).data]
    ['processing', 'gc']
    """
    if activity_by_window.is_empty():
        return empty_figure("no window has a critical path")
    frame = activity_by_window.sort(WINDOW_START_NS)
    order = (
        frame.group_by("activity")
        .agg(pl.col(CP_SHARE).sum())
        .sort([CP_SHARE, "activity"], descending=[True, False])["activity"]
    )
    fig = go.Figure()
    for activity in order.to_list():
        rows = frame.filter(pl.col("activity") == activity)
        width_ms = (rows[WINDOW_END_NS] - rows[WINDOW_START_NS]) / 1e6
        fig.add_bar(
            x=_datetimes(rows, WINDOW_START_NS),
            y=rows[CP_SHARE].to_list(),
            width=width_ms.to_list(),
            offset=0,
            name=activity,
            marker_color=activity_colour(activity),
            # The window start in ns rides along, so a click picks the window.
            customdata=rows.select(
                pl.col(CP_NS) / 1e9, pl.col(WINDOW_START_NS).cast(pl.String)
            ).rows(),
            hovertemplate=(
                f"{activity}<br>window %{{x}}<br>CP share %{{y:.1%}}"
                "<br>critical time %{customdata[0]:.3g} s<extra></extra>"
            ),
        )
    fig.update_layout(
        barmode="stack",
        title="Critical path by activity over time",
        xaxis_title="window start (UTC)",
        yaxis_title="share of the critical path",
        yaxis_tickformat=".0%",
        bargap=0,
        legend_title="activity",
    )
    return fig


def straggler_bars(straggler: pl.DataFrame, top: int = 30) -> go.Figure:
    """Each worker's share of the critical path next to its fair share.

    Parameters
    ----------
    straggler
        ``Summaries.straggler`` (or ``Summaries.executor``, whose
        ``executor_id`` then names the bars): ``worker, cp_share,
        fair_share, ratio``.
    top
        Show the ``top`` workers with the largest CP share.

    Returns
    -------
    plotly.graph_objects.Figure
        Two bar traces, "CP share" and "fair share", largest CP first; a
        worker whose CP bar is twice its fair share holds the run back.

    Examples
    --------
    >>> s = pl.DataFrame({"worker": ["exec-1/0", "exec-1/1"], "cp_share": [1.0, 0.0],
    ...     "fair_share": [0.5, 0.5], "ratio": [2.0, 0.0]})
    >>> [t.name for t in straggler_bars(s).data]
    ['CP share', 'fair share']
    """
    if straggler.is_empty():
        return empty_figure("no worker is on the critical path")
    key = "worker" if "worker" in straggler.columns else "executor_id"
    rows = straggler.sort([CP_SHARE, key], descending=[True, False]).head(top)
    if key == "worker":
        labels = [worker_label(w) for w in rows[key].to_list()]
    else:
        labels = rows[key].fill_null("driver").to_list()
    ratio = rows["ratio"].to_list() if "ratio" in rows.columns else [None] * len(rows)
    fig = go.Figure()
    fig.add_bar(
        x=labels,
        y=rows[CP_SHARE].to_list(),
        name="CP share",
        marker_color="#d62728",
        customdata=ratio,
        hovertemplate=(
            "%{x}<br>CP share %{y:.1%}<br>CP / fair share %{customdata:.2f}"
            "<extra></extra>"
        ),
    )
    fig.add_bar(
        x=labels,
        y=rows[FAIR_SHARE].to_list(),
        name="fair share",
        marker_color="#c7c7c7",
        hovertemplate="%{x}<br>fair share %{y:.1%}<extra></extra>",
    )
    fig.update_layout(
        barmode="group",
        title="Critical path per worker vs its fair share",
        xaxis_title=key.replace("_", " "),
        yaxis_title="share of the critical path",
        yaxis_tickformat=".0%",
    )
    return fig


def _operator_labels(operator: pl.DataFrame) -> list[str]:
    return [NO_STAGE if op is None else str(op) for op in operator["operator"]]


#: Characters of an operator label shown beside its bar (the whole label is
#: in the hover): long SQL labels were cut at the plot's left edge.
LABEL_CHARS = 48


def short_labels(labels: list[str], width: int = LABEL_CHARS) -> list[str]:
    """``labels`` cut to ``width`` characters with an ellipsis, kept distinct.

    >>> short_labels(["collect at a.py:3 · HashAggregate(keys=[k])", "x"], 20)
    ['collect at a.py:3 ·…', 'x']
    >>> short_labels(["aaaaaa1", "aaaaaa2"], 5)
    ['aaaa…', 'aaaa… (2)']
    """
    out: list[str] = []
    for label in labels:
        short = label if len(label) <= width else label[: width - 1].rstrip() + "…"
        candidate, n = short, 1
        while candidate in out:
            n += 1
            candidate = f"{short} ({n})"
        out.append(candidate)
    return out


def _stage_list(ids: list[int] | None, most: int = 8) -> str:
    if not ids:
        return "–"
    shown = ", ".join(str(i) for i in ids[:most])
    return shown + (f", … ({len(ids)})" if len(ids) > most else "")


def _one_bar_each(operator: pl.DataFrame) -> pl.DataFrame:
    """One row per operator (rows per stage, as older summaries hold, are
    summed) with its stages listed in ``stage_list``."""
    if "stage_ids" not in operator.columns and "stage_id" in operator.columns:
        ids = pl.concat_list(pl.col("stage_id")).list.drop_nulls()
        operator = operator.with_columns(stage_ids=ids)
    if operator["operator"].is_duplicated().any():
        summed = [c for c in (CP_SHARE, CP_NS, "tasks") if c in operator.columns]
        kept = [
            c for c in operator.columns if c not in (*summed, "operator", "stage_ids")
        ]
        operator = operator.group_by("operator").agg(
            *[pl.col(c).sum() for c in summed],
            *[pl.col(c).first() for c in kept],
            *(
                [
                    pl.col("stage_ids")
                    .list.explode(keep_nulls=False, empty_as_null=False)
                    .unique()
                    .drop_nulls()
                    .sort()
                ]
                if "stage_ids" in operator.columns
                else []
            ),
        )
    if "stage_ids" not in operator.columns:
        return operator
    listed = [_stage_list(ids) for ids in operator["stage_ids"].to_list()]
    return operator.with_columns(stage_list=pl.Series(listed, dtype=pl.String))


def operator_bars(operator: pl.DataFrame, top: int = 20) -> go.Figure:
    """Horizontal bars of each operator's CP share, one bar per operator.

    Parameters
    ----------
    operator
        ``Summaries.operator``: ``operator, cp_share, cp_ns`` and, when
        present, ``stage_ids, call_site, tasks, median_task_ns`` (hover).
        Several rows of one operator (one per stage) make one bar. The row
        with a null operator (edges outside any stage) is labelled
        ``NO_STAGE``.
    top
        Show the ``top`` operators with the largest CP share.

    Returns
    -------
    plotly.graph_objects.Figure
        One horizontal bar trace, largest share at the top.

    Examples
    --------
    >>> o = pl.DataFrame({"operator": ["count at A.scala:3 · Sort [k]", None,
    ...     "count at A.scala:3 · Sort [k]"], "stage_id": [0, None, 4],
    ...     "cp_share": [0.5, 0.2, 0.3], "cp_ns": [5e9, 2e9, 3e9]})
    >>> fig = operator_bars(o)
    >>> list(fig.data[0].y), list(fig.data[0].x)
    (['(no stage: driver, idle)', 'count at A.scala:3 · Sort [k]'], [0.2, 0.8])
    >>> fig.data[0].customdata[1][1]
    '0, 4'
    """
    if operator.is_empty():
        return empty_figure("no operator is on the critical path")
    rows = _one_bar_each(operator)
    rows = rows.sort(CP_SHARE, descending=True).head(top).reverse()
    hover = ("stage_list", "call_site", "tasks", "median_task_ns")
    extra = [c for c in hover if c in rows.columns]
    facts = rows.select(
        (pl.col(CP_NS) / 1e9).alias("cp_s"),
        *[pl.col(c).cast(pl.String).fill_null("–") for c in extra],
    )
    labels = _operator_labels(rows)
    facts = facts.with_columns(pl.Series("label", labels))
    last = len(facts.columns) - 1
    template = (
        f"%{{customdata[{last}]}}<br>CP share %{{x:.1%}}"
        "<br>critical time %{customdata[0]:.3g} s"
    )
    for i, column in enumerate(extra, start=1):
        title = "stages" if column == "stage_list" else column.replace("_", " ")
        template += f"<br>{title} %{{customdata[{i}]}}"
    fig = go.Figure()
    fig.add_bar(
        x=rows[CP_SHARE].to_list(),
        y=short_labels(labels),
        orientation="h",
        marker_color="#1f77b4",
        customdata=facts.rows(),
        hovertemplate=template + "<extra></extra>",
        name="CP share",
    )
    fig.update_layout(
        title="Critical path by operator",
        xaxis_title="share of the critical path",
        yaxis_title="operator",
        xaxis_tickformat=".0%",
        height=max(320, 28 * len(rows) + 160),
        yaxis_automargin=True,
    )
    return fig


def communication_heatmap(communication: pl.DataFrame) -> go.Figure:
    """Heatmap of CP by channel: sender rows, receiver columns.

    Parameters
    ----------
    communication
        ``Summaries.communication``: ``src, dst, kind, cp_share``; the
        kinds of one channel are summed (the hover names them). A null
        ``src`` (shuffle read with no known writer) is shown as "unknown".

    Returns
    -------
    plotly.graph_objects.Figure
        One heatmap trace over the endpoints that appear, in the same order
        on both axes; a cell with no channel is blank.

    Examples
    --------
    >>> c = pl.DataFrame({"src": ["driver", "executor 1"],
    ...     "dst": ["executor 1", "driver"], "kind": ["control", "control"],
    ...     "cp_share": [0.1, 0.0]})
    >>> fig = communication_heatmap(c)
    >>> len(fig.data), list(fig.data[0].x), fig.data[0].z[0][1]
    (1, ['driver', 'executor 1'], 0.1)
    """
    if communication.is_empty():
        return empty_figure("no messages or shuffle reads in the trace")
    rows = (
        communication.with_columns(pl.col("src").fill_null("unknown"))
        .group_by("src", "dst")
        .agg(
            pl.col(CP_SHARE).sum(),
            pl.col("kind").unique().sort().str.join(", ").alias("kinds"),
        )
    )
    names = sorted(set(rows["src"].to_list()) | set(rows["dst"].to_list()))
    index = {name: i for i, name in enumerate(names)}
    z: list[list[float | None]] = [[None] * len(names) for _ in names]
    text: list[list[str]] = [[""] * len(names) for _ in names]
    for src, dst, share, kinds in rows.select(
        "src", "dst", CP_SHARE, "kinds"
    ).iter_rows():
        z[index[src]][index[dst]] = share
        text[index[src]][index[dst]] = kinds
    top = float(rows[CP_SHARE].max() or 0.0)  # type: ignore[arg-type]
    zmax = top if top > 0 else 0.01
    fig = go.Figure(
        go.Heatmap(
            x=names,
            y=names,
            z=z,
            text=text,
            colorscale=CP_COLOURSCALE,
            zmin=0,
            # Fixed bounds: with one distinct value (often all 0: Spark's
            # control messages take no time) plotly would centre the scale on
            # it and label negative shares.
            zmax=zmax,
            colorbar={"title": "CP share", "tickformat": share_tickformat(zmax)},
            hovertemplate=(
                "%{y} → %{x}<br>%{text}<br>CP share %{z:.2%}<extra></extra>"
            ),
            hoverongaps=False,
        )
    )
    fig.update_layout(
        title="Critical path by channel (sender → receiver)",
        xaxis_title="receiver (dst)",
        yaxis_title="sender (src)",
        yaxis_autorange="reversed",
    )
    return fig


def share_tickformat(top: float) -> str:
    """A percent tick format with the decimals that resolve ``0..top``.

    >>> share_tickformat(0.0054), share_tickformat(0.01), share_tickformat(0.4)
    ('.2%', '.1%', '.0%')
    """
    if top <= 0:
        return ".0%"
    return f".{max(0, 1 - math.floor(math.log10(top * 100)))}%"


def one_executor(communication: pl.DataFrame) -> bool:
    """Whether the channels of ``communication`` touch at most one executor.

    Then there is no communication between executors to show (local mode:
    the driver and its one executor).

    >>> one_executor(pl.DataFrame({"src_executor_id": [None, "driver"],
    ...     "dst_executor_id": ["driver", None]}))
    True
    """
    columns = [c for c in ("src_executor_id", "dst_executor_id") if c in communication]
    if not columns:
        return False
    ids = pl.concat([communication[c] for c in columns]).drop_nulls().unique()
    return len(ids) <= 1


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
    span = pl.col("end_ns") - pl.col("start_ns")
    merged = (
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
    drawn = marked.filter("_own").drop("_own")
    return drawn, merged


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
    windows = cp_rows[WINDOW_START_NS].unique()
    if len(windows) != 1:
        raise ValueError(
            f"critical_gantt draws one window, got {len(windows)} "
            f"(window starts {sorted(windows.to_list())[:3]}...)"
        )
    origin = int(windows[0])
    local = cp_rows.filter(
        (pl.col("src_worker") == pl.col("dst_worker"))
        & (pl.col("end_ns") > pl.col("start_ns"))
    )
    messages = cp_rows.filter(pl.col("src_worker") != pl.col("dst_worker"))
    n_messages = len(messages)
    if n_messages > MAX_TIMELINE_MESSAGES:
        messages = messages.top_k(MAX_TIMELINE_MESSAGES, by="cp")
    end_ns = int(cp_rows[WINDOW_END_NS][0])
    local, merged = timeline_rows(local, origin, end_ns)
    fig = go.Figure()
    if not local.is_empty():
        fig.add_trace(_gantt_bars(local, origin))
    if not merged.is_empty():
        fig.add_trace(_merged_bars(merged, origin))
    if not messages.is_empty():
        fig.add_trace(_gantt_messages(messages, origin))
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
    order = _worker_order([worker_label(w) for w in workers.to_list()])
    end_ms = (end_ns - origin) / 1e6
    title = title or "Most critical window: edges coloured by critical participation"
    notes = []
    if not merged.is_empty():
        notes.append(f"{int(merged['edges'].sum()):,} activities merged per pixel")
    if n_messages > len(messages):
        notes.append(f"the {len(messages):,} most critical of {n_messages:,} messages")
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


def _significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, without exponent.

    >>> _significant(125754.527163), _significant(0.012345), _significant(90.0)
    ('126,000', '0.0123', '90')
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    places = digits - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, places)
    if places <= 0:
        return f"{rounded:,.0f}"
    return f"{rounded:.{places}f}".rstrip("0").rstrip(".")


def _duration(ns: float) -> str:
    seconds = abs(ns) / 1e9
    if seconds >= 1:
        return f"{_significant(ns / 1e9)} s"
    if seconds >= 1e-3:
        return f"{_significant(ns / 1e6)} ms"
    return f"{_significant(ns / 1e3)} µs"


def _size(n: float) -> str:
    if abs(n) >= 1e6:
        return f"{_significant(n / 1e6)} MB"
    if abs(n) >= 1e3:
        return f"{_significant(n / 1e3)} kB"
    return f"{_significant(n)} B"


def _time_of_day(ns: float) -> str:
    moment = dt.datetime.fromtimestamp(int(ns) // 1000 / 1e6, tz=dt.timezone.utc)
    return moment.strftime("%H:%M:%S.%f")[:-3]


def _evidence_value(key: str, value: Any) -> str:
    """One evidence value in units, by its key's naming convention."""
    if value is None:
        return "–"
    if isinstance(value, dict):
        return "{" + _evidence_pairs(value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_evidence_value(key, v) for v in value) + "]"
    if isinstance(value, str):
        return worker_text(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return json.dumps(value)
    if key in ("start_ns", "end_ns"):
        return _time_of_day(value) + " UTC"
    if key.endswith("_ns"):
        return _duration(value)
    if key.endswith("_bytes"):
        return _size(value)
    if "rate" in key:
        return f"{_significant(value)} rows/s"
    if "share" in key:
        return f"{_significant(value * 100)}%"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return _significant(value)


def _evidence_pairs(data: dict[str, Any]) -> str:
    return ", ".join(
        f"{re.sub(r'_(ns|bytes)$', '', k)}={_evidence_value(k, v)}"
        for k, v in data.items()
    )


def evidence_text(evidence: str | None) -> str:
    """A hint's evidence JSON as ``key=value`` pairs in units, on one line.

    Durations (``*_ns``) in s or ms, sizes (``*_bytes``) in MB or kB, rates
    in rows/s, all to 3 significant digits; ``start_ns``/``end_ns`` as times
    of day (UTC), shares as %, workers as :func:`worker_label` shows them.
    The unit suffix leaves the key. The raw numbers stay in the hints frame
    (``--json``, Parquet); this is only how they are shown.

    >>> evidence_text('{"share": 0.5, "tasks": [1, 2], "target_stage_ns": 2.875e8}')
    'share=50%, tasks=[1, 2], target_stage=288 ms'
    >>> evidence_text('{"start_ns": 1795463597412000000, "observed_rate": 125754.5}')
    'start=19:53:17.412 UTC, observed_rate=126,000 rows/s'
    >>> evidence_text(None)
    ''
    """
    if not evidence:
        return ""
    try:
        data = json.loads(evidence)
    except ValueError:
        return evidence
    if not isinstance(data, dict):
        return json.dumps(data)
    return _evidence_pairs(data)


#: Hints whose "saving" is a share of something else than a time (a
#: streaming query's input or trigger), by their ``share_of``, with how to
#: say it.
SHARE_ONLY: dict[str, str] = {
    "input": "{share:.0%} of the input falls behind",
    "trigger": "batches run {share:.0%} over their trigger",
}
#: How a saving's share reads, by the hints frame's ``share_of``.
_SHARE_OF_TEXT: dict[str, str] = {
    "run": "of the run",
    "slot_time": "of slot time",
    "query_batch_time": "of the query's batch time",
}


def saving_text(hint: dict[str, Any]) -> str:
    """A hint's predicted saving for a table cell, by what its share is of
    (its ``share_of``; a row saved without one reads it from its kind).

    >>> saving_text({"kind": "straggler_task", "predicted_saving_ns": 1.5e9,
    ...     "saving_share": 0.12, "share_of": "run"})
    '1.5 s (12% of the run)'
    >>> saving_text({"kind": "idle_capacity", "predicted_saving_ns": 1.2e11,
    ...     "saving_share": 0.4, "share_of": "slot_time"})
    '2 core-min (40% of slot time)'
    >>> saving_text({"kind": "state_skew", "predicted_saving_ns": 2e9,
    ...     "saving_share": 0.2, "share_of": "query_batch_time"})
    "2 s (20% of the query's batch time)"
    >>> saving_text({"kind": "stream_backlog", "saving_share": 0.4})
    '40% of the input falls behind'
    """
    saving, share = hint.get("predicted_saving_ns"), hint.get("saving_share")
    share_of = share_of_saved(hint)
    if share is not None and share_of in SHARE_ONLY:
        return SHARE_ONLY[share_of].format(share=share)
    if saving is None or share is None:
        return ""
    of = _SHARE_OF_TEXT.get(share_of, _SHARE_OF_TEXT["run"])
    if share_of == "slot_time":
        return f"{saving / 6e10:.3g} core-min ({share:.0%} {of})"
    return f"{_duration(saving)} ({share:.0%} {of})"


def hints_table(hints: pl.DataFrame) -> go.Figure:
    """The rebalancing hints as a table, most severe first.

    Parameters
    ----------
    hints
        ``Summaries.hints`` (columns of
        :data:`~sparktrail.summaries.HINT_SCHEMA`).

    Returns
    -------
    plotly.graph_objects.Figure
        One :class:`plotly.graph_objects.Table` with the columns of
        :data:`HINT_COLUMNS`; nulls are blank, evidence is ``key=value``.

    Examples
    --------
    >>> h = pl.DataFrame({"kind": ["driver_bound"], "severity": ["high"],
    ...     "stage_id": [None], "executor_id": [None], "partition": [None],
    ...     "evidence": ['{"driver_share": 0.9}'], "action": ["move work"]})
    >>> fig = hints_table(h)
    >>> list(fig.data[0].header.values)[:2], list(fig.data[0].cells.values[6])
    (['kind', 'severity'], ['driver_share=90%'])
    """
    if hints.is_empty():
        return empty_figure("no rebalancing hint: no threshold was crossed")
    columns: list[list[str]] = []
    for column in HINT_COLUMNS:
        if column == "saving":
            columns.append([saving_text(row) for row in hints.iter_rows(named=True)])
            continue
        values = hints[column].to_list() if column in hints.columns else []
        if column == "evidence":
            columns.append([evidence_text(v) for v in values])
        elif column == "action":
            columns.append(["" if v is None else worker_text(str(v)) for v in values])
        else:
            columns.append(["" if v is None else str(v) for v in values])
    fig = go.Figure(
        go.Table(
            columnwidth=[1.3, 0.8, 1.1, 0.6, 0.8, 0.8, 3.5, 4.5],
            header={
                "values": list(HINT_COLUMNS.values()),
                "fill_color": "#444",
                "font": {"color": "white"},
                "align": "left",
            },
            cells={"values": columns, "align": "left", "height": 24},
        )
    )
    fig.update_layout(
        title="Rebalancing hints",
        height=min(900, 160 + 90 * len(hints)),
        margin={"l": 10, "r": 10},
    )
    return fig
