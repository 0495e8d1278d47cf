"""sparktrail: an online critical-path profiler for Apache Spark.

The public Python API; each name lives in its pipeline stage and is
imported on first use (a module ``__getattr__``), so that importing one
stage, or :mod:`sparktrail.errors`, loads no other stage.

>>> import polars as pl, sparktrail
>>> trace = pl.DataFrame({"src_worker": ["exec-1/0"], "dst_worker": ["exec-1/0"],
...     "start_ns": [0], "end_ns": [1_000], "activity": ["processing"]})
>>> sparktrail.critical_participation(trace, window_ns=1_000)["cp"].to_list()
[1.0]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparktrail.dashboard.verdict import verdict
    from sparktrail.engines import Profile, summarize
    from sparktrail.notebook import watch
    from sparktrail.pag import (
        CycleError,
        SnapshotWarning,
        Trace,
        TraceError,
        critical_participation,
        load_trace,
        read_trace,
        snapshot_stats,
        to_networkx,
        write_trace,
    )
    from sparktrail.sources import profile
    from sparktrail.summaries import Summaries
    from sparktrail.tracer import import_trace

__version__ = "0.1.0"

#: Each public name and the stage module that owns it.
_OWNERS = {
    "summarize": "sparktrail.engines",
    "profile": "sparktrail.sources",
    "Profile": "sparktrail.engines",
    "Summaries": "sparktrail.summaries",
    "import_trace": "sparktrail.tracer",
    "verdict": "sparktrail.dashboard.verdict",
    "watch": "sparktrail.notebook",
    **dict.fromkeys(
        (
            "CycleError",
            "SnapshotWarning",
            "Trace",
            "TraceError",
            "critical_participation",
            "load_trace",
            "read_trace",
            "snapshot_stats",
            "to_networkx",
            "write_trace",
        ),
        "sparktrail.pag",
    ),
}

__all__ = [
    "CycleError",
    "Profile",
    "SnapshotWarning",
    "Summaries",
    "Trace",
    "TraceError",
    "__version__",
    "critical_participation",
    "import_trace",
    "load_trace",
    "profile",
    "read_trace",
    "snapshot_stats",
    "summarize",
    "to_networkx",
    "verdict",
    "watch",
    "write_trace",
]


def __getattr__(name: str) -> Any:
    owner = _OWNERS.get(name)
    if owner is None:
        raise AttributeError(f"module 'sparktrail' has no attribute {name!r}")
    value = getattr(importlib.import_module(owner), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
