"""``sparktrail demo``: run a real local Spark workload, traced live."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from sparktrail.pag import read_trace


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run a small real Spark workload and trace it live",
        description="Start local Spark, attach the live tracer, run workloads "
        "with a known straggler and a skewed join; the trace is ready to profile.",
    )
    parser.add_argument(
        "-o", "--out", default=".run/demo", help="trace directory (replaced)"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master URL")
    parser.set_defaults(run=run)


def _session(master: str) -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName("sparktrail-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # Let the skewed join show its skew: no adaptive skew handling and no
        # broadcast of its small side (which would avoid the shuffle).
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .getOrCreate()
    )


def run(args: argparse.Namespace) -> int:
    from sparktrail.tracer import attach, detach
    from sparktrail.workloads import WORKLOADS

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    print(f"starting Spark ({args.master}) ...", flush=True)
    spark = _session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        attach(spark, out)
        for name, workload in WORKLOADS.items():
            start = time.perf_counter()
            workload(spark)
            print(f"  ran {name} in {time.perf_counter() - start:.1f} s", flush=True)
        stats = detach(spark)
        print(f"traced live: {stats}", flush=True)
    finally:
        spark.stop()
    rows = len(read_trace(out))
    print(f"trace: {out} ({rows} rows); profile it with")
    print(f"  sparktrail profile {out} --window 1s -o {out.parent / 'profile'}")
    return 0
