"""Ranges and flags over many partitions at once: a column's statistics as arrays, the
array forms of range arithmetic and of comparison with a constant (NotArrays where the
bounds do not compute as arrays), and scalar rules lifted to arrays, partition by
partition, where they have no array form."""
from __future__ import annotations

import decimal
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from lakestats.core.errors import LakestatsError
from lakestats.pruning.ranges import (COMPARISONS, MAYBE, NAN_LEFT, UNKNOWN, Flags, Range,
                                      aligned, aligned_already)

# what a rule may raise on values it cannot reason about: that range or flag is unknown
RULE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, OverflowError,
               ZeroDivisionError, decimal.InvalidOperation)


def quiet() -> np.errstate:
    """numpy's operators over Python floats: inf * 0 and comparisons with NaN raise the
    FPU's invalid flag, 1e300 * 1e10 its overflow flag, which numpy would report as a
    warning after the loop; the values are right (nan, inf)."""
    return np.errstate(invalid="ignore", over="ignore")


@dataclass
class Ranges:
    """Range's fields over many partitions: bounds as object arrays of Python values, the
    rest as boolean arrays; `column` set when the expression is a bare column."""
    low: np.ndarray
    high: np.ndarray
    values: np.ndarray
    nulls: np.ndarray
    nan: np.ndarray
    known: np.ndarray
    column: str | None = None

    @classmethod
    def of(cls, ranges: list[Range], column: str | None = None) -> Ranges:
        lows, highs = np.empty(len(ranges), object), np.empty(len(ranges), object)
        lows[:], highs[:] = [r.low for r in ranges], [r.high for r in ranges]
        return cls(lows, highs, *(np.array([getattr(r, k) for r in ranges], bool)
                                  for k in ("values", "nulls", "nan", "known")), column=column)

    @classmethod
    def broadcast(cls, r: Range, n: int) -> Ranges:
        """A constant's range in each of n partitions."""
        return cls(np.full(n, r.low, object), np.full(n, r.high, object),
                   *(np.full(n, getattr(r, k), bool) for k in ("values", "nulls", "nan", "known")))

    def __len__(self) -> int:
        return len(self.known)

    def known_only(self, usable: np.ndarray) -> Ranges:
        """These ranges where `usable`, UNKNOWN's fields elsewhere."""
        unusable = ~usable
        return Ranges(np.where(unusable, None, self.low), np.where(unusable, None, self.high),
                      self.values | unusable, self.nulls | unusable, self.nan & usable,
                      self.known & usable, self.column)

    def at(self, i: int) -> Range:
        return Range(self.low[i], self.high[i], bool(self.values[i]), bool(self.nulls[i]),
                     bool(self.nan[i]), bool(self.known[i]), self.column)


@dataclass
class FlagArrays:
    """Flags over many partitions."""
    true: np.ndarray
    false: np.ndarray
    null: np.ndarray

    @classmethod
    def of(cls, flags: list[Flags]) -> FlagArrays:
        return cls(*(np.array([getattr(f, k) for f in flags], bool)
                     for k in ("true", "false", "null")))

    @classmethod
    def broadcast(cls, f: Flags, n: int) -> FlagArrays:
        return cls(np.full(n, f.true), np.full(n, f.false), np.full(n, f.null))

    def maybe_where(self, unknown: np.ndarray) -> FlagArrays:
        """These flags, all raised where `unknown` (in place)."""
        self.true[unknown] = self.false[unknown] = self.null[unknown] = True
        return self

    def flags(self) -> list[Flags]:
        return [Flags(t, f, n) for t, f, n in zip(self.true.tolist(), self.false.tolist(),
                                                   self.null.tolist())]

    def negated(self) -> FlagArrays:
        return FlagArrays(self.false, self.true, self.null)

    def both(self, other: FlagArrays) -> FlagArrays:
        """AND: true where both may be; null where one may be null and neither is surely
        false."""
        a, b = self, other
        return FlagArrays(a.true & b.true, a.false | b.false,
                          (a.null | b.null) & (a.true | a.null) & (b.true | b.null))

    def either(self, other: FlagArrays) -> FlagArrays:
        return self.negated().both(other.negated()).negated()


class NotArrays(LakestatsError):
    """These bounds do not compare as arrays: compare them one partition at a time."""


Value = Range | Ranges        # a constant's range, or one range per partition


def arith_arrays(a: Ranges, b: Ranges, op: str) -> Ranges:
    """arith(a_i, b_i, op) in every partition i, as arrays; NotArrays where the bounds do not
    compute as plain Python operators do (dates plus days or months, mixed types)."""
    known, both = a.known & b.known, a.values & b.values
    at = np.flatnonzero(known & both)
    low, high = np.full(len(a), None, object), np.full(len(a), None, object)
    al, ah, bl, bh = a.low[at], a.high[at], b.low[at], b.high[at]
    try:
        with quiet():
            if op == "+":
                low[at], high[at] = al + bl, ah + bh
            elif op == "-":
                low[at], high[at] = al + -bh, ah + -bl
            else:                   # the extremes are among the corners, as min and max pick
                corners = [al * bl, al * bh, ah * bl, ah * bh]
                low[at], high[at] = _first(corners, np.less), _first(corners, np.greater)
    except (TypeError, ValueError, OverflowError, decimal.InvalidOperation):
        raise NotArrays from None
    return Ranges(low, high, both, a.nulls | b.nulls, a.nan | b.nan, known).known_only(known)


def _first(items: list[np.ndarray], beats) -> np.ndarray:
    """Element by element, the first of the items no later one beats (Python's min or max)."""
    out = items[0].copy()
    for x in items[1:]:
        take = beats(x, out).astype(bool)
        out[take] = x[take]
    return out


def compare_constant(op: type, a: Ranges, b: Range) -> FlagArrays:
    """compare(op, a_i, b) for every partition i, as arrays; NotArrays where the bounds do
    not compare as arrays (a NaN constant; bounds of other types)."""
    n = len(a)
    if not b.known:
        return FlagArrays.broadcast(MAYBE, n)
    if b.nan:
        raise NotArrays
    null = a.nulls | b.nulls
    if not b.values:                           # NULL: no row can be true or false
        out = FlagArrays(np.zeros(n, bool), np.zeros(n, bool), a.values | a.nan | a.nulls)
    else:
        true, false = np.zeros(n, bool), np.zeros(n, bool)
        held = np.flatnonzero(a.values & a.known)
        if held.size:
            try:    # ValueError: a string Spark casts and lakestats cannot ('yesterday')
                lows, highs = _aligned_all(a.low[held], b.low), _aligned_all(a.high[held], b.low)
                with quiet():
                    true[held], false[held] = COMPARISONS[op](Range(lows, highs),
                                                              aligned(b, a.low[held[0]]))
            except (TypeError, ValueError):
                raise NotArrays from None
        true |= a.nan & NAN_LEFT[op]
        false |= a.nan & (not NAN_LEFT[op])
        out = FlagArrays(true, false, null)
    return out.maybe_where(~a.known)


def _aligned_all(values: np.ndarray, like) -> np.ndarray:
    """Bounds in like's type (aligned), when their type is not like's already (nothing
    aligns to a string: the string aligns to them)."""
    if values.size == 0 or aligned_already(values[0], like) or isinstance(like, str):
        return values
    out = np.empty(values.size, object)
    out[:] = [aligned(Range(v, v), like).low for v in values]
    return out


# -- scalar rules lifted to arrays: once over constants, else partition by partition


def each(fn: Callable[..., Range], *args: Value) -> Value:
    """fn over ranges: once over constants, else partition by partition (unknown in a
    partition where it fails)."""
    n = next((len(a) for a in args if isinstance(a, Ranges)), None)
    if n is None:
        return safe(fn, UNKNOWN, *args)
    return Ranges.of([safe(fn, UNKNOWN, *(in_partition(a, i) for a in args))
                      for i in range(n)])


def mapped(fn: Callable, v: Value) -> Value:
    """A non-decreasing function over the bounds, so that they bound its values: as arrays,
    else partition by partition (unknown where it fails)."""
    def one(r: Range) -> Range:
        if not r.known or r.nan:
            return UNKNOWN
        if not r.values:
            return replace(r, column=None)
        return Range(fn(r.low), fn(r.high), values=True, nulls=r.nulls)

    if isinstance(v, Ranges):
        try:
            usable = v.known & ~v.nan
            at = np.flatnonzero(usable & v.values)
            low, high = v.low.copy(), v.high.copy()
            low[at] = [fn(x) for x in v.low[at].tolist()]
            high[at] = [fn(x) for x in v.high[at].tolist()]
            return Ranges(low, high, v.values, v.nulls, v.nan, v.known).known_only(usable)
        except RULE_ERRORS:
            pass
    return each(one, v)


def each_flags(fn: Callable[..., Flags], n: int, *args: Value) -> FlagArrays:
    return FlagArrays.of([safe(fn, MAYBE, *(in_partition(a, i) for a in args))
                          for i in range(n)])


def safe(fn, unknown, *args):
    try:
        return fn(*args)
    except RULE_ERRORS:
        return unknown


def union_arrays(parts: list[tuple[np.ndarray, Ranges]], n: int) -> Ranges:
    """In each of n partitions, the union (ranges.union) of the ranges whose mask holds there;
    NotArrays where their bounds do not compare as arrays."""
    low, high = np.full(n, None, object), np.full(n, None, object)
    anything, known = np.zeros(n, bool), np.ones(n, bool)
    values, nulls, nan = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    for mask, r in parts:
        anything |= mask
        known &= ~mask | r.known
        nulls |= mask & r.nulls
        nan |= mask & r.nan
        added = np.flatnonzero(mask & r.values & r.known)
        first, more = added[~values[added]], added[values[added]]
        low[first], high[first] = r.low[first], r.high[first]
        if more.size:
            try:
                low[more] = np.minimum(low[more], r.low[more])
                high[more] = np.maximum(high[more], r.high[more])
            except TypeError:
                raise NotArrays from None
        values[added] = True
    known &= anything
    return Ranges(low, high, values, nulls, nan, known).known_only(known)


def fitting(v: Value, bits: int) -> Value:
    """v, unknown where its integer bounds overflow a Spark integer of `bits` bits (an error
    under ANSI, a wrap-around under legacy arithmetic: neither is the exact value); v as it
    is for bits 0 (no integer type)."""
    if bits == 0:
        return v
    low, high = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    if isinstance(v, Range):
        fits = not (v.known and v.values) or all(
            not isinstance(x, int) or low <= x <= high for x in (v.low, v.high))
        return v if fits else UNKNOWN
    at, fits = np.flatnonzero(v.known & v.values), np.ones(len(v), bool)
    try:
        fits[at] = ~((v.low[at] < low) | (v.high[at] > high)).astype(bool)
    except TypeError:                                  # dates, strings: no integers
        return v
    return v.known_only(fits)


def in_partition(v: Value, i: int) -> Range:
    return v.at(i) if isinstance(v, Ranges) else v


def lift(v: Value, n: int) -> Ranges:
    return v if isinstance(v, Ranges) else Ranges.broadcast(v, n)
