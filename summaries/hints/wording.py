"""How the rules write numbers and settings into a sentence."""

from __future__ import annotations

from sparktrail.pag.context import AppContext

__all__ = [
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
