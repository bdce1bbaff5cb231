"""Spark SQL predicates evaluated against one partition's statistics, in three-valued logic.

A predicate (parsed by sqlglot in the Spark dialect, no JVM) is evaluated per partition to
three flags: may it be true, false, or null for some row? The partition is pruned iff it cannot
be true, and fully matching iff it can be neither false nor null.

Values are ranges: each expression node derives a conservative [low, high] of its possible
non-null, non-NaN values from its inputs' ranges, by one rule per node type (RANGE_RULES), in
the style of pyiceberg's metrics evaluator. Comparisons turn two ranges into flags by one rule
per operator (COMPARISONS). What has no rule is unknown: it never prunes and never raises.
NOT swaps an atom's true and false flags, which is 3VL negation exactly; AND and OR combine
flags soundly (rows are not correlated across columns). Spark semantics: NaN is above every
number, comparisons with NULL are null.
"""
from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass, replace
from typing import Callable

import sqlglot
from sqlglot import expressions as E

# -- ranges


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


@dataclass(frozen=True)
class Flags:
    """Three-valued outcome over a partition's rows."""
    true: bool
    false: bool
    null: bool

    def negated(self) -> "Flags":
        return Flags(self.false, self.true, self.null)


MAYBE = Flags(True, True, True)

# -- the statistics a predicate reads


class Partition:
    """One partition as the evaluator sees it: typed ranges of columns, and membership tests.
    `stats` maps a column to its statistics row with `low`/`high` already typed."""

    def __init__(self, stats: dict[str, dict], row_count: int, table_columns: set[str],
                 member: Callable[[str, list], list[bool] | None] | None = None):
        self.stats, self.row_count, self.table_columns = stats, row_count, table_columns
        self._member = member

    def column(self, name: str) -> Range:
        s = self.stats.get(name)
        if s is None:
            if name not in self.table_columns:    # not ours to judge: Spark will say
                return UNKNOWN
            # a column the partition lacks (added later) is null in every row
            return Range(values=False, nulls=self.row_count > 0, column=name)
        nan = bool(s.get("nan_count"))
        nonnull = s["row_count"] - s["null_count"] - (s.get("nan_count") or 0)
        return Range(s.get("low"), s.get("high"), values=nonnull > 0,
                     nulls=s["null_count"] > 0, nan=nan, column=name,
                     known=s.get("low") is not None or nonnull == 0)

    def member(self, column: str, values: list) -> list[bool] | None:
        """Which values the column may hold (Bloom filter or exact frequencies), or None."""
        return self._member(column, values) if self._member else None


# -- range-derivation rules: node type -> function(node, partition) -> Range


def _product_bounds(pairs) -> tuple:
    """Interval multiplication: the extremes are among the corners, whatever the signs."""
    products = [a * b for a, b in pairs]
    return min(products), max(products)


def _combine(a: Range, b: Range, low, high) -> Range:
    return Range(low, high, values=a.values and b.values, nulls=a.nulls or b.nulls,
                 nan=a.nan or b.nan)


def _arith(node: E.Expression, p: Partition, op: str) -> Range:
    a, b = value_range(node.this, p), value_range(node.expression, p)
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
    if isinstance(y, _Months):
        return y.shift(x)
    if isinstance(x, _Months):
        return x.shift(y)
    if isinstance(x, (dt.date, dt.datetime)) and isinstance(y, int) and not isinstance(y, bool):
        return x + dt.timedelta(days=y)           # date_add(d, n), d + n
    return x + y


def _negated(a: Range) -> Range:
    if not a.known or a.nan:
        return UNKNOWN
    return Range(_negate(a.high), _negate(a.low), values=a.values, nulls=a.nulls) \
        if a.values else replace(a, column=None)


def _negate(x):
    return _Months(-x.n) if isinstance(x, _Months) else -x


@dataclass(frozen=True)
class _Months:
    """An interval of months or years: adding it is monotone (Spark clamps the day)."""
    n: int

    def shift(self, d):
        if not isinstance(d, dt.date):
            raise TypeError("months add to dates and timestamps only")
        month = d.month - 1 + self.n
        year, month = d.year + month // 12, month % 12 + 1
        last = (dt.date(year + (month == 12), month % 12 + 1, 1) - dt.timedelta(days=1)).day
        return d.replace(year=year, month=month, day=min(d.day, last))


_UNITS = {"DAY": dt.timedelta(days=1), "HOUR": dt.timedelta(hours=1),
          "MINUTE": dt.timedelta(minutes=1), "SECOND": dt.timedelta(seconds=1),
          "WEEK": dt.timedelta(weeks=1)}


def _interval_value(node: E.Interval):
    n = int(node.this.name)
    unit = (node.unit.name if node.unit else "DAY").upper().rstrip("S")
    if unit in _UNITS:
        return n * _UNITS[unit]
    if unit in ("MONTH", "YEAR"):
        return _Months(n * (12 if unit == "YEAR" else 1))
    raise ValueError(unit)


def _monotone(fn: Callable) -> Callable:
    """A rule for a non-decreasing function of its first argument."""
    def rule(node: E.Expression, p: Partition) -> Range:
        a = value_range(node.this, p)
        if not a.known or a.nan:
            return UNKNOWN
        if not a.values:
            return replace(a, column=None)
        try:
            return Range(fn(node, a.low), fn(node, a.high), values=True, nulls=a.nulls)
        except (TypeError, ValueError, AttributeError, OverflowError):
            return UNKNOWN
    return rule


def _to_date(_, v):
    if isinstance(v, dt.datetime):
        return (v.astimezone(dt.timezone.utc) if v.tzinfo else v).date()
    if isinstance(v, dt.date):
        return v
    raise TypeError(v)


def _year(_, v):
    return _to_date(None, v).year


_TRUNC = {"YEAR": dict(month=1, day=1, hour=0, minute=0, second=0, microsecond=0),
          "MONTH": dict(day=1, hour=0, minute=0, second=0, microsecond=0),
          "DAY": dict(hour=0, minute=0, second=0, microsecond=0),
          "HOUR": dict(minute=0, second=0, microsecond=0),
          "MINUTE": dict(second=0, microsecond=0), "SECOND": dict(microsecond=0)}


def _truncate(node, v):
    fields = _TRUNC[node.unit.name.upper()]
    if isinstance(v, dt.datetime):
        return v.replace(**fields)
    return v.replace(**{k: f for k, f in fields.items() if k in ("month", "day")})


def _literal(node: E.Literal, p: Partition) -> Range:
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


def _cast(node: E.Cast, p: Partition) -> Range:
    inner = value_range(node.this, p)
    target = node.to.this
    if isinstance(node.this, E.Literal) and node.this.is_string:
        text = node.this.this
        try:
            if target == E.DataType.Type.DATE:
                return literal(dt.date.fromisoformat(text))
            if target in (E.DataType.Type.TIMESTAMP, E.DataType.Type.TIMESTAMPTZ,
                          E.DataType.Type.TIMESTAMPNTZ):
                return literal(dt.datetime.fromisoformat(text))
        except ValueError:
            return UNKNOWN
    if target in E.DataType.NUMERIC_TYPES and inner.known and not isinstance(inner.low, str):
        return replace(inner, column=None)       # numeric widening keeps the order
    return UNKNOWN


def _if(node: E.If, p: Partition) -> Range:
    return _branches([(node.this, node.args.get("true"))], node.args.get("false"), p)


def _case(node: E.Case, p: Partition) -> Range:
    if node.this is not None:              # CASE x WHEN ...: not supported
        return UNKNOWN
    return _branches([(i.this, i.args.get("true")) for i in node.args["ifs"]],
                     node.args.get("default"), p)


def _branches(arms, default, p: Partition) -> Range:
    """The union of the branches that may be taken (a NULL condition takes the next one)."""
    taken = []
    for condition, value in arms:
        flags = evaluate(condition, p)
        if flags.true:
            taken.append(value_range(value, p))
        if not (flags.false or flags.null):
            break
    else:
        taken.append(value_range(default, p) if default is not None else literal(None))
    return _union(taken)


def _union(ranges: list[Range]) -> Range:
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


RANGE_RULES: dict[type, Callable[[E.Expression, Partition], Range]] = {
    E.Column: lambda n, p: p.column(n.name),
    E.Literal: _literal,
    E.Null: lambda n, p: literal(None),
    E.Boolean: lambda n, p: literal(n.this),
    E.Paren: lambda n, p: value_range(n.this, p),
    E.Neg: lambda n, p: _negated(value_range(n.this, p)),
    E.Add: lambda n, p: _arith(n, p, "+"),
    E.Sub: lambda n, p: _arith(n, p, "-"),
    E.Mul: lambda n, p: _arith(n, p, "*"),
    E.Interval: lambda n, p: literal(_interval_value(n)),
    E.TsOrDsAdd: lambda n, p: _arith(E.Add(this=n.this, expression=n.expression), p, "+"),
    E.DateAdd: lambda n, p: _arith(E.Add(this=n.this, expression=n.expression), p, "+"),
    E.Cast: _cast,
    E.TsOrDsToDate: _monotone(_to_date),
    E.Year: _monotone(_year),
    E.TimestampTrunc: _monotone(_truncate),
    E.DateTrunc: _monotone(_truncate),
    E.If: _if,
    E.Case: _case,
}


def value_range(node: E.Expression, p: Partition) -> Range:
    return _apply(RANGE_RULES, node, p, UNKNOWN)


def _apply(rules: dict, node: E.Expression, p: Partition, unknown):
    """The node's rule, or `unknown` when it has none or it fails on these values: an
    expression lakestats cannot reason about never prunes and never raises."""
    rule = rules.get(type(node))
    if rule is None:
        return unknown
    try:
        return rule(node, p)
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError, ZeroDivisionError,
            decimal.InvalidOperation):
        return unknown


# -- comparison rules: operator -> (may be true, may be false) for ranges a (left), b (right)

def _lt(a, b): return a.low < b.high, a.high >= b.low
def _le(a, b): return a.low <= b.high, a.high > b.low
def _gt(a, b): return a.high > b.low, a.low <= b.high
def _ge(a, b): return a.high >= b.low, a.low < b.high
def _eq(a, b): return a.low <= b.high and b.low <= a.high, not (a.low == a.high == b.low == b.high)
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
    return rule(_aligned(a, b.low), _aligned(b, a.low))


def _aligned(r: Range, like) -> Range:
    """r's bounds in like's type: Spark casts a string literal to the column's type, a date to
    a timestamp at midnight; a naive timestamp meets a zoned one in UTC."""
    def fix(v):
        if isinstance(v, str) and isinstance(like, (dt.date, dt.datetime)):
            v = dt.datetime.fromisoformat(v) if isinstance(like, dt.datetime) else \
                dt.date.fromisoformat(v)
        if isinstance(like, dt.datetime) and type(v) is dt.date:
            v = dt.datetime(v.year, v.month, v.day)
        if isinstance(like, dt.datetime) and isinstance(v, dt.datetime):
            if like.tzinfo and not v.tzinfo:
                v = v.replace(tzinfo=dt.timezone.utc)
            elif v.tzinfo and not like.tzinfo:
                v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        if isinstance(like, float) and isinstance(v, decimal.Decimal):
            v = float(v)
        if isinstance(like, decimal.Decimal) and isinstance(v, float):
            v = decimal.Decimal(repr(v))
        return v
    return replace(r, low=fix(r.low), high=fix(r.high))


# -- boolean nodes


def _membership(flags: Flags, column: Range, values: list, p: Partition) -> Flags:
    """`column = v` / `column IN (...)` that the range allows: the Bloom filter or the exact
    frequencies may still say no row holds any of the values."""
    if not flags.true or column.column is None:
        return flags
    held = p.member(column.column, values)
    if held is not None and not any(held):
        return Flags(False, flags.false, flags.null)
    return flags


def _eq_rule(node: E.Expression, p: Partition) -> Flags:
    a, b = value_range(node.this, p), value_range(node.expression, p)
    flags = compare(type(node), a, b)
    if isinstance(node, E.EQ):
        for column, value in ((a, b), (b, a)):
            if column.column and value.known and value.values and value.low == value.high \
                    and value.column is None:
                return _membership(flags, column, [value.low], p)
    return flags


def _between(node: E.Between, p: Partition) -> Flags:
    return _and([compare(E.GTE, value_range(node.this, p), value_range(node.args["low"], p)),
                 compare(E.LTE, value_range(node.this, p), value_range(node.args["high"], p))])


ENVELOPE_MIN = 64      # longer IN lists are tested by their envelope, then by membership


def _in(node: E.In, p: Partition) -> Flags:
    if node.args.get("query") or not node.expressions:
        return MAYBE
    a = value_range(node.this, p)
    items = node.meta.get("lakestats.items")
    if items is None:
        items = [value_range(x, p) for x in node.expressions]
        if not any(x.find(E.Column) for x in node.expressions):
            node.meta["lakestats.items"] = items     # constants: the same in every partition
    if not all(i.known and i.column is None for i in items):
        return MAYBE
    with_values = [i for i in items if i.values]
    if len(items) > ENVELOPE_MIN and with_values:
        try:
            envelope = Range(min(i.low for i in with_values), max(i.high for i in with_values),
                             values=True, nulls=False)
        except TypeError:
            return MAYBE
        overlap = compare(E.EQ, a, envelope)
        out = Flags(overlap.true, True, overlap.null or len(with_values) < len(items))
    else:
        flags = [compare(E.EQ, a, i) for i in items]
        # any equality may hold; false only if each may be false; a NULL item makes misses null
        out = Flags(any(f.true for f in flags), all(f.false for f in flags) and not any(
            not i.values for i in items), any(f.null for f in flags))
    values = [i.low for i in with_values]
    return _membership(out, a, values, p) if values else out


def _is(node: E.Is, p: Partition) -> Flags:
    if not isinstance(node.expression, E.Null):
        return MAYBE
    a = value_range(node.this, p)
    if not a.known:
        return Flags(True, True, False)
    return Flags(a.nulls, a.values or a.nan, False)


def _like(node: E.Like, p: Partition) -> Flags:
    """LIKE with a literal prefix: values in [prefix, successor(prefix)) may match. 'prefix%'
    matches every row when min and max both start with the prefix (every string between them
    does too); other patterns only prune."""
    a, pattern = value_range(node.this, p), node.expression
    if node.args.get("escape") or not isinstance(pattern, E.Literal) or not pattern.is_string \
            or "\\" in pattern.this:
        return MAYBE
    text = pattern.this
    wildcards = [i for i, c in enumerate(text) if c in "%_"]
    if not wildcards:
        return compare(E.EQ, a, literal(text))
    prefix = text[:wildcards[0]]
    if not prefix or not a.known or a.values and not isinstance(a.low, str):
        return MAYBE
    if not a.values:
        return Flags(False, False, a.nulls)
    upper = _successor(prefix)
    true = a.high >= prefix and (upper is None or a.low < upper)
    false = text != prefix + "%" or not (a.low.startswith(prefix) and a.high.startswith(prefix))
    return Flags(true, false, a.nulls)


def _successor(prefix: str) -> str | None:
    """The smallest string greater than every string starting with prefix."""
    chars = list(prefix)
    while chars:
        if ord(chars[-1]) < 0x10FFFF:
            chars[-1] = chr(ord(chars[-1]) + 1)
            return "".join(chars)
        chars.pop()
    return None


def _and(flags: list[Flags]) -> Flags:
    return Flags(all(f.true for f in flags), any(f.false for f in flags),
                 any(f.null for f in flags) and all(f.true or f.null for f in flags))


def _or(flags: list[Flags]) -> Flags:
    return Flags(any(f.true for f in flags), all(f.false for f in flags),
                 any(f.null for f in flags) and all(f.false or f.null for f in flags))


def _boolean_column(node: E.Expression, p: Partition) -> Flags:
    a = value_range(node, p)
    if not a.known or not a.values:
        return Flags(a.known is False, a.known is False, a.nulls)
    if not all(isinstance(v, bool) for v in (a.low, a.high)):
        return MAYBE
    return Flags(a.high, not a.low, a.nulls)


BOOLEAN_RULES: dict[type, Callable[[E.Expression, Partition], Flags]] = {
    E.And: lambda n, p: _and([evaluate(n.this, p), evaluate(n.expression, p)]),
    E.Or: lambda n, p: _or([evaluate(n.this, p), evaluate(n.expression, p)]),
    E.Not: lambda n, p: evaluate(n.this, p).negated(),
    E.Paren: lambda n, p: evaluate(n.this, p),
    E.EQ: _eq_rule,
    **{op: (lambda n, p: compare(type(n), value_range(n.this, p), value_range(n.expression, p)))
       for op in (E.LT, E.LTE, E.GT, E.GTE, E.NEQ)},
    E.Between: _between,
    E.In: _in,
    E.Is: _is,
    E.Like: _like,
    E.Boolean: lambda n, p: Flags(n.this, not n.this, False),
    E.Column: _boolean_column,
}


def evaluate(node: E.Expression, p: Partition) -> Flags:
    return _apply(BOOLEAN_RULES, node, p, MAYBE)


class PredicateError(ValueError):
    """The predicate is not valid Spark SQL."""


def parse(where: str) -> E.Expression:
    try:
        return sqlglot.parse_one(where, read="spark")
    except sqlglot.errors.ParseError as e:
        raise PredicateError(f"cannot parse predicate {where!r}: {e}") from None


def columns_of(node: E.Expression) -> set[str]:
    return {c.name for c in node.find_all(E.Column)}
