"""The pag tests import the reference and strategies modules by name."""

from __future__ import annotations
