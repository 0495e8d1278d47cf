"""Activity summary: how much of the critical path each activity type takes.

A row per activity type: ``cp_share`` (its CP summed over the windows with
paths, divided by their number, so shares sum to 1 over a run that has
paths), ``cp_ns`` (critical time: CP x window length, summed) and
``time_ns`` (time all timelines spent in it, on the path or not).
"""

from __future__ import annotations

import polars as pl

from sparktrail.pag.query_engine import collect

from .run_shares import WINDOW, Frame, path_windows, whole_run, with_paths

__all__ = ["activity_from_partial", "activity_partial", "activity_summary"]


def activity_partial(cp: Frame) -> Frame:
    """Per (window, activity) sums of a CP table: what the summary adds up.

    ``window_start_ns, window_end_ns, activity, cp_share, cp_ns, time_ns``
    for every window of ``cp``; partials of disjoint sets of windows
    concatenate into the partial of their union.
    """
    window_ns = pl.col("window_end_ns") - pl.col("window_start_ns")
    return cp.group_by(*WINDOW, "activity").agg(
        pl.col("cp").sum().alias("cp_share"),
        (pl.col("cp") * window_ns).sum().cast(pl.Float64).alias("cp_ns"),
        pl.col("weight_ns").sum().alias("time_ns"),
    )


def activity_summary(cp: pl.DataFrame, *, by_window: bool = False) -> pl.DataFrame:
    """CP by activity type, for the whole run or per window with paths.

    Parameters
    ----------
    cp
        The CP table of :func:`~sparktrail.pag.critical_participation`.
    by_window
        One row per (window, activity) for windows with paths, with
        ``window_start_ns, window_end_ns``; else one row per activity.

    Returns
    -------
    polars.DataFrame
        ``activity, cp_share, cp_ns, time_ns``, largest share first.

    Examples
    --------
    >>> from sparktrail.pag import critical_participation
    >>> t = pl.DataFrame({"src_worker": ["a", "a"], "dst_worker": ["a", "a"],
    ...     "start_ns": [0, 3], "end_ns": [3, 4], "activity": ["processing", "gc"]})
    >>> activity_summary(critical_participation(t, 4))["cp_share"].to_list()
    [0.75, 0.25]
    """
    return activity_from_partial(
        activity_partial(cp), path_windows(cp), by_window=by_window
    )


def activity_from_partial(
    partial: pl.DataFrame, windows: pl.DataFrame, *, by_window: bool = False
) -> pl.DataFrame:
    """The activity summary from :func:`activity_partial` and the windows.

    ``windows`` says which windows have a path (``window_start_ns,
    has_paths``, as :func:`~sparktrail.summaries.window_stats` gives).
    """
    if by_window:
        return with_paths(partial, windows).sort(
            ["window_start_ns", "cp_share", "activity"], descending=[False, True, False]
        )
    # One query, collected at the end (each eager step would be one).
    per_window = with_paths(partial.lazy(), windows.lazy())
    everything = partial.lazy().group_by("activity").agg(pl.col("time_ns").sum())
    run = whole_run(per_window.drop("time_ns"), ["activity"], ["cp_share"], windows)
    query = (
        everything.join(run, on="activity", how="left")
        .select(
            "activity",
            pl.col("cp_share").fill_null(0.0),
            pl.col("cp_ns").fill_null(0.0),
            "time_ns",
        )
        .sort(
            [pl.col("cp_share").round(9), "time_ns", "activity"],
            descending=[True, True, False],
        )
    )
    return collect(query, len(partial))
