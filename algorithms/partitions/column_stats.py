"""Statistics of one column of one partition, accumulated chunk by chunk with Arrow kernels."""
from __future__ import annotations

from decimal import Decimal

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import hashing, range_sets, theta
from lakestats.core import histogram as hist
from lakestats.core import types as ty
from lakestats.core import udf
from lakestats.core.binning import binning_values
from lakestats.core.bloom import BloomFilter
from lakestats.core.counting import sum_by_value, value_counts
from lakestats.core.exact import Moments, exact_moments, fitting_int64
from lakestats.core.settings import RANGE_SET_SIZE

KLL_K = 200
# a column's values held before they are counted: one count over a file's row groups, not a
# count each and a merge of the counts (a quarter of the kernel's counting, on TPC-H lineitem)
UNCOUNTED_BYTES = 32 << 20


class ColumnStats:
    """Feed `add` the column's chunks (row groups); `finish` gives the statistics row, the value
    counts (for frequencies.parquet) and the histogram."""

    def __init__(self, name: str, arrow_type: pa.DataType, max_bins: int,
                 bloom_min_distinct: int, statistics: tuple[udf.Statistic, ...] = (),
                 range_set_size: int = RANGE_SET_SIZE):
        self.name, self.type = name, arrow_type
        self.kind = ty.kind_of(arrow_type)
        self.max_bins, self.bloom_min_distinct = max_bins, bloom_min_distinct
        self.range_set_size = range_set_size
        self.row_count = self.null_count = self.nan_count = 0
        self.true_count = 0
        self.extremes: list[pa.Scalar] = []
        self.value_counts: list[pa.StructArray] = []
        self.uncounted: list[pa.Array] = []
        self.uncounted_bytes = 0
        self.sum: int | Decimal | float = 0
        self.moments = Moments()
        self.lengths = [None, None, 0]         # min, max, total
        self.histograms: list[hist.Histogram | None] = []
        self.kll = ds.kll_doubles_sketch(KLL_K)
        self.plugins = udf.Accumulator(statistics, arrow_type)

    def add(self, arr: pa.Array) -> None:
        self.row_count += len(arr)
        self.null_count += arr.null_count
        if arr.null_count == len(arr):
            return
        if self.kind == ty.OTHER:
            if self.plugins.statistics:
                self.plugins.add(arr.drop_null())
            return
        values = ty.normalize(arr)      # first: Arrow cannot filter view types (string_view)
        if values.null_count:
            values = values.drop_null()
        if self.plugins.statistics:
            self.plugins.add(values)
        self.uncounted.append(values)
        self.uncounted_bytes += values.nbytes
        if self.uncounted_bytes > UNCOUNTED_BYTES:
            self._count()
        if self.kind == ty.FLOAT:
            nan = pc.is_nan(values)
            nans = pc.sum(nan).as_py()
            if nans:
                self.nan_count += nans
                values = values.filter(pc.invert(nan))
        if len(values) == 0:
            return
        extremes = ty.min_max(values)
        if self.kind == ty.TEMPORAL:
            ty.reads_back(extremes)
        self.extremes += extremes
        if self.kind == ty.BOOLEAN:
            self.true_count += pc.sum(values).as_py()
        elif self.kind in ty.LENGTH_KINDS:
            lengths = pc.utf8_length(values) if self.kind == ty.STRING else pc.binary_length(values)
            lmm = pc.min_max(lengths)
            lo, hi, total = self.lengths
            self.lengths = [lmm["min"].as_py() if lo is None else min(lo, lmm["min"].as_py()),
                            lmm["max"].as_py() if hi is None else max(hi, lmm["max"].as_py()),
                            total + pc.sum(lengths.cast(pa.int64())).as_py()]
        if self.kind in ty.NUMERIC_KINDS:
            self._add_moments(values)
        if self.kind in ty.BINNED_KINDS:
            binned = binning_values(values)
            self.histograms.append(hist.build(binned, self.max_bins))
            self.kll.update(binned.astype(np.float64))      # vectorized: ~30 ns a value

    def _count(self) -> None:
        if self.uncounted:
            self.value_counts.append(value_counts(pa.concat_arrays(self.uncounted)))
            self.uncounted, self.uncounted_bytes = [], 0

    def _add_moments(self, values: pa.Array) -> None:
        if self.kind in (ty.INTEGER, ty.DECIMAL):     # exact sums (decimal256 sums overflow)
            moments = exact_moments(values)
            self.sum = ty.EXACT_DECIMALS.add(self.sum, moments.total) \
                if self.kind == ty.DECIMAL else self.sum + moments.total
            self.moments.merge(moments)
        else:
            as_float = values.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
            with np.errstate(invalid="ignore", over="ignore"):
                self.sum += float(as_float.sum())
            self.moments.merge(Moments.of(as_float))

    def finish(self) -> tuple[dict, pa.Table | None, hist.Histogram | None]:
        row = {"column": self.name, "type": str(self.type), "row_count": self.row_count,
               "null_count": self.null_count, **self.plugins.row()}
        if self.kind == ty.OTHER:
            return row, None, None
        self._count()
        counts = self._merged_value_counts()
        row["distinct_count"] = counts.num_rows
        row["distinct_count_exact"] = True
        if self.kind == ty.FLOAT:
            row["nan_count"] = self.nan_count
        if self.extremes:
            extremes = pa.array(self.extremes, self.extremes[0].type)
            if len(extremes) > 2:                  # [min, max] of each chunk
                extremes = pa.array(ty.min_max(extremes), extremes.type)
            row["min"], row["max"] = ty.to_text(extremes).to_pylist()
        n = self.row_count - self.null_count - self.nan_count
        if self.kind in ty.NUMERIC_KINDS and n:
            row["sum"] = _number_text(self.sum)
            row["mean"] = _mean(self.sum, n, self.moments.mean)
            row["stddev"] = self.moments.stddev
        if self.kind in ty.LENGTH_KINDS and n:
            row["min_length"], row["max_length"] = self.lengths[0], self.lengths[1]
            row["avg_length"] = self.lengths[2] / n
        if self.kind == ty.BOOLEAN:
            row["true_count"] = self.true_count
        values = counts["value"].combine_chunks()
        text = ty.to_text(values)
        histogram = None
        if self.kind in ty.BINNED_KINDS:
            histogram = hist.merge(self.histograms, self.max_bins)
            row["histogram_exponent"] = histogram.exponent if histogram else None
            row["quantile_sketch"] = None if self.kll.is_empty() else self.kll.serialize()
            row["range_set"] = _range_set(values, text, self.range_set_size)
        # frequencies are always complete: the table-level algorithms reduce them exactly
        hashes = hashing.hash_text(text)
        row["frequencies_complete"] = True
        row["ndv_sketch"] = hashing.kmv_to_bytes(hashing.kmv(hashes))
        iceberg_hashes = theta.hashes(values)
        if iceberg_hashes is not None:
            row["theta_sketch"] = theta.sketch(iceberg_hashes)
        if counts.num_rows > self.bloom_min_distinct:
            bloom = BloomFilter.sized(counts.num_rows)
            bloom.add(hashes)
            row["bloom_filter"] = bloom.to_bytes()
        return row, pa.table({"value": text, "frequency": counts["count"]}), histogram

    def _merged_value_counts(self) -> pa.Table:
        """The row groups' value counts, summed."""
        if not self.value_counts:
            return pa.table({"value": pa.array([], ty.value_type(self.type)),
                             "count": pa.array([], pa.int64())})
        if len(self.value_counts) == 1:
            values, counts = self.value_counts[0].flatten()
            return pa.table({"value": values, "count": counts})
        values, counts = sum_by_value(
            pa.concat_arrays([vc.field(0) for vc in self.value_counts]),
            np.concatenate([vc.field(1).to_numpy() for vc in self.value_counts]))
        return pa.table({"value": values, "count": counts})


def _range_set(values: pa.Array, text: pa.Array, n: int) -> list[str] | None:
    """The distinct values' range-set (core.range_sets, Lemma 1) as canonical text (`text`:
    the values'): low1, high1, low2, ...; NaN left out, as from min and max."""
    if pa.types.is_floating(values.type):
        numbers = pc.invert(pc.is_nan(values))
        values, text = values.filter(numbers), text.filter(numbers)
    if not len(values):
        return None
    positions = _exact_positions(values)
    if positions is None:                     # wide decimals: Arrow sorts them exactly
        order = pc.sort_indices(values).to_numpy()
        positions = binning_values(values.take(order))
    else:
        order = np.argsort(positions, kind="stable")
        positions = positions[order]
    first, last = range_sets.split_points(positions, n)
    return text.take(order[np.column_stack([first, last]).ravel()]).to_pylist()


def _exact_positions(values: pa.Array) -> np.ndarray | None:
    """Values on a number line that orders them exactly: integers, times and floats as they
    are, decimals as their unscaled integers while these fit 64 bits (one scale: the same
    order and gaps in proportion); None for wider decimals."""
    return fitting_int64(values) if pa.types.is_decimal(values.type) else binning_values(values)


def _number_text(value) -> str:
    if isinstance(value, float):
        return ty.scalar_text(pa.scalar(value, pa.float64()))
    return str(value)


def _mean(total, n: int, float_mean: float) -> float:
    if isinstance(total, float):
        return float_mean
    return float(total / n) if isinstance(total, Decimal) else total / n   # int / int rounds once
