"""The oracle of the statistics tests: what every statistic must be, computed independently.

DuckDB over the very same Parquet files wherever DuckDB's semantics are ours (row and null
counts, distinct counts, which count NaN once and -0.0 = 0.0, min/max, exact integer sums in
HUGEINT, string and binary lengths, true counts), and exact Python arithmetic (int, Decimal,
Fraction), numpy and zoneinfo elsewhere (decimals beyond 38 digits, moments, float min/max and
NaN counts, frequencies, histogram bins). lakestats' canonical text is parsed back here with
Python and numpy only, never with lakestats' own parsers, so a wrong rendering cannot hide
behind its own inverse.
"""
from __future__ import annotations

import bisect
import datetime as dt
import math
import re
from collections import Counter
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)
import pyarrow.parquet as pq
import pytest

from lakestats.metastore.reader import StatisticsReader
from tests.oracle_data import NAN, TICKS, UTC

# -- the oracle: kinds and the values behind canonical text --------------------------------------

def kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return kind(t.value_type)
    for name, test in (("boolean", pa.types.is_boolean), ("integer", pa.types.is_integer),
                       ("float", pa.types.is_floating), ("decimal", pa.types.is_decimal),
                       ("temporal", pa.types.is_temporal),
                       ("string", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
                       ("binary", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)
                        or pa.types.is_fixed_size_binary(t))):
        if test(t):
            return name
    return "other"


def storage_ints(column: pa.ChunkedArray) -> list[int]:
    """Non-null temporal values as their integer storage (days, or ticks of the type's unit)."""
    arr = column.combine_chunks()
    width = pa.int32() if arr.type.bit_width == 32 else pa.int64()
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    ints = pa.compute.fill_null(arr.view(width), 0)     # with nulls, to_numpy gives floats
    return [int(v) for v in ints.to_numpy(zero_copy_only=False)[valid]]


def instant(text: str, t: pa.DataType) -> int:
    """ISO 8601 text back to the integer storage of `t`, with numpy's parser. A zoned timestamp
    must carry the UTC offset its zone has at that instant (zoneinfo says which)."""
    if pa.types.is_date(t):
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", text), text
        return int((np.datetime64(text, "D") - np.datetime64("1970-01-01", "D")).astype(np.int64))
    if pa.types.is_time(t):
        assert re.fullmatch(r"\d\d:\d\d:\d\d(\.\d+)?", text), text
        return int(np.datetime64("1970-01-01T" + text, t.unit).astype(np.int64))
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)"
                     r"(?:([+-])(\d\d):(\d\d)(?::(\d\d))?)?", text)
    assert m, text
    local, sign, hh, mm, ss = m.groups()
    ticks = int(np.datetime64(local, t.unit).astype(np.int64))
    if t.tz is None:
        assert sign is None, f"naive timestamp rendered with an offset: {text}"
        return ticks
    assert sign is not None, f"zoned timestamp rendered without its offset: {text}"
    offset = (1 if sign == "+" else -1) * (int(hh) * 3600 + int(mm) * 60 + int(ss or 0))
    at = ticks - offset * TICKS[t.unit]
    moment = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=at // TICKS[t.unit])
    zone_offset = moment.astimezone(ZoneInfo(t.tz)).utcoffset().total_seconds()
    assert offset == zone_offset, f"{text}: offset {offset} s, but {t.tz} has {zone_offset} s then"
    return at


def significant_digits(text: str) -> int:
    mantissa = text.lstrip("-").split("e")[0].replace(".", "")
    return len(mantissa.strip("0")) or 1


def parse(text: str, t: pa.DataType):
    """Canonical text back to the oracle's value domain: Python ints, floats, Decimals, str,
    bytes, bools; temporal values as their integer storage."""
    k = kind(t)
    if k == "integer":
        assert re.fullmatch(r"-?\d+", text), text
        return int(text)
    if k == "float":
        assert text != "-0", "negative zero is rendered as 0"
        if pa.types.is_float32(t):
            value = float(np.float32(text))
            shortest = np.format_float_scientific(np.float32(value), unique=True)
        else:
            value = float(text)
            shortest = repr(value)
        if math.isfinite(value):    # shortest round-trip text
            assert significant_digits(text) <= significant_digits(shortest), (text, shortest)
        return value
    if k == "decimal":
        assert re.fullmatch(r"-?\d+(\.\d+)?(E[+-]?\d+)?", text), text   # Arrow: 1E-38
        return Decimal(text)
    if k == "temporal":
        return instant(text, t)
    if k == "binary":
        assert re.fullmatch(r"([0-9a-f]{2})*", text), f"not lowercase hex: {text!r}"
        return bytes.fromhex(text)
    if k == "boolean":
        assert text in ("true", "false"), text
        return text == "true"
    return text


def key(value, t: pa.DataType):
    """A value as a dictionary key under our semantics: one NaN, -0.0 = 0.0."""
    if kind(t) == "float":
        return "NaN" if value != value else value + 0.0
    return value


def python_values(column: pa.ChunkedArray) -> list:
    """Non-null values (NaN included) in the oracle's value domain."""
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.cast(t.value_type)
    if kind(t) == "temporal":
        return storage_ints(column)
    return [v for v in column.to_pylist() if v is not None]


def duck(sql: str) -> tuple:
    return duckdb.sql(sql).fetchall()[0]


def source(root: Path, rel_paths: list[str]) -> str:
    """DuckDB's reading of the files, by column name (files may lack newer columns)."""
    paths = [str(root / p) for p in rel_paths]
    return f"read_parquet({paths!r}, union_by_name=true)"


def read_column(root: Path, rel_paths: list[str], name: str, t: pa.DataType) -> pa.ChunkedArray:
    """The column over the files, as stored; null where a file lacks the column."""
    chunks = []
    for p in rel_paths:
        table = pq.read_table(root / p)
        chunks.append(table[name].combine_chunks() if name in table.column_names
                      else pa.nulls(table.num_rows, t))
    return pa.chunked_array([c.cast(t) if c.type != t else c for c in chunks], t)


def exact_moments(values: list) -> tuple[Fraction, Fraction | None, float, float | None]:
    """Sum, mean, and the sample stddev of exact numbers (ints, Decimals or finite floats)."""
    exact = [Fraction(v) for v in values]
    n = len(exact)
    total = sum(exact)
    mean = total / n
    if n < 2:
        return total, mean, float(mean), None
    variance = sum((v - mean) ** 2 for v in exact) / (n - 1)
    with localcontext(prec=40):           # the variance of values near 1e308 exceeds a float
        stddev = (Decimal(variance.numerator) / Decimal(variance.denominator)).sqrt()
    return total, mean, float(mean), float(stddev)


def oracle(root: Path, rel_paths: list[str], name: str, t: pa.DataType) -> dict:
    """The expected statistics of one column over the given files."""
    src, c = source(root, rel_paths), f'"{name}"'
    k = kind(t)
    rows, non_null = duck(f"select count(*), count({c}) from {src}")
    want = {"row_count": rows, "null_count": rows - non_null}
    for absent in ("nan_count", "distinct_count", "min", "max", "sum", "mean", "stddev",
                   "min_length", "max_length", "avg_length", "true_count"):
        want[absent] = None
    if k == "other":
        return want
    column = read_column(root, rel_paths, name, t)
    values = python_values(column)
    assert len(values) == non_null
    if k == "decimal":            # DuckDB reads decimals beyond 38 digits as doubles: exact Python
        want["distinct_count"] = len(set(values))
    else:                         # DuckDB counts NaN once and -0.0 = 0.0, as we do
        want["distinct_count"] = duck(f"select count(distinct {c}) from {src}")[0]
    if k == "float":
        # Python, not DuckDB: DuckDB 2.0 mis-evaluates NaN filters on these files (isnan()
        # pushed into the Parquet scan, or two FILTER aggregates side by side, keep NaNs)
        want["nan_count"] = sum(v != v for v in values)
        finite = [v for v in values if v == v]
        if finite:
            want["min"], want["max"] = min(finite), max(finite)
            if all(math.isfinite(v) for v in finite):
                total, _, want["mean"], want["stddev"] = exact_moments(finite)
                want["sum"] = float(total)
                # floating-point summation's own error bound: exact only when well-conditioned
                # (+-3.4e38 beside small values cancel in any float64 sum)
                bound = float(len(finite) * Fraction(1, 2**53) * sum(Fraction(abs(v)) for v in finite))
                want["tolerance"] = {"sum": bound, "mean": bound / len(finite),
                                     "stddev": bound / len(finite)}
            else:                 # infinities: IEEE arithmetic decides (inf, or nan for inf - inf)
                with np.errstate(invalid="ignore", over="ignore"):
                    want["mean"], want["sum"] = float(np.mean(finite)), float(np.sum(finite))
                want["stddev"] = NAN if len(finite) > 1 else None
    elif k == "integer":
        lo, hi, total = duck(f"select min({c}), max({c}), sum({c}::hugeint) from {src}")
        if values:
            want["min"], want["max"], want["sum"] = lo, hi, int(total)
            exact_total, _, want["mean"], want["stddev"] = exact_moments(values)
            assert exact_total == total
    elif k == "decimal":
        if values:
            want["min"], want["max"] = min(values), max(values)
            total, _, want["mean"], want["stddev"] = exact_moments(values)
            want["sum"] = total
    elif k == "temporal":
        if pa.types.is_date(t):
            expr = f"{{}}({c}) - date '1970-01-01'"
        elif t.unit == "ns":
            expr = f"epoch_ns({{}}({c}))"
        else:
            expr = f"epoch_us({{}}({c})) // {10**6 // TICKS[t.unit]}"
        if values:
            want["min"], want["max"] = min(values), max(values)
            assert duck(f"select {expr.format('min')}, {expr.format('max')} from {src}") == (
                want["min"], want["max"])
    elif k == "string":
        if values:
            (want["min"], want["max"], want["min_length"], want["max_length"],
             want["avg_length"]) = duck(f"select min({c}), max({c}), min(length({c})), "
                                        f"max(length({c})), avg(length({c})) from {src}")
    elif k == "binary":
        if values:
            lo, hi, *lengths = duck(f"select lower(hex(min({c}))), lower(hex(max({c}))), "
                                    f"min(octet_length({c})), max(octet_length({c})), "
                                    f"avg(octet_length({c})) from {src}")
            want["min"], want["max"] = bytes.fromhex(lo), bytes.fromhex(hi)
            want["min_length"], want["max_length"], want["avg_length"] = lengths
    elif k == "boolean":
        lo, hi, trues = duck(f"select min({c}), max({c}), count(*) filter (where {c}) from {src}")
        want["true_count"] = trues
        if values:
            want["min"], want["max"] = lo, hi
    return want


# -- comparing ----------------------------------------------------------------------------------

def close(got, want, rel: float = 1e-9, tolerance: float = 0.0) -> bool:
    if want is None or got is None:
        return got is None and want is None
    if math.isnan(want) or math.isinf(want):
        return (math.isnan(got) and math.isnan(want)) or got == want
    return got == pytest.approx(want, rel=rel, abs=max(tolerance, 1e-300))


def check_row(row: dict, want: dict, t: pa.DataType, where: str) -> None:
    name = f"{where}:{row['column']}"
    for k in ("row_count", "null_count", "nan_count", "distinct_count", "true_count",
              "min_length", "max_length"):
        assert row[k] == want[k], (name, k, row[k], want[k])
    assert close(row["avg_length"], want["avg_length"], 1e-12), (name, "avg_length")
    for k in ("min", "max"):
        if want[k] is None:
            assert row[k] is None, (name, k, row[k])
        else:
            assert row[k] is not None, (name, k)
            assert parse(row[k], t) == want[k], (name, k, row[k], want[k])
    if want["sum"] is None:
        assert row["sum"] is None, (name, "sum")
    elif kind(t) == "integer":
        assert int(row["sum"]) == want["sum"], (name, "sum", row["sum"], want["sum"])
    elif kind(t) == "decimal":
        assert Fraction(Decimal(row["sum"])) == want["sum"], (name, "sum", row["sum"], want["sum"])
    else:
        assert close(parse(row["sum"], pa.float64()), want["sum"],
                     tolerance=want.get("tolerance", {}).get("sum", 0.0)), (name, "sum", row["sum"])
    for k in ("mean", "stddev"):
        # summary() gives null where IEEE arithmetic gives inf or NaN (inf - inf)
        finite = want[k] if want[k] is None or math.isfinite(want[k]) else None
        assert close(row[k], finite, tolerance=want.get("tolerance", {}).get(k, 0.0)), \
            (name, k, row[k], want[k])


def check_frequencies(freq: pa.Table, values: list, t: pa.DataType, where: str) -> None:
    """Exact counts per value (one NaN, -0.0 = 0.0), nulls not a value, decreasing counts."""
    got = Counter()
    for text, count in zip(freq["value"].to_pylist(), freq["frequency"].to_pylist()):
        assert text is not None, where
        value = key(parse(text, t), t)
        assert value not in got, (where, "value listed twice", text)
        got[value] = count
    assert got == Counter(key(v, t) for v in values), where
    counts = freq["frequency"].to_pylist()
    assert counts == sorted(counts, reverse=True), where


def check_range_set(texts: list[str] | None, values: list, t: pa.DataType, where: str) -> None:
    """At most 20 disjoint ranges bounded by values, covering them; least wide (Lemma 1)."""
    distinct = sorted({key(v, t) for v in values} - {"NaN"})
    pairs = list(zip(*[iter(key(parse(x, t), t) for x in texts or [])] * 2))
    assert len(pairs) <= 20 and {b for p in pairs for b in p} <= set(distinct), (where, pairs)
    assert bool(pairs) == bool(distinct), where
    assert all(a[1] < b[0] for a, b in zip(pairs, pairs[1:])), (where, pairs)
    assert all(any(lo <= v <= hi for lo, hi in pairs) for v in distinct), (where, pairs)
    gaps = sorted((b - a for a, b in zip(distinct, distinct[1:])), reverse=True)
    assert kind(t) not in ("integer", "temporal") or not distinct or \
        sum(hi - lo for lo, hi in pairs) == distinct[-1] - distinct[0] - sum(gaps[:19]), where


def binning_domain(values: list, t: pa.DataType) -> list:
    """Values as histograms bin them: integer storage, or the (correctly rounded) float64."""
    k = kind(t)
    if k in ("integer", "temporal"):
        return sorted(values)
    return sorted(float(v) for v in values if v == v)


def check_histogram(bins: list[dict], exponent: int | None, values: list, t: pa.DataType,
                    max_bins: int, where: str, finest: bool = True) -> None:
    """Every bin's count is the oracle's count of values in its range; bins tile a power-of-two
    grid (closed integer bins clipped to the values' range, half-open float bins, infinities on
    their own) with no more than max_bins bins, on the finest such grid unless `finest` is
    false (a version that removed partitions keeps its grid)."""
    domain = binning_domain(values, t)
    closed = kind(t) in ("integer", "temporal")
    assert sum(b["count"] for b in bins) == len(domain), where
    if not domain:
        assert bins == [] and exponent is None, where
        return
    assert all(b["count"] > 0 for b in (bins[0], bins[-1])), where
    edge = (lambda s: instant(s, t)) if kind(t) == "temporal" else (int if closed else float)
    finite_bins = []
    for b in bins:
        lo, hi = edge(b["lower"]), edge(b["upper"])
        if not closed and lo == hi and math.isinf(lo):
            assert b["count"] == domain.count(lo), (where, b)
            continue
        finite_bins.append((lo, hi, b["count"]))
    assert len(finite_bins) <= max_bins, (where, len(finite_bins))
    finite = [v for v in domain if closed or math.isfinite(v)]
    width = 2 ** exponent if exponent >= 0 else Fraction(1, 2 ** -exponent)
    for i, (lo, hi, count) in enumerate(finite_bins):
        if closed:
            inside = bisect.bisect_right(finite, hi) - bisect.bisect_left(finite, lo)
            assert count == inside, (where, lo, hi, count, inside)
            assert lo == finite[0] if i == 0 else lo % width == 0, (where, lo)
            assert hi == finite[-1] if i == len(finite_bins) - 1 else (hi + 1) % width == 0
            if i:
                assert lo == finite_bins[i - 1][1] + 1, (where, "bins not contiguous")
        else:
            inside = bisect.bisect_left(finite, hi) - bisect.bisect_left(finite, lo)
            assert count == inside, (where, lo, hi, count, inside)
            if math.isfinite(lo) and math.isfinite(hi):   # outermost edges may overflow
                assert Fraction(hi) - Fraction(lo) == width and Fraction(lo) % width == 0
            if i:
                assert lo == finite_bins[i - 1][1], (where, "bins not contiguous")
    if finest and closed and exponent > 0:      # the finest grid: one step finer needs too many bins
        assert (finite[-1] >> (exponent - 1)) - (finite[0] >> (exponent - 1)) + 1 > max_bins, where


def stats_rows(ts: StatisticsReader, rel: str | None = None) -> dict[str, dict]:
    return {r["column"]: r for r in ts.summary(partition=rel)["columns"]}


def check_everything(root: Path, ts: StatisticsReader, rel_paths: list[str], rel: str | None,
                     schema: pa.Schema, names: list[str] | None = None, max_bins: int = 1000,
                     finest: bool = True):
    """All statistics, frequencies, histograms (and a partition's range-sets) of `names` (default:
    every column) of one partition (rel) or of the table (rel None), against the oracle."""
    where = rel or "table"
    rows = stats_rows(ts, rel)
    checked = 0
    for field in schema:
        if names is not None and field.name not in names:
            continue
        row, t = rows[field.name], field.type
        want = oracle(root, rel_paths, field.name, t)
        check_row(row, want, t, where)
        if kind(t) == "other":
            continue
        values = python_values(read_column(root, rel_paths, field.name, t))
        assert row["frequencies_complete"] is True, (where, field.name)
        name = f"{where}:{field.name}"
        check_frequencies(ts.frequencies(field.name, partition=rel), values, t, name)
        if kind(t) in ("integer", "float", "decimal", "temporal"):
            if rel is not None:
                check_range_set(row["range_set"], values, t, name)
            bins = ts.histogram(field.name, partition=rel) if binning_domain(values, t) else []
            check_histogram(bins, row["histogram_exponent"], values, t, max_bins, name, finest)
        checked += 1
    return checked
