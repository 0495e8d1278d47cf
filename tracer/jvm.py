"""Building and loading the Java half of the live bridge (``SparktrailListener``).

The listener is shipped as source (``tracer/java/SparktrailListener.java``)
and compiled on first use with the JDK's ``javac`` against the jars of the
installed pyspark, so it always matches the Spark it runs in and no jar is
committed. The classes are cached per Spark version and source hash:
``$SPARKTRAIL_CACHE/listener/<spark>-<sha12>/`` (default cache root
``$XDG_CACHE_HOME/sparktrail`` or ``~/.cache/sparktrail``).

:func:`build_listener_jar` packs the same classes into a jar for drivers
without sparktrail's Python (``spark-submit``, ``spark-sql``, a Spark
Connect server, a Scala or Java application): ``--jars`` it with
``spark.extraListeners`` and ``spark.sparktrail.traceDir``. It needs nothing
beyond Spark's own jars; its manifest records the Spark and Scala versions
it was compiled against, and the listener logs one warning on a driver of
another Spark version.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparktrail.errors import SparktrailError

__all__ = [
    "CLASS_NAME",
    "JAR_NAME",
    "JavaNotFoundError",
    "ListenerJar",
    "build_listener_jar",
    "cache_root",
    "find_javac",
    "listener_classes",
    "load_listener_class",
    "pyspark_jars",
]

#: Fully qualified name of the listener class.
CLASS_NAME = "dev.sparktrail.SparktrailListener"
SOURCE = Path(__file__).resolve().parent / "java" / "SparktrailListener.java"
_CLASS_FILE = Path(*CLASS_NAME.split(".")).with_suffix(".class")
#: File name :func:`build_listener_jar` writes by default.
JAR_NAME = "sparktrail-listener.jar"
#: Manifest attributes naming the versions the jar was built against (the
#: Java listener reads them back: ``SPARK_VERSION_ATTRIBUTE``, ...).
SPARK_VERSION_ATTRIBUTE = "Sparktrail-Spark-Version"
SCALA_VERSION_ATTRIBUTE = "Sparktrail-Scala-Version"
_SPARK_CORE = re.compile(r"^spark-core_(\d+\.\d+)-(.+)\.jar$")
_SCALA_LIBRARY = re.compile(r"^scala-library-(\d.*)\.jar$")

# One class loader per JVM gateway and classes dir: a new loader per attach
# would define the class again each time.
_LOADERS: dict[tuple[int, str], Any] = {}


class JavaNotFoundError(SparktrailError, RuntimeError):
    """No JDK ``javac`` to build the listener with (the message says how to get one)."""


def cache_root() -> Path:
    """Root of sparktrail's cache: ``$SPARKTRAIL_CACHE``, else the user cache."""
    env = os.environ.get("SPARKTRAIL_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "sparktrail"


def find_javac() -> Path:
    """Find ``javac``: ``$JAVA_HOME/bin/javac`` first, then ``PATH``.

    Raises
    ------
    JavaNotFoundError
        If neither has one; the message says how to install a JDK.
    """
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "javac"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("javac")
    if found:
        return Path(found)
    where = f"JAVA_HOME={home} has no bin/javac and " if home else ""
    raise JavaNotFoundError(
        "sparktrail's live bridge compiles a small Java listener on first use, "
        f"but no javac was found ({where}none is on PATH). Install a JDK 17 or "
        "newer (a JRE is not enough), e.g. `apt-get install openjdk-17-jdk-headless`"
        ", `brew install openjdk@17` or `conda install -c conda-forge openjdk=17`, "
        "and put its bin/ on PATH or set JAVA_HOME."
    )


def pyspark_jars() -> Path:
    """The jars the Spark runtime uses: ``$SPARK_HOME/jars``, else pyspark's own.

    Raises
    ------
    RuntimeError
        If neither exists.
    """
    home = os.environ.get("SPARK_HOME")
    candidates = [Path(home) / "jars"] if home else []
    try:
        import pyspark

        candidates.append(Path(pyspark.__file__).resolve().parent / "jars")
    except ImportError:
        pass
    for path in candidates:
        if path.is_dir() and any(path.glob("spark-core_*.jar")):
            return path
    raise RuntimeError(
        "no Spark jars found (looked in $SPARK_HOME/jars and pyspark/jars); "
        "install pyspark (`pip install 'sparktrail[spark]'`)"
    )


def _spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def _run_javac(javac: Path, jars: Path, out: Path) -> None:
    """Compile the listener into ``out`` (a seam for tests)."""
    command = [
        str(javac),
        "--release",
        "17",
        "-nowarn",
        "-cp",
        str(jars / "*"),
        "-d",
        str(out),
        str(SOURCE),
    ]
    import subprocess  # not at import: the command line's parsers read this module

    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"javac could not compile {SOURCE.name} against {jars} "
            f"(exit {done.returncode}):\n{done.stderr.strip()}"
        )


def listener_classes(spark_version: str | None = None) -> Path:
    """Compile the listener (once per Spark version and source) and return its dir.

    Parameters
    ----------
    spark_version
        Version the cache entry is named for; default: the installed
        pyspark's. The classes are compiled against :func:`pyspark_jars`.

    Returns
    -------
    pathlib.Path
        A directory to put on a class path (holds ``dev/sparktrail/*.class``).

    Raises
    ------
    JavaNotFoundError
        If it must compile and there is no ``javac``.
    RuntimeError
        If ``javac`` fails (its output is in the message).
    """
    import hashlib

    version = spark_version or _spark_version()
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    target = cache_root() / "listener" / f"{version}-{digest}"
    if (target / _CLASS_FILE).is_file():
        return target
    javac = find_javac()
    jars = pyspark_jars()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Compile into a private dir and rename it into place, so concurrent
    # processes never load a half-written class file.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _run_javac(javac, jars, staging)
        try:
            staging.rename(target)
        except OSError:  # another process won the race; its copy is the same
            if not (target / _CLASS_FILE).is_file():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


@dataclass(frozen=True)
class ListenerJar:
    """A listener jar :func:`build_listener_jar` wrote.

    Attributes
    ----------
    path
        The jar (absolute).
    spark_version, scala_version
        The versions of the Spark jars it was compiled against.
    """

    path: Path
    spark_version: str
    scala_version: str

    def flags(self, trace_dir: str = "DIR") -> list[str]:
        """The ``spark-submit``/``spark-sql`` flags that install the listener.

        >>> ListenerJar(Path("/x/l.jar"), "4.0.0", "2.13.16").flags("s3a://b/t")
        ... # doctest: +NORMALIZE_WHITESPACE
        ['--jars', '/x/l.jar', '--conf',
         'spark.extraListeners=dev.sparktrail.SparktrailListener',
         '--conf', 'spark.sparktrail.traceDir=s3a://b/t']
        """
        return [
            "--jars",
            str(self.path),
            "--conf",
            f"spark.extraListeners={CLASS_NAME}",
            "--conf",
            f"spark.sparktrail.traceDir={trace_dir}",
        ]


def jar_versions(jars: Path) -> tuple[str, str]:
    """The Spark and Scala versions of a Spark ``jars`` directory, from the
    names of its ``spark-core_<scala>-<spark>.jar`` and ``scala-library-<v>.jar``.

    Raises
    ------
    RuntimeError
        If it holds no ``spark-core`` jar.
    """
    spark = scala = None
    for child in sorted(jars.iterdir()):
        if (core := _SPARK_CORE.match(child.name)) and spark is None:
            scala, spark = core.group(1), core.group(2)
    for child in sorted(jars.iterdir()):
        if library := _SCALA_LIBRARY.match(child.name):
            scala = library.group(1)  # the full version, e.g. 2.13.16
    if spark is None or scala is None:
        raise RuntimeError(f"{jars}: no spark-core_<scala>-<version>.jar in it")
    return spark, scala


def build_listener_jar(path: str | os.PathLike[str]) -> ListenerJar:
    """Compile the listener against the installed Spark's jars into a jar.

    The jar holds only the listener's classes and a manifest naming the
    Spark and Scala versions they were compiled against; at run time it
    needs nothing beyond Spark's own jars.

    Parameters
    ----------
    path
        The jar to write (replaced atomically), or an existing directory to
        write :data:`JAR_NAME` into.

    Returns
    -------
    ListenerJar
        Where it is and what it was built for (``flags()``: how to install it).

    Raises
    ------
    JavaNotFoundError
        If it must compile and there is no ``javac``.
    RuntimeError
        If there are no Spark jars or ``javac`` fails.
    """
    import zipfile

    from sparktrail import __version__ as version

    target = Path(path).expanduser().resolve()
    if target.is_dir():
        target = target / JAR_NAME
    spark, scala = jar_versions(pyspark_jars())
    classes = listener_classes(spark)
    manifest = (
        "Manifest-Version: 1.0\r\n"
        f"Created-By: sparktrail {version}\r\n"
        "Implementation-Title: sparktrail-listener\r\n"
        f"Implementation-Version: {version}\r\n"
        f"{SPARK_VERSION_ATTRIBUTE}: {spark}\r\n"
        f"{SCALA_VERSION_ATTRIBUTE}: {scala}\r\n"
        f"Sparktrail-Listener-Class: {CLASS_NAME}\r\n"
        "\r\n"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as jar:
            # The manifest first, where java.util.jar.JarInputStream looks.
            jar.writestr("META-INF/", "")
            jar.writestr("META-INF/MANIFEST.MF", manifest)
            for file in sorted(classes.rglob("*.class")):
                jar.write(file, file.relative_to(classes).as_posix())
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return ListenerJar(target, spark, scala)


def load_listener_class(spark: Any, classes: Path | None = None) -> Any:
    """Load the listener class into a running Spark driver through py4j.

    Parameters
    ----------
    spark
        A ``SparkSession`` (or ``SparkContext``) whose JVM gets the class.
    classes
        The compiled classes; default :func:`listener_classes`.

    Returns
    -------
    py4j.java_gateway.JavaObject
        The ``java.lang.Class`` object of the listener.
    """
    sc = getattr(spark, "sparkContext", spark)
    gateway, jvm = sc._gateway, sc._jvm
    classes = classes or listener_classes()
    key = (id(gateway), str(classes))
    loader = _LOADERS.get(key)
    if loader is None:
        urls = gateway.new_array(jvm.java.net.URL, 1)
        urls[0] = jvm.java.io.File(str(classes)).toURI().toURL()
        # Parent: the loader that sees Spark's classes from this thread.
        parent = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader = jvm.java.net.URLClassLoader(urls, parent)
        _LOADERS[key] = loader
    return jvm.java.lang.Class.forName(CLASS_NAME, True, loader)
