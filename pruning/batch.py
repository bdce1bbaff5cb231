"""The predicate over every partition at once: the same three-valued answers as
pruning.predicate, one array per flag instead of one call per partition.

Atoms of the common shapes (a column compared with a constant, BETWEEN, IN and IS NULL of a
column) and AND, OR and NOT are evaluated as arrays over the partitions' ranges, the constant
derived once; membership tests then ask only the partitions the ranges keep, their Bloom
filters probed together. Anything else falls back to pruning.predicate, partition by
partition, so both paths give the same answers (a property test holds them to it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from sqlglot import expressions as E

from lakestats.core.errors import LakestatsError
from lakestats.pruning.predicate import StatsView, evaluate, in_envelope, value_range
from lakestats.pruning.ranges import (COMPARISONS, FLIPPED, MAYBE, NAN_LEFT, Flags, Range, aligned,
                                      aligned_already)

# what a constant is evaluated against: no partition (a column in it is unknown)
CONSTANTS = StatsView({}, 0, set())
# (column, values, partitions asked) -> may each asked partition hold one of the values?
MemberAll = Callable[[str, list, np.ndarray], np.ndarray | None]


@dataclass
class FlagArrays:
    true: np.ndarray
    false: np.ndarray
    null: np.ndarray

    @classmethod
    def of(cls, flags: list[Flags]) -> FlagArrays:
        return cls(np.array([f.true for f in flags], bool), np.array([f.false for f in flags], bool),
                   np.array([f.null for f in flags], bool))

    def flags(self) -> list[Flags]:
        return [Flags(t, f, n) for t, f, n in zip(self.true.tolist(), self.false.tolist(),
                                                   self.null.tolist())]


class _Fallback(LakestatsError):
    """This node is not of a vectorized shape: ask pruning.predicate, partition by partition."""


class Views:
    """The partitions as the batch evaluator reads them: a column's ranges as arrays over
    every partition (`columns`), and each partition's StatsView for what is evaluated one
    partition at a time. This one derives the arrays from the views; pruning.views keeps
    them as arrays and makes a view only when one is asked for."""

    def __init__(self, views: list[StatsView]):
        self._views = views

    def __len__(self) -> int:
        return len(self._views)

    @property
    def views(self) -> list[StatsView]:
        return self._views

    def columns(self, name: str) -> ColumnRanges:
        return ColumnRanges.of(name, self.views)


def evaluate_all(node: E.Expression, partitions: Views | list[StatsView],
                 member_all: MemberAll) -> list[Flags]:
    return evaluate_arrays(node, partitions, member_all).flags()


def evaluate_arrays(node: E.Expression, partitions: Views | list[StatsView],
                    member_all: MemberAll) -> FlagArrays:
    """evaluate_all's answers as three arrays over the partitions."""
    if not isinstance(partitions, Views):
        partitions = Views(partitions)
    return _evaluate(node, partitions, member_all)


def _evaluate(node: E.Expression, views: Views, member_all: MemberAll) -> FlagArrays:
    rule = RULES.get(type(node))
    try:
        if rule is not None:
            return rule(node, views, member_all)
    except _Fallback:
        pass
    return FlagArrays.of([evaluate(node, v) for v in views.views])


def _and(node, views, member_all) -> FlagArrays:
    a, b = _evaluate(node.this, views, member_all), _evaluate(node.expression, views, member_all)
    return FlagArrays(a.true & b.true, a.false | b.false,
                      (a.null | b.null) & (a.true | a.null) & (b.true | b.null))


def _or(node, views, member_all) -> FlagArrays:
    a, b = _evaluate(node.this, views, member_all), _evaluate(node.expression, views, member_all)
    return FlagArrays(a.true | b.true, a.false & b.false,
                      (a.null | b.null) & (a.false | a.null) & (b.false | b.null))


def _not(node, views, member_all) -> FlagArrays:
    a = _evaluate(node.this, views, member_all)
    return FlagArrays(a.false, a.true, a.null)


@dataclass
class ColumnRanges:
    """One column's ranges over the partitions."""
    name: str
    low: np.ndarray          # object arrays of Python values
    high: np.ndarray
    values: np.ndarray       # bool arrays
    nulls: np.ndarray
    nan: np.ndarray
    known: np.ndarray

    @classmethod
    def of(cls, name: str, views: list[StatsView]) -> ColumnRanges:
        ranges = [v.column(name) for v in views]
        lows, highs = np.empty(len(ranges), object), np.empty(len(ranges), object)
        lows[:], highs[:] = [r.low for r in ranges], [r.high for r in ranges]
        return cls(name, lows, highs, *(np.array([getattr(r, k) for r in ranges], bool)
                                             for k in ("values", "nulls", "nan", "known")))


def _operands(left: E.Expression, right: E.Expression, op: type, views: Views
              ) -> tuple[ColumnRanges, Range, type]:
    """(the column's ranges, the constant's range, the operator with the column on the left)
    for `column op constant` or `constant op column`."""
    if isinstance(right, E.Column) and not left.find(E.Column):
        left, right, op = right, left, FLIPPED[op]
    if not isinstance(left, E.Column) or right.find(E.Column) or not len(views):
        raise _Fallback
    return views.columns(left.name), value_range(right, CONSTANTS), op


def compare_all(op: type, a: ColumnRanges, b: Range) -> FlagArrays:
    """ranges.compare(op, a_i, b) for every partition i."""
    n = len(a.known)
    maybe = FlagArrays(np.ones(n, bool), np.ones(n, bool), np.ones(n, bool))
    if not b.known:
        return maybe
    if b.nan:
        raise _Fallback
    null = a.nulls | b.nulls
    if not b.values:                           # NULL: no row can be true or false
        some = a.values | a.nan | a.nulls
        out = FlagArrays(np.zeros(n, bool), np.zeros(n, bool), some)
    else:
        true, false = np.zeros(n, bool), np.zeros(n, bool)
        held = np.flatnonzero(a.values & a.known)
        if held.size:
            like = a.low[held[0]]
            try:    # ValueError: a string Spark casts and lakestats cannot ('yesterday')
                lows, highs = _aligned_all(a.low[held], b.low), _aligned_all(a.high[held], b.low)
                c = aligned(b, like)
                lo = Range(lows, highs)
                t, f = COMPARISONS[op](lo, c)
                true[held], false[held] = t, f
            except (TypeError, ValueError):
                raise _Fallback from None
        true |= a.nan & NAN_LEFT[op]
        false |= a.nan & (not NAN_LEFT[op])
        out = FlagArrays(true, false, null)
    unknown = ~a.known
    out.true[unknown] = out.false[unknown] = out.null[unknown] = True
    return out


def _aligned_all(values: np.ndarray, like) -> np.ndarray:
    """Bounds in like's type (ranges.aligned), when their type is not like's already."""
    if values.size == 0 or aligned_already(values[0], like):
        return values
    out = np.empty(values.size, object)
    out[:] = [aligned(Range(v, v), like).low for v in values]
    return out


def _comparison(node, views, member_all) -> FlagArrays:
    a, b, op = _operands(node.this, node.expression, type(node), views)
    out = compare_all(op, a, b)
    if op is E.EQ and b.known and b.values and b.low == b.high:
        _membership(out, a.name, [b.low], member_all)
    return out


def _between(node, views, member_all) -> FlagArrays:
    a, low, _ = _operands(node.this, node.args["low"], E.GTE, views)
    high = value_range(node.args["high"], CONSTANTS)
    if node.args["high"].find(E.Column):
        raise _Fallback
    above, below = compare_all(E.GTE, a, low), compare_all(E.LTE, a, high)
    return FlagArrays(above.true & below.true, above.false | below.false,
                      (above.null | below.null) & (above.true | above.null)
                      & (below.true | below.null))


def _is(node, views, member_all) -> FlagArrays:
    if not isinstance(node.expression, E.Null) or not isinstance(node.this, E.Column):
        raise _Fallback
    a = views.columns(node.this.name)
    n = len(a.known)
    return FlagArrays(np.where(a.known, a.nulls, True), np.where(a.known, a.values | a.nan, True),
                      np.zeros(n, bool))


def _in(node, views, member_all) -> FlagArrays:
    if node.args.get("query") or not node.expressions or not isinstance(node.this, E.Column) \
            or any(x.find(E.Column) for x in node.expressions) or not len(views):
        raise _Fallback
    a = views.columns(node.this.name)
    items = [value_range(x, CONSTANTS) for x in node.expressions]
    if not all(i.known for i in items):
        return FlagArrays.of([MAYBE] * len(views))
    with_values = [i for i in items if i.values]
    try:
        envelope = in_envelope(items)
    except TypeError:
        return FlagArrays.of([MAYBE] * len(views))
    if envelope is not None:
        overlap = compare_all(E.EQ, a, envelope)
        out = FlagArrays(overlap.true, np.ones(len(views), bool),
                         overlap.null | (len(with_values) < len(items)))
    else:
        flags = [compare_all(E.EQ, a, i) for i in items]
        no_null_item = all(i.values for i in items)
        out = FlagArrays(np.logical_or.reduce([f.true for f in flags]),
                         np.logical_and.reduce([f.false for f in flags]) & no_null_item,
                         np.logical_or.reduce([f.null for f in flags]))
    if with_values:
        _membership(out, a.name, [i.low for i in with_values], member_all)
    return out


def _membership(out: FlagArrays, column: str, values: list, member_all: MemberAll) -> None:
    """Partitions whose range allows a value, asked whether they may hold one."""
    asked = np.flatnonzero(out.true)
    if asked.size:
        held = member_all(column, values, asked)
        if held is not None:
            out.true[asked[~held]] = False


RULES = {E.And: _and, E.Or: _or, E.Not: _not, E.Paren: lambda n, v, m: _evaluate(n.this, v, m),
         E.EQ: _comparison, E.NEQ: _comparison, E.LT: _comparison, E.LTE: _comparison,
         E.GT: _comparison, E.GTE: _comparison, E.Between: _between, E.In: _in, E.Is: _is}
