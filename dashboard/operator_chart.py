"""The critical path by operator: one bar per operator, its stages on hover."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from sparktrail.summaries.frames import CP_NS, CP_SHARE

from .chart_basics import NO_STAGE, empty_figure, no_stage_label

__all__ = ["LABEL_CHARS", "NO_STAGE", "operator_bars", "short_labels"]


def _operator_labels(operator: pl.DataFrame) -> list[str]:
    parts = (
        operator["parts"].to_list()
        if "parts" in operator.columns
        else [None] * len(operator)
    )
    return [
        no_stage_label(part) if op is None else str(op)
        for op, part in zip(operator["operator"], parts, strict=True)
    ]


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


def _operator_hover(rows: pl.DataFrame, labels: list[str]) -> tuple[pl.DataFrame, str]:
    """Each bar's hover facts (critical seconds, the columns present of
    stages, call site, tasks and median task time, the whole label) and
    the hover template that shows them."""
    hover = ("stage_list", "call_site", "tasks", "median_task_ns")
    extra = [c for c in hover if c in rows.columns]
    facts = rows.select(
        (pl.col(CP_NS) / 1e9).alias("cp_s"),
        *[pl.col(c).cast(pl.String).fill_null("–") for c in extra],
    )
    facts = facts.with_columns(pl.Series("label", labels))
    last = len(facts.columns) - 1
    template = (
        f"%{{customdata[{last}]}}<br>CP share %{{x:.1%}}"
        "<br>critical time %{customdata[0]:.3g} s"
    )
    for i, column in enumerate(extra, start=1):
        title = "stages" if column == "stage_list" else column.replace("_", " ")
        template += f"<br>{title} %{{customdata[{i}]}}"
    return facts, template


def operator_bars(operator: pl.DataFrame, top: int = 20) -> go.Figure:
    """Horizontal bars of each operator's CP share, one bar per operator.

    Parameters
    ----------
    operator
        ``Summaries.operator``: ``operator, cp_share, cp_ns`` and, when
        present, ``stage_ids, call_site, tasks, median_task_ns`` (hover).
        Several rows of one operator (one per stage) make one bar. The row
        with a null operator (edges outside any stage) is labelled by its
        ``parts`` (:func:`.chart_basics.no_stage_label`).
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
    labels = _operator_labels(rows)
    facts, template = _operator_hover(rows, labels)
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
