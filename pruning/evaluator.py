"""Spark SQL predicates evaluated against the statistics of every partition at once, in
three-valued logic: one evaluator, over arrays.

A predicate (pruning.predicate parses it) gives each partition three flags: may it be true,
false, or null for some row? The partition is pruned iff it cannot be true, and fully
matching iff it can be neither false nor null.

Each expression node derives the ranges of its values over the partitions from its inputs'
ranges, by one rule per node type (RANGE_RULES), in the style of pyiceberg's metrics
evaluator; comparisons turn two ranges into flags by one rule per operator
(ranges.COMPARISONS). As in DataFusion's PruningPredicate, a column's statistics are arrays
over the partitions (Views.columns) and the common shapes (an expression compared with a
constant, BETWEEN, IN, IS NULL, LIKE 'prefix%', AND, OR, NOT) are array operations; a
constant's range is derived once per query. Arithmetic, CAST to a number and date
functions run over the bounds as arrays (pruning.arrays), and so does the union of the
branches of IF and CASE each partition may take; what has no array form (dates plus months,
bounds of mixed types) runs partition by partition over pruning.ranges, a failure making that
partition's range unknown. Numbers meet as Spark's types make them meet: before the walk,
pruning.spark_types adds the casts Spark's analyzer adds where a float meets an integer, and
decimal arithmetic rounds its bounds to Spark's result scale. What has no rule is unknown: it
never prunes and never raises. NOT swaps true and false, which is 3VL negation exactly; AND
and OR combine flags soundly (rows are not correlated across columns). Membership tests (=, IN) ask the partitions
the ranges keep, all at once (MemberAll: value index, value sets, Bloom filters).
"""
from __future__ import annotations

import datetime as dt
import decimal
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as E

from lakestats.pruning.arrays import (RULE_ERRORS, FlagArrays, NotArrays, Ranges, Value,
                                      arith_arrays, compare_constant, each, each_flags,
                                      fitting, in_partition, lift, mapped, safe, union_arrays)
from lakestats.pruning.predicate import StatsView, Views
from lakestats.pruning.ranges import (CASTS, FLIPPED, MAYBE, UNKNOWN, Flags,
                                      Range, arith, cast_number, compare, literal, negated,
                                      sql_literal, successor, to_decimal, union)
from lakestats.pruning.spark_types import coerced, decimal_digits, int_bits, spark_type
from lakestats.pruning.temporal import interval_value, to_date, truncating, year

# (column, values, partitions asked) -> may each asked partition hold one of the values?
MemberAll = Callable[[str, list, np.ndarray], np.ndarray | None]


def no_membership(column: str, values: list, asked: np.ndarray) -> None:
    return None


@dataclass
class Scope:
    """What an evaluation reads: the partitions, and their membership test."""
    views: Views
    member_all: MemberAll = no_membership

    def __len__(self) -> int:
        return len(self.views)


# digits of decimal arithmetic: a product of two DECIMAL(38)s exactly (Python's default is 28)
DECIMAL_DIGITS = 80
# the scope of a constant: one partition, no column in it
CONSTANTS = Scope(Views([StatsView({}, 0, set())]))


def evaluate(node: E.Expression, partitions: Views | list[StatsView],
             member_all: MemberAll = no_membership) -> FlagArrays:
    """The predicate's flags in every partition."""
    if not isinstance(partitions, Views):
        partitions = Views(partitions)
    if not len(partitions):
        return FlagArrays(*(np.zeros(0, bool) for _ in range(3)))
    try:
        node = coerced(node, partitions.spark_type)
    except RULE_ERRORS:                  # types it cannot reason about: nothing is pruned
        return FlagArrays.broadcast(MAYBE, len(partitions))
    return _flags(node, Scope(partitions, member_all))


def evaluate_one(node: E.Expression, partition: StatsView) -> Flags:
    return evaluate(node, [partition]).flags()[0]


# -- range-derivation rules: node type -> function(node, scope) -> Range (a constant) or Ranges


def _arith(op: str) -> Callable:
    def rule(node: E.Expression, s: Scope) -> Value:
        t = spark_type(node, s.views.spark_type)
        if t in ("float", "decimal"):   # each step rounded to 24 bits; a scale not known
            return UNKNOWN
        a, b = value_ranges(node.this, s), value_ranges(node.expression, s)
        v = None
        if isinstance(a, Ranges) or isinstance(b, Ranges):
            try:
                v = arith_arrays(lift(a, len(s)), lift(b, len(s)), op)
            except NotArrays:
                pass
        v = each(lambda x, y: arith(x, y, op), a, b) if v is None else v
        digits = decimal_digits(t)      # Spark rounds a decimal result to its type's scale
        return mapped(lambda x: to_decimal(x, *digits), v) if digits else _fitting(v, node, s)
    return rule


def _fitting(v: Value, node: E.Expression, s: Scope) -> Value:
    """v, unknown where it overflows the node's Spark integer type (arrays.fitting)."""
    return fitting(v, int_bits(node, s.views.spark_type))


def _monotone(of_node: Callable) -> Callable:
    """A rule for a non-decreasing function of the node's argument, of_node(node) (looked up
    once per node)."""
    return lambda node, s: mapped(of_node(node), value_ranges(node.this, s))


_cast_bounds = _monotone(lambda node: functools.partial(cast_number, node.to))


def _cast(node: E.Cast, s: Scope) -> Value:
    """CAST (TryCast: Spark's non-ANSI parse of it) of a string constant to a date or
    timestamp; of a number to a number (ranges.cast_number)."""
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
    return _cast_bounds(node, s) if target in CASTS else UNKNOWN


def _if(node: E.If, s: Scope) -> Value:
    return _branches([(node.this, node.args.get("true"))], node.args.get("false"), s)


def _case(node: E.Case, s: Scope) -> Value:
    if node.this is not None:              # CASE x WHEN ...: not supported
        return UNKNOWN
    return _branches([(i.this, i.args.get("true")) for i in node.args["ifs"]],
                     node.args.get("default"), s)


def _branches(arms, default, s: Scope) -> Ranges:
    """In each partition, the union of the branches that may be taken (a NULL condition
    takes the next one): as arrays, else partition by partition."""
    conditions = [_flags(condition, s) for condition, _ in arms]
    values = [value_ranges(value, s) for _, value in arms] + [
        value_ranges(default, s) if default is not None else literal(None)]
    n, reached, taken = len(s), np.ones(len(s), bool), []
    for flags in conditions:
        taken.append(reached & flags.true)
        reached = reached & (flags.false | flags.null)
    taken.append(reached)
    try:
        return union_arrays([(m, lift(v, n)) for m, v in zip(taken, values)], n)
    except NotArrays:
        return Ranges.of([union([in_partition(v, i) for m, v in zip(taken, values) if m[i]])
                          for i in range(n)])


RANGE_RULES: dict[type, Callable[[E.Expression, Scope], Value]] = {
    E.Column: lambda n, s: s.views.columns(n.name),
    E.Literal: lambda n, s: sql_literal(n),
    E.Null: lambda n, s: literal(None),
    E.Boolean: lambda n, s: literal(n.this),
    E.Paren: lambda n, s: value_ranges(n.this, s),
    E.Neg: lambda n, s: _fitting(each(negated, value_ranges(n.this, s)), n, s),
    E.Add: _arith("+"),
    E.Sub: _arith("-"),
    E.Mul: _arith("*"),
    E.Interval: lambda n, s: literal(interval_value(n)),
    E.TsOrDsAdd: _arith("+"),
    E.DateAdd: _arith("+"),
    E.Cast: _cast,
    E.TryCast: _cast,
    E.TsOrDsToDate: _monotone(lambda node: to_date),
    E.Year: _monotone(lambda node: year),
    E.TimestampTrunc: _monotone(truncating),
    E.DateTrunc: _monotone(truncating),
    E.If: _if,
    E.Case: _case,
}


def value_ranges(node: E.Expression, s: Scope) -> Value:
    """The ranges of the node's values over the partitions; a constant's is the same in
    every partition: one Range, derived once per query."""
    if node.find(E.Column):
        return _apply(RANGE_RULES, node, s, UNKNOWN)
    return constant_range(node)


def constant_range(node: E.Expression) -> Range:
    """The range of an expression without a column."""
    found = node.meta.get("lakestats.range")
    if found is None:
        found = node.meta["lakestats.range"] = in_partition(
            _apply(RANGE_RULES, node, CONSTANTS, UNKNOWN), 0)
    return found


def _apply(rules: dict, node: E.Expression, s: Scope, unknown):
    """The node's rule, or `unknown` when it has none or it fails on these values: an
    expression lakestats cannot reason about never prunes and never raises."""
    rule = rules.get(type(node))
    if rule is None:
        return unknown
    try:
        with decimal.localcontext(prec=DECIMAL_DIGITS):
            return rule(node, s)
    except RULE_ERRORS:
        return unknown


# -- comparisons


def compare_arrays(op: type, a: Value, b: Value, n: int) -> FlagArrays:
    """ranges.compare(op, a_i, b_i) in every partition i."""
    if isinstance(a, Range) and isinstance(b, Range):
        return FlagArrays.broadcast(safe(compare, MAYBE, op, a, b), n)
    if isinstance(a, Range):
        a, b, op = b, a, FLIPPED[op]
    if isinstance(b, Range):
        try:
            return compare_constant(op, a, b)
        except NotArrays:
            pass
    return each_flags(lambda x, y: compare(op, x, y), n, a, b)


# -- boolean nodes: node type -> function(node, scope) -> FlagArrays


def _membership(out: FlagArrays, a: Value, values: list, s: Scope) -> FlagArrays:
    """`column = v` / `column IN (...)`: the partitions whose range allows a value, asked
    whether they may hold one (value index, value sets, Bloom filters)."""
    asked = np.flatnonzero(out.true)
    if isinstance(a, Ranges) and a.column and values and asked.size:
        held = s.member_all(a.column, values, asked)
        if held is not None:
            out.true[asked[~held]] = False
    return out


def _comparison(node: E.Expression, s: Scope) -> FlagArrays:
    a, b = value_ranges(node.this, s), value_ranges(node.expression, s)
    out = compare_arrays(type(node), a, b, len(s))
    if isinstance(node, E.EQ):
        for column, value in ((a, b), (b, a)):
            if isinstance(value, Range) and value.known and value.values \
                    and value.low == value.high:
                _membership(out, column, [value.low], s)
    return out


def _between(node: E.Between, s: Scope) -> FlagArrays:
    a, n = value_ranges(node.this, s), len(s)
    return compare_arrays(E.GTE, a, value_ranges(node.args["low"], s), n).both(
        compare_arrays(E.LTE, a, value_ranges(node.args["high"], s), n))


ENVELOPE_MIN = 64      # longer IN lists are tested by their envelope, then by membership


def in_envelope(items: list[Range]) -> Range | None:
    """One range around the values of a long IN list (tested first, then membership); None
    for a short list, tested item by item. TypeError when the items do not compare."""
    with_values = [i for i in items if i.values]
    if len(items) <= ENVELOPE_MIN or not with_values:
        return None
    return Range(min(i.low for i in with_values), max(i.high for i in with_values),
                 values=True, nulls=False)


def _in(node: E.In, s: Scope) -> FlagArrays:
    """`a IN (x, y, ...)`, which is `a = x OR a = y ...`; a long list of constants by its
    envelope. Membership is asked only for constants: a range's bounds are not values."""
    n = len(s)
    if node.args.get("query") or not node.expressions:
        return FlagArrays.broadcast(MAYBE, n)
    a = value_ranges(node.this, s)
    items = [value_ranges(x, s) for x in node.expressions]
    constants = [i for i in items if isinstance(i, Range)]
    if not all(i.known for i in constants):
        return FlagArrays.broadcast(MAYBE, n)
    no_null = np.ones(n, bool)          # no item is NULL (in this partition)
    for i in items:
        no_null &= i.values
    try:
        envelope = in_envelope(items) if len(constants) == len(items) else None
    except TypeError:
        return FlagArrays.broadcast(MAYBE, n)
    if envelope is not None:
        overlap = compare_arrays(E.EQ, a, envelope, n)
        out = FlagArrays(overlap.true, np.ones(n, bool), overlap.null | ~no_null)
    else:
        # any equality may hold; false only if each may be false; a NULL item makes misses null
        flags = [compare_arrays(E.EQ, a, i, n) for i in items]
        out = FlagArrays(np.logical_or.reduce([f.true for f in flags]),
                         np.logical_and.reduce([f.false for f in flags]) & no_null,
                         np.logical_or.reduce([f.null for f in flags]))
    if len(constants) < len(items):
        return out
    return _membership(out, a, [i.low for i in items if i.values], s)


def _is(node: E.Is, s: Scope) -> FlagArrays:
    if not isinstance(node.expression, E.Null):
        return FlagArrays.broadcast(MAYBE, len(s))
    a = lift(value_ranges(node.this, s), len(s))
    return FlagArrays(np.where(a.known, a.nulls, True), np.where(a.known, a.values | a.nan, True),
                      np.zeros(len(a), bool))


def _like(node: E.Like, s: Scope) -> FlagArrays:
    """LIKE with a literal prefix: values in [prefix, successor(prefix)) may match. 'prefix%'
    matches every row when min and max both start with the prefix (every string between them
    does too); other patterns only prune."""
    n, pattern = len(s), node.expression
    if node.args.get("escape") or not isinstance(pattern, E.Literal) or not pattern.is_string \
            or "\\" in pattern.this:
        return FlagArrays.broadcast(MAYBE, n)
    a, text = value_ranges(node.this, s), pattern.this
    wildcards = [i for i, c in enumerate(text) if c in "%_"]
    if not wildcards:
        return compare_arrays(E.EQ, a, literal(text), n)
    prefix = text[:wildcards[0]]
    if not prefix:
        return FlagArrays.broadcast(MAYBE, n)
    a, upper = lift(a, n), successor(prefix)
    held = np.flatnonzero(a.values & a.known)
    low, high = a.low[held].tolist(), a.high[held].tolist()
    if not all(isinstance(v, str) for v in low + high):
        return FlagArrays.broadcast(MAYBE, n)
    low, high = pa.array(low, pa.string()), pa.array(high, pa.string())
    out = FlagArrays(np.zeros(n, bool), np.zeros(n, bool), a.nulls.copy())
    may = pc.greater_equal(high, prefix)
    if upper is not None:
        may = pc.and_(may, pc.less(low, upper))
    out.true[held] = may.to_numpy(zero_copy_only=False)
    if text == prefix + "%":
        out.false[held] = ~pc.and_(pc.starts_with(low, prefix), pc.starts_with(
            high, prefix)).to_numpy(zero_copy_only=False)
    else:
        out.false[held] = True
    return out.maybe_where(~a.known)


def _boolean_column(node: E.Expression, s: Scope) -> FlagArrays:
    def one(a: Range) -> Flags:
        if not a.known or not a.values:
            return Flags(a.known is False, a.known is False, a.nulls)
        if not all(isinstance(v, bool) for v in (a.low, a.high)):
            return MAYBE
        return Flags(a.high, not a.low, a.nulls)
    return each_flags(one, len(s), value_ranges(node, s))


BOOLEAN_RULES: dict[type, Callable[[E.Expression, Scope], FlagArrays]] = {
    E.And: lambda n, s: _flags(n.this, s).both(_flags(n.expression, s)),
    E.Or: lambda n, s: _flags(n.this, s).either(_flags(n.expression, s)),
    E.Not: lambda n, s: _flags(n.this, s).negated(),
    E.Paren: lambda n, s: _flags(n.this, s),
    **{op: _comparison for op in (E.EQ, E.LT, E.LTE, E.GT, E.GTE, E.NEQ)},
    E.Between: _between,
    E.In: _in,
    E.Is: _is,
    E.Like: _like,
    E.Boolean: lambda n, s: FlagArrays.broadcast(Flags(n.this, not n.this, False), len(s)),
    E.Column: _boolean_column,
}


def _flags(node: E.Expression, s: Scope) -> FlagArrays:
    found = _apply(BOOLEAN_RULES, node, s, None)
    return FlagArrays.broadcast(MAYBE, len(s)) if found is None else found
