"""Spark SQL predicates evaluated against one partition's statistics, in three-valued logic.

A predicate (parsed by sqlglot in the Spark dialect, no JVM) is evaluated per partition to
three flags: may it be true, false, or null for some row? The partition is pruned iff it cannot
be true, and fully matching iff it can be neither false nor null.

Each expression node derives the range of its values from its inputs' ranges (pruning.ranges),
by one rule per node type (RANGE_RULES), in the style of pyiceberg's metrics evaluator;
comparisons turn two ranges into flags by one rule per operator (ranges.COMPARISONS). What has
no rule is unknown: it never prunes and never raises. NOT swaps an atom's true and false flags,
which is 3VL negation exactly; AND and OR combine flags soundly (rows are not correlated across
columns).
"""
from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import replace
from typing import Callable

import sqlglot
from sqlglot import expressions as E

from lakestats.core.errors import UsageError
from lakestats.pruning.ranges import (MAYBE, UNKNOWN, Flags, Months, Range, all_of, any_of, arith,
                                      compare, literal, local, negated, successor, union)

# -- the statistics a predicate reads


class StatsView:
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


def _arith(node: E.Expression, p: StatsView, op: str) -> Range:
    return arith(value_range(node.this, p), value_range(node.expression, p), op)


_UNITS = {"DAY": dt.timedelta(days=1), "HOUR": dt.timedelta(hours=1),
          "MINUTE": dt.timedelta(minutes=1), "SECOND": dt.timedelta(seconds=1),
          "WEEK": dt.timedelta(weeks=1)}


def _interval_value(node: E.Interval):
    n = int(node.this.name)
    unit = (node.unit.name if node.unit else "DAY").upper().rstrip("S")
    if unit in _UNITS:
        return n * _UNITS[unit]
    if unit in ("MONTH", "YEAR"):
        return Months(n * (12 if unit == "YEAR" else 1))
    raise ValueError(unit)


def _monotone(fn: Callable) -> Callable:
    """A rule for a non-decreasing function of its first argument."""
    def rule(node: E.Expression, p: StatsView) -> Range:
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
        return local(v).date()
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
        return local(v).replace(**fields)
    return v.replace(**{k: f for k, f in fields.items() if k in ("month", "day")})


def _literal(node: E.Literal, p: StatsView) -> Range:
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


def _cast(node: E.Cast, p: StatsView) -> Range:
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


def _if(node: E.If, p: StatsView) -> Range:
    return _branches([(node.this, node.args.get("true"))], node.args.get("false"), p)


def _case(node: E.Case, p: StatsView) -> Range:
    if node.this is not None:              # CASE x WHEN ...: not supported
        return UNKNOWN
    return _branches([(i.this, i.args.get("true")) for i in node.args["ifs"]],
                     node.args.get("default"), p)


def _branches(arms, default, p: StatsView) -> Range:
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
    return union(taken)


RANGE_RULES: dict[type, Callable[[E.Expression, StatsView], Range]] = {
    E.Column: lambda n, p: p.column(n.name),
    E.Literal: _literal,
    E.Null: lambda n, p: literal(None),
    E.Boolean: lambda n, p: literal(n.this),
    E.Paren: lambda n, p: value_range(n.this, p),
    E.Neg: lambda n, p: negated(value_range(n.this, p)),
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


def value_range(node: E.Expression, p: StatsView) -> Range:
    """The range of the node's values; a constant's is the same in every partition, so it is
    derived once per query."""
    cached = node.meta.get("lakestats.range")
    if cached is not None:
        return cached
    found = _apply(RANGE_RULES, node, p, UNKNOWN)
    if not node.find(E.Column):
        node.meta["lakestats.range"] = found
    return found


def _apply(rules: dict, node: E.Expression, p: StatsView, unknown):
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


# -- boolean nodes


def _membership(flags: Flags, column: Range, values: list, p: StatsView) -> Flags:
    """`column = v` / `column IN (...)` that the range allows: the Bloom filter or the exact
    frequencies may still say no row holds any of the values."""
    if not flags.true or column.column is None:
        return flags
    held = p.member(column.column, values)
    if held is not None and not any(held):
        return Flags(False, flags.false, flags.null)
    return flags


def _eq_rule(node: E.Expression, p: StatsView) -> Flags:
    a, b = value_range(node.this, p), value_range(node.expression, p)
    flags = compare(type(node), a, b)
    if isinstance(node, E.EQ):
        for column, value in ((a, b), (b, a)):
            if column.column and value.known and value.values and value.low == value.high \
                    and value.column is None:
                return _membership(flags, column, [value.low], p)
    return flags


def _between(node: E.Between, p: StatsView) -> Flags:
    return all_of([compare(E.GTE, value_range(node.this, p), value_range(node.args["low"], p)),
                   compare(E.LTE, value_range(node.this, p), value_range(node.args["high"], p))])


ENVELOPE_MIN = 64      # longer IN lists are tested by their envelope, then by membership


def in_envelope(items: list[Range]) -> Range | None:
    """One range around the values of a long IN list (tested first, then membership); None
    for a short list, tested item by item. TypeError when the items do not compare."""
    with_values = [i for i in items if i.values]
    if len(items) <= ENVELOPE_MIN or not with_values:
        return None
    return Range(min(i.low for i in with_values), max(i.high for i in with_values),
                 values=True, nulls=False)


def _in(node: E.In, p: StatsView) -> Flags:
    if node.args.get("query") or not node.expressions:
        return MAYBE
    a = value_range(node.this, p)
    items = [value_range(x, p) for x in node.expressions]
    if not all(i.known and i.column is None for i in items):
        return MAYBE
    with_values = [i for i in items if i.values]
    try:
        envelope = in_envelope(items)
    except TypeError:
        return MAYBE
    if envelope is not None:
        overlap = compare(E.EQ, a, envelope)
        out = Flags(overlap.true, True, overlap.null or len(with_values) < len(items))
    else:
        flags = [compare(E.EQ, a, i) for i in items]
        # any equality may hold; false only if each may be false; a NULL item makes misses null
        out = Flags(any(f.true for f in flags), all(f.false for f in flags) and not any(
            not i.values for i in items), any(f.null for f in flags))
    values = [i.low for i in with_values]
    return _membership(out, a, values, p) if values else out


def _is(node: E.Is, p: StatsView) -> Flags:
    if not isinstance(node.expression, E.Null):
        return MAYBE
    a = value_range(node.this, p)
    if not a.known:
        return Flags(True, True, False)
    return Flags(a.nulls, a.values or a.nan, False)


def _like(node: E.Like, p: StatsView) -> Flags:
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
    upper = successor(prefix)
    true = a.high >= prefix and (upper is None or a.low < upper)
    false = text != prefix + "%" or not (a.low.startswith(prefix) and a.high.startswith(prefix))
    return Flags(true, false, a.nulls)


def _boolean_column(node: E.Expression, p: StatsView) -> Flags:
    a = value_range(node, p)
    if not a.known or not a.values:
        return Flags(a.known is False, a.known is False, a.nulls)
    if not all(isinstance(v, bool) for v in (a.low, a.high)):
        return MAYBE
    return Flags(a.high, not a.low, a.nulls)


BOOLEAN_RULES: dict[type, Callable[[E.Expression, StatsView], Flags]] = {
    E.And: lambda n, p: all_of([evaluate(n.this, p), evaluate(n.expression, p)]),
    E.Or: lambda n, p: any_of([evaluate(n.this, p), evaluate(n.expression, p)]),
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


def evaluate(node: E.Expression, p: StatsView) -> Flags:
    return _apply(BOOLEAN_RULES, node, p, MAYBE)


class PredicateError(UsageError, ValueError):
    """The predicate is not valid Spark SQL."""


def parse(where: str) -> E.Expression:
    """One boolean expression: never a second statement after a ';'."""
    try:
        trees = [t for t in sqlglot.parse(where, read="spark") if t is not None]
    except sqlglot.errors.SqlglotError as e:
        raise PredicateError(f"cannot parse predicate {where!r}: {parse_error(e)}") from None
    if len(trees) != 1:
        raise PredicateError(f"predicate {where!r}: expected one expression, found "
                             f"{len(trees)} statements" if trees else "an empty predicate")
    if isinstance(trees[0], (E.Query, E.DDL, E.DML, E.Command, E.Set)):
        raise PredicateError(f"predicate {where!r}: expected an expression, found a "
                             f"{trees[0].key.upper()} statement")
    return trees[0]


def parse_error(e: sqlglot.errors.SqlglotError) -> str:
    """sqlglot's error as one line of plain text: its message underlines the culprit with
    terminal escape codes, on a second line."""
    first = e.errors[0] if isinstance(e, sqlglot.errors.ParseError) and e.errors else None
    if first is None:
        text = str(e)
    else:
        text = f"{first['description']} at line {first['line']}, column {first['col']}" + (
            f" (near {first['highlight']!r})" if first.get("highlight") else "")
    text = re.sub(r"<class '(?:\w+\.)*(\w+)'>", r"\1", re.sub(r"\x1b\[[0-9;]*m", "", text))
    return " ".join(text.split())


def columns_of(node: E.Expression) -> set[str]:
    return {c.name for c in node.find_all(E.Column)}

