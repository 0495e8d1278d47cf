"""Which polars engine runs a lazy query: in-memory for small inputs.

Polars 2 runs ``LazyFrame.collect()`` on its streaming engine by default.
That engine bounds the memory of a query over 10^7-10^8 trace rows, but
costs about 1.5 ms more than the in-memory engine to set up (measured on a
group-by over 20,000 task rows: 2.3 ms against 0.8 ms), and a window the
online pipeline closes runs a dozen such queries over some 30,000 rows.
:func:`collect` runs a query over fewer than :data:`SMALL_ROWS` rows in
memory and leaves larger ones to polars' default; :func:`collect_all` runs
several queries as one batch, and :func:`write_small_parquets` writes
small frames to Parquet as one batch of sink queries. A query over fewer
than :data:`UNOPTIMIZED_ROWS` rows skips polars' optimizer, whose planning
costs more than running it.

Assumptions
-----------
* Both engines compute the same query. What either leaves unspecified (the
  row order of a group-by or of a join without ``maintain_order``, the
  last bits of a float sum over a hash group-by) may differ, as it does
  between two runs of one engine: the callers sort or key their results
  where order matters, and compare floats to a tolerance.
* Polars' optimizations do not change a query's result; without them
  (:data:`UNOPTIMIZED_ROWS`) its types are still coerced and checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

__all__ = [
    "SMALL_ROWS",
    "UNOPTIMIZED_ROWS",
    "collect",
    "collect_all",
    "collect_group_by",
    "collect_in_memory",
    "write_small_parquets",
]

#: Input rows under which a query runs on the in-memory engine: its
#: intermediate frames are then a few tens of MB at most.
SMALL_ROWS = 1_000_000
#: Input rows under which a query runs without polars' optimizer (type
#: coercion and checks stay on): planning a query over the online window's
#: partial sums (about a hundred rows) cost more than running it, half of
#: a batch of six such queries (1.0 -> 0.54 ms), and a window of 30,000
#: rows closed in 43 instead of 47 ms (one core, medians of five).
UNOPTIMIZED_ROWS = 1_000
_NO_OPTIMIZATIONS = pl.QueryOptFlags.none() if hasattr(pl, "QueryOptFlags") else None
#: Polars 1 already runs queries in memory by default (and its older
#: versions do not know the name "in-memory").
_PICKS_ENGINE = int(pl.__version__.split(".")[0]) >= 2


def collect(query: pl.LazyFrame, rows: int) -> pl.DataFrame:
    """Run ``query``, whose input has ``rows`` rows, on the fitting engine.

    Parameters
    ----------
    query
        The lazy query.
    rows
        Rows of its (largest) input frame.

    Returns
    -------
    polars.DataFrame
        ``query.collect()``: in-memory under :data:`SMALL_ROWS` rows, else
        on polars' default engine; without the optimizer under
        :data:`UNOPTIMIZED_ROWS`.

    Examples
    --------
    >>> df = pl.DataFrame({"a": [1, 2, 3]})
    >>> collect(df.lazy().select(pl.col("a").sum()), len(df)).item()
    6
    """
    if _PICKS_ENGINE and rows < SMALL_ROWS:
        done: pl.DataFrame = query.collect(engine="in-memory", **_flags(rows))
        return done
    return query.collect()


def collect_in_memory(query: pl.LazyFrame) -> pl.DataFrame:
    """Run ``query`` on the in-memory engine, whatever its size.

    For a group-by into millions of groups, which the streaming engine runs
    with more memory than the in-memory one: the what-if replay's task
    table of a 10^7-row trace (3.3 M tasks) peaked at 1.5 GiB streamed
    against 0.65 GiB in memory.

    >>> df = pl.DataFrame({"a": [1, 1, 2]})
    >>> collect_in_memory(df.lazy().group_by("a").len().sort("a"))["len"].to_list()
    [2, 1]
    """
    if _PICKS_ENGINE:
        return query.collect(engine="in-memory")
    return query.collect()


def collect_group_by(
    frame: pl.LazyFrame,
    keys: list[str],
    aggs: list[pl.Expr],
    rows: int,
    *,
    apart: list[pl.Expr] | tuple[pl.Expr, ...] = (),
) -> pl.DataFrame:
    """``frame.group_by(keys).agg(*aggs, *apart)``, collected as by
    :func:`collect` (``rows``: of ``frame``).

    From :data:`SMALL_ROWS` rows on, each aggregation of ``apart`` runs in
    a query of its own, joined to the others on ``keys``: polars evaluates
    a group-by's aggregations side by side, and a median holds about 3.5
    times its column meanwhile (90 MB over 3.3·10^6 task facts), so that
    the hint rules' nine medians per stage took 350 MB at once. A smaller
    frame is one query (the online pipeline's windows: one is faster).

    >>> df = pl.DataFrame({"k": [1, 1, 2], "v": [1, 3, 5]}).lazy()
    >>> collect_group_by(df, ["k"], [pl.len()], 3, apart=[pl.col("v").median()]
    ...     ).sort("k").rows()
    [(1, 2, 2.0), (2, 1, 5.0)]
    """
    if rows < SMALL_ROWS or not apart:
        return collect(frame.group_by(keys).agg(*aggs, *apart), rows)
    out = collect(frame.group_by(keys).agg(*aggs), rows)
    for agg in apart:
        part = collect(frame.group_by(keys).agg(agg), rows)
        out = out.join(part, on=keys, how="left", nulls_equal=True)
    return out


def collect_all(queries: list[pl.LazyFrame], rows: int) -> list[pl.DataFrame]:
    """Run ``queries`` together (in parallel, their shared parts once).

    Parameters
    ----------
    queries
        Lazy queries, typically over one frame.
    rows
        Rows of their (largest) input frame; it picks the engine as for
        :func:`collect`.

    Returns
    -------
    list of polars.DataFrame
        Each query's result, in the order of ``queries``.

    Examples
    --------
    >>> df = pl.DataFrame({"a": [1, 2, 3]}).lazy()
    >>> [r.item() for r in collect_all([df.select(pl.len()), df.sum()], 3)]
    [3, 6]
    """
    if _PICKS_ENGINE and rows < SMALL_ROWS:
        results: list[pl.DataFrame] = pl.collect_all(
            queries, engine="in-memory", **_flags(rows)
        )
        return results
    return pl.collect_all(queries)


def _flags(rows: int) -> dict[str, Any]:
    if _NO_OPTIMIZATIONS is not None and rows < UNOPTIMIZED_ROWS:
        return {"optimizations": _NO_OPTIMIZATIONS}
    return {}


def write_small_parquets(
    files: Mapping[Path, tuple[pl.DataFrame, dict[str, str] | None]],
) -> None:
    """Write small frames to Parquet files, LZ4 without column statistics.

    Parameters
    ----------
    files
        Path -> (frame, key-value metadata or ``None``).

    Notes
    -----
    Under polars 2 the files are written as one batch of sink queries, in
    parallel and with one call's overhead: a window of the online store
    as it was written then (its CP rows and ten summary frames) took
    7.4/7.4/6.7 ms against 10.5/10.1/8.5 ms one file at a time (medians,
    three alternating runs).
    Polars 1 writes them one at a time.

    Examples
    --------
    >>> import tempfile
    >>> df = pl.DataFrame({"a": [1, 2]})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_small_parquets({Path(d, "a.parquet"): (df, {"k": "v"})})
    ...     pl.read_parquet(Path(d, "a.parquet"))["a"].to_list()
    [1, 2]
    """
    options = {"compression": "lz4", "statistics": False}
    if not _PICKS_ENGINE:
        for path, (frame, metadata) in files.items():
            frame.write_parquet(path, metadata=metadata, **options)  # type: ignore[arg-type]
        return
    sinks = [
        frame.lazy().sink_parquet(path, metadata=metadata, lazy=True, **options)  # type: ignore[arg-type, call-overload]
        for path, (frame, metadata) in files.items()
    ]
    rows = max((len(frame) for frame, _ in files.values()), default=0)
    collect_all(sinks, rows)
