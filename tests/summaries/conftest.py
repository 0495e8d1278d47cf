"""The summaries tests import their trace builders by name."""

from __future__ import annotations
