"""Package exports imported on first use (PEP 562), so that importing one
module of a stage (a constant, an argument parser) does not import the
whole stage and its heavy libraries (polars, numba, pyarrow).

>>> getattr_, dir_ = lazy_exports("sparktrail", {"InputError": "sparktrail.errors"}, {})
>>> getattr_("InputError").__name__
'InputError'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, owners: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package`` that import
    each name of ``owners`` (name -> owning module) on first use and keep it
    in ``namespace`` (the package's ``globals()``), so later look-ups are
    plain attribute reads."""

    def __getattr__(name: str) -> Any:
        owner = owners.get(name)
        if owner is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(owner), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *owners})

    return __getattr__, __dir__
