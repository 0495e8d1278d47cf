"""``log_integrity``: what the log lacks, said once (DESIGN §6, step 1).

A log that is not whole (a stage declared more tasks than the log holds,
times set aside, no ``ApplicationEnd``, a cut last line, a lost
``EnvironmentUpdate``: :class:`~.facts.Integrity`) still profiles; the
rules that need the missing events stay silent on them, and this hint says
what is missing, so the verdict is read for what it is. It saves no time:
it is ``info``, and the renderers show it beside the verdict
(:func:`integrity_notes`).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from .hint import Hint
from .inputs import Context

__all__ = ["INTEGRITY_KIND", "integrity_notes", "log_integrity"]

#: The hint kind that carries the log's integrity notes.
INTEGRITY_KIND = "log_integrity"


def log_integrity(ctx: Context) -> list[Hint]:
    """One hint naming what the log lacks (none for a whole log)."""
    integrity = ctx.facts.integrity
    if integrity.whole:
        return []
    evidence: dict[str, Any] = {
        "notes": list(integrity.notes),
        "partial_stages": sorted(integrity.partial_stages)[:20],
        "set_aside": integrity.set_aside,
        "application_end": integrity.app_end,
    }
    action = (
        "the log is not whole: "
        + "; ".join(integrity.notes)
        + ". The rules that need what is missing stay silent on it"
    )
    return [Hint(INTEGRITY_KIND, 0.0, evidence, action)]


def integrity_notes(hints: pl.DataFrame) -> list[str]:
    """The notes of a hints frame's ``log_integrity`` row (empty: none).

    >>> h = pl.DataFrame({"kind": ["log_integrity"],
    ...     "evidence": ['{"notes": ["stage 3 declares 600 tasks; the log holds 1"]}']})
    >>> integrity_notes(h)
    ['stage 3 declares 600 tasks; the log holds 1']
    """
    if hints.is_empty() or "kind" not in hints.columns:
        return []
    rows = hints.filter(pl.col("kind") == INTEGRITY_KIND)
    if rows.is_empty():
        return []
    notes = json.loads(rows["evidence"][0] or "{}").get("notes") or []
    return [str(n) for n in notes]
