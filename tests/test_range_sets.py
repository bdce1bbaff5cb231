"""Range-sets: the paper's Lemma 1 examples, union, compaction, and properties against plain
set arithmetic over the integers."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from itertools import combinations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from lakestats.core import range_sets as rs
from lakestats.core.range_sets import RangeSet


def test_lemma_1_examples():
    a = rs.build(np.array([0, 11, 12, 14, 22]), 2)
    b = rs.build(np.array([0, 4, 5, 10, 24, 25]), 2)
    assert a.pairs() == [(0, 0), (11, 22)]
    assert b.pairs() == [(0, 10), (24, 25)]
    assert rs.build(np.array(sorted({0, 11, 12, 14, 22, 4, 5, 10, 24, 25})), 2).pairs() == \
        [(0, 14), (22, 25)]


def test_union_then_compaction_covers_every_value():
    merged = rs.union([rs.build(np.array([0, 11, 12, 14, 22]), 2),
                       rs.build(np.array([0, 4, 5, 10, 24, 25]), 2)])
    assert merged.pairs() == [(0, 10), (11, 22), (24, 25)]
    compacted = rs.compact(merged, 2)
    assert compacted.pairs() == [(0, 22), (24, 25)]
    assert all(compacted.contains(v) for v in [0, 11, 12, 14, 22, 4, 5, 10, 24, 25])


def test_touching_ranges_merge():
    # the date_dim example: partitions P1 and P2 survive `year <= 1995`
    dip = rs.union([RangeSet.of([(3000, 3500), (4000, 5000)]),
                    RangeSet.of([(1000, 2000), (5000, 6000)])])
    assert dip.pairs() == [(1000, 2000), (3000, 3500), (4000, 6000)]


def test_overlaps_date_dim_fact_partitions():
    dip = RangeSet.of([(1000, 2000), (3000, 3500), (4000, 6000)])
    zone_dip = RangeSet.of([(1000, 6000)])
    fact = [(2100, 2900), (3600, 3900), (5500, 7500), (6500, 6900), (12500, 13000)]
    lows, highs = np.array([f[0] for f in fact]), np.array([f[1] for f in fact])
    owners = np.arange(len(fact))
    assert rs.overlaps(lows, highs, owners, len(fact), dip).tolist() == \
        [False, False, True, False, False]
    assert rs.overlaps(lows, highs, owners, len(fact), zone_dip).tolist() == \
        [True, True, True, False, False]


def test_values_of_any_order_compare_as_they_are():
    decimals = RangeSet.of([(Decimal("0.10"), Decimal("0.20")), (Decimal("0.15"), Decimal("1"))])
    assert decimals.pairs() == [(Decimal("0.10"), Decimal("1"))]
    days = np.array(["2024-01-01", "2024-01-02", "2024-03-01"], "datetime64[D]")
    assert [(str(a), str(b)) for a, b in zip(*[x.astype(str) for x in
                                               (rs.build(days, 2).lows, rs.build(days, 2).highs)])] \
        == [("2024-01-01", "2024-01-02"), ("2024-03-01", "2024-03-01")]
    words = rs.compact(RangeSet.of([("a", "b"), ("d", "e"), ("g", "h")]), 2)
    assert len(words) == 2 and words.lows[0] == "a" and words.highs[-1] == "h"
    assert rs.union([RangeSet.of([(dt.date(2024, 1, 1), dt.date(2024, 1, 5))]),
                     RangeSet.of([(dt.date(2024, 1, 5), dt.date(2024, 2, 1))])]).pairs() == \
        [(dt.date(2024, 1, 1), dt.date(2024, 2, 1))]


def _covered(r: RangeSet, domain) -> set[int]:
    return {v for v in domain if r.contains(v)}


small_sets = st.lists(st.integers(-30, 30), min_size=1, max_size=14, unique=True).map(sorted)


@given(small_sets, st.integers(1, 6))
def test_build_covers_every_value_with_least_width(values, n):
    built = rs.build(np.array(values), n)
    assert len(built) <= n and _covered(built, values) == set(values)
    # Lemma 1: no choice of n ranges over these values is narrower (brute force)
    best = min(sum(values[j - 1] - values[i] for i, j in zip((0,) + c, c + (len(values),)))
               for c in combinations(range(1, len(values)), min(n, len(values)) - 1))
    assert sum(built.highs - built.lows) == best


ranges = st.lists(st.tuples(st.integers(-30, 30), st.integers(0, 8)), max_size=6).map(
    lambda xs: RangeSet.of([(a, a + w) for a, w in xs]) if xs else rs.empty(np.array([], int)))


@given(ranges, ranges, st.integers(1, 4))
def test_set_algebra_matches_plain_sets(a, b, n):
    domain = range(-40, 45)
    assert _covered(rs.union([a, b]), domain) == _covered(a, domain) | _covered(b, domain)
    assert _covered(rs.intersection(a, b), domain) == _covered(a, domain) & _covered(b, domain)
    assert _covered(rs.compact(a, n), domain) >= _covered(a, domain)
    assert len(rs.compact(a, n)) <= max(n, 0) or len(a) <= n
    for x in (a, b, rs.union([a, b]), rs.intersection(a, b)):       # sorted, disjoint
        assert all(x.lows <= x.highs) and all(x.highs[:-1] < x.lows[1:])
    # overlaps: does each of b's ranges meet a?
    if len(b):
        hits = rs.overlaps(b.lows, b.highs, np.arange(len(b)), len(b), a)
        assert hits.tolist() == [bool(_covered(a, range(lo, hi + 1))) for lo, hi in b.pairs()]
