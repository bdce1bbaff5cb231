"""Every statistic against an independent oracle, on adversarial data, at partition and table level.

The oracle is plain Python over the values (exact integers, Decimal, fractions-based stdev,
Counter) and DuckDB where its semantics are ours; it never calls lakestats code except to parse
canonical text back into typed values with Arrow's own parsers.
"""
from __future__ import annotations

import datetime as dt
import math
import statistics
from collections import Counter
from decimal import Decimal, localcontext

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.algorithms.partitions import kernel as partition
from lakestats.core import binning
from lakestats.core import types as ty
from lakestats.metastore import histograms
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
from tests.tables import write

NAN = float("nan")
NY, KOLKATA = "America/New_York", "Asia/Kolkata"
I64_MIN, I64_MAX = -2**63, 2**63 - 1


def adversarial(seed: int, n: int = 400) -> pa.Table:
    """Each column mixes its type's hard cases with random values and nulls."""
    rng = np.random.default_rng(seed)
    null = rng.random(n) < 0.1

    def col(hard: list, random: np.ndarray | list, typ: pa.DataType) -> pa.Array:
        values = list(hard) + list(random)[: n - len(hard)]
        mask = [False] * len(hard) + list(null[len(hard):])
        return pa.array([None if m else v for v, m in zip(values, mask)], typ)

    ints = rng.integers(-1000, 1000, n)
    floats = rng.normal(0, 1e6, n)
    return pa.table({
        "i8": col([-128, 127], ints % 100, pa.int8()),
        "i16": col([-2**15, 2**15 - 1], ints, pa.int16()),
        "u32": col([0, 2**32 - 1], np.abs(ints), pa.uint32()),
        "i64": col([I64_MIN, I64_MAX, I64_MAX, I64_MIN + 1], ints * 10**12, pa.int64()),
        "u64": col([2**64 - 1, 0], np.abs(ints), pa.uint64()),
        "f64": col([NAN, float("inf"), -float("inf"), -0.0, 0.0, 5e-324, 1.7976931348623157e308],
                   floats, pa.float64()),
        "f32": col([NAN, -0.0, 0.0, 3.4028235e38], floats.astype(np.float32), pa.float32()),
        "dec": col([Decimal("9" * 35 + ".999"), Decimal("-" + "9" * 35 + ".999"), Decimal("0.001")],
                   [Decimal(int(i)) / 1000 for i in ints], pa.decimal128(38, 3)),
        "dec15": col([Decimal("-9999999999999.99"), Decimal("9999999999999.99")],
                     [Decimal(int(i)) / 100 for i in ints], pa.decimal128(15, 2)),
        "dec256": col([Decimal("1" * 60 + ".5")], [Decimal(int(i)) / 10 for i in ints],
                      pa.decimal256(70, 1)),
        "ts_ny": col([dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc),
                      dt.datetime(2262, 4, 11, tzinfo=dt.timezone.utc)],
                     [dt.datetime(2024, 3, 10, 6, 30, tzinfo=dt.timezone.utc)
                      + dt.timedelta(minutes=int(i)) for i in ints], pa.timestamp("us", NY)),
        "ts_kol": col([], [dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
                           + dt.timedelta(seconds=int(i)) for i in ints], pa.timestamp("s", KOLKATA)),
        # whole microseconds, so that Python's datetime (the oracle) holds them exactly
        "ts_ns": col([-2**62 // 1000 * 1000, 2**62 // 1000 * 1000], ints * 1_000_007_000,
                     pa.int64()).cast(pa.timestamp("ns")),
        "day": col([dt.date(1, 1, 1), dt.date(9999, 12, 31)],
                   [dt.date(2020, 1, 1) + dt.timedelta(days=int(i)) for i in ints], pa.date32()),
        "tod": col([dt.time(0), dt.time(23, 59, 59, 999999)],
                   [dt.time(int(i) % 24, 30) for i in ints], pa.time64("us")),
        "text": col(["", "é", "e\u0301", "😀", "z" * 10_000, "\x00"],
                    rng.choice(["Oslo", "Zürich", "東京", ""], n), pa.large_string()),
        "blob": col([b"", b"\x00\xff", b"\xff" * 50], [bytes([int(i) % 256]) for i in ints],
                    pa.binary()),
        "flag": col([True, False], rng.random(n) < 0.3, pa.bool_()),
        "nothing": pa.nulls(n, pa.int32()),
        "nested": pa.array([None if m else {"a": int(i)} for i, m in zip(ints, null)]),
    })


# -- the oracle ---------------------------------------------------------------------------------

def values_of(column: pa.ChunkedArray) -> list:
    """Non-null, non-NaN Python values."""
    return [v for v in column.to_pylist() if v is not None and v == v]


def expected(column: pa.ChunkedArray) -> dict:
    raw = column.to_pylist()
    values = values_of(column)
    t = column.type
    kind = ty.kind_of(t)
    out = {"row_count": len(raw), "null_count": sum(v is None for v in raw)}
    if kind == ty.OTHER:
        return out
    if kind == ty.FLOAT:
        out["nan_count"] = sum(v is not None and v != v for v in raw)
    keys = {("NaN" if v != v else (v + 0.0 if kind == ty.FLOAT else v))
            for v in raw if v is not None}
    out["distinct_count"] = len(keys)
    if values:
        out["min"], out["max"] = min(values), max(values)
    if kind in (ty.INTEGER, ty.DECIMAL) and values:
        with localcontext(prec=200):
            out["sum"] = sum(values)
        out["mean"] = float(Decimal(out["sum"]) / len(values))
        if len(values) > 1:
            out["stddev"] = float(statistics.stdev([Decimal(v) for v in values]))
    if kind in ty.LENGTH_KINDS and values:
        lengths = [len(v) for v in values]
        out.update(min_length=min(lengths), max_length=max(lengths),
                   avg_length=sum(lengths) / len(lengths))
    if kind == ty.BOOLEAN:
        out["true_count"] = sum(values)
    return out


def parsed(text: str, t: pa.DataType):
    """Canonical text back to a Python value, through Arrow's parsers."""
    return ty.from_text([text], t)[0].as_py()


def check_column(row: dict, column: pa.ChunkedArray, t: pa.DataType) -> None:
    want = expected(column)
    name = row["column"]
    for key in ("row_count", "null_count", "nan_count", "distinct_count", "true_count",
                "min_length", "max_length"):
        if key in want:
            assert row[key] == want[key], (name, key)
    if "avg_length" in want:
        assert row["avg_length"] == pytest.approx(want["avg_length"], rel=1e-12), name
    if "min" in want:
        assert parsed(row["min"], t) == want["min"], (name, "min", row["min"])
        assert parsed(row["max"], t) == want["max"], (name, "max", row["max"])
    else:
        assert row.get("min") is None
    if "sum" in want:
        assert (int(row["sum"]) if ty.kind_of(t) == ty.INTEGER else Decimal(row["sum"])) \
            == want["sum"], name
        assert row["mean"] == pytest.approx(want["mean"], rel=1e-12), name
    if "stddev" in want:
        assert row["stddev"] == pytest.approx(want["stddev"], rel=1e-9), name


def check_float_moments(row: dict, column: pa.ChunkedArray) -> None:
    values = values_of(column)
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) == len(values) and len(values) > 1:
        assert row["mean"] == pytest.approx(math.fsum(values) / len(values), rel=1e-9)
        assert row["stddev"] == pytest.approx(statistics.stdev(values), rel=1e-9)
    elif values:   # +inf and -inf together: the mean is NaN, as IEEE arithmetic says
        assert math.isnan(row["mean"]) or math.isinf(row["mean"])


def check_frequencies(freq: pa.Table, column: pa.ChunkedArray, t: pa.DataType) -> None:
    got = Counter()
    for text, n in zip(freq["value"].to_pylist(), freq["frequency"].to_pylist()):
        value = parsed(text, t)
        got["NaN" if value != value else value] += n
    want = Counter("NaN" if v != v else v for v in column.to_pylist() if v is not None)
    assert got == want, column._name if hasattr(column, "_name") else t
    counts = freq["frequency"].to_pylist()
    assert counts == sorted(counts, reverse=True)


def check_histogram(bins: list[dict], column: pa.ChunkedArray, t: pa.DataType, max_bins: int):
    values = values_of(column)
    assert sum(b["count"] for b in bins) == len(values)
    finite_bins = [b for b in bins if not (b["lower"] == b["upper"] and "inf" in b["lower"])]
    assert len(finite_bins) <= max_bins
    closed = ty.kind_of(t) in (ty.INTEGER, ty.TEMPORAL)
    as_number = {ty.DECIMAL: float, ty.FLOAT: float}.get(ty.kind_of(t))
    edge_type = binning.edge_type(t)
    for b in bins:
        lo, hi = parsed(b["lower"], edge_type), parsed(b["upper"], edge_type)
        inside = [v for v in values if (as_number(v) if as_number else v) is not None
                  and ((lo <= (as_number(v) if as_number else v) <= hi) if closed or lo == hi
                       else (lo <= as_number(v) < hi))]
        assert len(inside) == b["count"], (b, t)


# -- the tests ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("adversarial")
    parts = [adversarial(seed) for seed in range(3)] + [adversarial(9).slice(0, 0)]
    for i, part in enumerate(parts):
        write(root / f"part-{i}.parquet", part, row_group_size=150)   # several row groups
    # the oracle reads what Parquet stored (timestamp[s] comes back as timestamp[ms])
    return root, [pq.read_table(root / f"part-{i}.parquet") for i in range(len(parts))]


def test_partition_statistics_match_the_oracle(table):
    root, parts = table
    for i, data in enumerate(parts):
        stats = partition.compute(Store(str(root)), f"part-{i}.parquet")
        rows = {r["column"]: r for r in stats.statistics.to_pylist()}
        assert stats.row_count == data.num_rows
        for field in data.schema:
            check_column(rows[field.name], data[field.name], field.type)
            if ty.kind_of(field.type) == ty.FLOAT:
                check_float_moments(rows[field.name], data[field.name])
            if rows[field.name].get("frequencies_complete"):
                freq = stats.frequencies.filter(pa.compute.equal(stats.frequencies["column"],
                                                                 field.name))
                check_frequencies(freq, data[field.name], field.type)
            if field.name in stats.histograms.column_names:
                check_histogram(histograms.histogram_bins(stats.histograms, field.name),
                                data[field.name], field.type, 1000)


def test_table_statistics_match_the_oracle(table, run):
    root, parts = table
    run(root)
    whole = pa.concat_tables(parts)
    ts = StatisticsReader(f"{root}/_lakestats")
    rows = {r["column"]: r for r in ts.summary()["columns"]}
    for field in whole.schema:
        row = rows[field.name]
        check_column(row, whole[field.name], field.type)
        if row.get("frequencies_complete"):
            assert row["distinct_count_exact"]
            check_frequencies(ts.frequencies(field.name), whole[field.name], field.type)
        if ty.kind_of(field.type) in ty.BINNED_KINDS and values_of(whole[field.name]):
            check_histogram(ts.histogram(field.name), whole[field.name], field.type, 1000)


def test_table_histogram_is_the_histogram_of_all_rows(tmp_path, run):
    """Re-binning partition histograms loses nothing: the table's histogram equals the one
    computed over the same rows in a single file, at 1,000 and at 10,000 bins."""
    rng = np.random.default_rng(7)
    pieces = [pa.table({"x": rng.lognormal(s, 1 + s, 5000), "k": rng.integers(-10**s, 10**(s + 3), 5000),
                        "t": pa.array(rng.integers(0, 10**(14 + s), 5000), pa.timestamp("us"))})
              for s in range(4)]
    for bins in (1000, 10_000):
        split, single = tmp_path / f"split{bins}", tmp_path / f"single{bins}"
        for i, piece in enumerate(pieces):
            write(split / f"{i}.parquet", piece)
        write(single / "all.parquet", pa.concat_tables(pieces))
        run(split, max_bins=bins)
        run(single, max_bins=bins)
        for column in ("x", "k", "t"):
            merged = StatisticsReader(f"{split}/_lakestats").histogram(column)
            direct = StatisticsReader(f"{single}/_lakestats").histogram(column)
            assert merged == direct
            assert bins // 2 <= len(merged) <= bins


def test_high_cardinality_columns_are_exact_and_sketched(tmp_path, run):
    """Overlapping ids over three partitions, in four types: exact distinct counts, a KMV
    estimate within its error, Bloom filters without false negatives."""
    from lakestats.core import hashing
    from lakestats.core.bloom import BloomFilter
    for i in range(3):
        ids = np.arange(i * 40_000, i * 40_000 + 50_000)
        write(tmp_path / f"{i}.parquet", pa.table({
            "id": ids, "big": pa.array(np.uint64(2**64 - 1) - ids.astype(np.uint64)),
            "price": pa.array([Decimal(int(v)) / 100 for v in ids], pa.decimal128(12, 2)),
            "name": pa.array(ids.astype(str))}))
    run(tmp_path)
    truth = duckdb.sql(f"select count(distinct id) from read_parquet('{tmp_path}/*.parquet')"
                       ).fetchall()[0][0]
    ts = StatisticsReader(f"{tmp_path}/_lakestats")
    for row in ts.statistics().to_pylist():
        assert row["distinct_count_exact"] and row["distinct_count"] == truth, row["column"]
        sketch = hashing.kmv_from_bytes(row["ndv_sketch"])
        assert hashing.kmv_estimate(sketch) == pytest.approx(truth, rel=0.05)
    data = pq.read_table(tmp_path / "1.parquet")
    stats = {r["column"]: r for r in ts.statistics(partition="1.parquet").to_pylist()}
    absent = ty.to_text(pa.array(np.arange(10**6, 10**6 + 20_000)))
    for column in data.column_names:
        bloom = BloomFilter.from_bytes(stats[column]["bloom_filter"])
        assert bloom.contains_text(ty.to_text(data[column].combine_chunks())).all()
        if column == "id":
            assert bloom.contains_text(absent).mean() < 0.02


def test_a_thousand_columns(tmp_path, run):
    rng = np.random.default_rng(3)
    data = {f"c{i:04d}": (rng.integers(0, 50, 300) if i % 3 else rng.normal(size=300))
            for i in range(1000)}
    for j in range(2):
        write(tmp_path / f"{j}.parquet", pa.table({k: v[j * 150:(j + 1) * 150] for k, v in data.items()}))
    run(tmp_path)
    columns = StatisticsReader(f"{tmp_path}/_lakestats").summary()["columns"]
    assert [c["column"] for c in columns] == sorted(data)
    oracle = duckdb.sql(f"select count(distinct c0001), min(c0001), max(c0001), sum(c0001), "
                        f"stddev_samp(c0999) from read_parquet('{tmp_path}/*.parquet')").fetchall()[0]
    c1, c999 = columns[1], columns[999]
    assert (c1["distinct_count"], int(c1["min"]), int(c1["max"]), int(c1["sum"])) == oracle[:4]
    assert c999["stddev"] == pytest.approx(oracle[4], rel=1e-9)


def test_an_all_null_column_and_a_zero_row_file(tmp_path, run):
    write(tmp_path / "a.parquet", pa.table({"x": pa.nulls(5, pa.float64()), "s": ["a"] * 5}))
    pq.write_table(pa.table({"x": pa.array([], pa.float64()), "s": pa.array([], pa.string())}),
                   tmp_path / "empty.parquet")
    run(tmp_path)
    x, s = StatisticsReader(f"{tmp_path}/_lakestats").summary()["columns"]
    assert (x["row_count"], x["null_count"], x["distinct_count"], x["min"], x["mean"]) == (5, 5, 0, None, None)
    assert (s["distinct_count"], s["min"], s["max"]) == (1, "a", "a")
