"""The Spark type of a predicate's expressions, and the casts Spark's analyzer adds where a
float meets an integer: the evaluator compares what Spark compares.

Most mixed comparisons need no cast of ours: an integer or a decimal meeting a double is read
as a double (ranges.aligned), exactly as Spark does. A float (32-bit) meeting an integer is
the exception: Spark rounds the integer to a float, so `g = 16777217` is true where g is
16777216. `coerced` makes that rounding explicit as CAST(... AS FLOAT) nodes, as Spark's
ImplicitTypeCasts does, and the evaluator's CAST rule rounds exactly.
"""
from __future__ import annotations

import decimal
import re
from typing import Callable

import pyarrow as pa
from sqlglot import expressions as E

T = E.DataType.Type
INTEGRAL_BITS = {T.TINYINT: 8, T.SMALLINT: 16, T.INT: 32, T.BIGINT: 64}
SPARK_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
# numeric types from narrow to wide, as Spark widens them (a decimal is apart)
NUMERIC_ORDER = ("tinyint", "smallint", "int", "bigint", "float", "double")
CAST_TYPES = {T.TINYINT: "tinyint", T.SMALLINT: "smallint", T.INT: "int", T.BIGINT: "bigint",
              T.FLOAT: "float", T.DOUBLE: "double"}
DECIMAL = T.DECIMAL
MAX_PRECISION, MIN_ADJUSTED_SCALE = 38, 6         # Spark's DecimalType
# the decimal an integer type is widened to where it meets a decimal
INTEGRAL_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
COMPARISONS = (E.EQ, E.NEQ, E.NullSafeEQ, E.LT, E.LTE, E.GT, E.GTE)
ARITHMETIC = (E.Add, E.Sub, E.Mul)
# a column's Spark type name (spark_column_type's), None where not known
ColumnType = Callable[[str], "str | None"]


def spark_column_type(t: pa.DataType) -> tuple[str | None, str]:
    """The kind of a column, and Spark's name of the type it reads the Parquet column as."""
    if pa.types.is_boolean(t):
        return "boolean", "boolean"
    if pa.types.is_signed_integer(t):
        return "integral", {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[t.bit_width]
    if pa.types.is_unsigned_integer(t):
        return ("integral", {8: "smallint", 16: "int", 32: "bigint"}[t.bit_width]) \
            if t.bit_width < 64 else ("fractional", "decimal(20,0)")
    if pa.types.is_floating(t):
        return "fractional", "double" if t.bit_width == 64 else "float"
    if pa.types.is_decimal(t):
        return "fractional", f"decimal({t.precision},{t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string", "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
            pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return "binary", "binary"
    if pa.types.is_date(t):
        return "date", "date"
    if pa.types.is_timestamp(t):
        return "timestamp", "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return "complex", "array"
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return "complex", "struct" if pa.types.is_struct(t) else "map"
    return None, str(t)


def spark_number_type(text: str) -> tuple[str, str]:
    """A numeric literal's kind and Spark type: 5 int, 5000000000 bigint, larger ones and
    5.5 decimal, 1e3 double."""
    if "e" in text.lower():
        return "fractional", "double"
    if "." in text or abs(int(text)) >= 2 ** 63:
        return "fractional", "decimal"
    return "integral", "int" if abs(int(text)) < 2 ** 31 else "bigint"


def wider(a: str | None, b: str | None) -> str | None:
    """The type Spark computes two numbers of types a and b in (None: not known)."""
    if "void" in (a, b):                               # NULL takes the other's type
        return b if a == "void" else a
    a, b = (t if t is None or not t.startswith("decimal") else "decimal" for t in (a, b))
    if "decimal" in (a, b):
        other = b if a == "decimal" else a
        return "double" if other in ("float", "double") else \
            "decimal" if other in SPARK_INT_BITS or other == "decimal" else None
    if a in NUMERIC_ORDER and b in NUMERIC_ORDER:
        return max(a, b, key=NUMERIC_ORDER.index)
    return "double" if "double" in (a, b) else None    # anything numeric with a double


def spark_type(node: E.Expression, column_type: ColumnType) -> str | None:
    """The Spark type of a numeric expression (a name from NUMERIC_ORDER, or decimal(p,s) /
    decimal); None where lakestats does not know it."""
    if isinstance(node, E.Column):
        return column_type(node.name)
    if isinstance(node, E.Null):
        return "void"
    if isinstance(node, E.Literal):
        try:
            t = "string" if node.is_string else spark_number_type(node.this)[1]
        except ValueError:
            return None
        return "decimal(%d,%d)" % _literal_digits(node.this) if t == "decimal" else t
    if isinstance(node, E.Cast):                       # TryCast too
        return "decimal(%d,%d)" % decimal_type(node.to) if node.to.this == DECIMAL else \
            CAST_TYPES.get(node.to.this, node.to.this.value.lower())
    if isinstance(node, (E.Paren, E.Neg)):
        return spark_type(node.this, column_type)
    if isinstance(node, ARITHMETIC):
        return _arithmetic_type(node, column_type)
    if isinstance(node, (E.If, E.Case)):
        return _common([spark_type(holder.args[key], column_type)
                        for holder, key in _branch_slots(node) if holder.args.get(key)])
    return "int" if isinstance(node, E.Year) else None


def decimal_type(to: E.DataType) -> tuple[int, int]:
    """A DECIMAL type's precision and scale: Spark's DECIMAL alone is DECIMAL(10, 0)."""
    given = [int(p.this.this) for p in to.expressions]
    return (given[0] if given else 10), (given[1] if len(given) > 1 else 0)


def decimal_digits(t: str | None) -> tuple[int, int] | None:
    """The precision and scale of a type named decimal(p,s); None for another name."""
    found = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", t or "")
    return (int(found[1]), int(found[2])) if found else None


def _literal_digits(text: str) -> tuple[int, int]:
    """A literal's precision and scale as Spark types it: 1.50 is DECIMAL(3, 2), 0.05
    DECIMAL(2, 2), 7 DECIMAL(1, 0) where it meets a decimal."""
    _, digits, exponent = decimal.Decimal(text.lstrip("-")).as_tuple()
    scale = max(0, -exponent)
    return max(len(digits) + max(0, exponent), scale, 1), scale


def _arithmetic_type(node: E.Expression, column_type: ColumnType) -> str | None:
    """The type of + - * as Spark's DecimalPrecision gives it: where a decimal meets a
    decimal or an integer, the exact result's precision and scale, the scale cut (the value
    rounded) where the precision would pass 38; else the wider operand's type."""
    operands = [node.this, node.expression]
    types = [spark_type(x, column_type) for x in operands]
    if not any(decimal_digits(t) for t in types) or any(t in ("float", "double") for t in types):
        return wider(*types)
    digits = [decimal_digits(t) or (_literal_digits(x.sql()) if _is_number(x) else
                                    (INTEGRAL_DIGITS.get(t, 0), 0))
              for x, t in zip(operands, types)]
    (p1, s1), (p2, s2) = digits
    if not (p1 and p2):
        return "decimal"                               # an operand of unknown precision
    if isinstance(node, E.Mul):
        precision, scale = p1 + p2 + 1, s1 + s2
    else:
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    if precision > MAX_PRECISION:                      # DecimalType.adjustPrecisionScale
        scale = max(MAX_PRECISION - (precision - scale), min(scale, MIN_ADJUSTED_SCALE))
        precision = MAX_PRECISION
    return f"decimal({precision},{scale})"


def _is_number(node: E.Expression) -> bool:
    """A numeric literal, or a negative one (Spark's grammar reads -5 as a literal)."""
    node = node.this if isinstance(node, E.Neg) else node
    return isinstance(node, E.Literal) and not node.is_string


def int_bits(node: E.Expression, column_type: ColumnType) -> int:
    """The width of the node's Spark integer type, at least (8 where its type is not known);
    0 where its type is no integer type."""
    t = spark_type(node, column_type)
    return 8 if t is None else SPARK_INT_BITS.get(t, 0)


def coerced(node: E.Expression, column_type: ColumnType) -> E.Expression:
    """The node with CAST(... AS FLOAT) where Spark casts an integer meeting a float: in a
    comparison, BETWEEN, IN, arithmetic and the branches of IF and CASE. The node itself
    where nothing is a float (the common case: no copy)."""
    if not any(column_type(c.name) == "float" for c in node.find_all(E.Column)) and not any(
            c.to.this == T.FLOAT for c in node.find_all(E.Cast)):
        return node
    return node.transform(lambda n: _with_casts(n, column_type))


def _with_casts(node: E.Expression, column_type: ColumnType) -> E.Expression:
    if isinstance(node, E.Between):                    # a >= low AND a <= high, each coerced
        pairs = [(E.GTE, node.args["low"]), (E.LTE, node.args["high"])]
        return E.and_(*(op(this=node.this.copy(), expression=bound.copy())
                        for op, bound in pairs)).transform(
            lambda n: _with_casts(n, column_type), copy=False)
    if isinstance(node, (*COMPARISONS, *ARITHMETIC)):
        slots = [(node, "this", None), (node, "expression", None)]
    elif isinstance(node, E.In) and not node.args.get("query"):
        slots = [(node, "this", None)] + [(node, "expressions", i)
                                          for i in range(len(node.expressions))]
    elif isinstance(node, (E.If, E.Case)):
        slots = [(holder, key, None) for holder, key in _branch_slots(node)]
    else:
        return node
    operands = [_at(holder, key, i) for holder, key, i in slots]
    if _common([spark_type(x, column_type) for x in operands if x is not None]) == "float":
        for (holder, key, i), operand in zip(slots, operands):
            if operand is not None:
                holder.set(key, _as_float(operand, column_type), i)
    return node


def _at(holder: E.Expression, key: str, index: int | None) -> E.Expression | None:
    value = holder.args.get(key)
    return value if index is None else value[index]


def _branch_slots(node: E.If | E.Case) -> list[tuple[E.Expression, str]]:
    """Where IF's or CASE's values are: (node, arg) pairs."""
    if isinstance(node, E.If):
        return [(node, "true"), (node, "false")]
    return [(arm, "true") for arm in node.args["ifs"]] + [(node, "default")]


def _common(types: list[str | None]) -> str | None:
    """The type Spark coerces all of `types` to (None where one is not known)."""
    common = types[0] if types else None
    for t in types[1:]:
        common = wider(common, t)
    return common


def _as_float(node: E.Expression, column_type: ColumnType) -> E.Expression:
    """An integer operand cast to a float, as Spark rounds it; others as they are."""
    return E.Cast(this=node, to=E.DataType(this=T.FLOAT)) \
        if spark_type(node, column_type) in SPARK_INT_BITS else node
