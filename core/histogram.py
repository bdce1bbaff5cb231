"""Equi-width histograms on a power-of-two grid: exact to build, exact to merge.

Bin i of a grid with exponent e covers [i * 2**e, (i+1) * 2**e) of the binning domain. For a
set of values we pick the smallest e (no finer than integers, or than the float spacing of the
largest magnitude) that spans them in at most `max_bins` bins. A grid of exponent e nests in
every grid of exponent e' > e (bin i goes to bin i >> (e' - e)), so merging histograms is a
shift and a sum, and the merged histogram is exactly the one built over all values at once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lakestats.core.errors import LakestatsError


@dataclass
class Histogram:
    exponent: int
    start: int                       # index of the first bin (Python int: uint64 grids exceed int64)
    counts: np.ndarray               # int64, first and last bins non-empty
    neg_inf: int = 0                 # -inf values (float domain only)
    pos_inf: int = 0
    # floats need their own lower bound on the exponent: the grid never goes finer than the
    # spacing of floats around the largest magnitude, so bin indices stay exact in int64
    float_domain: bool = field(default=False)
    low: int | float | None = None   # smallest and largest binned (finite) value
    high: int | float | None = None

    @property
    def total(self) -> int:
        return int(self.counts.sum()) + self.neg_inf + self.pos_inf


def _span(lo: int, hi: int, e: int) -> int:
    return (hi >> e) - (lo >> e) + 1


def _fit(lo: int, hi: int, e: int, max_bins: int) -> int:
    """Smallest exponent >= e whose grid spans index range [lo, hi] (at exponent e) in max_bins."""
    if hi - lo + 1 <= max_bins:
        return e
    # jump close to the answer, then step
    shift = max(0, (hi - lo).bit_length() - max_bins.bit_length() - 1)
    while _span(lo, hi, shift) > max_bins:
        shift += 1
    return e + shift


def build(values: np.ndarray, max_bins: int) -> Histogram | None:
    """Histogram of non-null, non-NaN values (int64, uint64 or float64 array)."""
    if values.dtype.kind == "f":
        return _build_float(values, max_bins)
    if values.size == 0:
        return None
    lo, hi = int(values.min()), int(values.max())
    e = _fit(lo, hi, 0, max_bins)
    idx = values >> values.dtype.type(e)
    first = int(idx.min())
    counts = np.bincount((idx - idx.dtype.type(first)).astype(np.int64), minlength=_span(lo, hi, e))
    return Histogram(e, first, counts.astype(np.int64), low=lo, high=hi)


def _float_floor_exponent(magnitude: float) -> int:
    # the spacing of floats around the magnitude, and never finer than that of subnormals
    # (2**-1074): finer bin edges would not be representable
    if magnitude == 0:
        return -1074
    return max(math.frexp(magnitude)[1] - 53, -1074)


def _build_float(values: np.ndarray, max_bins: int) -> Histogram | None:
    finite = np.isfinite(values)
    neg_inf = int(np.count_nonzero(values == -np.inf))
    pos_inf = int(np.count_nonzero(values == np.inf))
    values = values[finite] if neg_inf or pos_inf else values
    if values.size == 0:
        if not (neg_inf or pos_inf):
            return None
        return Histogram(0, 0, np.zeros(0, np.int64), neg_inf, pos_inf, float_domain=True)
    lo, hi = float(values.min()), float(values.max())
    e0 = _float_floor_exponent(max(abs(lo), abs(hi)))
    e = _fit(_float_index(lo, e0), _float_index(hi, e0), e0, max_bins)
    scaled = np.ldexp(values, -e)
    idx = np.floor(scaled).astype(np.int64)
    idx[(scaled == 0) & (values < 0)] = -1      # tiny negatives that underflowed to -0.0
    first = int(idx.min())
    counts = np.bincount(idx - first, minlength=_span_float(lo, hi, e))
    return Histogram(e, first, counts.astype(np.int64), neg_inf, pos_inf, float_domain=True,
                     low=lo, high=hi)


def _float_index(x: float, e: int) -> int:
    """floor(x / 2**e), exactly: x * 2**-e may underflow, and a negative x is then in bin -1."""
    scaled = math.ldexp(x, -e)
    return -1 if scaled == 0 and x < 0 else math.floor(scaled)


def _span_float(lo: float, hi: float, e: int) -> int:
    return _float_index(hi, e) - _float_index(lo, e) + 1


def merge(histograms: list[Histogram | None], max_bins: int) -> Histogram | None:
    """The histogram of the union of the values behind `histograms`, on the grid build() would
    pick for that union."""
    hs = [h for h in histograms if h is not None]
    if not hs:
        return None
    neg_inf = sum(h.neg_inf for h in hs)
    pos_inf = sum(h.pos_inf for h in hs)
    float_domain = any(h.float_domain for h in hs)
    binned = [h for h in hs if h.counts.size]
    if not binned:
        return Histogram(0, 0, np.zeros(0, np.int64), neg_inf, pos_inf, float_domain)
    if len(hs) == 1 and hs[0].counts.size <= max_bins:      # already on its own grid
        return hs[0]
    e = max(h.exponent for h in binned)
    while True:
        lo = min(h.start >> (e - h.exponent) for h in binned)
        hi = max((h.start + h.counts.size - 1) >> (e - h.exponent) for h in binned)
        if hi - lo + 1 <= max_bins:
            break
        e += 1
    counts = np.zeros(hi - lo + 1, np.int64)
    for h in binned:
        np.add.at(counts, _bins_on(h, e, lo), h.counts)
    return Histogram(e, lo, counts, neg_inf, pos_inf, float_domain,
                     low=min(h.low for h in binned), high=max(h.high for h in binned))


def _bins_on(h: Histogram, e: int, first: int) -> np.ndarray:
    """Where each of h's bins falls on the coarser (or equal) grid of exponent e, whose
    first bin is `first`."""
    s = e - h.exponent
    base = h.start >> s
    rem = h.start - (base << s)           # 0 <= rem < 2**s: keeps the shift inside int64
    if s < 62:
        offsets = (np.arange(h.counts.size, dtype=np.int64) + rem) >> s
    else:                                  # a grid this much coarser holds all in 1-2 bins
        offsets = np.array([(rem + j) >> s for j in range(h.counts.size)], np.int64)
    return offsets + (base - first)


def subtract(h: Histogram | None, removed: list[Histogram | None],
             remaining: tuple[int | float | None, int | float | None] | None
             ) -> Histogram | None:
    """h without the values behind `removed` (histograms of some of h's values), exactly.
    `remaining` is (smallest, largest) finite value left in the binning domain ((None, None)
    when none is left), or None when not known. Counts come off on h's grid, and empty bins
    at the edges go: the grid is build()'s for what is left, unless build() would now pick a
    finer one; then h's coarser grid stays, its counts as exact (compute --exact merges anew).
    Raises GridChanged when a removed histogram held an extreme and `remaining` is unknown."""
    parts = [r for r in removed if r is not None]
    if h is None or not parts:
        return h
    binned = [r for r in parts if r.counts.size]
    neg_inf = h.neg_inf - sum(r.neg_inf for r in parts)
    pos_inf = h.pos_inf - sum(r.pos_inf for r in parts)
    low, high = h.low, h.high
    if any(r.low <= h.low or r.high >= h.high for r in binned):
        if remaining is None:
            raise GridChanged("a removed partition held the smallest or largest value")
        low, high = remaining
    if low is None:                                 # no finite value left
        return Histogram(0, 0, np.zeros(0, np.int64), neg_inf, pos_inf,
                         h.float_domain) if neg_inf or pos_inf else None
    counts = h.counts.copy()
    for r in binned:
        np.subtract.at(counts, _bins_on(r, h.exponent, h.start), r.counts)
    first, last = _index(low, h), _index(high, h)
    return Histogram(h.exponent, first, counts[first - h.start:last - h.start + 1], neg_inf,
                     pos_inf, h.float_domain, low, high)


def _index(x: int | float, h: Histogram) -> int:
    """The bin of h's grid that holds x."""
    return _float_index(x, h.exponent) if h.float_domain else int(x) >> h.exponent


class GridChanged(LakestatsError):
    """A histogram cannot be taken apart on its grid; merge it anew."""


def edges(h: Histogram) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper edges of each bin (int64 or uint64 numbers, or float64 in the float
    domain). Integer bins are closed [lower, upper] and clipped to the values' range; float
    bins are half-open [lower, upper)."""
    n = h.counts.size
    if h.float_domain:
        idx = np.arange(n + 1, dtype=np.int64) + np.int64(h.start)     # exact: int64 indices
        with np.errstate(over="ignore"):
            bounds = np.ldexp(idx.astype(np.float64), h.exponent)     # beyond float64: +-inf
        return bounds[:-1], bounds[1:]
    wide = h.high is not None and h.high > np.iinfo(np.int64).max     # a uint64 grid
    dtype = np.uint64 if wide else np.int64
    lowers = (np.arange(n, dtype=dtype) + dtype(h.start)) << dtype(h.exponent)
    if not n:
        return lowers, lowers.copy()
    uppers = np.empty_like(lowers)
    uppers[:-1] = lowers[1:] - dtype(1)
    # the last upper edge may lie beyond the type ((start + n) << e): clip it in Python ints
    uppers[-1] = min(((h.start + n) << h.exponent) - 1, h.high)
    lowers[0] = max(int(lowers[0]), h.low)
    return lowers, uppers
