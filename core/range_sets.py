"""Range-sets: at most n non-overlapping closed ranges [low, high] that cover every value of a
column ("Pushing Data-Induced Predicates Through Joins", the statistic behind join pruning).

A range-set is two numpy arrays, lows and highs, sorted, with lows[i] <= highs[i] <
lows[i + 1]. Values are numbers, numpy datetimes, or Python objects that order (Decimal, str):
every operation compares them as they are, so a bound is never rounded.

- `split_points` is Lemma 1: over sorted distinct values, cutting at the n - 1 largest gaps gives
  the n ranges of least total width that cover them all.
- `union` merges overlapping and touching ranges (a data-induced predicate from many
  partitions), `intersection` is AND, `overlaps` tests many range-sets against one at once,
  and `compact` merges across the smallest gaps: always a superset, so a compacted predicate
  stays a necessary condition.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

@dataclass(frozen=True)
class RangeSet:
    lows: np.ndarray
    highs: np.ndarray

    def __len__(self) -> int:
        return len(self.lows)

    @classmethod
    def of(cls, pairs) -> RangeSet:
        """From (low, high) pairs, in any order, overlapping or not."""
        pairs = list(pairs)
        return union([cls(values([p[0] for p in pairs]), values([p[1] for p in pairs]))])

    def pairs(self) -> list[tuple]:
        return list(zip(self.lows.tolist(), self.highs.tolist()))

    def contains(self, value) -> bool:
        i = int(np.searchsorted(self.highs, value, side="left"))
        return i < len(self) and self.lows[i] <= value


def values(items) -> np.ndarray:
    """Values as a range-set holds them: numpy's fixed-width strings become Python objects,
    which numpy's ufuncs order."""
    arr = np.asarray(items)
    return arr.astype(object) if arr.dtype.kind in "US" else arr


def empty(like: np.ndarray | None = None) -> RangeSet:
    dtype = like.dtype if like is not None else np.float64
    return RangeSet(np.array([], dtype), np.array([], dtype))


def split_points(positions: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Lemma 1 over sorted distinct values, given as positions on a number line (float64 is
    enough: positions only choose the cuts; the bounds are the values at the indices returned).
    Returns the first and last index of each range."""
    count = len(positions)
    if count == 0:
        return np.array([], np.int64), np.array([], np.int64)
    if count <= n:
        every = np.arange(count)
        return every, every
    gaps = np.diff(positions.astype(np.float64))
    # the n - 1 largest gaps; ties broken by position, so the same values give the same ranges
    order = np.lexsort((np.arange(len(gaps)), -gaps))
    cuts = np.sort(order[:n - 1])
    return np.concatenate([[0], cuts + 1]), np.concatenate([cuts, [count - 1]])


def build(values: np.ndarray, n: int) -> RangeSet:
    """The optimal range-set of sorted distinct numeric values."""
    first, last = split_points(values, n)
    return RangeSet(values[first], values[last])


def union(sets: list[RangeSet]) -> RangeSet:
    """Every value any of the sets covers; ranges that overlap or touch become one."""
    lows = np.concatenate([s.lows for s in sets]) if sets else np.array([])
    highs = np.concatenate([s.highs for s in sets]) if sets else np.array([])
    if len(lows) <= 1:
        return RangeSet(lows, highs)
    order = np.argsort(lows, kind="stable")
    lows, reach = lows[order], np.maximum.accumulate(highs[order])
    starts = np.flatnonzero(np.concatenate([[True], lows[1:] > reach[:-1]]))
    ends = np.concatenate([starts[1:] - 1, [len(lows) - 1]])
    return RangeSet(lows[starts], reach[ends])


def intersection(a: RangeSet, b: RangeSet) -> RangeSet:
    """The values both cover."""
    if not len(a) or not len(b):
        return empty(a.lows)
    first = np.searchsorted(b.highs, a.lows, side="left")       # first b range not below
    last = np.searchsorted(b.lows, a.highs, side="right")       # past the last b range not above
    counts = np.maximum(last - first, 0)
    i = np.repeat(np.arange(len(a)), counts)
    starts = np.cumsum(counts) - counts
    j = np.repeat(first, counts) + np.arange(len(i)) - np.repeat(starts, counts)
    lows = np.where(a.lows[i] >= b.lows[j], a.lows[i], b.lows[j])
    highs = np.where(a.highs[i] <= b.highs[j], a.highs[i], b.highs[j])
    return RangeSet(lows, highs)


def overlaps(lows: np.ndarray, highs: np.ndarray, owners: np.ndarray, count: int,
             predicate: RangeSet) -> np.ndarray:
    """For ranges (lows[i], highs[i]) of `count` owners (owners[i]), whether each owner has a
    range that meets the predicate: one binary search per range, whatever the owners."""
    hit = np.zeros(count, bool)
    if not len(predicate) or not len(lows):
        return hit
    j = np.searchsorted(predicate.highs, lows, side="left")    # first predicate range not below
    inside = j < len(predicate)
    meets = np.zeros(len(lows), bool)
    meets[inside] = predicate.lows[j[inside]] <= highs[inside]
    hit[owners[meets]] = True
    return hit


def compact(rs: RangeSet, n: int) -> RangeSet:
    """At most n ranges, merging across the smallest gaps (a superset of rs)."""
    if len(rs) <= n:
        return rs
    gaps = _gaps(rs)
    order = np.lexsort((np.arange(len(gaps)), -gaps))
    cuts = np.sort(order[:n - 1]) if n > 1 else np.array([], np.int64)
    first = np.concatenate([[0], cuts + 1])
    last = np.concatenate([cuts, [len(rs) - 1]])
    return RangeSet(rs.lows[first], rs.highs[last])


def _gaps(rs: RangeSet) -> np.ndarray:
    """The widths between consecutive ranges, as float64; all equal where values have no
    distance (strings): merging then keeps every other boundary evenly."""
    try:
        diff = rs.lows[1:] - rs.highs[:-1]
        if np.issubdtype(diff.dtype, np.timedelta64):
            diff = diff.astype(np.int64)
        return np.asarray(diff, np.float64)
    except (TypeError, ValueError):
        return np.ones(len(rs) - 1)
