"""The fleet page: one row per application of an event-log directory.

``sparktrail history`` profiles every application of a History Server's
log directory (:mod:`sparktrail.fleet`); this module turns each saved
:class:`~sparktrail.engines.profiler.Profile` into a row
(:func:`fleet_row`: the ``--json`` contract) and the rows into
``index.html`` (:func:`write_fleet_page`): a sortable table like the
History Server's application list, ranked by what can be saved, each
application linking to its own report.

What can be saved
-----------------
* ``predicted_saving_s``: the top shown hint's predicted saving of wall
  time (the verdict's hint; ``None`` for a hint that saves core time, not
  wall time, such as ``idle_capacity``, or a share-only streaming hint);
* ``saving_core_hours``: the executor core time it frees: an
  ``idle_capacity`` hint's freed slot time, else the wall seconds saved
  times the cores the application held on average (its core-hours over its
  wall hours), as a run that ends sooner releases its executors sooner.

Rows are ranked by ``saving_core_hours``, then ``predicted_saving_s``
(largest first), then, among applications with nothing to save, by their
core-hours and wall time; logs that could not be profiled come last.
"""

from __future__ import annotations

import datetime as dt
import html
import os
from pathlib import Path
from typing import Any

from sparktrail.engines.profiler import Profile
from sparktrail.summaries.hints import share_of_saved, shown_hints

from .figures import SHARE_ONLY
from .html_pages import write_page
from .spark_tables import SORT_SCRIPT
from .verdict import run_wall_ns, verdict

__all__ = ["FLEET_PAGE", "ROW_KEYS", "fleet_row", "rank_rows", "write_fleet_page"]

#: The page :func:`write_fleet_page` writes in its folder.
FLEET_PAGE = "index.html"
#: The keys of a row, in ``--json`` order (``log`` and ``error`` follow).
ROW_KEYS = (
    "app_id",
    "attempt",
    "name",
    "start",
    "wall_s",
    "core_hours",
    "verdict",
    "top_hint",
    "predicted_saving_s",
    "saving_core_hours",
    "report",
)
_NS_PER_HOUR = 3600e9


def fleet_row(profile: Profile, report: str | None) -> dict[str, Any]:
    """The fleet row of one application's profile (keys :data:`ROW_KEYS`).

    ``report`` is the link to its ``report.html``, relative to the page.

    Examples
    --------
    >>> import polars as pl
    >>> from sparktrail.engines.profiler import profile
    >>> t = pl.DataFrame({"src_worker": ["driver", "exec-1/0"],
    ...     "dst_worker": ["driver", "exec-1/0"], "start_ns": [0, 10],
    ...     "end_ns": [10, 20], "activity": ["driver", "processing"]})
    >>> row = fleet_row(profile(t, 10, name="t"), "t/report.html")
    >>> row["wall_s"], row["core_hours"], row["top_hint"], row["report"]
    (2e-08, None, None, 't/report.html')
    """
    summaries = profile.summaries
    context = summaries.context
    span = run_wall_ns(summaries)
    wall_s = span / 1e9 if span is not None else None
    core_hours = None
    if span is not None:
        start = context.start_ns if context.start_ns is not None else 0
        if context.start_ns is None and not summaries.windows.is_empty():
            start = int(summaries.windows["window_start_ns"].min())  # type: ignore[arg-type]
        slots = context.slot_ns(start, start + span)
        core_hours = slots / _NS_PER_HOUR if slots is not None else None
    hints = shown_hints(summaries.hints)
    top = hints.row(0, named=True) if not hints.is_empty() else None
    saving_s, saving_core_hours = _savings(top, wall_s, core_hours)
    return {
        "app_id": context.app_id,
        "attempt": context.attempt_id,
        "name": context.app_name or profile.name,
        "start": _iso(context.start_ns),
        "wall_s": wall_s,
        "core_hours": core_hours,
        "verdict": verdict(summaries),
        "top_hint": str(top["kind"]) if top is not None else None,
        "predicted_saving_s": saving_s,
        "saving_core_hours": saving_core_hours,
        "report": report,
    }


def _savings(
    top: dict[str, Any] | None, wall_s: float | None, core_hours: float | None
) -> tuple[float | None, float | None]:
    """``(wall seconds, core-hours)`` the top hint saves (module docstring).

    >>> _savings({"kind": "hotspot", "predicted_saving_ns": 3.6e12}, 7200.0, 8.0)
    (3600.0, 4.0)
    >>> _savings({"kind": "idle_capacity", "predicted_saving_ns": 7.2e12}, 1.0, 1.0)
    (None, 2.0)
    """
    if top is None or top.get("predicted_saving_ns") is None:
        return None, None
    saving_ns = float(top["predicted_saving_ns"])
    share_of = share_of_saved(top)
    if share_of == "slot_time":
        return None, saving_ns / _NS_PER_HOUR
    if share_of in SHARE_ONLY:
        return None, None
    seconds = saving_ns / 1e9
    if core_hours is None or not wall_s:
        return seconds, None
    return seconds, seconds * core_hours / wall_s


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    moment = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def rank_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` ranked by what can be saved (module docstring).

    >>> rank_rows([{"saving_core_hours": 1.0, "predicted_saving_s": 5.0},
    ...     {"error": "bad"}, {"saving_core_hours": 2.0, "predicted_saving_s": 1.0},
    ...     {"saving_core_hours": None, "predicted_saving_s": 9.0}])
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'saving_core_hours': 2.0, 'predicted_saving_s': 1.0},
     {'saving_core_hours': 1.0, 'predicted_saving_s': 5.0},
     {'saving_core_hours': None, 'predicted_saving_s': 9.0}, {'error': 'bad'}]
    """

    def key(row: dict[str, Any]) -> tuple[int, float, float, float, float, str]:
        return (
            1 if row.get("error") else 0,
            -(row.get("saving_core_hours") or 0.0),
            -(row.get("predicted_saving_s") or 0.0),
            -(row.get("core_hours") or 0.0),
            -(row.get("wall_s") or 0.0),
            str(row.get("log") or ""),  # ties: by the log's path, always alike
        )

    return sorted(rows, key=key)


#: The page's columns: (row key, heading, meaning, unit).
_COLUMNS = (
    ("name", "application", "its name and id; a click opens its report", "text"),
    ("attempt", "attempt", "the attempt id (YARN, or a retried application)", "text"),
    ("start", "started", "when the application started (UTC)", "text"),
    ("wall_s", "wall time (s)", "from the application's start to its end", "number"),
    (
        "core_hours",
        "core-hours",
        "executor cores × the time each executor lived",
        "number",
    ),
    ("verdict", "verdict", "what holds the run back and what to do first", "text"),
    ("top_hint", "top hint", "the kind of the hint the verdict names", "text"),
    (
        "predicted_saving_s",
        "saves (s)",
        "wall seconds the top hint's action saves, replayed on the traced tasks",
        "number",
    ),
    (
        "saving_core_hours",
        "saves (core-hours)",
        "executor core-hours the top hint's action frees",
        "number",
    ),
)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px;
       color: #222; }
p.note { color: #555; font-size: 0.9em; }
table.sortable { border-collapse: collapse; width: 100%; font-size: 0.85em; }
table.sortable th, table.sortable td { border: 1px solid #ddd; padding: 3px 6px;
       vertical-align: top; }
table.sortable th { background: #444; color: white; cursor: pointer; }
table.sortable td[data-sort] { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th[aria-sort=descending]::after { content: " ▼"; }
table.sortable th[aria-sort=ascending]::after { content: " ▲"; }
tr.failed td { color: #a00; }
span.app-id { color: #777; font-size: 0.9em; }
"""


def _number(value: Any) -> str:
    if value is None:
        return "<td></td>"
    if abs(value) < 1:
        shown = f"{value:.2g}"
    else:
        shown = f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return f'<td data-sort="{float(value)!r}">{shown}</td>'


def _row_html(row: dict[str, Any]) -> str:
    error = row.get("error")
    cells = []
    for key, _, _, unit in _COLUMNS:
        value = row.get(key)
        if key == "name":
            name = html.escape(str(value or row.get("log") or "?"))
            app_id = row.get("app_id")
            ident = (
                f' <span class="app-id">{html.escape(app_id)}</span>' if app_id else ""
            )
            report = row.get("report")
            if report:
                name = f'<a href="{html.escape(report)}">{name}</a>'
            cells.append(f"<td>{name}{ident}</td>")
        elif key == "verdict" and error:
            cells.append(f"<td>could not be profiled: {html.escape(error)}</td>")
        elif unit == "number":
            cells.append(_number(value))
        else:
            cells.append(f"<td>{html.escape('' if value is None else str(value))}</td>")
    failed = ' class="failed"' if error else ""
    return f"<tr{failed}>{''.join(cells)}</tr>"


def write_fleet_page(
    rows: list[dict[str, Any]], out_dir: str | os.PathLike[str], title: str
) -> Path:
    """Write ``out_dir/index.html``: ``rows`` (ranked by :func:`rank_rows`)
    as a table that sorts when a heading is clicked; returns its path.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     page = write_fleet_page([{"name": "etl", "wall_s": 3.0}], d, "logs")
    ...     'data-sort="3.0"' in page.read_text()
    True
    """
    ranked = rank_rows(rows)
    head = "".join(
        f'<th title="{html.escape(meaning)}">{html.escape(heading)}</th>'
        for _, heading, meaning, _ in _COLUMNS
    )
    body = "".join(_row_html(row) for row in ranked)
    failed = sum(1 for row in ranked if row.get("error"))
    note = (
        f"{len(ranked)} applications ({failed} could not be profiled), ranked "
        "by the core-hours and wall seconds their top hint saves; click a "
        "heading to sort by it."
    )
    body = (
        f'<h1>{html.escape(title)}</h1><p class="note">{html.escape(note)}</p>'
        f'<table id="applications" class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )
    return write_page(
        Path(out_dir) / FLEET_PAGE,
        f"sparktrail history: {title}",
        _STYLE,
        body,
        SORT_SCRIPT,
    )
