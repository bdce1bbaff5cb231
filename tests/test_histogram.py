"""Histograms taken apart: a removed partition's values come off exactly, whether or not it
held the smallest or largest value; the grid is build()'s for what is left, or a coarser one
whose every bin still counts exactly the values in it."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from lakestats.core import histogram as hist

INTS = st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=40)
FLOATS = st.lists(st.one_of(st.floats(allow_nan=False, width=64),
                            st.sampled_from([0.0, -0.0, 1.5, -1e-300, 1e300])),
                  min_size=1, max_size=40)


def rebinned(h: hist.Histogram, e: int, start: int, size: int) -> np.ndarray:
    """h's counts on the grid of exponent e (>= h's) that starts at bin `start`."""
    out = np.zeros(size, np.int64)
    np.add.at(out, hist._bins_on(h, e, start), h.counts)
    return out


def finite_range(values: np.ndarray):
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if not finite.size:
        return None, None
    number = float if values.dtype.kind == "f" else int
    return number(finite.min()), number(finite.max())


@seed(20261123)
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(INTS, FLOATS), min_size=2, max_size=5),
       gone=st.sets(st.integers(0, 4), min_size=1), max_bins=st.sampled_from([4, 16, 1000]))
def test_subtract_is_exact(parts, gone, max_bins):
    dtype = np.float64 if any(isinstance(v, float) for p in parts for v in p) else np.int64
    arrays = [np.array(p, dtype) for p in parts]
    gone = {g for g in gone if g < len(arrays)}
    if not gone or len(gone) == len(arrays):
        return
    whole = hist.merge([hist.build(a, max_bins) for a in arrays], max_bins)
    left = np.concatenate([a for i, a in enumerate(arrays) if i not in gone])
    got = hist.subtract(whole, [hist.build(arrays[i], max_bins) for i in sorted(gone)],
                        finite_range(left))
    want = hist.build(left, max_bins)
    if want is None or not want.counts.size:
        assert got == want or (got is not None and not got.counts.size
                               and (got.neg_inf, got.pos_inf) == (want.neg_inf, want.pos_inf))
        return
    assert (got.low, got.high, got.neg_inf, got.pos_inf) == (want.low, want.high, want.neg_inf,
                                                            want.pos_inf)
    assert got.exponent >= want.exponent and got.counts[0] and got.counts[-1]
    assert np.array_equal(got.counts, rebinned(want, got.exponent, got.start, got.counts.size))
    if got.exponent == want.exponent:
        assert got.start == want.start and np.array_equal(got.counts, want.counts)


def test_an_unknown_range_asks_for_a_merge_anew():
    whole = hist.build(np.arange(10, dtype=np.int64), 1000)
    with pytest.raises(hist.GridChanged):
        hist.subtract(whole, [hist.build(np.array([9], np.int64), 1000)], None)
    inside = hist.subtract(whole, [hist.build(np.array([4], np.int64), 1000)], None)
    assert inside.counts.tolist() == [1, 1, 1, 1, 0, 1, 1, 1, 1, 1]
