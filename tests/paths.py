"""Where the tests find the repository and the shared event logs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVENTLOGS = ROOT.parent / "shared" / "eventlogs"
#: The Spark 2.3 log of a small local application that most tests read.
SHARED_LOG = EVENTLOGS / "local-1532512550423"
#: A public Structured Streaming log: Spark 3.1's Kafka word count.
KAFKA_STREAMING_LOG = (
    EVENTLOGS / "public" / "spark" / "spark-events" / "local-1596020211915"
)
#: A public log of failing tasks and lost executors: 8,580 attempts.
FAILING_TASKS_LOG = (
    EVENTLOGS
    / "public"
    / "rapids"
    / "spark-events-profiling"
    / "tasks_executors_fail_compressed_eventlog.zstd"
)
