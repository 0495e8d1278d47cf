"""Where the tests find the repository and the shared event logs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVENTLOGS = ROOT.parent / "shared" / "eventlogs"
#: The Spark 2.3 log of a small local application that most tests read.
SHARED_LOG = EVENTLOGS / "local-1532512550423"
