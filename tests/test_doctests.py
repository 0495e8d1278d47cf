"""Run the doctests of every sparktrail module, found with pkgutil."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = (
    "sparktrail",
    "sparktrail.pag",
    "sparktrail.tracer",
    "sparktrail.summaries",
    "sparktrail.engines",
    "sparktrail.dashboard",
)


def modules() -> list[str]:
    names = set()
    for package in PACKAGES:
        try:
            module = importlib.import_module(package)
        except ImportError:
            continue
        names.add(package)
        path = getattr(module, "__path__", None)
        if path is None:
            continue
        for info in pkgutil.walk_packages(path, prefix=package + "."):
            # __main__ runs the CLI (and exits) when imported
            if not info.name.endswith(".__main__"):
                names.add(info.name)
    return sorted(names)


MODULES = modules()

#: Doctests known to fail, reported to their owners; strict, so a fix shows.
KNOWN_FAILURES: dict[str, str] = {}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            n,
            marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[n])
            if n in KNOWN_FAILURES
            else (),
        )
        for n in MODULES
    ],
)
def test_doctests(name):
    # GIVEN a sparktrail module
    module = importlib.import_module(name)
    # WHEN its doctests run
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    # THEN none fails
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def test_pag_modules_have_examples():
    # GIVEN the pag modules
    pag = [n for n in MODULES if n.startswith("sparktrail.pag.")]
    assert {"sparktrail.pag.participation", "sparktrail.pag.trace"} <= set(pag)
    # WHEN their doctests are counted
    attempted = {
        n: doctest.testmod(importlib.import_module(n), verbose=False).attempted
        for n in pag
    }
    # THEN every one of them has at least one example
    assert all(attempted.values()), attempted
