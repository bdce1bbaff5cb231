"""Statistics of one column of one partition, accumulated chunk by chunk with Arrow kernels."""
from __future__ import annotations

import collections
import math
from decimal import Decimal

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from metastore import histogram as hist
from metastore import types as ty

KLL_K = 200
HLL_LG_K = 12


def binning_values(arr: pa.Array) -> np.ndarray:
    """Non-null, non-NaN values in the binning domain: the integer storage of integers and
    temporal values, the float64 value of floats and decimals."""
    t = arr.type
    if pa.types.is_integer(t):
        return arr.to_numpy(zero_copy_only=False).astype(
            np.uint64 if pa.types.is_uint64(t) else np.int64, copy=False)
    if pa.types.is_temporal(t):
        width = pa.int32() if t.bit_width == 32 else pa.int64()
        return arr.view(width).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    values = arr.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return values[~np.isnan(values)] if pa.types.is_floating(t) else values


def min_max(values: pa.Array) -> list[pa.Scalar]:
    """[min, max] of non-null values; durations compare as their integer counts."""
    if pa.types.is_duration(values.type):
        mm = pc.min_max(values.view(pa.int64()))
        return [pa.scalar(mm[k].as_py(), pa.int64()).cast(values.type) for k in ("min", "max")]
    mm = pc.min_max(values)
    return [mm["min"], mm["max"]]


def value_counts(values: pa.Array) -> pa.StructArray:
    """pc.value_counts, with decimals of up to 18 digits hashed as their unscaled int64
    (Arrow hashes decimal128 several times slower than int64)."""
    t = values.type
    if not (pa.types.is_decimal128(t) and t.precision <= 18) or values.null_count:
        return pc.value_counts(values)
    counted = pc.value_counts(pa.array(unscaled_int64(values)))
    keys = counted.field(0).to_numpy()
    storage = np.empty(2 * len(keys), np.int64)
    storage[0::2], storage[1::2] = keys, keys >> 63
    decimals = pa.Array.from_buffers(t, len(keys), [None, pa.py_buffer(storage)])
    return pa.StructArray.from_arrays([decimals, counted.field(1)], names=["values", "counts"])


def unscaled_int64(values: pa.Array) -> np.ndarray:
    """The unscaled integers of a decimal128 array of at most 18 digits (no nulls): the low
    64-bit word of each value, the high word being only its sign."""
    words = np.frombuffer(values.buffers()[1], np.int64)
    return words[2 * values.offset: 2 * (values.offset + len(values)): 2]


def exact_int_sum(arr: pa.Array) -> int:
    """Overflow-free sum of an integer array: split into 32-bit halves that each sum in 64 bits."""
    values = arr.to_numpy(zero_copy_only=False)
    if values.dtype == np.uint64:
        return int((values >> np.uint64(32)).sum(dtype=np.uint64)) * 2**32 + int(
            (values & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64))
    values = values.astype(np.int64, copy=False)
    high = values >> np.int64(32)
    low = (values & np.int64(0xFFFFFFFF)).astype(np.uint64)
    total = 0
    for start in range(0, values.size, 1 << 30):   # each half stays below 2**63 per slice
        total += int(high[start:start + (1 << 30)].sum()) * 2**32
        total += int(low[start:start + (1 << 30)].sum(dtype=np.uint64))
    return total


class Moments:
    """Count, mean and M2 (sum of squared deviations), merged with Chan et al.'s formula."""

    def __init__(self, n: int = 0, mean: float = 0.0, m2: float = 0.0):
        self.n, self.mean, self.m2 = n, mean, m2

    def merge(self, other: "Moments") -> None:
        if other.n == 0:
            return
        if self.n == 0:
            self.n, self.mean, self.m2 = other.n, other.mean, other.m2
            return
        n = self.n + other.n
        delta = other.mean - self.mean
        if math.isfinite(delta):
            self.m2 += other.m2 + delta * delta * self.n * other.n / n
            self.mean += delta * other.n / n
        else:   # infinities: let IEEE arithmetic decide (inf, or nan for inf - inf)
            self.mean = (self.mean * self.n + other.mean * other.n) / n
            self.m2 = math.nan
        self.n = n

    @classmethod
    def of(cls, values: np.ndarray, mean: float | None = None) -> "Moments":
        if values.size == 0:
            return cls()
        with np.errstate(invalid="ignore", over="ignore"):   # inf - inf is NaN, by design
            m = float(values.mean()) if mean is None else mean
            m2 = float(np.square(values - m).sum()) if math.isfinite(m) else math.nan
        return cls(values.size, m, m2)

    @property
    def stddev(self) -> float | None:
        if self.n < 2:
            return None
        return math.sqrt(self.m2 / (self.n - 1)) if self.m2 >= 0 else math.nan


class ColumnStats:
    """Feed `add` the column's chunks (row groups); `finish` gives the statistics row, the value
    counts (for frequencies.parquet) and the histogram."""

    def __init__(self, name: str, arrow_type: pa.DataType, max_bins: int,
                 frequency_max_distinct: int):
        self.name, self.type = name, arrow_type
        self.kind = ty.kind_of(arrow_type)
        self.max_bins, self.frequency_max_distinct = max_bins, frequency_max_distinct
        self.row_count = self.null_count = self.nan_count = 0
        self.true_count = 0
        self.extremes: list[pa.Scalar] = []
        self.value_counts: list[pa.StructArray] = []
        self.sum: int | Decimal | float = 0
        self.moments = Moments()
        self.lengths = [None, None, 0]         # min, max, total
        self.histograms: list[hist.Histogram | None] = []

    def add(self, arr: pa.Array) -> None:
        self.row_count += len(arr)
        self.null_count += arr.null_count
        if self.kind == ty.OTHER or arr.null_count == len(arr):
            return
        values = ty.normalize(arr.drop_null() if arr.null_count else arr)
        self.value_counts.append(value_counts(values))
        if self.kind == ty.FLOAT:
            nan = pc.is_nan(values)
            nans = pc.sum(nan).as_py()
            if nans:
                self.nan_count += nans
                values = values.filter(pc.invert(nan))
        if len(values) == 0:
            return
        self.extremes += min_max(values)
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

    def _add_moments(self, values: pa.Array) -> None:
        as_float = values.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        if self.kind == ty.INTEGER:
            exact = exact_int_sum(values)
            self.sum += exact
            self.moments.merge(Moments.of(as_float, exact / len(values)))
        elif self.kind == ty.DECIMAL:
            wide = values.cast(pa.decimal256(76, values.type.scale))   # no overflow
            self.sum = ty.EXACT_DECIMALS.add(self.sum, pc.sum(wide).as_py())
            self.moments.merge(Moments.of(as_float))
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                self.sum += float(as_float.sum())
            self.moments.merge(Moments.of(as_float))

    def finish(self) -> tuple[dict, pa.Table | None, hist.Histogram | None]:
        row = {"column": self.name, "type": str(self.type), "row_count": self.row_count,
               "null_count": self.null_count}
        if self.kind == ty.OTHER:
            return row, None, None
        counts = self._merged_value_counts()
        row["distinct_count"] = counts.num_rows
        row["distinct_count_exact"] = True
        if self.kind == ty.FLOAT:
            row["nan_count"] = self.nan_count
        if self.extremes:
            low, high = min_max(pa.array(self.extremes, self.extremes[0].type))
            row["min"], row["max"] = ty.scalar_text(low), ty.scalar_text(high)
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
        histogram = None
        if self.kind in ty.BINNED_KINDS:
            histogram = hist.merge(self.histograms, self.max_bins)
            row["histogram_exponent"] = histogram.exponent if histogram else None
        frequencies = None
        row["frequencies_complete"] = counts.num_rows <= self.frequency_max_distinct
        if row["frequencies_complete"]:
            frequencies = pa.table({"value": ty.to_text(counts["value"]),
                                    "frequency": counts["count"]})
        else:   # complete frequencies make sketches redundant: both derive from them exactly
            row["ndv_sketch"], row["quantile_sketch"] = sketches(
                counts["value"].combine_chunks(), counts["count"].to_numpy())
        return row, frequencies, histogram

    def _merged_value_counts(self) -> pa.Table:
        """The row groups' value counts summed: one hash pass (dictionary_encode) and a bincount,
        several times faster than a group-by."""
        if not self.value_counts:
            return pa.table({"value": pa.array([], ty.value_type(self.type)),
                             "count": pa.array([], pa.int64())})
        if len(self.value_counts) == 1:
            values, counts = self.value_counts[0].flatten()
            return pa.table({"value": values, "count": counts})
        values = pa.concat_arrays([vc.field(0) for vc in self.value_counts])
        counts = np.concatenate([vc.field(1).to_numpy() for vc in self.value_counts])
        encoded = pc.dictionary_encode(values)
        summed = np.bincount(encoded.indices.to_numpy(), weights=counts,
                             minlength=len(encoded.dictionary))   # exact below 2**53 rows
        return pa.table({"value": encoded.dictionary, "count": summed.astype(np.int64)})


def sketches(values: pa.Array, counts: np.ndarray) -> tuple[bytes, bytes | None]:
    """From distinct values and their counts: the HLL of the values and, for binned kinds, the
    KLL of every value (each distinct value repeated by its count)."""
    hll = ndv_sketch(values).serialize_compact()
    if ty.kind_of(values.type) not in ty.BINNED_KINDS:
        return hll, None
    if ty.kind_of(values.type) == ty.FLOAT:
        keep = pc.invert(pc.is_nan(values))
        values, counts = values.filter(keep), counts[keep.to_numpy(zero_copy_only=False)]
    kll = ds.kll_doubles_sketch(KLL_K)
    kll.update(np.repeat(binning_values(values).astype(np.float64), counts))
    return hll, kll.serialize()


def ndv_sketch(values: pa.Array) -> ds.hll_sketch:
    """HLL of distinct values. Numbers hash as numbers (integers of any width alike; decimals
    of up to 15 digits, which float64 holds exactly, as floats), everything else as its
    canonical text."""
    sketch = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_8)
    t = values.type
    if pa.types.is_uint64(t):            # the sketch takes signed 64-bit integers
        values = values.view(pa.int64())
    if pa.types.is_decimal(t) and t.precision <= 15:
        values = values.cast(pa.float64())
    if ty.kind_of(values.type) in (ty.INTEGER, ty.FLOAT):   # numpy's tolist is the fastest way
        items = values.to_numpy(zero_copy_only=False).tolist()
    else:
        items = ty.to_text(values).to_pylist()
    # DataSketches' Python API takes one item per call; map() keeps the loop in C
    collections.deque(map(sketch.update, items), maxlen=0)
    return sketch


def _number_text(value) -> str:
    if isinstance(value, float):
        return ty.scalar_text(pa.scalar(value, pa.float64()))
    return str(value)


def _mean(total, n: int, float_mean: float) -> float:
    if isinstance(total, float):
        return float_mean
    return float(total / n) if isinstance(total, Decimal) else total / n   # int / int rounds once
