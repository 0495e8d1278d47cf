"""The stage and executor tables, for the dashboard and the report.

Pure builders over :attr:`Summaries.stages` and :attr:`Summaries.executors`
(:mod:`~sparktrail.summaries.stage_stats`): each column has a heading, a
one-line meaning (hover text on the heading) and a unit. Cells keep their
numbers so the tables sort by value, not by text:

* :func:`table_records` and :func:`datatable_columns` feed a Dash
  ``DataTable`` (sorted natively in the browser, numbers formatted there);
* :func:`html_table` writes the report's plain HTML table, each cell with
  its text in units and its number in ``data-sort``; :data:`SORT_SCRIPT`
  sorts such a table when a heading is clicked.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from sparktrail.summaries.operator import STAGE_PREFIX

__all__ = [
    "EXECUTOR_COLUMNS",
    "EXECUTOR_TABLE_CAPTION",
    "SORT_SCRIPT",
    "STAGE_COLUMNS",
    "STAGE_TABLE_CAPTION",
    "Column",
    "cell_text",
    "datatable_columns",
    "html_table",
    "table_records",
]


@dataclass(frozen=True)
class Column:
    """One column of a table: its heading, its meaning and its unit.

    ``unit`` is one of ``text``, ``count``, ``duration`` (ns in the frame,
    seconds shown), ``bytes`` (MB shown), ``share`` (a fraction, % shown)
    or ``ratio``.
    """

    heading: str
    help: str
    unit: str = "text"


_CP = Column(
    "critical share",
    "share of the run's critical path: the time this holds the whole run back",
    "share",
)
#: The work columns both tables show, in page order.
_WORK: dict[str, Column] = {
    "records": Column(
        "records",
        "input records + shuffle records read (Spark shows them apart), each "
        "partition once (blank: unknown, no attempt reported any)",
        "count",
    ),
    "bytes": Column(
        "input (MB)",
        "input bytes + shuffle bytes read (Spark shows them apart), each "
        "partition once (blank: no attempt finished)",
        "bytes",
    ),
    "shuffle_write_bytes": Column(
        "shuffle write (MB)",
        "shuffle bytes written, each partition once (blank: no attempt finished)",
        "bytes",
    ),
    "spilled_bytes": Column(
        "spill (MB)",
        "memory + disk bytes spilled (Spark shows them apart; blank: not reported)",
        "bytes",
    ),
}
#: The stage table's columns (frame column -> Column), in page order.
STAGE_COLUMNS: dict[str, Column] = {
    "stage_id": Column("stage", "Spark's stage id", "count"),
    "operator": Column("operator", "the user call that created the stage"),
    "cp_share": _CP,
    "wall_ns": Column(
        "wall time (s)",
        "from the stage's first task launch to its last task's finish "
        "(Spark's stage duration runs from submission to completion)",
        "duration",
    ),
    "tasks": Column(
        "tasks", "task attempts, retries and still running ones included", "count"
    ),
    "failed_tasks": Column("failed", "attempts that failed or were killed", "count"),
    "median_task_ns": Column(
        "median task (s)",
        "median of every attempt's finish - launch (Spark's summary takes "
        "successful tasks only)",
        "duration",
    ),
    "max_task_ns": Column(
        "max task (s)",
        "longest attempt: finish - launch, as Spark records it",
        "duration",
    ),
    "skew": Column(
        "skew", "max task / median task: 1 is even, 5 or more is skewed", "ratio"
    ),
    **_WORK,
    "gc_share": Column(
        "GC",
        "JVM GC time / executor run time, over the attempts that reported "
        "metrics (as Spark)",
        "share",
    ),
}
#: The executor table's columns, in page order.
EXECUTOR_COLUMNS: dict[str, Column] = {
    "executor_id": Column(
        "executor", "Spark's executor id ('driver': local mode's one executor)"
    ),
    "host": Column("host", "where it ran"),
    "cores": Column("cores", "task slots", "count"),
    "cp_share": _CP,
    "fair_share": Column(
        "fair share",
        "the critical share it would hold if every busy worker held the same",
        "share",
    ),
    "ratio": Column(
        "ratio", "critical share / fair share: above 2 holds back", "ratio"
    ),
    "tasks": Column(
        "tasks", "task attempts, retries and still running ones included", "count"
    ),
    "failed_tasks": Column("failed", "attempts that failed or were killed", "count"),
    "task_ns": Column(
        "task time (s)",
        "every attempt's finish - launch, summed (Spark's task time)",
        "duration",
    ),
    "gc_share": Column(
        "GC",
        "JVM GC time / executor run time, over the attempts that reported "
        "metrics (as Spark; red there above 10%)",
        "share",
    ),
    **_WORK,
}
STAGE_TABLE_CAPTION = (
    "One row per Spark stage, like the Spark UI's stage table, with its share "
    "of the critical path; click a heading to sort."
)
EXECUTOR_TABLE_CAPTION = (
    "One row per executor, like the Spark UI's executor table, with its share "
    "of the critical path against its fair share; click a heading to sort."
)

_STAGE_PREFIX = re.compile(STAGE_PREFIX)


def _value(value: Any, unit: str) -> Any:
    """The number a cell sorts by, in the unit shown (None stays None)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if unit == "duration":
        return round(value / 1e9, 3)
    if unit == "bytes":
        return round(value / 1e6, 3)
    if unit == "share":
        return round(100 * value, 2)
    if unit == "ratio":
        return round(value, 2)
    if unit == "text" and isinstance(value, str):
        return _STAGE_PREFIX.sub("", value)  # the stage id has its own column
    return value


def table_records(
    frame: pl.DataFrame, columns: dict[str, Column]
) -> list[dict[str, Any]]:
    """The rows of ``frame`` as ``DataTable`` records, values in shown units.

    >>> f = pl.DataFrame({"stage_id": [3], "operator": ["stage 3: count at A:1"],
    ...     "wall_ns": [1_500_000_000], "cp_share": [0.25]})
    >>> table_records(f, STAGE_COLUMNS)
    [{'stage_id': 3, 'operator': 'count at A:1', 'cp_share': 25.0, 'wall_ns': 1.5}]
    """
    present = [c for c in columns if c in frame.columns]
    return [
        {c: _value(row[c], columns[c].unit) for c in present}
        for row in frame.select(present).iter_rows(named=True)
    ]


def datatable_columns(columns: dict[str, Column]) -> list[dict[str, Any]]:
    """``DataTable`` column specs: numeric types with their formats.

    >>> spec = datatable_columns(STAGE_COLUMNS)
    >>> spec[2]["name"], spec[2]["type"]
    ('critical share', 'numeric')
    """
    specs = []
    for key, column in columns.items():
        spec: dict[str, Any] = {"id": key, "name": column.heading}
        if column.unit != "text":
            spec["type"] = "numeric"
            digits = {"duration": 3, "bytes": 1, "share": 1, "ratio": 2}
            if column.unit in digits:
                # DataTable's format as d3-format JSON (what dash_table's
                # Format builder emits): fixed digits, "%" as the symbol.
                fixed = f".{digits[column.unit]}f"
                spec["format"] = (
                    {"locale": {"symbol": ["", "%"]}, "specifier": f"${fixed}"}
                    if column.unit == "share"
                    else {"specifier": fixed}
                )
        specs.append(spec)
    return specs


def cell_text(value: Any, unit: str) -> str:
    """A cell's text: its shown value with the unit's precision.

    >>> cell_text(0.1234, "share"), cell_text(2_500_000_000, "duration")
    ('12.3%', '2.500')
    >>> cell_text(None, "bytes"), cell_text(12345, "count")
    ('', '12,345')
    """
    shown = _value(value, unit)
    if shown is None:
        return ""
    if unit == "share":
        return f"{shown:.1f}%"
    if unit == "duration":
        return f"{shown:.3f}"
    if unit == "bytes":
        return f"{shown:,.1f}"
    if unit == "ratio":
        return f"{shown:.2f}"
    if unit == "count" and isinstance(shown, int):
        return f"{shown:,}"
    return str(shown)


def html_table(
    frame: pl.DataFrame, columns: dict[str, Column], table_id: str, top: int = 200
) -> str:
    """A sortable HTML table of ``frame`` (the first ``top`` rows).

    Each heading has its meaning as ``title``; each cell its text in units
    and, for numbers, its value in ``data-sort`` (see :data:`SORT_SCRIPT`).

    >>> f = pl.DataFrame({"stage_id": [1], "cp_share": [0.5]})
    >>> print(html_table(f, STAGE_COLUMNS, "stages"))  # doctest: +ELLIPSIS
    <table id="stages" class="sortable">...<td data-sort="50.0">50.0%</td>...
    """
    present = [c for c in columns if c in frame.columns]
    head = "".join(
        f'<th title="{html.escape(columns[c].help)}">'
        f"{html.escape(columns[c].heading)}</th>"
        for c in present
    )
    body = []
    for row in frame.head(top).select(present).iter_rows(named=True):
        cells = []
        for c in present:
            unit = columns[c].unit
            shown = _value(row[c], unit)
            sort = "" if unit == "text" or shown is None else f' data-sort="{shown}"'
            cells.append(f"<td{sort}>{html.escape(cell_text(row[c], unit))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = (
        f'<p class="note">The first {top} of {len(frame)} rows.</p>'
        if len(frame) > top
        else ""
    )
    return (
        f'<table id="{table_id}" class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )


#: Sorts a ``table.sortable`` by the clicked heading's column, by
#: ``data-sort`` numbers when the cells have them (blanks last), else by
#: text; a second click reverses the order.
SORT_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, i) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var down = th.getAttribute("aria-sort") !== "descending";
      table.querySelectorAll("th").forEach(function (h) {
        h.removeAttribute("aria-sort");
      });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      var key = function (row) {
        var cell = row.cells[i];
        var n = cell.getAttribute("data-sort");
        return n === null ? cell.textContent : parseFloat(n);
      };
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === "" || y === "") { return (x === "") - (y === ""); }
        var c = typeof x === "number" && typeof y === "number"
          ? x - y : String(x).localeCompare(String(y));
        return down ? -c : c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""
