"""The critical path by communication channel: a sender × receiver heatmap."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import polars as pl

from sparktrail.summaries.frames import CP_SHARE
from sparktrail.units import percent

from .chart_basics import CP_COLOURSCALE, empty_figure

__all__ = [
    "NEGLIGIBLE_SHARE",
    "ONE_EXECUTOR_NOTE",
    "communication_heatmap",
    "one_executor",
    "share_tickformat",
]

#: A channel's CP share under which the heatmap is not drawn: its colours
#: would only say that nothing there held the run back.
NEGLIGIBLE_SHARE = 0.01

#: Why the communication chart is hidden for a run with one executor.
ONE_EXECUTOR_NOTE = (
    "Communication chart hidden: the run has one executor (local mode), so "
    "there is no communication between executors."
)


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
    >>> tiny = c.with_columns(pl.col("cp_share") / 10_000)
    >>> communication_heatmap(tiny).layout.annotations[0].text[:36]
    'no channel holds 1% of the critical '
    """
    if communication.is_empty():
        return empty_figure("no messages or shuffle reads in the trace")
    rows = _channels(communication)
    top = float(rows[CP_SHARE].max() or 0.0)  # type: ignore[arg-type]
    if top < NEGLIGIBLE_SHARE:
        # A saturated scale over a maximum of 0.005% would read as a hot
        # channel.
        return empty_figure(
            f"no channel holds {NEGLIGIBLE_SHARE:.0%} of the critical path "
            f"(the most: {percent(top)}): communication held nothing back"
        )
    names, z, text = _channel_grid(rows)
    zmax = top
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


def _channels(communication: pl.DataFrame) -> pl.DataFrame:
    """One row per (sender, receiver): CP share summed, its kinds listed."""
    return (
        communication.with_columns(pl.col("src").fill_null("unknown"))
        .group_by("src", "dst")
        .agg(
            pl.col(CP_SHARE).sum(),
            pl.col("kind").unique().sort().str.join(", ").alias("kinds"),
        )
    )


def _channel_grid(
    rows: pl.DataFrame,
) -> tuple[list[str], list[list[float | None]], list[list[str]]]:
    """The endpoints in order, and per (sender, receiver) cell its CP share
    (``None``: no channel) and the kinds of its messages."""
    names = sorted(set(rows["src"].to_list()) | set(rows["dst"].to_list()))
    index = {name: i for i, name in enumerate(names)}
    z: list[list[float | None]] = [[None] * len(names) for _ in names]
    text: list[list[str]] = [[""] * len(names) for _ in names]
    for src, dst, share, kinds in rows.select(
        "src", "dst", CP_SHARE, "kinds"
    ).iter_rows():
        z[index[src]][index[dst]] = share
        text[index[src]][index[dst]] = kinds
    return names, z, text


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
