"""Statistics of one column of one partition, accumulated chunk by chunk with Arrow kernels."""
from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from metastore import hashing
from metastore import histogram as hist
from metastore import types as ty
from metastore.bloom import BloomFilter

KLL_K = 200
# columns with more distinct values than this in a partition get a Bloom filter: membership
# tests then need not read the partition's frequencies
BLOOM_MIN_DISTINCT = 1_000


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
    if pa.types.is_decimal(t):
        return decimal_floats(arr)
    values = arr.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return values[~np.isnan(values)] if pa.types.is_floating(t) else values


def decimal_floats(arr: pa.Array) -> np.ndarray:
    """Decimals (no nulls) as their nearest float64. Arrow's decimal-to-float cast can be an ulp
    off, which moves values across bin edges; one division of exact doubles is correctly rounded
    (unscaled values below 2**53, scales up to 22), Arrow's text parser is in general."""
    t = arr.type
    if pa.types.is_decimal128(t) and t.scale <= 22:
        words = _words(arr)[0]
        low, high = words[:, 0].view(np.int64), words[:, 1].view(np.int64)
        if ((high == low >> 63) & (low > -2**53) & (low < 2**53)).all():
            return low.astype(np.float64) / 10.0 ** t.scale
    return arr.cast(pa.string()).cast(pa.float64()).to_numpy(zero_copy_only=False)


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
    """Overflow-free sum of an integer array."""
    values = arr.to_numpy(zero_copy_only=False)
    return _exact_sum(values.astype(np.uint64 if values.dtype == np.uint64 else np.int64,
                                    copy=False))


def _exact_sum(values: np.ndarray) -> int:
    """Sum of an int64 or uint64 array: split into 32-bit halves that each sum in 64 bits."""
    high_type = np.uint64 if values.dtype == np.uint64 else np.int64
    high = values >> values.dtype.type(32)
    low = (values & values.dtype.type(0xFFFFFFFF)).astype(np.uint64)
    total = 0
    for start in range(0, values.size, 1 << 30):   # each half stays below 2**63 per slice
        total += int(high[start:start + (1 << 30)].sum(dtype=high_type)) << 32
        total += int(low[start:start + (1 << 30)].sum(dtype=np.uint64))
    return total


def _words(values: pa.Array) -> tuple[np.ndarray, bool]:
    """Integers or decimals' unscaled integers (no nulls) as rows of little-endian 64-bit words,
    and whether the last word is signed (two's complement)."""
    t = values.type
    if pa.types.is_integer(t):
        unsigned = pa.types.is_uint64(t)
        ints = values.to_numpy(zero_copy_only=False).astype(
            np.uint64 if unsigned else np.int64, copy=False)
        return ints.view(np.uint64).reshape(-1, 1), not unsigned
    if t.byte_width < 16:                               # decimal32 / decimal64
        values = values.cast(pa.decimal128(t.precision, t.scale))
    width = values.type.byte_width // 8
    words = np.frombuffer(values.buffers()[1], np.uint64)
    words = words[values.offset * width:(values.offset + len(values)) * width]
    return words.reshape(-1, width), True


def exact_moments(values: pa.Array) -> "Moments":
    """Moments of integers or decimals (no nulls) with their exact total. Deviations are taken
    from the smallest value in exact integer arithmetic before going to float64, so values far
    from zero but close together keep their spread."""
    words, signed = _words(values)
    n, width = words.shape
    scale = values.type.scale if pa.types.is_decimal(values.type) else 0
    total = 0
    for k in range(width):
        column = words[:, k]
        top = signed and k == width - 1
        total += _exact_sum(column.view(np.int64) if top else column) << (64 * k)
    mm = pc.min_max(values)["min"]
    pivot_words = _words(pa.repeat(mm, 1))[0][0]
    pivot = sum(int(w) << (64 * k) for k, w in enumerate(pivot_words))
    if signed and pivot_words[-1] >> np.uint64(63):
        pivot -= 1 << (64 * width)
    deviations = np.zeros(n, np.float64)
    borrow = np.zeros(n, np.uint64)
    for k in range(width):                # value - pivot, word by word: >= 0, < 2**(64 * width)
        column, p = words[:, k], pivot_words[k]
        deviations += np.ldexp((column - p - borrow).astype(np.float64), 64 * k)
        borrow = ((column < p) | ((column == p) & (borrow == 1))).astype(np.uint64)
    moments = Moments.of(deviations, (total - n * pivot) / n)
    exact = total if not pa.types.is_decimal(values.type) else \
        decimal.Decimal(total).scaleb(-scale, ty.EXACT_DECIMALS)
    m2 = moments.m2 / 10 ** (2 * scale) if isinstance(moments.m2, Fraction) else moments.m2
    return Moments(n, float(Fraction(total, n) / 10 ** scale), m2, exact)


def _rounded(x: Fraction) -> Fraction:
    """x to 53 significant bits (a float's precision, without a float's exponent range), so
    that merged sums of squares stay small fractions."""
    if x == 0:
        return x
    k = x.numerator.bit_length() - x.denominator.bit_length()
    return Fraction(float(x / Fraction(2) ** k)) * Fraction(2) ** k


def _sqrt(x: Fraction) -> float:
    if x == 0:
        return 0.0
    k = (x.numerator.bit_length() - x.denominator.bit_length()) // 2 * 2
    try:
        return math.ldexp(math.sqrt(float(x / Fraction(2) ** k)), k // 2)
    except OverflowError:
        return math.inf


class Moments:
    """Count, mean and M2 (sum of squared deviations), merged with Chan et al.'s formula. M2 is
    a Fraction (squares of deviations beyond 1e154 overflow float64), or NaN when infinities
    make it undefined. Integer and decimal moments carry their exact total, so that merges take
    the difference of two means exactly."""

    def __init__(self, n: int = 0, mean: float = 0.0, m2: Fraction | float = 0,
                 total: int | decimal.Decimal | None = None):
        self.n, self.mean, self.total = n, mean, total
        self.m2 = m2 if isinstance(m2, Fraction) else (
            Fraction(m2) if math.isfinite(m2) else math.nan)

    def merge(self, other: "Moments") -> None:
        if other.n == 0:
            return
        if self.n == 0:
            self.n, self.mean, self.m2, self.total = other.n, other.mean, other.m2, other.total
            return
        n = self.n + other.n
        if self.total is not None and other.total is not None:
            delta = Fraction(other.total) / other.n - Fraction(self.total) / self.n
            with decimal.localcontext(ty.EXACT_DECIMALS):
                self.total = self.total + other.total
            self.mean = float(Fraction(self.total) / n)
        elif math.isfinite(self.mean) and math.isfinite(other.mean):
            delta = Fraction(other.mean) - Fraction(self.mean)
            self.mean = float(Fraction(self.mean) + delta * other.n / n)
        else:   # infinities: let IEEE arithmetic decide (inf, or nan for inf - inf)
            self.mean = (self.mean * self.n + other.mean * other.n) / n
            self.m2, self.n = math.nan, n
            return
        if isinstance(self.m2, Fraction) and isinstance(other.m2, Fraction):
            self.m2 = _rounded(self.m2 + other.m2 + delta * delta * self.n * other.n / n)
        else:
            self.m2 = math.nan
        self.n = n

    @classmethod
    def of(cls, values: np.ndarray, mean: float | None = None) -> "Moments":
        if values.size == 0:
            return cls()
        with np.errstate(invalid="ignore", over="ignore"):   # inf - inf is NaN, by design
            if not np.isfinite(values).all():
                return cls(values.size, float(values.mean()) if mean is None else mean, math.nan)
            # scaled by a power of two into [-1, 1]: neither the sum nor the squares overflow
            # (values near 1e308) or underflow (values near 1e-308)
            top = float(np.abs(values).max())
            k = math.frexp(top)[1] if top else 0
            scaled = np.ldexp(values, -k)
            m = math.ldexp(float(scaled.mean()), k) if mean is None else mean
            m2 = float(np.square(scaled - math.ldexp(m, -k)).sum())
        return cls(values.size, m, Fraction(m2) * Fraction(2) ** (2 * k))

    @property
    def stddev(self) -> float | None:
        if self.n < 2:
            return None
        return _sqrt(self.m2 / (self.n - 1)) if isinstance(self.m2, Fraction) else math.nan


class ColumnStats:
    """Feed `add` the column's chunks (row groups); `finish` gives the statistics row, the value
    counts (for frequencies.parquet) and the histogram."""

    def __init__(self, name: str, arrow_type: pa.DataType, max_bins: int,
                 bloom_min_distinct: int = BLOOM_MIN_DISTINCT):
        self.name, self.type = name, arrow_type
        self.kind = ty.kind_of(arrow_type)
        self.max_bins, self.bloom_min_distinct = max_bins, bloom_min_distinct
        self.row_count = self.null_count = self.nan_count = 0
        self.true_count = 0
        self.extremes: list[pa.Scalar] = []
        self.value_counts: list[pa.StructArray] = []
        self.sum: int | Decimal | float = 0
        self.moments = Moments()
        self.lengths = [None, None, 0]         # min, max, total
        self.histograms: list[hist.Histogram | None] = []
        self.kll = ds.kll_doubles_sketch(KLL_K)

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
            self.kll.update(binned.astype(np.float64))      # vectorized: ~30 ns a value

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
            row["quantile_sketch"] = None if self.kll.is_empty() else self.kll.serialize()
        # frequencies are always complete: the table-level algorithms reduce them exactly
        text = ty.to_text(counts["value"].combine_chunks())
        hashes = hashing.hash_text(text)
        row["frequencies_complete"] = True
        row["ndv_sketch"] = hashing.kmv_to_bytes(hashing.kmv(hashes))
        if counts.num_rows > self.bloom_min_distinct:
            bloom = BloomFilter.sized(counts.num_rows)
            bloom.add(hashes)
            row["bloom_filter"] = bloom.to_bytes()
        return row, pa.table({"value": text, "frequency": counts["count"]}), histogram

    def _merged_value_counts(self) -> pa.Table:
        """The row groups' value counts summed: one hash pass (dictionary_encode) and a bincount,
        several times faster than a group-by."""
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


def sum_by_value(values: pa.Array | pa.ChunkedArray, counts: np.ndarray
                 ) -> tuple[pa.Array, np.ndarray]:
    """Distinct values and their summed counts: one hash pass (dictionary_encode) and a
    bincount, several times faster than a group-by. Exact below 2**53 rows."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    encoded = pc.dictionary_encode(values)
    summed = np.bincount(encoded.indices.to_numpy(), weights=counts,
                         minlength=len(encoded.dictionary))
    return encoded.dictionary, summed.astype(np.int64)


def _number_text(value) -> str:
    if isinstance(value, float):
        return ty.scalar_text(pa.scalar(value, pa.float64()))
    return str(value)


def _mean(total, n: int, float_mean: float) -> float:
    if isinstance(total, float):
        return float_mean
    return float(total / n) if isinstance(total, Decimal) else total / n   # int / int rounds once
