"""Exact arithmetic over Arrow arrays: integers and decimals as 64-bit words, overflow-free
sums, and moments (count, mean, sum of squared deviations) that merge with Chan et al.'s
pairwise formula, exactly where the values are integers or decimals."""
from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import types as ty


def unscaled_int64(values: pa.Array) -> np.ndarray:
    """The unscaled integers of a decimal128 array of at most 18 digits (no nulls): the low
    64-bit word of each value, the high word being only its sign."""
    words = np.frombuffer(values.buffers()[1], np.int64)
    return words[2 * values.offset: 2 * (values.offset + len(values)): 2]


def exact_sum(values: np.ndarray) -> int:
    """Sum of an int64 or uint64 array: split into 32-bit halves that each sum in 64 bits."""
    high_type = np.uint64 if values.dtype == np.uint64 else np.int64
    high = values >> values.dtype.type(32)
    low = (values & values.dtype.type(0xFFFFFFFF)).astype(np.uint64)
    total = 0
    for start in range(0, values.size, 1 << 30):   # each half stays below 2**63 per slice
        total += int(high[start:start + (1 << 30)].sum(dtype=high_type)) << 32
        total += int(low[start:start + (1 << 30)].sum(dtype=np.uint64))
    return total


def fitting_int64(values: pa.Array) -> np.ndarray | None:
    """Decimals' (no nulls) unscaled integers as int64 when every one fits, else None."""
    words, _ = as_words(values)
    low = words[:, 0].view(np.int64)
    return low if (words[:, 1:].view(np.int64) == (low >> 63)[:, None]).all() else None


def as_words(values: pa.Array) -> tuple[np.ndarray, bool]:
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
    words, signed = as_words(values)
    n, width = words.shape
    scale = values.type.scale if pa.types.is_decimal(values.type) else 0
    total = 0
    for k in range(width):
        column = words[:, k]
        top = signed and k == width - 1
        total += exact_sum(column.view(np.int64) if top else column) << (64 * k)
    if width == 1:                        # integers: the smallest by NumPy, not via Arrow
        column = words[:, 0]
        pivot_words = np.array([column.view(np.int64).min() if signed else column.min()]
                               ).view(np.uint64)
    else:
        pivot_words = as_words(pa.repeat(pc.min_max(values)["min"], 1))[0][0]
    pivot = sum(int(w) << (64 * k) for k, w in enumerate(pivot_words))
    if signed and pivot_words[-1] >> np.uint64(63):
        pivot -= 1 << (64 * width)
    deviations = (words[:, 0] - pivot_words[0]).astype(np.float64)
    borrow = np.uint64(0)
    for k in range(1, width):             # value - pivot, word by word: >= 0, < 2**(64 * width)
        below, p = words[:, k - 1], pivot_words[k - 1]
        borrow = ((below < p) | ((below == p) & (borrow == 1))).astype(np.uint64)
        deviations += np.ldexp((words[:, k] - pivot_words[k] - borrow).astype(np.float64),
                               64 * k)
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

