"""How the rules write numbers and settings into a sentence."""

from __future__ import annotations

from sparktrail.pag.context import AppContext

__all__ = [
    "fmt_mb",
    "fmt_s",
    "settings_text",
]


def settings_text(app: AppContext, wanted: dict[str, str]) -> str:
    """``key=value, ...`` of the settings in ``wanted`` that the application
    did not already run with (a rule never recommends a value in force).

    >>> app = AppContext(properties={"spark.a": "1"})
    >>> settings_text(app, {"spark.a": "1", "spark.b": "2"})
    'spark.b=2'
    """
    return ", ".join(
        f"{key}={value}"
        for key, value in wanted.items()
        if (app.setting(key) or "").strip().lower() != value.lower()
    )


def fmt_s(ns: float) -> str:
    """A duration in ns as seconds for a sentence.

    >>> fmt_s(1_234_000_000), fmt_s(12_000_000)
    ('1.23 s', '0.012 s')
    """
    seconds = ns / 1e9
    return f"{seconds:.3g} s" if seconds >= 0.1 else f"{seconds:.2g} s"


def fmt_mb(nbytes: float) -> str:
    """A size in bytes as MB (2^20 bytes) for a sentence.

    >>> fmt_mb(64_835_336)
    '61.8 MB'
    """
    return f"{nbytes / (1 << 20):,.1f} MB"
