"""A predicate as Spark SQL (parsed by sqlglot in the Spark dialect, no JVM), and the
partitions' statistics as pruning.evaluator reads them."""
from __future__ import annotations

import re

import pyarrow as pa
import sqlglot
from sqlglot import expressions as E

from lakestats.core.errors import UsageError
from lakestats.pruning.arrays import Ranges
from lakestats.pruning.ranges import UNKNOWN, Range
from lakestats.pruning.spark_types import spark_column_type

# -- the statistics a predicate reads


class StatsView:
    """One partition as the evaluator sees it: typed ranges of its columns. `stats` maps a
    column to its statistics row with `low`/`high` already typed."""

    def __init__(self, stats: dict[str, dict], row_count: int, table_columns: set[str],
                 schema: pa.Schema | None = None):
        """`schema`: the table's, where known (the integer columns' widths)."""
        self.stats, self.row_count, self.table_columns = stats, row_count, table_columns
        self.schema = schema

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


class Views:
    """The partitions as the evaluator reads them: a column's ranges as arrays over every
    partition (`columns`). This one derives them from each partition's StatsView;
    pruning.views keeps them as arrays from the partition index."""

    def __init__(self, views: list[StatsView]):
        self._views = views
        self.table_schema = views[0].schema if views else None

    def __len__(self) -> int:
        return len(self._views)

    @property
    def views(self) -> list[StatsView]:
        return self._views

    def columns(self, name: str) -> Ranges:
        return Ranges.of([v.column(name) for v in self.views], column=name)

    def spark_type(self, name: str) -> str | None:
        """The Spark type the column is read as; None where the views do not say."""
        schema = self.table_schema
        return None if schema is None or name not in schema.names else \
            spark_column_type(schema.field(name).type)[1]


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
    return as_spark_reads(trees[0])


# `name` or `quoted name` (`` escapes a backtick), then ASC or DESC
_ORDER = re.compile(r"\s*(?:`((?:[^`]|``)+)`|([^\s`]+))(?:\s+(ASC|DESC))?\s*", re.IGNORECASE)


def parse_order(order_by: str | None) -> tuple[str, bool] | None:
    """"col [ASC|DESC]" -> (col, descending). A name holding a dot is quoted, as Spark reads
    an unquoted a.b as field b of struct a, of which the statistics say nothing."""
    if not order_by:
        return None
    found = _ORDER.fullmatch(order_by)
    if not found:
        raise PredicateError(f"order by {order_by!r}: expected COLUMN [ASC|DESC]")
    quoted, plain, direction = found.groups()
    if plain and "." in plain:
        raise PredicateError(f"order by {order_by!r}: a struct's field is not a column the "
                             f"statistics order; a column named so is quoted: `{plain}`")
    return (quoted.replace("``", "`") if quoted else plain), (direction or "").upper() == "DESC"


def quoted(name: str) -> str:
    """A column's name as Spark SQL reads it whatever it holds (dots, spaces, backticks)."""
    return "`" + name.replace("`", "``") + "`"


def as_spark_reads(tree: E.Expression) -> E.Expression:
    """sqlglot parses `s NOT LIKE p` (and NOT ILIKE) as a Like marked `negate`, where
    `NOT (s LIKE p)` is a Not over a Like: the mark made a Not, so that every rule that
    reads a predicate sees the negation. `BETWEEN SYMMETRIC`, which sqlglot reads and Spark
    does not, is refused (the rules would read it as an ordered BETWEEN)."""
    def unmarked(node: E.Expression) -> E.Expression:
        if isinstance(node, E.Between) and node.args.get("symmetric"):
            raise PredicateError("Spark SQL has no BETWEEN SYMMETRIC: write "
                                 f"{node.sql(dialect='spark')}")
        if not node.args.get("negate"):
            return node
        node = node.copy()
        node.set("negate", None)
        return E.Not(this=node)
    return tree.transform(unmarked)


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


def struct_fields_opaque(node: E.Expression, columns: set[str]) -> E.Expression:
    """`s.f` where `s` is one of `columns` reads a struct's field, of which column `f`'s
    statistics say nothing: it becomes an expression no rule knows (it never prunes)."""
    names = {c.lower() for c in columns}
    return _opaque(node, "struct_field",
                   lambda c: any(p.name.lower() in names for p in c.parts[:-1]))


def columns_opaque(node: E.Expression, columns: set[str]) -> E.Expression:
    """The `columns` (unqualified) become expressions no rule knows: comparisons with them
    never prune (columns whose values Spark types otherwise than the statistics do)."""
    names = {c.lower() for c in columns}
    return _opaque(node, "typed_by_spark",
                   lambda c: not c.parts[:-1] and c.name.lower() in names) if names else node


def _opaque(node: E.Expression, label: str, chosen) -> E.Expression:
    def opaque(n: E.Expression) -> E.Expression:
        if isinstance(n, E.Column) and chosen(n):
            return E.Anonymous(this=label, expressions=[E.Literal.string(n.sql())])
        return n
    return node.transform(opaque)
