"""Worker names: the driver's timeline and an executor slot's ``exec-<id>/<slot>``.

The tracer names each task slot's timeline ``exec-<executor id>/<slot>`` and
the driver's ``driver`` (DESIGN §3); every stage that reads a worker name
back (its executor, its slot) reads it here.

Assumptions
-----------
* An executor id may itself hold ``/`` (the slot is the last part, digits).
* Any other worker name (a hand-made trace's ``a``) is its own executor.
"""

from __future__ import annotations

import re

import polars as pl

__all__ = [
    "DRIVER",
    "EXECUTOR_PATTERN",
    "SLOT_IN_TEXT",
    "SLOT_PREFIX",
    "executor_of",
    "executor_of_column",
    "executor_of_name",
    "slot_of",
    "worker_label",
    "worker_name",
    "worker_text",
]


DRIVER = "driver"
#: What every slot's timeline starts with.
SLOT_PREFIX = "exec-"
#: A slot's timeline, its executor id the group (as a polars or Spark SQL
#: regular expression; ASCII digits, as Spark SQL's regex reads them).
EXECUTOR_PATTERN = rf"^{SLOT_PREFIX}(.+)/[0-9]+$"
#: A slot's timeline, its executor id and slot the groups.
_SLOT = re.compile(rf"{SLOT_PREFIX}(.+)/([0-9]+)")
#: A slot's name inside a sentence (an executor id without "/" or spaces).
SLOT_IN_TEXT = re.compile(rf"{SLOT_PREFIX}([^/\s]+)/([0-9]+)")


def executor_of(worker: pl.Expr) -> pl.Expr:
    """The executor a worker belongs to (null for the driver timeline).

    >>> df = pl.DataFrame({"w": ["exec-7/1", "driver", "exec-driver/0", "a"]})
    >>> df.select(executor_of(pl.col("w"))).to_series().to_list()
    ['7', None, 'driver', 'a']
    """
    return (
        pl.when(worker == DRIVER)
        .then(pl.lit(None, dtype=pl.String))
        .otherwise(pl.coalesce(worker.str.extract(EXECUTOR_PATTERN, 1), worker))
    )


def executor_of_column(frame: pl.DataFrame, column: str) -> pl.Expr:
    """:func:`executor_of` of ``frame[column]``, parsed once per distinct name.

    The same values as ``executor_of(pl.col(column))`` on ``frame``; a
    frame has a few dozen worker names over 10^4-10^6 rows, and the regular
    expression per row was a large part of a window's summaries.

    >>> df = pl.DataFrame({"w": ["exec-7/1", "driver", "exec-7/1", "a", None]})
    >>> df.select(executor_of_column(df, "w")).to_series().to_list()
    ['7', None, '7', 'a', None]
    """
    names = frame.get_column(column).unique().to_list()
    # In Python: a few dozen names, where a query costs ~0.2 ms.
    executors = [executor_of_name(name) for name in names]
    return pl.col(column).replace_strict(names, executors, return_dtype=pl.String)


def executor_of_name(worker: str | None) -> str | None:
    """:func:`executor_of` of one name.

    >>> [executor_of_name(w) for w in ["exec-7/1", "driver", "exec-a/b/2", None]]
    ['7', None, 'a/b', None]
    """
    if worker is None or worker == DRIVER:
        return None
    slot = slot_of(worker)
    return worker if slot is None else slot[0]


def worker_name(executor_id: object, slot: int) -> str:
    """The timeline of ``slot`` on executor ``executor_id``.

    >>> worker_name("7", 1)
    'exec-7/1'
    """
    return f"{SLOT_PREFIX}{executor_id}/{slot}"


def slot_of(worker: str | None) -> tuple[str, int] | None:
    """``(executor id, slot)`` of a slot's timeline, None for any other name.

    >>> slot_of("exec-a/b/2"), slot_of("driver")
    (('a/b', 2), None)
    """
    found = None if worker is None else _SLOT.fullmatch(worker)
    return None if found is None else (found[1], int(found[2]))


def worker_label(worker: str | None) -> str:
    """How a worker is shown to a user (the data keep its name), on every
    page and in the terminal.

    ``exec-3/1`` is executor 3's core 1; the driver's own timeline is
    ``driver``, and a slot of the executor inside the driver (local mode,
    ``exec-driver/1``) is ``driver · core 1``.

    >>> worker_label("exec-3/1"), worker_label("exec-driver/1")
    ('executor 3 · core 1', 'driver · core 1')
    >>> worker_label("driver"), worker_label(None), worker_label("a")
    ('driver', 'driver', 'a')
    """
    if worker is None:
        return "driver"
    slot = slot_of(worker)
    if slot is None:
        return worker
    executor, core = slot
    if executor == "driver":
        return f"driver · core {core}"
    return f"executor {executor} · core {core}"


def worker_text(text: str) -> str:
    """``text`` with every worker name in it shown by :func:`worker_label`.

    >>> worker_text("move work off exec-2/0 (and exec-driver/1)")
    'move work off executor 2 · core 0 (and driver · core 1)'
    """
    return SLOT_IN_TEXT.sub(lambda m: worker_label(m.group(0)), text)
