"""sparktrail: an online critical-path profiler for Apache Spark.

The public Python API; each name lives in its pipeline stage.

>>> import polars as pl, sparktrail
>>> trace = pl.DataFrame({"src_worker": ["exec-1/0"], "dst_worker": ["exec-1/0"],
...     "start_ns": [0], "end_ns": [1_000], "activity": ["processing"]})
>>> sparktrail.critical_participation(trace, window_ns=1_000)["cp"].to_list()
[1.0]
"""

from sparktrail.engines import summarize
from sparktrail.pag import (
    CycleError,
    SnapshotWarning,
    Trace,
    TraceError,
    critical_participation,
    load_trace,
    read_trace,
    snapshot_stats,
    write_trace,
)
from sparktrail.summaries import Summaries

__version__ = "0.1.0"

__all__ = [
    "CycleError",
    "SnapshotWarning",
    "Summaries",
    "Trace",
    "TraceError",
    "__version__",
    "critical_participation",
    "load_trace",
    "read_trace",
    "snapshot_stats",
    "summarize",
    "write_trace",
]
