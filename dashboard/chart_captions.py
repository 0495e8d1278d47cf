"""The one line under each chart: what it shows and how to read it.

In the words of the README's glossary, shared by the dashboard and the
report (:data:`CAPTIONS`, by chart).
"""

from __future__ import annotations

__all__ = ["CAPTIONS"]

#: One line under each chart: what it shows and how to read it, in the words
#: of the README's glossary (shared by the dashboard and the report).
CAPTIONS: dict[str, str] = {
    "activity": "Each bar is a window; its colours split the window's critical "
    "path (CP) by activity and add up to 100%: the tallest colour is what held "
    "the run back then.",
    "straggler": "Each worker's CP share (red) beside its fair share (grey), "
    "the share it would hold if the critical path were spread evenly over the "
    "active workers: red far above grey is a straggler.",
    "operator": "CP share of each operator (call site and SQL plan node, the "
    'same across jobs; its stages on hover); the "(no stage: …)" bar is the '
    "time outside any stage (driver code, scheduling, slots waiting for work), "
    "its largest parts on its label.",
    "communication": "CP share of the messages and shuffle reads from each "
    "sender (row) to each receiver (column): a dark cell is a channel the "
    "critical path waits on.",
    "timeline": "A row per worker, a bar per activity coloured by critical "
    "participation (CP): dark held the window back; faint: waiting; lines: "
    "messages. Past 5,000 bars, non-critical ones merge per worker and pixel "
    "(grey).",
    "hints": "Rebalancing suggestions drawn from CP, most severe first: what "
    "the rule found, with its numbers, and what to change (hover a column's "
    "heading for its meaning; every number the rule read is in profile --json).",
}
