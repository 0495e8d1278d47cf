"""Shared fixtures of the summaries tests: builders on sys.path, warm kernel."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session", autouse=True)
def warm_kernel() -> None:
    """Compile (or load) the numba kernel once."""
    from sparktrail.pag import critical_participation

    trace = pl.DataFrame(
        {
            "src_worker": ["a"],
            "dst_worker": ["a"],
            "start_ns": [0],
            "end_ns": [1],
            "activity": ["processing"],
        }
    )
    critical_participation(trace, 1)
