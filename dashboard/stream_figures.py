"""Figures of a Structured Streaming query's micro-batches (DESIGN §8).

Pure builders over the application's context (:attr:`AppContext.batches
<sparktrail.pag.context.AppContext>`), the numbers Spark's own progress
reports: :func:`batch_frame` tabulates them, :func:`stream_progress` draws
per batch the input and processed rates, the trigger's duration broken
down as Spark reports it (``durationMs``), and the sources' backlog. Each
point carries ``[batch_id, trigger start in ms]`` as its ``customdata``, so a
click on a batch can select the window its trigger started in.
"""

from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from sparktrail.pag.context import AppContext

__all__ = ["BATCH_COLUMNS", "STREAM_CAPTION", "batch_frame", "stream_progress"]

#: The duration keys drawn, bottom up; the rest of ``triggerExecution`` is
#: drawn as "other".
DURATION_KEYS = (
    "addBatch",
    "queryPlanning",
    "getBatch",
    "latestOffset",
    "walCommit",
    "commitOffsets",
)
#: Columns of :func:`batch_frame`.
BATCH_COLUMNS: dict[str, pl.DataType] = {
    "query": pl.String(),
    "batch_id": pl.Int64(),
    "timestamp_ns": pl.Int64(),
    "input_rows": pl.Int64(),
    "input_rate": pl.Float64(),
    "processed_rate": pl.Float64(),
    "trigger_ms": pl.Int64(),
    **{f"{key}_ms": pl.Int64() for key in DURATION_KEYS},
    "backlog": pl.Int64(),
    "state_rows": pl.Int64(),
}
STREAM_CAPTION = (
    "One point per micro-batch, from Spark's own progress reports: top, rows "
    "per second arriving (input) and processed; when processed stays below "
    "input the query falls behind. Middle, where each trigger's time went "
    "(addBatch runs the batch's jobs; the rest is planning and offset "
    "bookkeeping). Bottom, offsets behind the source's latest (where the "
    "source reports it) and state rows. Click a batch to show its window."
)


def _name(app: AppContext, query_id: str) -> str:
    for query in app.queries:
        if query.query_id == query_id and query.name:
            return query.name
    return query_id[:8]


def batch_frame(app: AppContext) -> pl.DataFrame:
    """One row per micro-batch of every query, in batch order.

    >>> from sparktrail.pag.streams import StreamBatch
    >>> app = AppContext(batches=(StreamBatch("q", batch_id=0, timestamp_ns=5,
    ...     input_rows_per_second=10.0, duration_ms={"triggerExecution": 7}),))
    >>> batch_frame(app).select("query", "batch_id", "input_rate", "trigger_ms").row(0)
    ('q', 0, 10.0, 7)
    """
    rows = []
    for b in app.batches:
        durations = b.duration_ms or {}
        backlogs = [s.backlog for s in b.sources or () if s.backlog is not None]
        states = [
            s.num_rows_total
            for s in b.state_operators or ()
            if s.num_rows_total is not None
        ]
        rows.append(
            {
                "query": _name(app, b.query_id),
                "batch_id": b.batch_id,
                "timestamp_ns": b.timestamp_ns,
                "input_rows": b.num_input_rows,
                "input_rate": b.input_rows_per_second,
                "processed_rate": b.processed_rows_per_second,
                "trigger_ms": durations.get("triggerExecution"),
                **{f"{k}_ms": durations.get(k) for k in DURATION_KEYS},
                "backlog": sum(backlogs) if backlogs else None,
                "state_rows": sum(states) if states else None,
            }
        )
    frame = pl.DataFrame(rows, schema=BATCH_COLUMNS, orient="row")
    return frame.sort("query", "batch_id", nulls_last=True)


def _times(frame: pl.DataFrame) -> list[dt.datetime | None]:
    return [
        None
        if ns is None
        else dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc).replace(
            tzinfo=None
        )
        for ns in frame["timestamp_ns"].to_list()
    ]


def _points(batches: pl.DataFrame) -> list[list[int | None]]:
    # [batch id, trigger start in ms] per point: the hover names the batch,
    # a click selects the window the trigger started in (ms: a browser's
    # numbers are doubles, exact to 2**53, and epoch ns are not).
    ms = (pl.col("timestamp_ns") // 1_000_000).alias("ms")
    return [list(row) for row in batches.select("batch_id", ms).rows()]


def _line(
    batches: pl.DataFrame, name: str, column: str, dash: str = "solid"
) -> go.Scatter:
    """One query's ``column`` per batch, as a line over trigger time."""
    return go.Scatter(
        x=_times(batches),
        y=batches[column].to_list(),
        name=name,
        mode="lines+markers",
        line={"dash": dash},
        customdata=_points(batches),
        hovertemplate="batch %{customdata[0]}<br>%{y:,.0f}"
        "<extra>%{fullData.name}</extra>",
    )


def stream_progress(app: AppContext) -> go.Figure:
    """Per micro-batch: input vs processed rate, trigger time, backlog.

    Returns
    -------
    plotly.graph_objects.Figure
        Three rows sharing the x axis (the batch's trigger time, UTC); one
        line per query and rate. A figure with a note when the context has
        no micro-batch.

    Examples
    --------
    >>> from sparktrail.pag.streams import StreamBatch
    >>> app = AppContext(batches=tuple(StreamBatch("q", batch_id=i,
    ...     timestamp_ns=i * 10**9, input_rows_per_second=100.0,
    ...     processed_rows_per_second=80.0, duration_ms={"triggerExecution": 900,
    ...     "addBatch": 700}) for i in range(3)))
    >>> fig = stream_progress(app)
    >>> [t.name for t in fig.data][:3]
    ['q input', 'q processed', 'q addBatch']
    """
    frame = batch_frame(app)
    if frame.is_empty():
        return _no_batches()
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=(
            "rows per second: input vs processed",
            "trigger time by phase (ms)",
            "backlog (offsets behind latest) and state rows",
        ),
    )
    for (query,), batches in frame.group_by("query", maintain_order=True):
        fig.add_trace(_line(batches, f"{query} input", "input_rate", "dot"), 1, 1)
        fig.add_trace(_line(batches, f"{query} processed", "processed_rate"), 1, 1)
        for bar in _phase_bars(batches, str(query)):
            fig.add_trace(bar, row=2, col=1)
        for column, label in (("backlog", "backlog"), ("state_rows", "state rows")):
            if batches[column].is_not_null().any():
                fig.add_trace(_line(batches, f"{query} {label}", column), 3, 1)
    fig.update_layout(
        title="Structured Streaming: Spark's progress per micro-batch",
        barmode="stack",
        height=720,
        legend={"orientation": "h", "y": -0.14},
    )
    fig.update_xaxes(title_text="trigger time (UTC)", row=3, col=1)
    return fig


def _no_batches() -> go.Figure:
    """The figure of a run without micro-batches: a note in its middle."""
    fig = go.Figure()
    fig.add_annotation(
        text="no Structured Streaming micro-batch in this run",
        showarrow=False,
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
    )
    fig.update_layout(xaxis_visible=False, yaxis_visible=False, height=200)
    return fig


def _phase_bars(batches: pl.DataFrame, query: str) -> list[go.Bar]:
    """One query's trigger time per batch split by phase, a bar trace per
    phase that took any time (``other``: what the known phases leave)."""
    x = _times(batches)
    known = batches.select(f"{k}_ms" for k in DURATION_KEYS).fill_null(0)
    other = (batches["trigger_ms"].fill_null(0) - known.sum_horizontal()).clip(0)
    return [
        go.Bar(
            x=x,
            y=values.to_list(),
            name=f"{query} {key}",
            customdata=_points(batches),
            hovertemplate="batch %{customdata[0]}<br>%{y:,} ms"
            "<extra>%{fullData.name}</extra>",
        )
        for key, values in [
            *((k, known[f"{k}_ms"]) for k in DURATION_KEYS),
            ("other", other),
        ]
        if (values > 0).any()
    ]
