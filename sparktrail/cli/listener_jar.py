"""``sparktrail listener-jar -o PATH``: the live listener as a jar for any driver.

It compiles sparktrail's Java listener (``dev.sparktrail.SparktrailListener``)
with the JDK against the installed pyspark's jars (or ``$SPARK_HOME/jars``)
into one jar that needs nothing beyond Spark's own jars, and prints the
flags that install it in a driver without sparktrail's Python
(``spark-submit``, ``spark-sql``, a Spark Connect server, a Scala or Java
application)::

    --jars PATH --conf spark.extraListeners=dev.sparktrail.SparktrailListener
    --conf spark.sparktrail.traceDir=DIR

The driver writes the raw event log under ``DIR/raw/`` (any Hadoop
filesystem URI it can write: ``file:``, ``hdfs:``, ``s3a:``); ``sparktrail
profile DIR`` reads it. The flags go to stdout on one line, what the jar
was built for to stderr.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from sparktrail.tracer.jvm import JAR_NAME, build_listener_jar

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``listener-jar`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "listener-jar",
        help="build the live listener as a jar for spark-submit, spark-sql, Connect",
        description=(
            "Compile sparktrail's Spark listener against the installed Spark's "
            "jars into a self-contained jar and print the flags that install it "
            "(--jars, spark.extraListeners, spark.sparktrail.traceDir). Needs a JDK."
        ),
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path(JAR_NAME),
        help=f"the jar to write, or a directory for {JAR_NAME} (default: ./{JAR_NAME})",
    )
    parser.add_argument(
        "--trace-dir",
        default="DIR",
        help="trace directory to put in the printed flags: a path on the driver "
        "or a Hadoop URI (file:, hdfs:, s3a:) (default: the placeholder DIR)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Build the jar, print its flags."""
    jar = build_listener_jar(args.output)
    print(
        f"sparktrail: wrote {jar.path} (built for Spark {jar.spark_version}, "
        f"Scala {jar.scala_version}); install it in a driver with:",
        file=sys.stderr,
    )
    print(shlex.join(jar.flags(args.trace_dir)))
    return 0
