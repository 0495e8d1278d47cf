"""Each worker's share of the critical path beside its fair share."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from sparktrail.summaries.frames import CP_SHARE, FAIR_SHARE

from .chart_basics import empty_figure, worker_label

__all__ = ["straggler_bars"]


def _bar_labels(rows: pl.DataFrame, key: str) -> list[str]:
    """The bars' labels: workers as people read them, or executor ids."""
    if key == "worker":
        return [worker_label(w) for w in rows[key].to_list()]
    return rows[key].fill_null("driver").to_list()


#: Bars a chart draws one by one; past them, the rest are one bar.
TOP_WORKERS = 30


def _with_rest(rows: pl.DataFrame, key: str, top: int) -> tuple[pl.DataFrame, int]:
    """The ``top`` rows, then one row for the rest (their mean shares, so
    the bar compares with the others'); and how many the rest holds."""
    rest = rows.slice(top)
    if rest.is_empty():
        return rows, 0
    mean = rest.select(pl.col(CP_SHARE, FAIR_SHARE).mean())
    other = mean.with_columns(
        pl.lit(f"{len(rest)} other{'s' * (len(rest) != 1)} (mean)").alias(key),
        (pl.col(CP_SHARE) / pl.col(FAIR_SHARE)).alias("ratio"),
    )
    kept = rows.head(top).select(key, CP_SHARE, FAIR_SHARE, "ratio")
    return pl.concat([kept, other.select(kept.columns)], how="vertical_relaxed"), len(
        rest
    )


def straggler_bars(straggler: pl.DataFrame, top: int = TOP_WORKERS) -> go.Figure:
    """Each worker's share of the critical path next to its fair share.

    Parameters
    ----------
    straggler
        ``Summaries.straggler`` (or ``Summaries.executor``, whose
        ``executor_id`` then names the bars): ``worker, cp_share,
        fair_share, ratio``.
    top
        Show the ``top`` workers with the largest CP share one by one and
        the others as one bar of their mean shares.

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
    >>> list(straggler_bars(s, top=1).data[0].x)
    ['executor 1 · core 0', '1 other (mean)']
    """
    if straggler.is_empty():
        return empty_figure("no worker is on the critical path")
    key = "worker" if "worker" in straggler.columns else "executor_id"
    rows = straggler.sort([CP_SHARE, key], descending=[True, False])
    if "ratio" not in rows.columns:
        rows = rows.with_columns(pl.lit(None, pl.Float64).alias("ratio"))
    rows, others = _with_rest(rows, key, top)
    labels = _bar_labels(rows, key)
    ratio = rows["ratio"].to_list()
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
        title="Critical path per worker vs its fair share"
        + (f" (the {top} largest, then the other {others})" if others else ""),
        xaxis_title=key.replace("_", " "),
        yaxis_title="share of the critical path",
        yaxis_tickformat=".0%",
    )
    return fig
