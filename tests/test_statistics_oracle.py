"""Every statistic lakestats computes, at partition and at table level, against an independent
oracle on adversarial data.

The oracle is DuckDB over the very same Parquet files wherever DuckDB's semantics are ours
(row and null counts, distinct counts, which count NaN once and -0.0 = 0.0, min/max, exact
integer sums in HUGEINT, string and binary lengths, true counts), and exact Python arithmetic
(int, Decimal, Fraction), numpy and zoneinfo elsewhere (decimals beyond 38 digits, moments,
float min/max and NaN counts, frequencies, histogram bins).
lakestats' canonical text is parsed back here with Python and numpy only, never with lakestats'
own parsers, so a wrong rendering cannot hide behind its own inverse.
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

from functions import partition
from metastore import files
from metastore.reader import TableStatistics
from metastore.store import Store
from monostore.frequencies import FrequencyOptions

NAN, INF = float("nan"), float("inf")
NEG_NAN = float(np.copysign(np.nan, -1.0))          # a NaN with its sign bit set
NAN_PAYLOAD = float(np.frombuffer(np.uint64(0x7FF0000000000123).tobytes(), np.float64)[0])
FLOAT_MAX, FLOAT_TINY = 1.7976931348623157e308, 5e-324
I64_MIN, I64_MAX, U64_MAX = -2**63, 2**63 - 1, 2**64 - 1
NY, KOLKATA = "America/New_York", "Asia/Kolkata"
UTC = dt.timezone.utc
TICKS = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


# -- writing tables -----------------------------------------------------------------------------

def write(path: Path, table: pa.Table, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)
    return path


def texts(values: list, typ: pa.DataType) -> pa.Array:
    """Decimal columns from their text (pa.array mis-infers the precision of some negatives)."""
    return pa.array([None if v is None else str(v) for v in values], pa.string()).cast(typ)


def adversarial(part: int, n: int = 240) -> pa.Table:
    """One partition: in each column its type's hard values (which differ between partitions, so
    that table-level min/max, sums and sketches must combine them), then random values, ~10% null.
    """
    rng = np.random.default_rng(1000 + part)
    null = rng.random(n) < 0.1
    ints = rng.integers(-1000, 1000, n)

    def col(hard: dict, rest, typ: pa.DataType | None = None, as_text: bool = False) -> pa.Array:
        first = hard.get(part, [])
        values = list(first) + list(rest)[: n - len(first)]
        values = [v if i < len(first) or not null[i] else None for i, v in enumerate(values)]
        return texts(values, typ) if as_text else pa.array(values, typ)

    def stamp(*args, tz=UTC) -> dt.datetime:
        return dt.datetime(*args, tzinfo=tz)

    with localcontext(prec=100):
        near = [Decimal(10**20 + 7 * part) + Decimal(int(i) % 500).scaleb(-6) for i in ints]
    nines76 = "9" * 74 + ".99"
    return pa.table({
        "i8": col({0: [-128], 1: [127]}, ints % 128, pa.int8()),
        "i16": col({0: [-2**15, 2**15 - 1]}, ints * 30, pa.int16()),
        "i32": col({1: [-2**31, 2**31 - 1]}, ints * 10**6, pa.int32()),
        "i64": col({0: [I64_MIN, I64_MIN], 2: [I64_MAX, I64_MAX - 1]}, ints * 10**15, pa.int64()),
        # far from zero, close together: the spread is lost if deviations are taken in float64
        "i64_near": col({}, 2**62 + 13 * part + ints % 50, pa.int64()),
        "u8": col({1: [0, 255]}, np.abs(ints) % 256, pa.uint8()),
        "u16": col({2: [0, 2**16 - 1]}, np.abs(ints) * 60, pa.uint16()),
        "u32": col({0: [2**32 - 1]}, np.abs(ints) * 4_000_000, pa.uint32()),
        "u64": col({0: [U64_MAX, U64_MAX], 1: [0]}, np.abs(ints) * 10**15, pa.uint64()),
        "f64": col({0: [NAN, NEG_NAN, NAN_PAYLOAD, INF, -INF, -0.0, 0.0, FLOAT_TINY, -FLOAT_TINY,
                        FLOAT_MAX], 1: [-0.0, NAN, -INF], 2: [0.0, -FLOAT_MAX, INF]},
                   rng.normal(0, 1e6, n), pa.float64()),
        "f64_finite": col({1: [-0.0, 0.0]}, rng.normal(1e3 + part, 10, n), pa.float64()),
        # partition 1 holds NaN and nulls only: no min, no mean there
        "f64_nan_part": col({1: [NAN] * n}, rng.lognormal(0, 2, n), pa.float64()),
        "f32": col({0: [NAN, -0.0, 0.0, 3.4028235e38, -3.4028235e38], 1: [1.4e-45, 16777216.0, 0.1]},
                   rng.normal(0, 1e3, n).astype(np.float32), pa.float32()),
        "dec38": col({0: ["-" + "9" * 35 + ".999"], 1: ["9" * 35 + ".999", "0.001", "-0.001"]},
                     [Decimal(int(i)).scaleb(-3) for i in ints], pa.decimal128(38, 3), True),
        # every value 38 digits: a partition's sum needs 40
        "dec38_0": col({0: ["9" * 38] * 3, 1: ["-" + "9" * 38] * 2},
                       [("-" if i < 0 else "") + "9" * 37 + str(abs(int(i)) % 10) for i in ints],
                       pa.decimal128(38, 0), True),
        "dec_near": col({}, near, pa.decimal128(38, 6), True),
        # 76 digits: eight of them overflow 256-bit integers
        "dec256": col({0: [nines76] * 8, 2: [nines76] * 8 + ["-" + nines76]},
                      [Decimal(int(i)).scaleb(-2) for i in ints], pa.decimal256(76, 2), True),
        "dec9": col({0: ["9999999.99", "-9999999.99"]}, [Decimal(int(i)).scaleb(-2) for i in ints],
                    pa.decimal128(9, 2), True),
        "ts_ny": col({0: [stamp(1970, 1, 1), stamp(2024, 3, 10, 6, 59, 59, 999999),
                          stamp(2024, 3, 10, 7)],      # spring forward: 01:59:59.999999 then 03:00
                      1: [stamp(2024, 11, 3, 5, 30), stamp(2024, 11, 3, 6, 30)],  # 01:30 twice
                      2: [stamp(1800, 1, 1, 12, 0, 1)]},                # local mean time -04:56:02
                     [stamp(2024, 3, 9) + dt.timedelta(minutes=int(i) * 7) for i in ints],
                     pa.timestamp("us", NY)),
        "ts_kolkata": col({1: [stamp(1900, 1, 1), stamp(2100, 12, 31, 23, 59, 59, 999000)]},
                          [stamp(2000, 1, 1) + dt.timedelta(seconds=int(i) * 997) for i in ints],
                          pa.timestamp("ms", KOLKATA)),
        # near both ends of int64 (DuckDB reserves the very ends for +-infinity)
        "ts_utc_ns": col({}, [I64_MIN + 10**6 + part, I64_MAX - 10**6 - part]
                         + list(ints * 999_999_937),
                         pa.int64()).cast(pa.timestamp("ns", "UTC")),
        "ts_s": col({0: [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)]},
                    [dt.datetime(2020, 1, 1) + dt.timedelta(seconds=int(i) * 86_399) for i in ints],
                    pa.timestamp("s")),
        # before 1970 with fractions of a second: the fraction of a negative count
        "ts_ns": col({2: [-1, -999_999_999, -1_000_000_001]}, ints * 1_000_000_007,
                     pa.int64()).cast(pa.timestamp("ns")),
        "day": col({0: [dt.date(1, 1, 1)], 1: [dt.date(9999, 12, 31)]},
                   [dt.date(2020, 2, 29) + dt.timedelta(days=int(i)) for i in ints], pa.date32()),
        "tod_us": col({0: [dt.time(0), dt.time(23, 59, 59, 999999)]},
                      [dt.time(int(i) % 24, abs(int(i)) % 60) for i in ints], pa.time64("us")),
        "tod_ns": col({1: [0, 86_400 * 10**9 - 1]}, np.abs(ints) * 86_399_999_999,
                      pa.int64()).cast(pa.time64("ns")),
        "tod_ms": col({}, np.abs(ints) * 86_399, pa.int32()).cast(pa.time32("ms")),
        # code point order (= UTF-8 byte order); the longest value is the 10,000-character max
        "text": col({0: ["", "é", "e\u0301", "😀", "\x00", "Z", "z"],
                     1: ["\U0010ffff" + "x" * 9_999, ""], 2: ["👩‍👩‍👧", "ß"]},
                    rng.choice(["Oslo", "Zürich", "東京", "", "naïve"], n)),
        "large_text": col({2: ["a" * 5000, "\U0001f600" * 3]}, rng.choice(["x", "yy", ""], n),
                          pa.large_string()),
        "dict_text": col({}, rng.choice(["b", "a", "c"], n)).dictionary_encode(),
        "blob": col({0: [b"", b"\x00", b"\x00\x00", b"\xff" * 40], 1: [b"\x7f"]},
                    [bytes([int(i) % 256]) * (int(i) % 5) for i in ints], pa.binary()),
        "fixed": col({}, [int(i).to_bytes(4, "big", signed=True) for i in ints],
                     pa.binary(4)),
        "flag": col({1: [True] * 5}, rng.random(n) < 0.3, pa.bool_()),
        "nothing": pa.nulls(n, pa.int32()),
        "nothing_text": pa.nulls(n, pa.string()),
        "nested": col({}, [{"a": int(i), "b": str(i)} for i in ints]),
        "listed": col({}, [[int(i)] * (abs(int(i)) % 3) for i in ints], pa.list_(pa.int64())),
    })


@pytest.fixture(scope="module")
def adversarial_table(tmp_path_factory, run):
    """Three partitions of adversarial data in several row groups each, plus a zero-row file,
    computed once through Redis and the worker pool."""
    root = tmp_path_factory.mktemp("adversarial")
    parts = [adversarial(p) for p in range(3)]
    for p, data in enumerate(parts):
        write(root / f"part={p}" / "data.parquet", data, row_group_size=70)
    write(root / "empty.parquet", parts[0].slice(0, 0))
    report = run(root)
    assert report.published and not report.failed and report.computed == 4
    return root


def cycle(values: list, n: int) -> list:
    return (values * (n // len(values) + 1))[:n]


def data_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_lakestats" not in p.parts)


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

def as_float(value) -> float | None:
    """summary() renders non-finite floats as text."""
    return float(value) if isinstance(value, str) else value


def close(got, want, rel: float = 1e-9, tolerance: float = 0.0) -> bool:
    got = as_float(got)
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
        assert close(row[k], want[k], tolerance=want.get("tolerance", {}).get(k, 0.0)), \
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


def binning_domain(values: list, t: pa.DataType) -> list:
    """Values as histograms bin them: integer storage, or the (correctly rounded) float64."""
    k = kind(t)
    if k in ("integer", "temporal"):
        return sorted(values)
    return sorted(float(v) for v in values if v == v)


def check_histogram(bins: list[dict], exponent: int | None, values: list, t: pa.DataType,
                    max_bins: int, where: str) -> None:
    """Every bin's count is the oracle's count of values in its range; bins tile a power-of-two
    grid (closed integer bins clipped to the values' range, half-open float bins, infinities on
    their own) with no more than max_bins bins, on the finest such grid."""
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
    if closed and exponent > 0:      # the finest grid: one step finer needs too many bins
        assert (finite[-1] >> (exponent - 1)) - (finite[0] >> (exponent - 1)) + 1 > max_bins, where


def stats_rows(ts: TableStatistics, rel: str | None = None) -> dict[str, dict]:
    return {r["column"]: r for r in ts.summary(partition=rel)["columns"]}


def check_everything(root: Path, ts: TableStatistics, rel_paths: list[str], rel: str | None,
                     schema: pa.Schema, names: list[str] | None = None, max_bins: int = 1000):
    """All statistics, frequencies and histograms of `names` (default: every column) of one
    partition (rel) or of the table (rel None) against the oracle over `rel_paths`."""
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
        check_frequencies(ts.frequencies(field.name, partition=rel), values, t,
                          f"{where}:{field.name}")
        if kind(t) in ("integer", "float", "decimal", "temporal"):
            domain = binning_domain(values, t)
            bins = ts.histogram(field.name, partition=rel) if domain else []
            check_histogram(bins, row["histogram_exponent"], values, t, max_bins,
                            f"{where}:{field.name}")
        checked += 1
    return checked


# -- the tests ----------------------------------------------------------------------------------

def test_partition_statistics_match_the_oracle(adversarial_table):
    """Each partition (three of adversarial data, one of zero rows) through the published
    partition statistics: every statistic, the frequencies and the histogram of every column
    equal what DuckDB and exact arithmetic say about that file alone."""
    root = adversarial_table
    ts = TableStatistics(str(root / "_lakestats"))
    for rel in data_files(root):
        schema = pq.read_schema(root / rel)
        check_everything(root, ts, [rel], rel, schema)
    empty = ts.summary(partition="empty.parquet")
    assert empty["row_count"] == 0
    assert all(c["row_count"] == 0 and c["min"] is None and c["distinct_count"] in (0, None)
               for c in empty["columns"])


def test_table_statistics_match_the_oracle(adversarial_table):
    """The table: the same checks against DuckDB over all four files at once. Row, null and NaN
    counts, min/max, exact sums and exact distinct counts combine partitions losslessly;
    table-level frequencies are the sums of the partitions'."""
    root = adversarial_table
    ts = TableStatistics(str(root / "_lakestats"))
    rels = data_files(root)
    schema = pq.read_schema(root / rels[0])
    summary = ts.summary()
    assert (summary["row_count"], summary["partitions"], summary["missing"]) == (
        duck(f"select count(*) from {source(root, rels)}")[0], 4, {})
    assert [c["column"] for c in summary["columns"]] == schema.names
    assert check_everything(root, ts, rels, None, schema) == len(schema) - 2   # all but nested
    for column in summary["columns"]:       # nested columns have no distinct count at all
        nested = kind(schema.field(column["column"]).type) == "other"
        assert column["distinct_count_exact"] is (None if nested else True), column["column"]


def test_canonical_text_of_the_extremes(adversarial_table):
    """The spellings themselves: 0 never -0, infinities as inf/-inf, a float32 in its own
    shortest text, decimals exactly, lowercase hex, true/false, ISO 8601 with the zone's offset
    at that instant (EST in winter, EDT in summer, +05:30 in Kolkata, LMT before 1883), and a
    10,000-character string kept whole."""
    root = adversarial_table
    ts = TableStatistics(str(root / "_lakestats"))
    table = stats_rows(ts)
    p0, p1, p2 = (stats_rows(ts, f"part={p}/data.parquet") for p in range(3))
    assert (table["f64"]["min"], table["f64"]["max"]) == ("-inf", "inf")
    assert (p1["f64_finite"]["min"] != "-0") and p0["f32"]["max"] == "3.4028235e+38"
    f32 = ts.frequencies("f32", partition="part=1/data.parquet")["value"].to_pylist()
    assert {"1e-45", "16777216", "0.1"} <= set(f32)          # float32's own shortest text
    assert Decimal(table["dec38"]["min"]) == Decimal("-" + "9" * 35 + ".999")
    assert Decimal(table["dec256"]["max"]) == Decimal("9" * 74 + ".99")
    assert table["blob"]["max"] == "ff" * 40 and table["blob"]["min"] == ""
    assert (table["flag"]["min"], table["flag"]["max"]) == ("false", "true")
    assert table["text"]["max"] == "\U0010ffff" + "x" * 9_999
    assert table["text"]["max_length"] == 10_000 and table["text"]["min"] == ""
    assert table["ts_utc_ns"]["max"].endswith("+00:00")
    assert p1["ts_kolkata"]["min"].startswith("1900-01-01T05:")   # LMT then: +05:21:10
    assert p1["ts_kolkata"]["max"] == "2101-01-01T05:29:59.999+05:30"
    assert p2["ts_ny"]["min"].endswith("-04:56:02") and p2["ts_ny"]["min"].startswith("1800-01-01T07:03:59")
    ny = ts.frequencies("ts_ny", partition="part=1/data.parquet")["value"].to_pylist()
    assert {"2024-11-03T01:30:00.000000-04:00", "2024-11-03T01:30:00.000000-05:00"} <= set(ny)
    ny0 = ts.frequencies("ts_ny", partition="part=0/data.parquet")["value"].to_pylist()
    assert {"2024-03-10T01:59:59.999999-05:00", "2024-03-10T03:00:00.000000-04:00"} <= set(ny0)
    assert table["ts_s"]["min"] == "0001-01-01T00:00:00.000"     # stored as milliseconds
    assert "1969-12-31T23:59:59.999999999" in ts.frequencies(
        "ts_ns", partition="part=2/data.parquet")["value"].to_pylist()
    assert (table["day"]["min"], table["day"]["max"]) == ("0001-01-01", "9999-12-31")
    assert (p1["tod_ns"]["min"], p1["tod_ns"]["max"]) == ("00:00:00.000000000",
                                                         "23:59:59.999999999")
    for name in ("text", "f64", "dec38", "nothing"):
        assert table[name]["nan_count"] is None or name == "f64"
    assert table["nothing"]["distinct_count"] == 0 and table["nothing"]["min"] is None


@pytest.mark.parametrize("max_bins", [1000, 10_000])
def test_table_histogram_is_the_single_file_histogram(tmp_path, run, max_bins):
    """The same rows once in four files and once in one: the table histogram re-binned from the
    partitions' equals bin for bin what the kernel builds over the single file, and each bin's
    count matches the oracle. Partitions span very different ranges, so their grids differ."""
    rng = np.random.default_rng(max_bins)
    pieces = []
    for p in range(4):
        n = 6000
        pieces.append(pa.table({
            "wide": pa.array(rng.integers(-10**(3 * p + 3), 10**(3 * p + 3), n), pa.int64()),
            "extreme": pa.array([I64_MIN, I64_MAX][: p % 3]
                                + rng.integers(-50, 50, n - p % 3).tolist(), pa.int64()),
            "unsigned": pa.array([U64_MAX] * (p == 2)
                                 + rng.integers(0, 10**p * 5000, n - (p == 2)).tolist(), pa.uint64()),
            "small": pa.array(rng.integers(-3, 3 + p, n), pa.int8()),
            "lognormal": pa.array(rng.lognormal(p, 1 + p, n) * (-1) ** p),
            "specials": pa.array(np.concatenate([[INF, -INF, NAN, -0.0, 0.0, FLOAT_MAX][p:],
                                                 rng.normal(0, 10.0**p, n - 6 + p)])),
            "tiny": pa.array(rng.normal(0, 1e-300, n)),
            "f32": pa.array(rng.normal(p, 1, n).astype(np.float32)),
            "price": texts([Decimal(int(v)).scaleb(-4) for v in rng.integers(-10**8, 10**(8 + p), n)],
                           pa.decimal128(18, 4)),
            # a tight cluster just below 1: bins one float64 ulp wide, so every decimal must
            # round to its nearest float64 (Arrow's decimal cast is often an ulp off here)
            "clustered": texts(["0.99999999999999" + "".join(map(str, rng.integers(0, 10, 24)))
                                for _ in range(n)], pa.decimal128(38, 38)),
            "when": pa.array(rng.integers(0, 10**(12 + p), n) - 10**11, pa.int64()
                             ).cast(pa.timestamp("us", NY)),
            "day": pa.array(rng.integers(-10**p * 300, 10**p * 300, n), pa.int32()).cast(pa.date32()),
            "clock": pa.array(rng.integers(0, 86_400 * 10**9, n), pa.int64()).cast(pa.time64("ns")),
        }))
    split, single = tmp_path / "split", tmp_path / "single"
    for p, piece in enumerate(pieces):
        write(split / f"{p}.parquet", piece, row_group_size=2500)
    whole = pa.concat_tables(pieces)
    write(single / "all.parquet", whole)
    report = run(split, max_bins=max_bins)
    assert report.published and report.computed == 4
    kernel = partition.compute(Store(str(single)), "all.parquet", max_bins=max_bins)
    ts = TableStatistics(str(split / "_lakestats"))
    rows = stats_rows(ts)
    single_rows = {r["column"]: r for r in kernel.statistics.to_pylist()}
    for field in whole.schema:
        merged = ts.histogram(field.name)
        assert merged == files.histogram_bins(kernel.histograms, field.name), field.name
        assert rows[field.name]["histogram_exponent"] == single_rows[field.name]["histogram_exponent"]
        values = python_values(whole[field.name])
        check_histogram(merged, rows[field.name]["histogram_exponent"], values, field.type,
                        max_bins, f"table:{field.name}")
        for p in range(4):
            rel = f"{p}.parquet"
            check_histogram(ts.histogram(field.name, partition=rel),
                            stats_rows(ts, rel)[field.name]["histogram_exponent"],
                            python_values(pieces[p][field.name]), field.type, max_bins,
                            f"{rel}:{field.name}")
    assert len(ts.histogram("wide")) > max_bins // 2      # the grid is used, not wasted


def test_distinct_count_is_exact_while_every_partition_keeps_frequencies(tmp_path, run):
    """Three partitions of 900 distinct values each (overlapping): the table's 2,100 distinct
    values are counted exactly and its frequencies are the sums."""
    for p in range(3):
        ids = np.arange(p * 600, p * 600 + 900)
        write(tmp_path / f"{p}.parquet", pa.table({
            "id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids]),
            "x": pa.array(ids / 7.0), "ts": pa.array(ids * 10**9, pa.int64()).cast(pa.timestamp("ns", KOLKATA))}))
    run(tmp_path)
    ts = TableStatistics(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    for name in ("id", "name", "x", "ts"):
        truth = duck(f'select count(distinct "{name}") from {source(tmp_path, rels)}')[0]
        row = stats_rows(ts)[name]
        assert (row["distinct_count"], row["distinct_count_exact"], row["frequencies_complete"]) \
            == (truth, True, True) and truth == 2100
        t = pq.read_schema(tmp_path / rels[0]).field(name).type
        check_frequencies(ts.frequencies(name), python_values(read_column(tmp_path, rels, name, t)),
                          t, name)


@pytest.mark.parametrize("algorithm", ["low-distinct", "low-duplicate", "binned"])
def test_distinct_count_is_exact_for_every_type_and_algorithm(tmp_path, run, algorithm):
    """A small partition and three large ones (30,000 rows, ~20,000 distinct each,
    overlapping), every type: the table's distinct count equals DuckDB's whatever the
    algorithm; so does each partition's."""
    rng = np.random.default_rng(5)
    for p in range(4):
        n = 300 if p == 0 else 30_000
        ids = rng.integers(p * 15_000, p * 15_000 + (200 if p == 0 else 25_000), n)
        write(tmp_path / f"{p}.parquet", pa.table({
            "id": pa.array(ids, pa.int64()),
            "big": pa.array(np.uint64(U64_MAX) - ids.astype(np.uint64)),
            "x": pa.array(ids / 3.0 - 2000),
            "f32": pa.array((ids - 30_000).astype(np.float32)),
            "price": texts([Decimal(int(i)).scaleb(-2) for i in ids], pa.decimal128(12, 2)),
            "wide": texts([Decimal(int(i) * 10**20 + 1).scaleb(-3) for i in ids], pa.decimal128(38, 3)),
            "name": pa.array([f"név {i}" for i in ids]),
            "blob": pa.array([int(i).to_bytes(4, "little") for i in ids]),
            "ts": pa.array(ids * 10**6, pa.int64()).cast(pa.timestamp("us", NY)),
            "day": pa.array(ids.astype(np.int32), pa.int32()).cast(pa.date32()),
        }), row_group_size=7000)
    run(tmp_path, frequencies=FrequencyOptions(algorithm, all_values=True))
    ts = TableStatistics(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    src = source(tmp_path, rels)
    table = stats_rows(ts)
    for name in table:
        truth = duck(f'select count(distinct "{name}") from {src}')[0]
        row = table[name]
        assert row["distinct_count_exact"] is True and row["frequencies_complete"] is True, name
        assert row["distinct_count"] == truth, (name, truth)
        assert ts.frequencies(name).num_rows == truth
        for rel in rels:
            part = stats_rows(ts, rel)[name]
            assert part["distinct_count_exact"] is True, (rel, name)
            assert part["distinct_count"] == duck(
                f'select count(distinct "{name}") from {source(tmp_path, [rel])}')[0], (rel, name)
            assert part["frequencies_complete"] is True, (rel, name)
    # the rest stays exact: counts, min/max, sums, histogram
    schema = pq.read_schema(tmp_path / rels[0])
    for field in schema:
        want, row = oracle(tmp_path, rels, field.name, field.type), table[field.name]
        check_row(row, dict(want, distinct_count=row["distinct_count"]), field.type, "table")


def test_integer_extremes_sum_mean_and_stddev_exactly(tmp_path, run):
    """int64 min and max in one column (and in one partition), uint64 max, and values near 2**62
    that differ by little: sums compare to Python's exact integers, means and sample stddevs to
    exact rational arithmetic, through several row groups and partitions."""
    columns = {
        "both_ends": ([I64_MIN, I64_MAX] * 3 + [0, -1, 1], pa.int64()),
        "low_end": ([I64_MIN] * 50 + [I64_MIN + k for k in range(50)], pa.int64()),
        "high_end": ([I64_MAX - k % 3 for k in range(100)], pa.int64()),
        "near": ([2**62 + k % 17 for k in range(100)], pa.int64()),
        "u64": ([U64_MAX] * 40 + [U64_MAX - k for k in range(40)] + [0], pa.uint64()),
        "u64_near": ([2**63 + k % 5 for k in range(100)], pa.uint64()),
        "i32": ([2**31 - 1] * 60 + [-2**31] * 2, pa.int32()),
    }
    for p in range(3):
        n = 60 + p
        write(tmp_path / f"{p}.parquet", pa.table({
            name: pa.array([v + p if "near" in name else v for v in cycle(values, n)], t)
            for name, (values, t) in columns.items()}), row_group_size=9)
    run(tmp_path)
    ts = TableStatistics(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    schema = pq.read_schema(tmp_path / rels[0])
    for rel in rels:
        check_everything(tmp_path, ts, [rel], rel, schema)
    check_everything(tmp_path, ts, rels, None, schema)


def test_decimal_extremes_sum_exactly(tmp_path, run):
    """decimal128(38, x) at ±(10**38 - 1) scaled, decimal256(76, x) whose sums overflow 256
    bits, and decimals that differ only in their 20th digit: exact Decimal sums, means and
    stddevs, at partition and table level."""
    nines = "9" * 76
    for p in range(3):
        n = 16 + p
        write(tmp_path / f"{p}.parquet", pa.table({
            "d38_0": texts(cycle(["9" * 38] * 12 + ["-" + "9" * 38] * (p + 1), n),
                           pa.decimal128(38, 0)),
            "d38_38": texts(cycle(["0." + "9" * 38, "0." + "0" * 37 + "1", "-0." + "9" * 38][p:],
                                  n), pa.decimal128(38, 38)),
            "d76": texts(cycle([nines] * 12 + ["-" + nines] * (p + 1), n), pa.decimal256(76, 0)),
            "d76_10": texts(cycle([nines[:66] + "." + nines[:10]] * 9 + ["1.5"] * (p + 4), n),
                            pa.decimal256(76, 10)),
            "near": texts([f"1{p}00000000000000000000.{k:06d}" for k in range(n)],
                          pa.decimal128(38, 6)),
            "short": texts([f"{k * 37 - 200}.{k % 100:02d}" for k in range(n)],
                           pa.decimal128(10, 2)),
        }), row_group_size=5)
    run(tmp_path)
    ts = TableStatistics(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    schema = pq.read_schema(tmp_path / rels[0])
    for rel in rels:
        check_everything(tmp_path, ts, [rel], rel, schema)
    check_everything(tmp_path, ts, rels, None, schema)


def test_float_specials_across_partitions(tmp_path, run):
    """NaN (three bit patterns), ±inf, -0.0 with 0.0, in partitions that hold only some of them:
    NaN counted apart and once as a distinct value, min/max over the rest, -0.0 and 0.0 one
    value, infinities in bins of their own, mean and stddev as IEEE arithmetic has them."""
    layouts = [[NAN, NEG_NAN, NAN_PAYLOAD, None], [-0.0, 0.0, -0.0, None, 1.5], [INF, 2.0, NAN],
               [-INF, -0.0, 0.25], [FLOAT_TINY, -FLOAT_TINY, 0.0]]
    for p, values in enumerate(layouts):
        write(tmp_path / f"{p}.parquet", pa.table({
            "x": pa.array(values, pa.float64()),
            "y": pa.array([v for v in values], pa.float32()),
            "finite": pa.array([v if v is None or math.isfinite(v) else 3.0 for v in values]),
        }))
    run(tmp_path)
    ts = TableStatistics(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    schema = pq.read_schema(tmp_path / rels[0])
    for rel in rels:
        check_everything(tmp_path, ts, [rel], rel, schema)
    check_everything(tmp_path, ts, rels, None, schema)
    x = stats_rows(ts)["x"]
    assert (x["nan_count"], x["min"], x["max"]) == (4, "-inf", "inf")
    assert x["distinct_count"] == 9      # nan, ±inf, 0, 1.5, 2, 0.25, ±5e-324
    assert [b for b in ts.histogram("x") if b["lower"] == b["upper"]] == [
        {"lower": "-inf", "upper": "-inf", "count": 1}, {"lower": "inf", "upper": "inf", "count": 1}]


def test_float_moments_neither_overflow_nor_underflow(tmp_path, run):
    """Values near the largest float64 (their squares overflow) and near the smallest normal one
    (their squares underflow to 0): means and sample stddevs are ordinary finite numbers, within
    each partition and once merged."""
    write(tmp_path / "a.parquet", pa.table({"huge": [FLOAT_MAX, 0.0, -FLOAT_MAX / 2, FLOAT_MAX / 4],
                                            "tiny": [1e-300, -2e-300, 3e-310, 0.0]}))
    write(tmp_path / "b.parquet", pa.table({"huge": [1e300, -1e300, 1e200],
                                            "tiny": [5e-324, 7e-301, -1e-305]}))
    run(tmp_path)
    ts = TableStatistics(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    schema = pq.read_schema(tmp_path / rels[0])
    for rel in rels:
        check_everything(tmp_path, ts, [rel], rel, schema)
    check_everything(tmp_path, ts, rels, None, schema)


def test_all_null_zero_row_nested_and_missing_columns(tmp_path, run):
    """An all-null column, a zero-row file (a partition like any other), struct and list columns
    (row and null counts only), and a column that only the newer file has (nulls elsewhere),
    against DuckDB's union_by_name reading of the same files."""
    write(tmp_path / "old.parquet", pa.table({
        "k": pa.array([1, None, 3], pa.int32()), "void": pa.nulls(3, pa.float64()),
        "s": pa.array([{"a": 1}, None, {"a": None}]), "l": pa.array([[1], None, []])}))
    write(tmp_path / "new.parquet", pa.table({
        "k": pa.array([2**40, None], pa.int64()), "void": pa.nulls(2, pa.float64()),
        "s": pa.array([None, {"a": 5}]), "l": pa.array([None, [None]], pa.list_(pa.int64())),
        "added": pa.array(["x", None])}))
    write(tmp_path / "zero.parquet", pa.table({
        "k": pa.array([], pa.int64()), "void": pa.array([], pa.float64()),
        "s": pa.array([], pa.struct([("a", pa.int64())])), "l": pa.array([], pa.list_(pa.int64())),
        "added": pa.array([], pa.string())}))
    report = run(tmp_path)
    assert report.published and report.computed == 3
    ts = TableStatistics(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    for rel in rels:
        check_everything(tmp_path, ts, [rel], rel, pq.read_schema(tmp_path / rel))
    table_schema = pa.schema([("k", pa.int64()), ("void", pa.float64()),
                              ("s", pa.struct([("a", pa.int64())])),
                              ("l", pa.list_(pa.int64())), ("added", pa.string())])
    assert check_everything(tmp_path, ts, rels, None, table_schema) == 3
    summary = ts.summary()
    assert (summary["row_count"], summary["partitions"]) == (5, 3)
    assert stats_rows(ts, "zero.parquet")["k"]["row_count"] == 0
    void = stats_rows(ts)["void"]
    assert (void["null_count"], void["nan_count"], void["distinct_count"], void["min"],
            void["mean"], void["histogram_exponent"]) == (5, 0, 0, None, None, None)


def test_a_thousand_columns(tmp_path, run):
    """1,000 columns of seven types in two files; a sample of 35 columns (every type, first and
    last) checked in full against the oracle, the rest by their place and row counts."""
    rng = np.random.default_rng(11)
    makers = [
        lambda n: pa.array(rng.integers(-10**12, 10**12, n)),
        lambda n: pa.array(np.where(rng.random(n) < 0.1, np.nan, rng.normal(0, 1, n))),
        lambda n: pa.array(rng.choice(["α", "β", "", "γγ"], n)),
        lambda n: texts([Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**9, 10**9, n)],
                        pa.decimal128(12, 2)),
        lambda n: pa.array(rng.integers(0, 10**15, n), pa.int64()).cast(pa.timestamp("us", KOLKATA)),
        lambda n: pa.array(rng.random(n) < 0.5),
        lambda n: pa.array(rng.integers(0, 3000, n), pa.int32()).cast(pa.date32()),
    ]
    names = [f"c{i:04d}" for i in range(1000)]
    for f in range(2):
        write(tmp_path / f"{f}.parquet", pa.table(
            {name: makers[i % 7](120 + 30 * f) for i, name in enumerate(names)}))
    run(tmp_path)
    ts = TableStatistics(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    summary = ts.summary()
    assert [c["column"] for c in summary["columns"]] == names
    assert all(c["row_count"] == 270 for c in summary["columns"])
    sample = names[:14] + names[-7:] + [names[i] for i in rng.choice(1000, 14, replace=False)]
    schema = pq.read_schema(tmp_path / rels[0])
    assert check_everything(tmp_path, ts, rels, None, schema, names=sample) == len(set(sample))
    check_everything(tmp_path, ts, [rels[1]], rels[1], schema, names=sample[:7])
