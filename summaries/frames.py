"""The tables the summaries stage owns: every frame of a ``Summaries``.

Each schema is a mapping ``column -> polars dtype`` in column order (see
:mod:`sparktrail.pag.schemas`). :data:`SUMMARY_SCHEMAS` names them by the
:class:`~sparktrail.summaries.Summaries` field that holds them, in the
order ``sparktrail profile`` writes them; :func:`check_summary_frames`
checks a set of frames against them where summaries are built
(:func:`~sparktrail.summaries.summaries_from_partials`) and loaded from disk
(:meth:`~sparktrail.summaries.Summaries.load`).

Column names that the engines, the dashboard and the CLI read from these
frames are constants here (:data:`CP_SHARE`, ...); the window bounds are
the CP table's (:data:`~sparktrail.pag.schemas.WINDOW_START_NS`).

Assumptions
-----------
* Counts of distinct things (``slots``, ``tasks``) are ``UInt32``, the
  dtype polars' ``n_unique`` and ``len`` give; other counts are ``Int64``.
* A check compares schemas only, never data (cheap for any size).

>>> SUMMARY_FRAMES[:2]
('activity', 'activity_by_window')
>>> ACTIVITY[CP_SHARE]
Float64
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from sparktrail.pag.schemas import (
    ACTIVITY as ACTIVITY_COLUMN,
)
from sparktrail.pag.schemas import (
    WINDOW_END_NS,
    WINDOW_START_NS,
    Schema,
    SchemaError,
    check_frame,
)

from .stage_stats import EXECUTOR_STATS, STAGE_STATS

__all__ = [
    "ACTIVITY",
    "ACTIVITY_BY_WINDOW",
    "COMMUNICATION",
    "CP_NS",
    "CP_SHARE",
    "CP_TOTAL",
    "EXECUTOR",
    "EXECUTORS",
    "FAIR_SHARE",
    "HAS_PATHS",
    "HINTS",
    "OLDER_SHARE_OF",
    "OPERATOR",
    "OPTIONAL_FRAMES",
    "RATIO",
    "STAGES",
    "STRAGGLER",
    "SUMMARY_FRAMES",
    "SUMMARY_SCHEMAS",
    "TIME_NS",
    "WINDOWS",
    "SchemaError",
    "check_summary_frames",
    "with_parts",
    "with_share_of",
]

#: Share of the whole critical path (CP summed over windows with paths,
#: divided by their number).
CP_SHARE = "cp_share"
#: Critical time: CP x window length, summed.
CP_NS = "cp_ns"
#: Time spent, on the critical path or not.
TIME_NS = "time_ns"
FAIR_SHARE = "fair_share"
RATIO = "ratio"
HAS_PATHS = "has_paths"
CP_TOTAL = "cp_total"
#: How many windows of the run a row of the windows frame stands for: 1, or
#: a merged stretch's length (:func:`~sparktrail.pag.windows.plain_stretches`).
SPAN = "span"

_WINDOW: Schema = {WINDOW_START_NS: pl.Int64(), WINDOW_END_NS: pl.Int64()}

#: CP by activity type (:mod:`~sparktrail.summaries.activity`).
ACTIVITY: Schema = {
    ACTIVITY_COLUMN: pl.String(),
    CP_SHARE: pl.Float64(),
    CP_NS: pl.Float64(),
    TIME_NS: pl.Int64(),
}
#: The same per window with paths.
ACTIVITY_BY_WINDOW: Schema = {**_WINDOW, **ACTIVITY}
#: CP by worker (timeline) against its fair share
#: (:mod:`~sparktrail.summaries.straggler`).
STRAGGLER: Schema = {
    "worker": pl.String(),
    "executor": pl.String(),
    CP_SHARE: pl.Float64(),
    CP_NS: pl.Float64(),
    "busy_ns": pl.Int64(),
    FAIR_SHARE: pl.Float64(),
    "windows_active": pl.Int64(),
    RATIO: pl.Float64(),
}
#: CP by executor, its slots summed.
EXECUTOR: Schema = {
    "executor_id": pl.String(),
    "role": pl.String(),
    "slots": pl.UInt32(),
    CP_SHARE: pl.Float64(),
    CP_NS: pl.Float64(),
    "busy_ns": pl.Int64(),
    FAIR_SHARE: pl.Float64(),
    RATIO: pl.Float64(),
}
#: CP by operator, its stages the drill-down (:mod:`~sparktrail.summaries.operator`).
OPERATOR: Schema = {
    "operator": pl.String(),
    "stage_id": pl.Int64(),
    "stages": pl.UInt32(),
    "stage_ids": pl.List(pl.Int64()),
    "name": pl.String(),
    "call_site": pl.String(),
    "job_id": pl.Int64(),
    CP_SHARE: pl.Float64(),
    CP_NS: pl.Float64(),
    TIME_NS: pl.Int64(),
    "tasks": pl.UInt32(),
    "records": pl.Int64(),
    "bytes": pl.Int64(),
    "shuffle_write_bytes": pl.Int64(),
    "median_task_ns": pl.Float64(),
    # The row outside any stage: its activities and their shares
    # (:func:`~sparktrail.summaries.operator.with_no_stage_parts`).
    "parts": pl.List(pl.Struct({"activity": pl.String(), CP_SHARE: pl.Float64()})),
}
#: CP by executor-level channel (:mod:`~sparktrail.summaries.communication`).
COMMUNICATION: Schema = {
    "src": pl.String(),
    "dst": pl.String(),
    "src_executor_id": pl.String(),
    "dst_executor_id": pl.String(),
    "kind": pl.String(),
    CP_SHARE: pl.Float64(),
    CP_NS: pl.Float64(),
    "edges": pl.Int64(),
    "note": pl.String(),
}
#: Rebalancing hints (:mod:`~sparktrail.summaries.hints`); ``evidence`` is
#: a JSON object.
HINTS: Schema = {
    "kind": pl.String(),
    "severity": pl.String(),
    "stage_id": pl.Int64(),
    "executor_id": pl.String(),
    "partition": pl.Int64(),
    CP_SHARE: pl.Float64(),
    "predicted_saving_ns": pl.Float64(),
    "saving_share": pl.Float64(),
    # what saving_share is a share of (hints.hint.SHARE_OF)
    "share_of": pl.String(),
    "occurrences": pl.Int64(),
    "evidence": pl.String(),
    "action": pl.String(),
}
#: What a hints frame saved by an older sparktrail, without the
#: ``share_of`` column, meant by a hint's saving, by kind (else ``run``).
OLDER_SHARE_OF: Mapping[str, str] = {
    "idle_capacity": "slot_time",
    "stream_backlog": "input",
    "trigger_bound": "trigger",
}


def with_parts(operator: pl.DataFrame) -> pl.DataFrame:
    """An operator frame saved by an older sparktrail with its ``parts``
    column (null: the breakdown was not saved).

    >>> with_parts(pl.DataFrame({"operator": [None]}))["parts"].to_list()
    [None]
    """
    if "parts" in operator.columns:
        return operator
    return operator.with_columns(pl.lit(None, dtype=OPERATOR["parts"]).alias("parts"))


def with_share_of(hints: pl.DataFrame) -> pl.DataFrame:
    """A hints frame saved by an older sparktrail with its ``share_of``
    column, read from each hint's kind (:data:`OLDER_SHARE_OF`).

    >>> old = pl.DataFrame({"kind": ["idle_capacity", "spill"]})
    >>> with_share_of(old)["share_of"].to_list()
    ['slot_time', 'run']
    """
    if "share_of" in hints.columns:
        return hints
    share_of = (
        pl.col("kind")
        .replace_strict(dict(OLDER_SHARE_OF), default="run", return_dtype=pl.String)
        .alias("share_of")
    )
    frame = hints.with_columns(share_of)
    order = [c for c in HINTS if c in frame.columns]
    return frame.select(order + [c for c in frame.columns if c not in order])


#: One row per window (:func:`~sparktrail.summaries.window_stats`).
WINDOWS: Schema = {
    **_WINDOW,
    "edges": pl.Int64(),
    CP_TOTAL: pl.Float64(),
    HAS_PATHS: pl.Boolean(),
    "active_workers": pl.Int64(),
    "active_executors": pl.Int64(),
    SPAN: pl.Int64(),
}

#: One row per stage, like the Spark UI's stage table, with its CP share
#: (:func:`~sparktrail.summaries.stage_stats.stage_stats`).
STAGES: Schema = dict(STAGE_STATS)
#: One row per executor, like the Spark UI's executor table, with its CP
#: share (:func:`~sparktrail.summaries.stage_stats.executor_stats`).
EXECUTORS: Schema = dict(EXECUTOR_STATS)
#: Frames a folder written by an older sparktrail lacks; they load empty.
OPTIONAL_FRAMES = ("stages", "executors")

#: The frames of :class:`~sparktrail.summaries.Summaries` by field name, in
#: the order ``sparktrail profile`` writes them.
SUMMARY_SCHEMAS: Mapping[str, Schema] = {
    "activity": ACTIVITY,
    "activity_by_window": ACTIVITY_BY_WINDOW,
    "straggler": STRAGGLER,
    "executor": EXECUTOR,
    "operator": OPERATOR,
    "communication": COMMUNICATION,
    "hints": HINTS,
    "windows": WINDOWS,
    "stages": STAGES,
    "executors": EXECUTORS,
}
#: Their names.
SUMMARY_FRAMES = tuple(SUMMARY_SCHEMAS)


def check_summary_frames(frames: Mapping[str, pl.DataFrame], where: str = "") -> None:
    """Check each frame of ``frames`` against its schema in :data:`SUMMARY_SCHEMAS`.

    ``where`` (a folder, say) prefixes the table names in messages.

    Raises
    ------
    SchemaError
        For the first frame whose columns or dtypes differ, naming it and
        the column.

    Examples
    --------
    >>> check_summary_frames({"activity": pl.DataFrame(schema=ACTIVITY)})
    >>> bad = pl.DataFrame(schema={**ACTIVITY, CP_SHARE: pl.Int64()})
    >>> try:
    ...     check_summary_frames({"activity": bad}, "out/")
    ... except SchemaError as err:
    ...     print(err.table, err.column, err.expected, err.found)
    out/activity cp_share Float64 Int64
    """
    for name, frame in frames.items():
        check_frame(frame, SUMMARY_SCHEMAS[name], f"{where}{name}")
