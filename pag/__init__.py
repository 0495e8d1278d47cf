"""Program Activity Graphs: trace I/O, windowed snapshots and critical participation.

This stage never imports Spark or the tracer; it reads the Arrow trace files
that the tracer (or any producer) writes.
"""

from .participation import (
    CycleError,
    critical_participation,
    snapshot_stats,
    to_networkx,
)
from .snapshot import SnapshotWarning
from .trace import Trace, TraceError, load_trace, read_trace, write_trace

__all__ = [
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
]
