"""Turning Spark applications into activity traces (the first pipeline stage).

:func:`import_eventlog` reads a Spark event log (a file or a rolling
directory, in any codec Spark writes) and returns its trace (DESIGN §3, §5);
:func:`import_trace` returns it with the application's context;
:func:`follow_eventlog` does the same for a log that is still being written,
one trace file per batch (:mod:`.importer`). Each takes a local path or a
URI (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``, ``http(s)://``) read
through fsspec (:mod:`.remote`). :func:`attach` traces a live SparkSession
(:mod:`.listener`).

Each name is imported on first use, so that :mod:`.remote` or :mod:`.jvm`
(what the command line's parsers need) load without polars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparktrail._lazy import lazy_exports

if TYPE_CHECKING:
    from .eventlog import EventLogError, EventLogWarning
    from .fields import EventError
    from .importer import (
        follow_eventlog,
        import_eventlog,
        import_trace,
        time_census,
        trace_name,
    )
    from .listener import attach, detach, spark_conf
    from .outliers import SetAsideWarning
    from .spark_model import ImportStats

_OWNERS = {
    "EventError": "sparktrail.tracer.fields",
    "EventLogError": "sparktrail.tracer.eventlog",
    "EventLogWarning": "sparktrail.tracer.eventlog",
    "ImportStats": "sparktrail.tracer.spark_model",
    "SetAsideWarning": "sparktrail.tracer.outliers",
    **dict.fromkeys(
        (
            "follow_eventlog",
            "import_eventlog",
            "import_trace",
            "time_census",
            "trace_name",
        ),
        "sparktrail.tracer.importer",
    ),
    **dict.fromkeys(("attach", "detach", "spark_conf"), "sparktrail.tracer.listener"),
}

__all__ = [
    "EventError",
    "EventLogError",
    "EventLogWarning",
    "ImportStats",
    "SetAsideWarning",
    "attach",
    "detach",
    "follow_eventlog",
    "import_eventlog",
    "import_trace",
    "spark_conf",
    "time_census",
    "trace_name",
]

__getattr__, __dir__ = lazy_exports(__name__, _OWNERS, globals())
