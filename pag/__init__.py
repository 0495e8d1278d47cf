"""Program Activity Graphs: trace I/O, windowed snapshots and critical participation.

This stage never imports Spark or the tracer; it reads the Arrow trace files
that the tracer (or any producer) writes. Each name is imported on first
use: :mod:`.schemas` and the constants load without numba or polars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparktrail._lazy import lazy_exports

if TYPE_CHECKING:
    from .participation import (
        CycleError,
        critical_participation,
        snapshot_stats,
        to_networkx,
    )
    from .snapshot import SnapshotWarning
    from .trace import Trace, TraceError, load_trace, read_trace, write_trace

_OWNERS = {
    **dict.fromkeys(
        ("CycleError", "critical_participation", "snapshot_stats", "to_networkx"),
        "sparktrail.pag.participation",
    ),
    "SnapshotWarning": "sparktrail.pag.snapshot",
    **dict.fromkeys(
        ("Trace", "TraceError", "load_trace", "read_trace", "write_trace"),
        "sparktrail.pag.trace",
    ),
}

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

__getattr__, __dir__ = lazy_exports(__name__, _OWNERS, globals())
