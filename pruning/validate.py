"""A predicate checked as Spark 4 (ANSI mode, its default) would check it, before any statistics
are read: a column it cannot resolve, two types it cannot compare, and a literal that a
comparison or a CAST fails to cast. Spark fails on the last only when the query runs
(CAST_INVALID_INPUT); lakestats refuses it up front: a plan for a query that fails is no plan.

What Spark accepts passes: `int_col = '5'`, `date_col >= '2024-01-01'`, `ts > 'yesterday'`
(Spark's special datetime strings), a struct's `s.field`, names in any case. Only columns,
literals and casts have a type here: any other expression's type is unknown and passes.

One refusal is stricter than Spark: a string column compared with a number, a boolean or a
datetime. Spark casts every value of the column and fails at the first that does not cast,
so it accepts the comparison only on a column whose every value happens to be, say, a number;
`CAST(col AS BIGINT) = 5` says so explicitly and passes.
"""
from __future__ import annotations

import difflib
import functools
import re
import zoneinfo
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import expressions as E

from lakestats.pruning.predicate import PredicateError
from lakestats.pruning.spark_types import COMPARISONS, spark_column_type, spark_number_type

# names Spark reads as functions without parentheses; sqlglot leaves some of them columns
NILADIC = {"current_date", "current_timestamp", "current_user", "user", "session_user",
           "current_database", "current_schema", "current_catalog", "localtimestamp"}
NUMERIC = {"integral", "fractional"}
# a string compared with one of these kinds is cast to this type (AnsiTypeCoercion)
STRING_CAST = {"integral": "bigint", "fractional": "double", "boolean": "boolean",
               "date": "date", "timestamp": "timestamp"}


@dataclass(frozen=True)
class _Operand:
    kind: str | None          # None: unknown, never judged
    type: str                 # Spark's name of it, for messages
    node: E.Expression
    text: str | None = None   # a string literal's value
    column: bool = False

    @property
    def sql(self) -> str:     # for messages only: long IN lists are not written out
        return self.node.sql(dialect="spark")


def validate(node: E.Expression, schema: pa.Schema, hive_columns: set[str]) -> None:
    """Raise PredicateError, naming the column, value and types, if Spark would refuse the
    predicate over a table of this schema and these Hive-style partition columns (whose types
    Spark infers from the directory names: never judged)."""
    columns = {f.name.lower(): f for f in schema}
    hive = {h.lower() for h in hive_columns}
    for column in node.find_all(E.Column):
        _resolve(column, columns, hive)
    for n in node.walk():
        if n.find_ancestor(E.Subquery, E.Select):
            continue
        if isinstance(n, COMPARISONS):
            _comparable(n.this, n.expression, columns, hive)
        elif isinstance(n, E.Between):
            for bound in ("low", "high"):
                _comparable(n.this, n.args[bound], columns, hive)
        elif isinstance(n, E.In) and not n.args.get("query"):
            for item in n.expressions:
                _comparable(n.this, item, columns, hive)
        elif isinstance(n, E.Cast) and not n.args.get("safe"):
            _castable(n)
        if n is node:
            _boolean(n, columns, hive, filter_=True)
        if isinstance(n, (E.And, E.Or, E.Not)):
            for operand in (n.this, n.args.get("expression")):
                if operand is not None:
                    _boolean(operand, columns, hive)


def _resolve(column: E.Column, columns: dict[str, pa.Field], hive: set[str]) -> None:
    if column.find_ancestor(E.Subquery, E.Select):
        return                                  # another query's columns
    name, qualifiers = column.name, [p.name for p in column.parts[:-1]]
    if name.lower() in columns or name.lower() in hive:
        return
    if any(q.lower() in columns for q in qualifiers):
        return                                  # a struct's field: s.f
    if not qualifiers and not column.this.args.get("quoted") and name.lower() in NILADIC:
        return
    known = list(dict.fromkeys([f.name for f in columns.values()] + sorted(hive)))
    raise UnresolvedColumn(unknown_column(name, known))


class UnresolvedColumn(PredicateError):
    """A column the statistics do not have (misspelled, or only in files landed since)."""


def unknown_column(name: str, known: list[str]) -> str:
    """[UNRESOLVED_COLUMN] with the closest names and the table's columns (the first 20)."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6) or difflib.get_close_matches(
        name.lower(), [k.lower() for k in known], n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    listed = ", ".join(known[:20]) + (f", ... ({len(known) - 20} more)" if len(known) > 20 else "")
    return f"[UNRESOLVED_COLUMN] column {name!r} does not exist{hint}; columns: {listed}"


def _operand(node: E.Expression, columns: dict[str, pa.Field], hive: set[str]) -> _Operand:
    if isinstance(node, E.Paren):
        return _operand(node.this, columns, hive)
    if isinstance(node, E.Column):
        f = columns.get(node.name.lower())
        if f is None or node.name.lower() in hive or node.table.lower() in columns:
            return _Operand(None, "", node)
        return _Operand(*spark_column_type(f.type), node, column=True)
    if isinstance(node, E.Neg) and isinstance(node.this, E.Literal) and not node.this.is_string:
        return _Operand(*spark_number_type(node.this.this), node)
    if isinstance(node, E.Literal):
        return _Operand("string", "string", node, node.this) if node.is_string else \
            _Operand(*spark_number_type(node.this), node)
    if isinstance(node, E.Boolean):
        return _Operand("boolean", "boolean", node)
    if isinstance(node, E.Null):
        return _Operand("null", "void", node)
    if isinstance(node, E.HexString):
        return _Operand("binary", "binary", node)
    if isinstance(node, E.Cast):
        return _Operand(_cast_kind(node.to), node.to.sql(dialect="spark").lower(), node)
    return _Operand(None, "", node)


def _cast_kind(to: E.DataType) -> str | None:
    t = to.this
    if t in E.DataType.INTEGER_TYPES:
        return "integral"
    if t in E.DataType.REAL_TYPES:
        return "fractional"
    if t in E.DataType.TEXT_TYPES:
        return "string"
    if t in E.DataType.BINARY_TYPES:
        return "binary"
    if t == E.DataType.Type.BOOLEAN:
        return "boolean"
    if t == E.DataType.Type.DATE:
        return "date"
    if t in (E.DataType.Type.TIMESTAMP, E.DataType.Type.TIMESTAMPTZ,
             E.DataType.Type.TIMESTAMPLTZ, E.DataType.Type.TIMESTAMPNTZ):
        return "timestamp"
    return None


def _comparable(left: E.Expression, right: E.Expression, columns: dict[str, pa.Field],
                hive: set[str]) -> None:
    a, b = _operand(left, columns, hive), _operand(right, columns, hive)
    if None in (a.kind, b.kind) or "null" in (a.kind, b.kind) or a.kind == b.kind \
            or a.kind in NUMERIC and b.kind in NUMERIC or {a.kind, b.kind} == {"date", "timestamp"}:
        return
    for s, other in ((a, b), (b, a)):
        if s.kind == "string" and other.kind == "binary":
            return                                # the string is cast to binary: always fine
        if s.kind == "string" and other.kind in STRING_CAST:
            target = STRING_CAST[other.kind]
            what = f"cannot compare {a.sql} ({a.type}) with {b.sql} ({b.type})"
            if s.text is not None:
                if not _parses(s.text, target):
                    raise PredicateError(f"[CAST_INVALID_INPUT] {what}: {s.sql} is not a "
                                         f"{target}")
            elif s.column:
                raise PredicateError(
                    f"[CAST_INVALID_INPUT] {what}: Spark casts every {s.sql} value to {target} "
                    f"and fails at the first that is not one; compare with a string literal, "
                    f"or write CAST({s.sql} AS {target.upper()}) if every value is a {target}")
            return
    raise PredicateError(f"[DATATYPE_MISMATCH] cannot compare {a.sql} ({a.type}) with "
                         f"{b.sql} ({b.type})")


def _castable(node: E.Cast) -> None:
    """CAST('...' AS T), and the typed literals DATE '...', TIMESTAMP '...': the text must be
    a T."""
    if not (isinstance(node.this, E.Literal) and node.this.is_string):
        return
    kind, text, name = _cast_kind(node.to), node.this.this, node.to.sql(dialect="spark").lower()
    target = {"integral": name, "fractional": "decimal"
              if node.to.this == E.DataType.Type.DECIMAL else "double"}.get(kind, kind)
    if target in _PARSERS and not _parses(text, target):
        raise PredicateError(f"[CAST_INVALID_INPUT] {node.sql(dialect='spark')}: {text!r} is "
                             f"not a valid {name}")


def _boolean(node: E.Expression, columns: dict[str, pa.Field], hive: set[str],
             filter_: bool = False) -> None:
    """The filter is a boolean; so are the operands of AND, OR and NOT, or strings and NULLs
    (cast to one): ANSI casts no number or datetime to a boolean."""
    a = _operand(node, columns, hive)
    if a.kind in NUMERIC | {"binary", "date", "timestamp", "complex"} or \
            filter_ and a.kind in ("string", "null"):
        raise PredicateError(f"[DATATYPE_MISMATCH] {a.sql} ({a.type}) is not a boolean "
                             "condition")


# -- what Spark's casts from string accept (trimmed of white space first)

_INTEGRAL_RANGE = {"tinyint": 7, "smallint": 15, "int": 31, "integer": 31, "bigint": 63}
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?"
                     r"|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?)")
_DOUBLE_WORDS = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan"}
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_BOOLEAN = {"t", "true", "y", "yes", "1", "f", "false", "n", "no", "0"}
_SPECIAL = r"(epoch|now|today|yesterday|tomorrow)"
_Y = r"(?P<sign>[+-]?)(?P<y>[0-9]{4,7})"
_CLOCK = r"(?P<M>[0-9]{1,2})(:(?P<S>[0-9]{1,2})(\.[0-9]*)?(\s*(?P<zone>\S.*))?)?"
_DATE = (re.compile(rf"{_Y}(-(?P<m>[0-9]{{1,2}})(-(?P<d>[0-9]{{1,2}})([ T].*)?)?)?", re.S),
         re.compile(rf"{_SPECIAL}(\s+(?P<zone>\S+))?", re.I))
# a zone only after the seconds; hours alone only after a date or a T
_TIMESTAMP = (
    re.compile(rf"{_Y}(-(?P<m>[0-9]{{1,2}})(-(?P<d>[0-9]{{1,2}})"
               rf"([ T](?P<H>[0-9]{{1,2}})(:{_CLOCK})?)?)?)?", re.S),
    re.compile(rf"T(?P<H>[0-9]{{1,2}})(:{_CLOCK})?", re.S),
    re.compile(rf"(?P<H>[0-9]{{1,2}}):{_CLOCK}", re.S),
    re.compile(_SPECIAL, re.I))
_OFFSET = re.compile(r"(UTC|GMT|UT)?([+-](?P<h>[0-9]{1,2})(:?[0-9]{2}(:?[0-9]{2})?)?)?")
# java.time.ZoneId.SHORT_IDS, which Spark accepts too
_SHORT_ZONES = {"ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST", "CTT",
                "EAT", "ECT", "EST", "HST", "IET", "IST", "JST", "MIT", "MST", "NET", "NST",
                "PLT", "PNT", "PRT", "PST", "SST", "VST"}


def _integral(text: str, bits: int) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", text) is not None and -2 ** bits <= int(text) < 2 ** bits


def _date(text: str) -> bool:
    return any(m is not None and _fields(m) for m in (p.fullmatch(text) for p in _DATE))


def _timestamp(text: str) -> bool:
    return any(m is not None and _fields(m) for m in (p.fullmatch(text) for p in _TIMESTAMP))


def _fields(m: re.Match) -> bool:
    """A real day of the proleptic Gregorian calendar (Spark's), time of day and zone."""
    groups = m.groupdict()
    if groups.get("y") is not None:
        year = int(groups["y"]) * (-1 if groups["sign"] == "-" else 1)
        month, day = int(groups["m"] or 1), int(groups["d"] or 1)
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        if not (1 <= month <= 12 and 1 <= day <= days[month - 1]):
            return False
    hour, minute, second = (int(groups.get(k) or 0) for k in ("H", "M", "S"))
    zone = groups.get("zone")
    return hour < 24 and minute < 60 and second < 60 and (zone is None or _zone(zone))


def _zone(text: str) -> bool:
    """Zone ids as java.time.ZoneId reads them: Z, offsets, UTC+1, region ids (case
    matters)."""
    offset = _OFFSET.fullmatch(text)
    if text == "Z" or offset and (offset.group("h") is None or int(offset.group("h")) <= 18):
        return True
    names = _zone_names()
    return text in _SHORT_ZONES or text in names or not names    # no zone database: unknown


@functools.cache
def _zone_names() -> set[str]:
    return zoneinfo.available_timezones()


_PARSERS = {
    **{name: lambda t, bits=bits: _integral(t, bits) for name, bits in _INTEGRAL_RANGE.items()},
    "double": lambda t: t.lower() in _DOUBLE_WORDS or _DOUBLE.fullmatch(t) is not None,
    "decimal": lambda t: _DECIMAL.fullmatch(t) is not None,
    "boolean": lambda t: t.lower() in _BOOLEAN,
    "date": _date,
    "timestamp": _timestamp,
}


def _parses(text: str, target: str) -> bool:
    """Whether Spark's cast of the string literal to `target` succeeds."""
    return _PARSERS[target](text.strip())
