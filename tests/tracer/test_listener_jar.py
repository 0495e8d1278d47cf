"""The listener jar (``sparktrail listener-jar``) in drivers without sparktrail.

Two real JVM-only drivers run the installed pyspark's own scripts with the
jar on ``--jars``: ``bin/spark-sql -e`` and a Spark Connect server
(``sbin/start-connect-server.sh``) driven by a Python Connect client in a
subprocess. Neither driver has sparktrail's Python; ``sparktrail profile
TRACE_DIR`` then reads the raw log the listener left under ``raw/``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sparktrail.cli import main
from sparktrail.tracer import jvm

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("javac") is None and not os.environ.get("JAVA_HOME"),
        reason="no JDK",
    ),
]

QUERY = "SELECT k, count(*) FROM (SELECT id % 7 AS k FROM range(200000)) GROUP BY k"


def spark_home() -> Path:
    pyspark = pytest.importorskip("pyspark")
    return Path(pyspark.__file__).resolve().parent


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    assert found, "a JDK without java"
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_env(tmp: Path) -> dict[str, str]:
    """The environment of pyspark's scripts: its package dir as SPARK_HOME,
    logs and pid files in ``tmp``."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOG_DIR=str(tmp),
        SPARK_PID_DIR=str(tmp),
        SPARK_IDENT_STRING="sparktrail-test",
        SPARK_LOCAL_IP="127.0.0.1",
    )
    env.pop("SPARK_CONF_DIR", None)
    return env


def listener_flags(jar: Path, trace: Path) -> list[str]:
    return [
        "--jars",
        str(jar),
        "--conf",
        f"spark.extraListeners={jvm.CLASS_NAME}",
        "--conf",
        f"spark.sparktrail.traceDir={trace.as_uri()}",
    ]


def profile_operators(trace: Path, out: Path) -> list[str]:
    """``sparktrail profile TRACE_DIR -o OUT``; the operators it found."""
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["profile", str(trace), "-o", str(out)])
    assert code == 0
    operators = pl.read_parquet(out / "summaries" / "operator.parquet")
    return [op for op in operators["operator"].to_list() if op]


def finished_log(trace: Path, timeout: float = 60.0) -> Path:
    """The raw log dir once its ``appstatus_<app>`` marker says it is complete."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in (trace / "raw").glob("eventlog_v2_*"):
            app = log.name.removeprefix("eventlog_v2_")
            if (log / f"appstatus_{app}").exists():
                return log
        time.sleep(0.2)
    raise AssertionError(f"no finished raw log under {trace}/raw")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``sparktrail listener-jar -o DIR``: the jar and the flags it printed."""
    where = tmp_path_factory.mktemp("jar")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["listener-jar", "-o", str(where), "--trace-dir", "s3a://b/t"])
    assert code == 0
    return where / jvm.JAR_NAME, printed.getvalue().strip()


def test_the_jar_holds_the_listener_and_names_its_versions(
    built: tuple[Path, str],
) -> None:
    jar, flags = built
    assert flags == (
        f"--jars {jar} --conf spark.extraListeners=dev.sparktrail.SparktrailListener"
        " --conf spark.sparktrail.traceDir=s3a://b/t"
    )
    with zipfile.ZipFile(jar) as archive:
        names = archive.namelist()
        manifest = archive.read("META-INF/MANIFEST.MF").decode()
    # the listener's classes and nothing else: Spark's jars are the driver's
    assert names[:2] == ["META-INF/", "META-INF/MANIFEST.MF"]
    assert "dev/sparktrail/SparktrailListener.class" in names
    assert all(n.startswith(("META-INF/", "dev/sparktrail/")) for n in names)
    attributes = dict(
        line.split(": ", 1) for line in manifest.splitlines() if ": " in line
    )
    import pyspark

    assert attributes["Sparktrail-Spark-Version"] == pyspark.__version__
    scala = attributes["Sparktrail-Scala-Version"]
    assert (spark_home() / "jars" / f"scala-library-{scala}.jar").is_file()


LOG4J = textwrap.dedent(
    """
    rootLogger.level = warn
    rootLogger.appenderRef.stderr.ref = console
    appender.console.type = Console
    appender.console.name = console
    appender.console.target = SYSTEM_ERR
    appender.console.layout.type = PatternLayout
    appender.console.layout.pattern = %p %c: %m%n
    """
)


def run_main(
    jar: Path, tmp: Path, properties: list[str], dirs: list[str]
) -> subprocess.CompletedProcess[str]:
    """The listener's ``main``: prints the versions, starts a listener per dir."""
    config = tmp / "log4j2.properties"
    config.write_text(LOG4J)
    classpath = f"{jar}{os.pathsep}{spark_home() / 'jars' / '*'}"
    return subprocess.run(
        [
            java(),
            f"-Dlog4j2.configurationFile={config}",
            *properties,
            "-cp",
            classpath,
            jvm.CLASS_NAME,
            *dirs,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_driver_of_another_spark_version_gets_one_warning(
    built: tuple[Path, str], tmp_path: Path
) -> None:
    import pyspark

    jar, _ = built
    # GIVEN the jar as if built for Spark 3.5.1 (the property stands in for
    # the manifest), WHEN two listeners start in this Spark's JVM
    dirs = [str(tmp_path / "a"), (tmp_path / "b").as_uri()]
    other = run_main(jar, tmp_path, ["-Dsparktrail.builtFor.spark=3.5.1"], dirs)
    assert other.returncode == 0, other.stderr[-3000:]
    # THEN one warning names both versions, and both still write their log
    warnings = [
        line for line in other.stderr.splitlines() if "was built for Spark" in line
    ]
    assert len(warnings) == 1, other.stderr[-3000:]
    assert warnings[0].startswith("WARN dev.sparktrail.SparktrailListener: ")
    assert "built for Spark 3.5.1 (Scala " in warnings[0]
    assert f"this driver runs Spark {pyspark.__version__}" in warnings[0]
    assert "sparktrail listener-jar" in warnings[0]
    for name in ("a", "b"):
        (log,) = (tmp_path / name / "raw").glob("eventlog_v2_*")
        assert any(p.name.startswith("appstatus_") for p in log.iterdir())
    # and the jar as built, in the Spark it was built for, warns of nothing
    same = run_main(jar, tmp_path, [], [str(tmp_path / "c")])
    assert same.returncode == 0, same.stderr[-3000:]
    assert f"built for Spark {pyspark.__version__}" in same.stdout
    assert "was built for Spark" not in same.stderr


def test_spark_sql_without_sparktrail_is_profiled(
    built: tuple[Path, str], tmp_path: Path
) -> None:
    jar, _ = built
    trace = tmp_path / "trace"
    # GIVEN a JVM-only application: pyspark's spark-sql with the jar
    done = subprocess.run(
        [
            str(spark_home() / "bin" / "spark-sql"),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=4",
            *listener_flags(jar, trace),
            "-e",
            QUERY,
        ],
        cwd=tmp_path,  # its metastore_db and warehouse
        env=spark_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = dict(tuple(map(int, line.split())) for line in done.stdout.splitlines())
    assert counts == {k: 28572 if k < 3 else 28571 for k in range(7)}
    # THEN its trace dir holds only the raw log, complete at exit
    log = finished_log(trace, timeout=5)
    assert not list(trace.glob("*.arrow"))
    assert not any(p.name.startswith(".") for p in log.iterdir())
    # AND sparktrail profile TRACE_DIR reads it: the query's aggregation
    operators = profile_operators(trace, tmp_path / "profile")
    assert any(
        "HashAggregate(keys=[k], functions=[count(1)])" in op for op in operators
    ), operators
    assert any("partial_count(1)" in op for op in operators), operators


CLIENT = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{sys.argv[1]}").getOrCreate()
    a = spark.range(100_000).selectExpr("id % 11 AS k", "id AS v")
    print(len(a.groupBy("k").sum("v").collect()))
    b = spark.range(1_000).selectExpr("id % 11 AS k", "id AS w")
    print(len(a.join(b, "k").groupBy("k").count().collect()))
    spark.stop()
    """
)


def wait_started(log_dir: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for out in log_dir.glob("*.out"):
            text = out.read_text(errors="replace")
            if "Spark Connect server started at" in text:
                return
            if "Exception in thread" in text or "ERROR SparkContext" in text:
                raise AssertionError(f"Connect server failed:\n{text[-4000:]}")
        time.sleep(0.3)
    logs = "\n".join(p.read_text(errors="replace")[-4000:] for p in log_dir.glob("*"))
    raise AssertionError(f"Connect server did not start in {timeout} s:\n{logs}")


@pytest.mark.skipif(
    importlib.util.find_spec("grpc") is None,
    reason="the Spark Connect client needs pyspark[connect] (grpcio, grpcio-status)",
)
def test_a_spark_connect_servers_queries_are_profiled(
    built: tuple[Path, str], tmp_path: Path
) -> None:
    jar, _ = built
    trace, logs = tmp_path / "trace", tmp_path / "logs"
    logs.mkdir()
    port = free_port()
    env = spark_env(logs)
    sbin = spark_home() / "sbin"
    # GIVEN a Spark Connect server with the jar, bound to 127.0.0.1
    started = subprocess.run(
        [
            str(sbin / "start-connect-server.sh"),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            *listener_flags(jar, trace),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    client: subprocess.CompletedProcess[str] | None = None
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        wait_started(logs)
        # WHEN a Connect client (its own process) runs a group-by and a join
        client_env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
        client = subprocess.run(
            [sys.executable, "-c", CLIENT, str(port)],
            env=client_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        subprocess.run(
            [str(sbin / "stop-connect-server.sh")],
            env=env,
            capture_output=True,
            timeout=90,
            check=False,
        )
    assert client is not None and client.returncode == 0, client and client.stderr
    assert client.stdout.split() == ["11", "11"]
    # THEN the stopped server's raw log is complete and profile shows both
    finished_log(trace)
    operators: list[Any] = profile_operators(trace, tmp_path / "profile")
    assert any("functions=[sum(v)]" in op for op in operators), operators
    assert any("Join [k], [k], Inner" in op for op in operators), operators


def test_a_trace_dir_without_its_filesystem_is_one_clear_error(
    built: tuple[Path, str], tmp_path: Path
) -> None:
    # GIVEN an s3a: trace directory and no hadoop-aws in Spark's jars
    jar, _ = built
    if any((spark_home() / "jars").glob("hadoop-aws-*.jar")):
        pytest.skip("this Spark ships hadoop-aws")
    # WHEN the listener starts THEN it fails at once, naming the directory
    done = run_main(jar, tmp_path, [], ["s3a://bucket/trace"])
    assert done.returncode != 0
    assert (
        "sparktrail cannot write the trace directory s3a://bucket/trace" in done.stderr
    )
    assert "S3AFileSystem not found" in done.stderr
