"""How to call sparktrail from the user's shell, for commands the tool prints.

A command sparktrail prints must work when pasted: ``make run`` starts it
as ``.venv/bin/python -m sparktrail``, and the venv's ``bin`` is not on
the user's PATH unless they activated it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["program"]


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def program() -> str:
    """The command that runs this sparktrail from the user's shell.

    ``sparktrail`` when that name on the PATH is this installation's
    script; else the script beside this Python (``.venv/bin/sparktrail``,
    relative to the working directory); else ``python -m sparktrail``
    with this Python.

    >>> program().endswith("sparktrail")
    True
    """
    script = Path(sys.executable).parent / "sparktrail"
    found = shutil.which("sparktrail")
    if found and script.exists() and os.path.samefile(found, script):
        return "sparktrail"
    if script.exists():
        return _shown(script.absolute())
    return f"{_shown(Path(sys.executable).absolute())} -m sparktrail"
