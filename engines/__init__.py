"""Engines: run the pag and summaries stages over a whole trace, live, or on Spark.

* :mod:`~sparktrail.engines.batch` — :func:`summarize`, a saved trace a
  batch of windows at a time (polars + numba);
* :mod:`~sparktrail.engines.online` — :class:`OnlinePipeline`, windows
  closed as trace files arrive, kept in a :class:`WindowStore`;
* :mod:`~sparktrail.engines.spark` — the same summaries with the CP and
  its sums computed by PySpark (imported on demand: pyspark is optional);
* :mod:`~sparktrail.engines.spark_live` — :class:`SparkLivePipeline`, the
  online pipeline as a Spark Structured Streaming query (on demand too);
* :mod:`~sparktrail.engines.watermark`, :mod:`~sparktrail.engines.checkpoint`,
  :mod:`~sparktrail.engines.open_rows` — what both live engines share: the
  close rule, the checkpoint's fields and checks, the buffer of open rows;
* :mod:`~sparktrail.engines.engine_choice` — :func:`engine_for`, the engine
  ``--engine polars|spark`` names, for ``profile`` and ``live`` alike;
* :mod:`~sparktrail.engines.store` — the on-disk store of closed windows;
* :mod:`~sparktrail.engines.profiler` — :func:`profile`, a run's
  :class:`Profile` (summaries, most critical window), saved between the
  engines and every renderer.

Every engine finishes through
:func:`sparktrail.summaries.summaries_from_partials`, so they give the same
numbers on the same trace. Each name is imported on first use (the
command line reads :mod:`.engine_choice` without polars). Imports go one
way: engines read ``pag`` and ``summaries``; the dashboard and the CLI call
engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparktrail._lazy import lazy_exports

if TYPE_CHECKING:
    from .batch import CHUNK_ROWS, Progress, summarize, window_chunks
    from .online import ClosedWindow, OnlinePipeline, TraceFileWarning
    from .profiler import Profile, profile
    from .store import SUMMARY_FRAMES, StoredWindow, WindowStore, store_dir

_OWNERS = {
    **dict.fromkeys(
        ("CHUNK_ROWS", "Progress", "summarize", "window_chunks"),
        "sparktrail.engines.batch",
    ),
    **dict.fromkeys(
        ("ClosedWindow", "OnlinePipeline", "TraceFileWarning"),
        "sparktrail.engines.online",
    ),
    **dict.fromkeys(("Profile", "profile"), "sparktrail.engines.profiler"),
    **dict.fromkeys(
        ("SUMMARY_FRAMES", "StoredWindow", "WindowStore", "store_dir"),
        "sparktrail.engines.store",
    ),
}

__all__ = [
    "CHUNK_ROWS",
    "SUMMARY_FRAMES",
    "ClosedWindow",
    "OnlinePipeline",
    "Profile",
    "Progress",
    "StoredWindow",
    "TraceFileWarning",
    "WindowStore",
    "profile",
    "store_dir",
    "summarize",
    "window_chunks",
]

__getattr__, __dir__ = lazy_exports(__name__, _OWNERS, globals())
