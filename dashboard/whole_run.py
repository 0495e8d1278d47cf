"""The live dashboard's "whole run" choice: the closed windows taken together.

A live snapshot already holds one whole-run frame, ``activity_by_window``
of every closed window (the over-time chart). The other summaries are kept
per window; :func:`whole_run_view` finishes them the way the glossary
defines whole-run figures: the mean over the windows that have a path (a
window's CP sums to 1, so CP shares are summed and divided by their
number). The timeline shows the most critical window, picked as the
report picks it (:func:`~sparktrail.engines.profiler.most_critical_window`).

The hints need the whole trace (task facts, driver intervals): once the
snapshot carries the run so far (``ViewState.run``, profiled in the
background by :class:`~sparktrail.engines.run_so_far.RunSoFar` as
``sparktrail profile`` would), the view is that profile, hints, stage
and executor tables included. Before its first profile, the view is the
windows' mean and has no hints (:data:`WHOLE_RUN_HINTS` says so).

The windows' mean is computed when the view is first drawn, reading every
window's frames once (from the store for windows no longer cached).
"""

from __future__ import annotations

import functools

import polars as pl

from sparktrail.engines.profiler import most_critical_window
from sparktrail.summaries import Summaries, n_path_windows

from .live_view import ViewState, WindowFrames, WindowView, utc

__all__ = [
    "WHOLE_RUN",
    "WHOLE_RUN_HINTS",
    "profile_pending",
    "whole_run_frames",
    "whole_run_view",
]

#: The window-picker value of the whole run.
WHOLE_RUN = "whole-run"
#: What the hints table says for the whole run of a live trace.
WHOLE_RUN_HINTS = (
    "the run's hints come with its first whole-run profile (every few "
    "seconds while it runs); pick a window for its hints"
)


def _stack(frames: list[pl.DataFrame]) -> pl.DataFrame:
    kept = [f for f in frames if not f.is_empty()]
    return pl.concat(kept, how="diagonal_relaxed") if kept else pl.DataFrame()


def _spanned(frames: list[pl.DataFrame], parts: list[Summaries]) -> list[pl.DataFrame]:
    """Each window's frame with its shares counted as many times as the
    windows it stands for (a plain stretch's ``span``)."""
    out = []
    for frame, part in zip(frames, parts, strict=True):
        span = n_path_windows(part.windows) if len(part.windows) else 1
        shares = [c for c in frame.columns if c.endswith("share")]
        out.append(frame.with_columns(pl.col(shares) * span) if span > 1 else frame)
    return out


def _by_window_spans(per_window: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Per-window rows with their share counted ``span`` times (as
    :func:`_spanned`, for a frame of many windows)."""
    if per_window.is_empty() or "span" not in windows.columns:
        return per_window
    spans = windows.select("window_start_ns", "span")
    return (
        per_window.join(spans, on="window_start_ns", how="left")
        .with_columns(pl.col("cp_share") * pl.col("span").fill_null(1))
        .drop("span")
    )


def _mean(frame: pl.DataFrame, keys: list[str], n: int, *sums: str) -> pl.DataFrame:
    if frame.is_empty():
        return frame
    present = [c for c in sums if c in frame.columns]
    return (
        frame.group_by(keys)
        .agg(*[pl.col(c).sum() for c in present])
        .with_columns(*[(pl.col(c) / n) for c in present if c.endswith("share")])
        .sort("cp_share", descending=True)
    )


def whole_run_frames(
    views: tuple[WindowView, ...], activity_by_window: pl.DataFrame
) -> WindowFrames:
    """The whole-run summaries of ``views`` and the most critical window's CP.

    Parameters
    ----------
    views
        The closed windows, in time order.
    activity_by_window
        Their ``activity_by_window`` rows, concatenated (the snapshot's).
    """
    parts = [v.summaries for v in views]
    windows = _stack([p.windows for p in parts]).unique("window_start_ns")
    windows = windows.sort("window_start_ns") if len(windows) else windows
    n = n_path_windows(windows) if len(windows) else 1
    activity = _mean(
        _by_window_spans(activity_by_window, windows),
        ["activity"],
        n,
        "cp_share",
        "cp_ns",
    )
    first = parts[0]
    summaries = Summaries(
        activity=activity,
        activity_by_window=activity_by_window,
        straggler=_whole_straggler(parts, n),
        executor=pl.DataFrame(),
        operator=_whole_operator(parts, n),
        communication=_whole_communication(parts, n),
        hints=first.hints.clear(),
        windows=windows,
        window_ns=first.window_ns,
        origin_ns=views[0].start_ns,
    )
    return WindowFrames(summaries, _most_critical_cp(views, summaries))


def _whole_straggler(parts: list[Summaries], n: int) -> pl.DataFrame:
    """The windows' worker rows, averaged over the ``n`` windows with paths."""
    straggler = _mean(
        _stack(_spanned([p.straggler for p in parts], parts)),
        ["worker"],
        n,
        "cp_share",
        "cp_ns",
        "fair_share",
        "busy_ns",
    )
    if "fair_share" in straggler.columns:
        straggler = straggler.with_columns(
            ratio=pl.col("cp_share") / pl.col("fair_share")
        )
    return straggler


def _whole_operator(parts: list[Summaries], n: int) -> pl.DataFrame:
    """The windows' operator rows averaged, each with every window's stages."""
    operators = _stack(_spanned([p.operator for p in parts], parts))
    operator = _mean(operators, ["operator"], n, "cp_share", "cp_ns")
    if "stage_ids" in operators.columns:  # the drill-down: every window's stages
        ids = operators.group_by("operator").agg(
            pl.col("stage_ids").list.explode(keep_nulls=False).unique().sort()
        )
        operator = operator.join(ids, on="operator", how="left", nulls_equal=True)
    return operator


def _whole_communication(parts: list[Summaries], n: int) -> pl.DataFrame:
    """The windows' channel rows, averaged per channel."""
    channels = _stack(_spanned([p.communication for p in parts], parts))
    keys: list[str] = [
        c
        for c in ("src", "dst", "src_executor_id", "dst_executor_id", "kind")
        if c in channels.columns
    ]
    return _mean(channels, keys, n, "cp_share", "cp_ns", "edges")


def _most_critical_cp(
    views: tuple[WindowView, ...], summaries: Summaries
) -> pl.DataFrame | None:
    """The CP rows of the run's most critical window (``None``: none)."""
    cp = None
    busiest = most_critical_window(summaries)
    if busiest is not None:
        for view in views:
            if view.start_ns == busiest[0]:
                cp = view.cp
    return cp


def whole_run_view(snapshot: ViewState) -> WindowView | None:
    """The whole run of ``snapshot`` as one view (``None`` before any window).

    A finished report's one view already is the whole run.
    """
    views = snapshot.windows
    if not views:
        return None
    if not snapshot.live:
        return views[-1]
    start, end = views[0].start_ns, views[-1].end_ns
    label = f"whole run {utc(start)} – {utc(end)} UTC ({len(views)} windows)"
    run = snapshot.run
    if run is not None:
        held = WindowFrames(run, _most_critical_cp(views, run))
        return _WholeRun(start, end, label, lambda: held)
    frames = functools.partial(_cached, views, snapshot.activity_by_window)
    return _WindowsMean(start, end, label, frames)


def profile_pending(view: WindowView) -> bool:
    """Whether ``view`` is the live whole run before its first profile
    (the windows' mean: no hints, no stage or executor tables)."""
    return isinstance(view, _WindowsMean)


class _WholeRun(WindowView):
    """A view whose picker value is :data:`WHOLE_RUN`."""

    @property
    def key(self) -> str:
        """The window-picker value of the whole run."""
        return WHOLE_RUN


class _WindowsMean(_WholeRun):
    """The whole run as the mean of its windows, until it is profiled."""


_last: tuple[tuple[WindowView, ...], WindowFrames] | None = None


def _cached(
    views: tuple[WindowView, ...], activity_by_window: pl.DataFrame
) -> WindowFrames:
    # The last result is kept until the windows change (one redraw reads
    # every window once, not once per figure).
    global _last
    held = _last
    if held is not None and held[0] is views:
        return held[1]
    frames = whole_run_frames(views, activity_by_window)
    _last = (views, frames)
    return frames
