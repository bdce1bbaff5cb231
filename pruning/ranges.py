"""What predicates over statistics compute with: value ranges, three-valued flags, and their
arithmetic. A Range is a conservative [low, high] of an expression's possible non-null, non-NaN
values over a partition's rows; Flags say whether a predicate may be true, false or null for
some row. Spark semantics: NaN is above every number, comparisons with NULL are null."""
from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from dataclasses import dataclass, replace

import pyarrow as pa
from sqlglot import expressions as E

from lakestats.pruning.spark_types import INTEGRAL_BITS, decimal_type
from lakestats.pruning.temporal import SESSION_ZONE, Months


@dataclass(frozen=True)
class Range:
    """Possible values of an expression over a partition's rows."""
    low: object = None            # smallest possible non-null, non-NaN value (None: unbounded)
    high: object = None
    values: bool = True           # some row may have a non-null, non-NaN value
    nulls: bool = True            # some row may be null
    nan: bool = False             # some row may be NaN
    known: bool = True            # False: nothing is known (unsupported expression)
    column: str | None = None     # set when the expression is a bare column


UNKNOWN = Range(known=False)

def literal(value) -> Range:
    if value is None:
        return Range(values=False, nulls=True)
    if isinstance(value, float) and value != value:
        return Range(values=False, nulls=False, nan=True)
    return Range(value, value, values=True, nulls=False)


def sql_literal(node: E.Literal) -> Range:
    """A SQL literal's range: text, or the narrowest of integer, float and decimal."""
    if node.is_string:
        return literal(node.this)
    text = node.this
    try:
        return literal(int(text))
    except ValueError:
        pass
    if any(c in text.lower() for c in "e") or text.lower() in ("nan", "inf"):
        return literal(float(text))
    return literal(decimal.Decimal(text))


@dataclass(frozen=True)
class Flags:
    """Three-valued outcome over a partition's rows."""
    true: bool
    false: bool
    null: bool

    def negated(self) -> "Flags":
        return Flags(self.false, self.true, self.null)


MAYBE = Flags(True, True, True)


# -- arithmetic


def _product_bounds(pairs) -> tuple:
    """Interval multiplication: the extremes are among the corners, whatever the signs."""
    products = [a * b for a, b in pairs]
    return min(products), max(products)


def _combine(a: Range, b: Range, low, high) -> Range:
    return Range(low, high, values=a.values and b.values, nulls=a.nulls or b.nulls,
                 nan=a.nan or b.nan)


def arith(a: Range, b: Range, op: str) -> Range:
    """a op b for op in + - * (interval arithmetic; dates plus days or months)."""
    if not (a.known and b.known) or not (a.values and b.values):
        return UNKNOWN if not (a.known and b.known) else _combine(a, b, None, None)
    try:
        if op == "+":
            return _combine(a, b, _add(a.low, b.low), _add(a.high, b.high))
        if op == "-":
            return _combine(a, b, _add(a.low, _negate(b.high)), _add(a.high, _negate(b.low)))
        low, high = _product_bounds([(a.low, b.low), (a.low, b.high), (a.high, b.low),
                                     (a.high, b.high)])
        return _combine(a, b, low, high)
    except (TypeError, ValueError, OverflowError, decimal.InvalidOperation):
        return UNKNOWN


def _add(x, y):
    if isinstance(y, Months):
        return y.shift(x)
    if isinstance(x, Months):
        return x.shift(y)
    if isinstance(x, (dt.date, dt.datetime)) and isinstance(y, int) and not isinstance(y, bool):
        return x + dt.timedelta(days=y)           # date_add(d, n), d + n
    return x + y


CASTS = (*INTEGRAL_BITS, E.DataType.Type.DOUBLE, E.DataType.Type.FLOAT, E.DataType.Type.DECIMAL)


def cast_number(to: E.DataType, v):
    """Spark's CAST of a number v to the numeric type `to` (one of CASTS), a non-decreasing
    function of v, so that a range's bounds cast are the cast values' bounds; ValueError
    where that value is not certain: overflow (an error under ANSI, a wrap-around under
    legacy casts, NULL under try_cast), a float to a decimal, a value that is not a number."""
    if isinstance(v, bool):
        v = int(v)
    if not isinstance(v, (int, float, decimal.Decimal)):
        raise ValueError(f"CAST of {type(v).__name__}")
    target = to.this
    if target in INTEGRAL_BITS:                        # toward zero (NaN, inf: ValueError)
        bits, whole = INTEGRAL_BITS[target], math.trunc(v)
        if not -2 ** (bits - 1) <= whole < 2 ** (bits - 1):
            raise ValueError(f"{v} overflows {target.value}")
        return whole
    if target == E.DataType.Type.DOUBLE:
        return float(v)
    if target == E.DataType.Type.FLOAT:
        return to_float32(v)
    if target == E.DataType.Type.DECIMAL and not isinstance(v, float):
        return to_decimal(v, *decimal_type(to))
    raise ValueError(f"CAST to {target.value}")


def to_decimal(v: int | decimal.Decimal, precision: int, scale: int) -> decimal.Decimal:
    """v as a Spark DECIMAL(precision, scale): rounded half up (non-decreasing); ValueError
    where it overflows (NULL, or an error under ANSI)."""
    rounded = decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-scale),
                                          rounding=decimal.ROUND_HALF_UP)
    if abs(rounded) >= decimal.Decimal(10) ** (precision - scale):
        raise ValueError(f"{v} overflows DECIMAL({precision}, {scale})")
    return rounded


def to_float32(v) -> float:
    """v rounded to the nearest float32, ties to even, as Java's (float) rounds a long or a
    double (a non-decreasing function); ValueError where it overflows, or where v is a decimal
    whose rounding is not exact (Java's BigDecimal.floatValue may round twice)."""
    if isinstance(v, int):
        magnitude, bits = abs(v), abs(v).bit_length()
        if bits > 128:
            raise ValueError(f"{v} overflows float")
        if bits > 24:                           # keep 24 significant bits, ties to even
            shift = bits - 24
            kept, rest = divmod(magnitude, 1 << shift)
            half = 1 << (shift - 1)
            kept += rest > half or (rest == half and kept & 1)
            magnitude = kept << shift
        return math.copysign(float(magnitude), v)
    try:
        rounded = struct.unpack("f", struct.pack("f", float(v)))[0]
    except OverflowError:
        raise ValueError(f"{v} overflows float") from None
    if isinstance(v, decimal.Decimal) and rounded != v:
        raise ValueError(f"{v} is rounded to float")
    return rounded


def column_values(values: list, column_type: pa.DataType) -> list:
    """The values of a column of `column_type` that equal `values` as Spark compares them,
    one each, for a membership test; ValueError where that is not one value: a double meets
    any number as a double, so an integer column's value equal to a double is that double's
    integer only below 2^53 (from it on, several round to it), and a float32 column or a decimal
    one meets a number of another kind rounded."""
    def one(v):
        if isinstance(v, dt.datetime) and pa.types.is_timestamp(column_type):
            return _instant_or_local(v, column_type.tz is not None)
        if v is None or isinstance(v, bool) or not isinstance(v, (int, float, decimal.Decimal)):
            return v
        if pa.types.is_integer(column_type) and not isinstance(v, int):
            if not (v == int(v) and (isinstance(v, decimal.Decimal) or abs(v) < 2 ** 53)):
                raise ValueError(f"{v!r} is no one integer")
            return int(v)
        if column_type == pa.float64():
            return float(v)
        if (pa.types.is_floating(column_type) or pa.types.is_decimal(column_type)) and \
                isinstance(v, float) != pa.types.is_floating(column_type):
            raise ValueError(f"{v!r} meets a {column_type} column rounded")
        return v
    return [one(v) for v in values]


def _instant_or_local(v: dt.datetime, zoned: bool) -> dt.datetime:
    """A timestamp literal as a column's value equal to it: a naive one meeting a zoned column
    is read in the session zone, as `aligned` reads it (Arrow would read it as UTC). A zoned
    one meeting a naive column is equal to every local time Spark reads as that instant in the
    session zone, two of them around a change of offset: ValueError (no membership test)."""
    if zoned and v.tzinfo is None:
        return v.replace(tzinfo=SESSION_ZONE.get())
    if not zoned and v.tzinfo is not None:
        raise ValueError(f"{v} meets a naive column in the session zone")
    return v


def negated(a: Range) -> Range:
    if not a.known or a.nan:
        return UNKNOWN
    return Range(_negate(a.high), _negate(a.low), values=a.values, nulls=a.nulls) \
        if a.values else replace(a, column=None)


def _negate(x):
    return Months(-x.n) if isinstance(x, Months) else -x


def union(ranges: list[Range]) -> Range:
    if not ranges or not all(r.known for r in ranges):
        return UNKNOWN
    with_values = [r for r in ranges if r.values]
    try:
        low = min(r.low for r in with_values) if with_values else None
        high = max(r.high for r in with_values) if with_values else None
    except TypeError:
        return UNKNOWN
    return Range(low, high, values=bool(with_values), nulls=any(r.nulls for r in ranges),
                 nan=any(r.nan for r in ranges))


# -- comparison rules: operator -> (may be true, may be false) for ranges a (left), b (right);
# written with & and |, so that a's bounds may also be arrays over partitions (pruning.arrays)

def _lt(a, b): return a.low < b.high, a.high >= b.low
def _le(a, b): return a.low <= b.high, a.high > b.low
def _gt(a, b): return a.high > b.low, a.low <= b.high
def _ge(a, b): return a.high >= b.low, a.low < b.high
def _eq(a, b): return (a.low <= b.high) & (b.low <= a.high), \
    (a.low != a.high) | (a.high != b.low) | (b.low != b.high)
def _ne(a, b): return tuple(reversed(_eq(a, b)))


COMPARISONS = {E.LT: _lt, E.LTE: _le, E.GT: _gt, E.GTE: _ge, E.EQ: _eq, E.NEQ: _ne}
FLIPPED = {E.LT: E.GT, E.LTE: E.GTE, E.GT: E.LT, E.GTE: E.LTE, E.EQ: E.EQ, E.NEQ: E.NEQ}
# how a NaN on the left compares with any number: NaN is above every number, NaN = NaN
NAN_LEFT = {E.LT: False, E.LTE: False, E.GT: True, E.GTE: True, E.EQ: False, E.NEQ: True}


def compare(op: type, a: Range, b: Range) -> Flags:
    if not (a.known and b.known):
        return MAYBE
    if b.nan and not a.nan:
        a, b, op = b, a, FLIPPED[op]
    if b.nan:                                  # NaN on both sides: not worth the rules
        return MAYBE
    null = a.nulls or b.nulls
    if not b.values:                           # NULL literal or an all-null side
        return Flags(False, False, True) if (a.values or a.nan or a.nulls) else Flags(
            False, False, False)
    true = false = False
    if a.values:
        try:
            true, false = _coerced(COMPARISONS[op], a, b)
        except TypeError:
            return MAYBE
    if a.nan:
        true, false = true or NAN_LEFT[op], false or not NAN_LEFT[op]
    return Flags(true, false, null)


def _coerced(rule, a: Range, b: Range) -> tuple[bool, bool]:
    return rule(aligned(a, b.low), aligned(b, a.low))


def aligned_already(v, like) -> bool:
    """Is `v` of like's type, and zoned if like is (aligned has nothing to do)?"""
    return type(v) is type(like) and not (
        isinstance(like, dt.datetime) and like.tzinfo and not v.tzinfo)


def aligned(r: Range, like) -> Range:
    """r's bounds in like's type: Spark casts a string literal to the column's type, a date to
    a timestamp at midnight, an integer or a decimal meeting a double to a double (never the
    other way round: aligned to an integer or a decimal, a double stays one); a naive
    timestamp meeting a zoned one is read in the session zone (never the other way round, so
    that both sides of a comparison end up zoned)."""
    def fix(v):
        if isinstance(v, str) and isinstance(like, (dt.date, dt.datetime)):
            v = dt.datetime.fromisoformat(v) if isinstance(like, dt.datetime) else \
                dt.date.fromisoformat(v)
        if isinstance(like, dt.datetime) and type(v) is dt.date:
            v = dt.datetime(v.year, v.month, v.day)
        if isinstance(like, dt.datetime) and isinstance(v, dt.datetime) and \
                like.tzinfo and not v.tzinfo:
            v = v.replace(tzinfo=SESSION_ZONE.get())
        if isinstance(like, float) and isinstance(v, (int, decimal.Decimal)) and \
                not isinstance(v, bool):
            v = float(v)        # Spark compares a double with a number as doubles
        return v
    if aligned_already(r.low, like) and aligned_already(r.high, like):
        return r                          # the common case: nothing to align
    return replace(r, low=fix(r.low), high=fix(r.high))


# -- flags


def successor(prefix: str) -> str | None:
    """The smallest string greater than every string starting with prefix."""
    chars = list(prefix)
    while chars:
        if ord(chars[-1]) < 0x10FFFF:
            chars[-1] = chr(ord(chars[-1]) + 1)
            return "".join(chars)
        chars.pop()
    return None
