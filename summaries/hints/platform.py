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

__all__ = ["aqe_enabled", "can_speculate", "interactive_signs", "spark_at_least"]

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


def can_speculate(app: AppContext) -> bool:
    """Whether ``spark.speculation`` can act: never on a ``local`` master
    (Spark's TaskSchedulerImpl starts the speculation check only off local).

    >>> can_speculate(AppContext(master="local[4]")), can_speculate(AppContext())
    (False, True)
    """
    return not app.is_local


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
