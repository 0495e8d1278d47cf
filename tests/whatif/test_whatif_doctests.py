"""The doctests of sparktrail.whatif (tests/test_doctests.py walks the other
stages)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = (
    "sparktrail.whatif",
    "sparktrail.whatif.changes",
    "sparktrail.whatif.replay",
    "sparktrail.whatif.scheduler",
    "sparktrail.cli.whatif",
)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0
