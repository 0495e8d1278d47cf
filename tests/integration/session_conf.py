"""SQL settings set on the shared SparkSession for one test, then restored."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def sql_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """Set SQL settings on the shared session for one test, then restore them."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
