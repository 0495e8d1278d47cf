"""What the application's platform implies for advice, each rule in one place.

A rule names a cause only after checking that it can be the cause there
(issue 26): Spark never speculates on a ``local`` master; AQE is on by
default from Spark 3.2 and on Databricks; in an interactive session (a
Spark shell, a notebook) the time between jobs is a person thinking, not
the driver working.

Assumptions
-----------
* Call sites come from the stages' operator labels (``<call site> ·
  <plan node>``, DESIGN §8); a REPL's are ``<console>`` (Scala),
  ``<stdin>`` (the PySpark shell), ``<ipython-input-…>`` or
  ``/tmp/ipykernel_…`` (Jupyter), ``Command-…``/``command-…`` (Databricks).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sparktrail.pag.context import AppContext

__all__ = [
    "aqe_enabled",
    "can_speculate",
    "cluster_manager",
    "interactive_signs",
    "spark_at_least",
    "why_no_speculation",
]

#: App names Spark's own shells give their applications.
_SHELL_NAMES = frozenset({"spark shell", "pysparkshell", "sparkr", "spark-shell"})
#: Call sites of code typed into a REPL or a notebook cell.
_REPL_SITE = re.compile(
    r"<console>|<stdin>|<ipython-input|/ipykernel_|\bCommand-\d|\bcommand-\d"
    r"|<command-\d|Notebook|<string>:\d"
)
#: Properties that only a notebook or a REPL sets.
_NOTEBOOK_KEYS = (
    "spark.databricks.notebook.id",
    "spark.databricks.notebook.path",
    "spark.repl.class.uri",
    "spark.repl.class.outputDir",
)


def spark_at_least(app: AppContext, major: int, minor: int) -> bool | None:
    """Whether the application ran Spark ``major.minor`` or later
    (``None``: its version is unknown).

    >>> spark_at_least(AppContext(spark_version="3.1.1"), 3, 2)
    False
    """
    found = re.match(r"(\d+)\.(\d+)", app.spark_version or "")
    if not found:
        return None
    return (int(found.group(1)), int(found.group(2))) >= (major, minor)


def _databricks(app: AppContext) -> bool:
    return any(key.startswith("spark.databricks.") for key in app.properties)


#: Dataproc Serverless batch properties (Dataproc on YARN sets other
#: ``spark.dataproc.*`` keys, and runs on ``yarn``).
_DATAPROC_SERVERLESS_KEYS = (
    "spark.dataproc.scaling.version",
    "spark.dataproc.driver.compute.tier",
    "spark.dataproc.executor.compute.tier",
    "spark.dataproc.driver.disk.size",
    "spark.dataproc.executor.disk.size",
    "spark.dataproc.driver.disk.tier",
    "spark.dataproc.executor.disk.tier",
)


def cluster_manager(app: AppContext) -> str | None:
    """Who gives the application its executors, which decides how idle ones
    are released (``None``: the log states no master nor a platform's keys).

    ``local`` (``local``/``local[N]``/``local-cluster``: one machine),
    ``databricks`` (any ``spark.databricks.*`` key), ``emr-serverless``
    (``spark.emr-serverless.*``), ``glue`` (``spark.glue.*``),
    ``dataproc-serverless`` (its batch keys, or ``spark.dataproc.*`` off
    ``yarn``), else from the master: ``yarn``, ``standalone``
    (``spark://``), ``kubernetes`` (``k8s://``), ``mesos``.

    >>> cluster_manager(AppContext(master="k8s://https://10.0.0.1:443"))
    'kubernetes'
    >>> cluster_manager(AppContext(master="yarn",
    ...     properties={"spark.databricks.clusterUsageTags.clusterId": "x"}))
    'databricks'
    >>> cluster_manager(AppContext(master="yarn",
    ...     properties={"spark.dataproc.sql.parquet.enableFooterCache": "true"}))
    'yarn'
    >>> cluster_manager(AppContext()) is None
    True
    """
    master = (app.master or app.setting("spark.master") or "").strip().lower()
    if app.is_local or master.startswith("local"):
        return "local"
    keys = list(app.properties)
    if _databricks(app):
        return "databricks"
    if any(k.startswith("spark.emr-serverless.") for k in keys):
        return "emr-serverless"
    if any(k.startswith("spark.glue.") for k in keys):
        return "glue"
    dataproc = any(k.startswith("spark.dataproc.") for k in keys)
    serverless = any(k in app.properties for k in _DATAPROC_SERVERLESS_KEYS)
    if serverless or (dataproc and master and master != "yarn"):
        return "dataproc-serverless"
    if master.startswith("yarn"):
        return "yarn"
    if master.startswith("spark://"):
        return "standalone"
    if master.startswith("k8s://"):
        return "kubernetes"
    if master.startswith("mesos://"):
        return "mesos"
    return None


def aqe_enabled(app: AppContext) -> bool:
    """Whether adaptive query execution was on: as set, else Spark's default
    (on from 3.2, and on Databricks).

    >>> aqe_enabled(AppContext(spark_version="3.5.0"))
    True
    >>> aqe_enabled(AppContext(spark_version="3.5.0",
    ...     properties={"spark.sql.adaptive.enabled": "false"}))
    False
    """
    flag = app.flag("spark.sql.adaptive.enabled")
    if flag is not None:
        return flag
    return bool(spark_at_least(app, 3, 2)) or _databricks(app)


def why_no_speculation(app: AppContext) -> str | None:
    """Why ``spark.speculation`` cannot act here, in words (``None``: it can;
    see :func:`can_speculate`).

    >>> why_no_speculation(AppContext(master="local[4]"))
    'Spark does not speculate on a local master'
    """
    if app.is_local:
        return "Spark does not speculate on a local master"
    if not can_speculate(app):
        return (
            "every executor is on one host, where Spark never runs a copy beside "
            "the attempt"
        )
    return None


def can_speculate(app: AppContext) -> bool:
    """Whether ``spark.speculation`` can act: never on a ``local`` master
    (Spark's TaskSchedulerImpl starts the speculation check only off local),
    nor where every executor the log states is on one host (TaskSetManager
    never runs a copy on a host where the task already has an attempt).

    >>> from sparktrail.pag.context import ExecutorLife
    >>> can_speculate(AppContext(master="local[4]")), can_speculate(AppContext())
    (False, True)
    >>> one_host = tuple(ExecutorLife(str(i), 2, host="h1") for i in range(3))
    >>> can_speculate(AppContext(master="yarn", executors=one_host))
    False
    """
    if app.is_local:
        return False
    hosts = {e.host for e in app.executors if e.executor_id != "driver" and e.host}
    return len(hosts) != 1


def interactive_signs(app: AppContext, call_sites: Iterable[str | None]) -> list[str]:
    """Why the application looks like an interactive session (empty if not).

    >>> interactive_signs(AppContext(app_name="Spark shell"), ["count at <console>:24"])
    ["app name 'Spark shell'", "call site 'count at <console>:24'"]
    """
    signs = []
    name = (app.app_name or "").strip()
    if name.lower() in _SHELL_NAMES or name.lower().startswith("databricks shell"):
        signs.append(f"app name {name!r}")
    keys = [key for key in _NOTEBOOK_KEYS if key in app.properties]
    if keys:
        signs.append(f"property {keys[0]}")
    site = next((s for s in call_sites if s and _REPL_SITE.search(s)), None)
    if site is not None:
        signs.append(f"call site {site!r}")
    return signs
