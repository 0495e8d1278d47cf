"""Small queries skip polars' optimizer and still give the optimized result."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktrail.pag import query_engine
from sparktrail.pag.query_engine import UNOPTIMIZED_ROWS, collect, collect_all


def _query(frame: pl.DataFrame) -> pl.LazyFrame:
    """A join, a mixed-type filter and a group-by: what the summaries run."""
    names = pl.DataFrame({"k": [0, 1, 2], "name": ["a", "b", None]}).lazy()
    return (
        frame.lazy()
        .join(names, on="k", how="left")
        .with_columns(share=pl.col("v") / pl.col("v").sum())
        .filter((pl.col("share") > 0.1) & (pl.col("k") < 2.5))
        .group_by("name")
        .agg(pl.col("v").sum(), pl.len().alias("n"))
        .sort("name", nulls_last=True)
    )


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 100)), min_size=1, max_size=40)
)
@settings(max_examples=60, deadline=None)
def test_a_small_query_unoptimized_equals_it_optimized(
    rows: list[tuple[int, int]],
) -> None:
    # GIVEN a query over a small frame
    frame = pl.DataFrame(rows, schema={"k": pl.Int64, "v": pl.Int64}, orient="row")
    assert len(frame) < UNOPTIMIZED_ROWS
    # WHEN it runs as small (unoptimized) and as large (optimized) input
    small = collect(_query(frame), len(frame))
    large = collect(_query(frame), UNOPTIMIZED_ROWS)
    both = collect_all([_query(frame), _query(frame).head(1)], len(frame))
    # THEN the results are the same
    assert small.equals(large)
    assert both[0].equals(large) and both[1].equals(large.head(1))


def test_only_small_inputs_skip_the_optimizer(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    run = pl.LazyFrame.collect

    def noting(self: pl.LazyFrame, *args: object, **kwargs: object) -> pl.DataFrame:
        seen.append(kwargs.get("optimizations"))
        return run(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pl.LazyFrame, "collect", noting)
    query = pl.LazyFrame({"a": [1]}).select(pl.col("a") + 1)
    collect(query, UNOPTIMIZED_ROWS - 1)
    collect(query, UNOPTIMIZED_ROWS)
    skips = query_engine._PICKS_ENGINE and query_engine._NO_OPTIMIZATIONS
    if not skips:  # polars 1 (no engine to pick, or no QueryOptFlags)
        assert seen == [None, None]
    else:
        assert seen == [query_engine._NO_OPTIMIZATIONS, None]
