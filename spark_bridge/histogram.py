"""Spark's equi-height histograms, built from lakestats' exact data.

Spark (ANALYZE ... FOR ALL COLUMNS with histograms) cuts a column at the percentiles k/B,
k = 0..B, and keeps per bin (lo, hi] its number of distinct values. We cut at the same
percentiles (percentile_disc: the value at rank ceil(k/B * n)), exactly when the table keeps the
column's complete frequencies, else by interpolating inside our fine equal-width bins.
Values are in Spark's internal numeric domain: days for dates, microseconds for timestamps.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class EquiHeight:
    height: float                 # values per bin
    bins: list[tuple[float, float, int]]   # (lo, hi, distinct values)


def from_frequencies(values: np.ndarray, counts: np.ndarray, num_bins: int) -> EquiHeight | None:
    """Exact: `values` are the distinct values (any order), `counts` their frequencies."""
    if values.size == 0:
        return None
    order = np.argsort(values, kind="stable")
    values, counts = values[order].astype(np.float64), counts[order]
    cumulative = np.cumsum(counts)
    n = int(cumulative[-1])
    ranks = np.maximum(np.ceil(np.arange(num_bins + 1) * n / num_bins), 1)
    ends = values[np.searchsorted(cumulative, ranks)]
    # distinct values in (lo, hi]: the first bin also holds lo itself
    upto = np.searchsorted(values, ends, side="right")
    ndv = np.diff(upto)
    ndv[0] += 1
    return EquiHeight(n / num_bins, [(float(ends[k]), float(ends[k + 1]), int(ndv[k]))
                                     for k in range(num_bins)])


def from_bins(lowers: np.ndarray, ends: np.ndarray, counts: np.ndarray, low: float,
              high: float, integral: bool, distinct: int, num_bins: int) -> EquiHeight | None:
    """Interpolated within lakestats' fine bins [lowers, ends) holding `counts` values between
    `low` and `high`; distinct values are spread evenly over the bins."""
    n = int(counts.sum())
    if n == 0:
        return None
    cumulative = np.cumsum(counts)
    targets = np.arange(num_bins + 1) * n / num_bins
    i = np.minimum(np.searchsorted(cumulative, targets, side="left"), counts.size - 1)
    before = np.where(i > 0, cumulative[i - 1], 0)
    share = np.clip((targets - before) / np.maximum(counts[i], 1), 0, 1)
    with np.errstate(invalid="ignore"):       # the infinite bins: inf - inf
        points = np.where(ends[i] == lowers[i], lowers[i], lowers[i] + share * (ends[i] - lowers[i]))
    if integral:
        points = np.floor(points)
    points = np.clip(points, low, high)
    points[0], points[-1] = low, high
    per_bin = max(1, round(distinct / num_bins))
    widths = np.diff(points) + 1 if integral else np.full(num_bins, np.inf)
    return EquiHeight(n / num_bins, [(float(points[k]), float(points[k + 1]),
                                      int(max(1, min(per_bin, widths[k]))))
                                     for k in range(num_bins)])
