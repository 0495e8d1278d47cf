"""Exact order statistics per group, from one sorted array of packed keys.

A median per group (a stage's task times, an executor's in a stage) is
usually taken on the group's values in memory: for a long run, 8 to 16
bytes a task while it is taken (DESIGN §10). :class:`SortedGroups` holds
every value in one array of 64-bit keys, ``group << bits | value - lo``,
sorted in place: the values of a group lie side by side in ascending
order, so its k-th smallest is one read at a known place, and how many of
its values lie at or below a value is one binary search. The caller puts
the keys in an array that may be memory-mapped
(:func:`~sparktrail.pag.trace.mapped_array`), filled a slice at a time;
nothing here takes memory by the value.

The k-th smallest of a group *without* a subgroup's values (an executor's
peers in a stage: the stage's tasks but its own) is a binary search over
the group's places, counting the subgroup's values at or below each
candidate in a second :class:`SortedGroups` of the same packing.

Assumptions
-----------
* Groups are integers in ``[0, n_groups)``; values are integers in
  ``[lo, lo + 2**bits)``, and ``(n_groups - 1).bit_length() + bits <= 64``
  (:func:`packing`, which says when they do not fit).
* A median is that of :func:`statistics.median`: the middle value, or the
  mean of the two middle values, as a float.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from .query_engine import collect
from .trace import (
    mapped_array,
    maps_in_place,
    release_if_long,
    slices_group_by,
    trace_slices,
)

__all__ = ["Packing", "SortedGroups", "packing", "slices_medians"]

_Array = np.ndarray[Any, Any]
_KEY = np.uint64


@dataclass(frozen=True)
class Packing:
    """How a (group, value) pair makes one key: ``group << bits | value - lo``."""

    lo: int
    bits: int

    def keys(self, groups: _Array, values: _Array) -> _Array:
        """The keys of ``groups`` and ``values`` (equal lengths).

        >>> Packing(lo=5, bits=4).keys(np.array([0, 1]), np.array([5, 7])).tolist()
        [0, 18]
        """
        shifted = (np.asarray(values, dtype=np.int64) - self.lo).astype(_KEY)
        return (np.asarray(groups).astype(_KEY) << _KEY(self.bits)) | shifted

    def values(self, keys: _Array) -> _Array:
        """The values (int64) that ``keys`` hold.

        >>> p = Packing(lo=5, bits=4)
        >>> p.values(p.keys(np.array([3]), np.array([9]))).tolist()
        [9]
        """
        mask = _KEY((1 << self.bits) - 1)
        return (np.asarray(keys, dtype=_KEY) & mask).astype(np.int64) + self.lo


def packing(n_groups: int, lo: int, hi: int) -> Packing | None:
    """The packing of groups ``[0, n_groups)`` and values ``[lo, hi]`` into
    64-bit keys, or None when they need more bits than that.

    >>> packing(16, 0, 1000)
    Packing(lo=0, bits=10)
    >>> packing(2**40, -(2**30), 2**30) is None
    True
    """
    if n_groups < 1 or hi < lo:
        raise ValueError(f"no packing for {n_groups} groups of values in [{lo}, {hi}]")
    bits = max(1, (hi - lo).bit_length())
    if (n_groups - 1).bit_length() + bits > 64:
        return None
    return Packing(lo=lo, bits=bits)


@dataclass(frozen=True)
class SortedGroups:
    """Keys of one :class:`Packing` sorted, and where each group starts.

    Build it with :meth:`of`, which sorts the keys in place.

    >>> p = Packing(lo=0, bits=8)
    >>> keys = p.keys(np.array([1, 0, 1, 1]), np.array([9, 4, 2, 5]))
    >>> g = SortedGroups.of(keys, p, 2)
    >>> g.counts().tolist(), g.medians().tolist()
    ([1, 3], [4.0, 5.0])
    """

    keys: _Array
    packing: Packing
    starts: _Array

    @classmethod
    def of(cls, keys: _Array, packing: Packing, n_groups: int) -> SortedGroups:
        """``keys`` (uint64, made by ``packing``) sorted in place, grouped
        into ``n_groups`` groups."""
        if keys.dtype != _KEY:
            raise TypeError(f"keys must be uint64 (packed), not {keys.dtype}")
        keys.sort()  # in place: a mapped array stays in its file
        firsts = np.arange(n_groups, dtype=_KEY) << _KEY(packing.bits)
        starts = np.searchsorted(keys, firsts, side="left")
        return cls(keys, packing, np.append(starts, len(keys)))

    def counts(self) -> _Array:
        """How many values each group holds."""
        return np.diff(self.starts)

    def kth(self, groups: _Array, k: _Array) -> _Array:
        """The ``k``-th smallest value (from 0) of each of ``groups``; each
        ``k`` must be below its group's count."""
        groups = np.asarray(groups, dtype=np.int64)
        k = np.asarray(k, dtype=np.int64)
        if np.any((k < 0) | (k >= self.counts()[groups])):
            raise IndexError("a k-th value beyond its group's values")
        return self.packing.values(self.keys[self.starts[groups] + k])

    def medians(self) -> _Array:
        """Each group's median (float; NaN for a group with no values)."""
        n = self.counts()
        out = np.full(len(n), np.nan)
        has = np.flatnonzero(n)
        lower = self.kth(has, (n[has] - 1) // 2)
        upper = self.kth(has, n[has] // 2)
        out[has] = (lower + upper) / 2
        return out

    def at_most(self, groups: _Array, values: _Array) -> _Array:
        """How many values of each of ``groups`` are at most its ``value``.

        >>> p = Packing(lo=0, bits=8)
        >>> g = SortedGroups.of(p.keys(np.array([0, 0, 1]), np.array([3, 5, 4])), p, 2)
        >>> g.at_most(np.array([0, 0, 1]), np.array([4, 9, 3])).tolist()
        [1, 2, 0]
        """
        groups = np.asarray(groups, dtype=np.int64)
        top = (1 << self.packing.bits) - 1
        shifted = np.clip(np.asarray(values, dtype=np.int64) - self.packing.lo, -1, top)
        below = shifted < 0  # under every value: none
        probe = (groups.astype(_KEY) << _KEY(self.packing.bits)) | np.maximum(
            shifted, 0
        ).astype(_KEY)
        ends = np.searchsorted(self.keys, probe, side="right")
        return np.where(below, 0, ends - self.starts[groups])

    def kth_without(
        self, groups: _Array, k: _Array, part: SortedGroups, part_groups: _Array
    ) -> _Array:
        """The ``k``-th smallest value (from 0) of each of ``groups`` once the
        values of ``part``'s group ``part_groups`` (of the same packing, and
        among the group's) are left out: a binary search over the group's
        places for the first whose value has ``k + 1`` others at or below
        it.

        >>> p = Packing(lo=0, bits=8)
        >>> times = np.array([1, 9, 3, 4])
        >>> stage = SortedGroups.of(p.keys(np.zeros(4, int), times), p, 1)
        >>> own = SortedGroups.of(p.keys(np.zeros(2, int), np.array([1, 3])), p, 1)
        >>> zero = np.zeros(2, int)
        >>> stage.kth_without(zero, np.array([0, 1]), own, zero).tolist()
        [4, 9]
        """
        if part.packing != self.packing:
            raise ValueError(f"packings differ: {part.packing} against {self.packing}")
        groups = np.asarray(groups, dtype=np.int64)
        part_groups = np.asarray(part_groups, dtype=np.int64)
        k = np.asarray(k, dtype=np.int64)
        left = self.starts[groups].astype(np.int64)
        right = self.starts[groups + 1].astype(np.int64) - 1
        others = (right - left + 1) - part.counts()[part_groups]
        if np.any((k < 0) | (k >= others)):
            raise IndexError("a k-th value beyond the group's other values")
        while np.any(left < right):
            middle = (left + right) // 2
            value = self.packing.values(self.keys[middle])
            seen = self.at_most(groups, value) - part.at_most(part_groups, value)
            enough = seen >= k + 1
            right = np.where(enough, middle, right)
            left = np.where(enough, left, middle + 1)
        return self.packing.values(self.keys[left])


def slices_medians(
    frame: pl.DataFrame,
    keys: list[str],
    values: list[pl.Expr],
    where: pl.Expr | None = None,
) -> pl.DataFrame:
    """Per group of ``keys`` of ``frame``'s rows (those ``where`` holds), the
    median (Float64) of each of ``values`` (named expressions; a null is
    left out, a group of none has a null median), as polars' ``median``.

    A frame of at most a slice is one group-by. A longer one (a long run's
    task facts, DESIGN §10) is read a slice at a time, a value after the
    other: its groups, counts and extremes first
    (:func:`~sparktrail.pag.trace.slices_group_by`), then its values packed
    into a mapped array (:func:`~sparktrail.pag.trace.mapped_array`) and
    sorted in place (:class:`SortedGroups`). A value that is not an integer
    or does not pack is taken by polars, in memory.

    >>> t = pl.DataFrame({"k": [1, 1, 2, 1], "v": [4, None, 7, 1]})
    >>> slices_medians(t, ["k"], [pl.col("v")]).sort("k").rows()
    [(1, 2.5), (2, 7.0)]
    """
    if not maps_in_place(frame.height):
        rows = frame.lazy() if where is None else frame.lazy().filter(where)
        medians = [v.median().cast(pl.Float64) for v in values]
        return collect(rows.group_by(keys).agg(medians), frame.height)
    names = [v.meta.output_name() for v in values]
    partial = [
        e
        for v, n in zip(values, names, strict=True)
        for e in (
            v.count().alias(f"{n} n"),
            v.min().alias(f"{n} lo"),
            v.max().alias(f"{n} hi"),
        )
    ]
    whole = [
        e
        for n in names
        for e in (
            pl.col(f"{n} n").sum(),
            pl.col(f"{n} lo").min(),
            pl.col(f"{n} hi").max(),
        )
    ]
    groups = slices_group_by(frame, keys, partial, whole, where)
    extents = groups.collect().with_row_index("group")
    out = extents.select(keys)
    for value, name in zip(values, names, strict=True):
        out = out.with_columns(_medians(frame, extents, keys, value, name, where))
        release_if_long(frame.height)
    return out


def _medians(
    frame: pl.DataFrame,
    extents: pl.DataFrame,
    keys: list[str],
    value: pl.Expr,
    name: str,
    where: pl.Expr | None,
) -> pl.Series:
    """The median of ``value`` in each group of ``extents``, in its order."""
    lo, hi = extents[f"{name} lo"].min(), extents[f"{name} hi"].max()
    pack = None
    if lo is not None and extents[f"{name} lo"].dtype.is_integer():
        pack = packing(len(extents), int(lo), int(hi))  # type: ignore[arg-type]
    if pack is None:  # no value at all, or polars' median in memory
        rows = frame.lazy() if where is None else frame.lazy().filter(where)
        query = rows.group_by(keys).agg(value.median().cast(pl.Float64))
        joined = extents.lazy().join(query, on=keys, how="left", nulls_equal=True)
        return collect(joined.sort("group"), frame.height)[name]
    packed = mapped_array(int(extents[f"{name} n"].sum()), np.uint64)
    group_of = extents.lazy().select(*keys, "group")
    filled = 0
    for _, part in trace_slices(frame):
        part_rows = part.lazy() if where is None else part.lazy().filter(where)
        taken = (
            part_rows.select(*keys, value.alias(name))
            .drop_nulls(name)
            .join(group_of, on=keys, how="inner", nulls_equal=True)
            .select("group", name)
            .collect()
        )
        end = filled + len(taken)
        packed[filled:end] = pack.keys(
            taken["group"].to_numpy(), taken[name].to_numpy()
        )
        filled = end
    medians = SortedGroups.of(packed[:filled], pack, len(extents)).medians()
    return pl.Series(name, medians).fill_nan(None)
