"""The one base of every error sparktrail reports to its user.

Each stage raises its own subclass (a trace that breaks the schema, an
event log with nothing to read, a PAG with a cycle, ...), naming the file,
line or value at fault; the command line maps them to one line and an exit
code in one place (:func:`sparktrail.cli.main`). This module imports
nothing, so every stage can use it.

>>> issubclass(SparktrailError, Exception)
True
"""

from __future__ import annotations

__all__ = ["InputError", "SparktrailError"]


class SparktrailError(Exception):
    """Base class of the errors sparktrail raises for a user to read."""


class InputError(SparktrailError, ValueError):
    """Input that sparktrail cannot use: a file, a line, an argument value.

    Also a :class:`ValueError`, so code that caught ``ValueError`` before
    the base existed still does.
    """
