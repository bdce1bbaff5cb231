"""Statistics at the edges, against plain computations: histograms that merge exactly at 1,000
and 10,000 bins, exact distinct counts for every type and algorithm, integer, decimal and
float extremes, all-null, zero-row, nested and missing columns, a thousand columns."""
from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)
import pyarrow.parquet as pq
import pytest

from lakestats.algorithms.partitions import kernel as partition
from lakestats.core.settings import FrequencySettings, PartitionSettings
from lakestats.metastore import files, histograms
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
from tests.oracle import (check_everything, check_frequencies, check_histogram, check_row, duck,
                          oracle, python_values, read_column, source, stats_rows)
from tests.oracle_data import (FLOAT_MAX, FLOAT_TINY, I64_MAX, I64_MIN, INF, KOLKATA, NAN,
                               NAN_PAYLOAD, NEG_NAN, NY, U64_MAX, cycle, data_files, texts, write)


def check_every_partition_and_the_table(root) -> StatisticsReader:
    """Every statistic of each file and of the table against the oracle (one schema)."""
    ts = StatisticsReader(str(root / "_lakestats"))
    rels = data_files(root)
    schema = pq.read_schema(root / rels[0])
    for rel in rels:
        check_everything(root, ts, [rel], rel, schema)
    check_everything(root, ts, rels, None, schema)
    return ts


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
    kernel = partition.compute(Store(str(single)), "all.parquet",
                              PartitionSettings(max_bins=max_bins))
    ts = StatisticsReader(str(split / "_lakestats"))
    rows = stats_rows(ts)
    single_rows = {r["column"]: r for r in kernel.statistics.to_pylist()}
    for field in whole.schema:
        merged = ts.histogram(field.name)
        assert merged == histograms.histogram_bins(kernel.histograms, field.name), field.name
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
    ts = StatisticsReader(str(tmp_path / "_lakestats"))
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
    run(tmp_path, frequencies=FrequencySettings(algorithm, all_values=True))
    ts = StatisticsReader(str(tmp_path / "_lakestats"))
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
    check_every_partition_and_the_table(tmp_path)


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
    check_every_partition_and_the_table(tmp_path)


def test_float_specials_across_partitions(tmp_path, run):
    """NaN (three bit patterns), ±inf, -0.0 with 0.0, in partitions that hold only some of them:
    NaN counted apart and once as a distinct value, min/max over the rest, -0.0 and 0.0 one
    value, infinities in bins of their own, mean and stddev as IEEE arithmetic has them (null
    in the summary where that is inf or NaN)."""
    layouts = [[NAN, NEG_NAN, NAN_PAYLOAD, None], [-0.0, 0.0, -0.0, None, 1.5], [INF, 2.0, NAN],
               [-INF, -0.0, 0.25], [FLOAT_TINY, -FLOAT_TINY, 0.0]]
    for p, values in enumerate(layouts):
        write(tmp_path / f"{p}.parquet", pa.table({
            "x": pa.array(values, pa.float64()),
            "y": pa.array([v for v in values], pa.float32()),
            "finite": pa.array([v if v is None or math.isfinite(v) else 3.0 for v in values]),
        }))
    run(tmp_path)
    ts = check_every_partition_and_the_table(tmp_path)
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
    check_every_partition_and_the_table(tmp_path)


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
    ts = StatisticsReader(str(tmp_path / "_lakestats"))
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
    ts = StatisticsReader(str(tmp_path / "_lakestats"))
    rels = data_files(tmp_path)
    summary = ts.summary()
    assert [c["column"] for c in summary["columns"]] == names
    assert all(c["row_count"] == 270 for c in summary["columns"])
    asked = ["c0999", "c0000", "c0064", "c0063", "c0500"]      # in small row groups: read apart
    assert ts.summary(columns=asked)["columns"] == [c for c in summary["columns"]
                                                   if c["column"] in asked]
    sample = names[:14] + names[-7:] + [names[i] for i in rng.choice(1000, 14, replace=False)]
    schema = pq.read_schema(tmp_path / rels[0])
    assert check_everything(tmp_path, ts, rels, None, schema, names=sample) == len(set(sample))
    check_everything(tmp_path, ts, [rels[1]], rels[1], schema, names=sample[:7])


def test_frequency_lists_short_and_long_read_back_whole_and_by_top(tmp_path):
    """Short lists share row groups, long ones have their own; each column reads back whole,
    and its top k from the first row groups only, whatever the order of the names."""
    sizes = {"m": 10, "b": 20_000, "z": 5, "a": 70_000, "c": 3, "y": 16_000}
    rng = np.random.default_rng(7)
    per_column = [(name, pa.table({"value": pa.array([f"{name}{i}" for i in range(n)]),
                                   "frequency": pa.array(rng.integers(1, 50, n))}))
                  for name, n in sizes.items()]
    table = files.frequencies_table(per_column)
    store = Store(str(tmp_path))
    files.write_frequencies(store, table)
    groups = pq.ParquetFile(tmp_path / "frequencies.parquet").metadata.num_row_groups
    assert groups < len(sizes) + 1          # the short lists share
    for name, counts in per_column:
        expected = counts.take(np.argsort(-counts["frequency"].to_numpy(), kind="stable"))
        got = files.read_frequencies(store, [name])
        assert got["column"].to_pylist() == [name] * len(counts)
        assert got.select(["value", "frequency"]).equals(expected)
        assert files.FrequencyFile(store).top(name, 7).select(["value", "frequency"]) \
            .equals(expected.slice(0, 7))
        rows, batches = files.FrequencyFile(store).batches(name)
        assert rows >= len(counts)
        assert pa.concat_tables(list(batches())).equals(expected)
    both = files.read_frequencies(store, ["z", "a"])
    assert both.num_rows == sizes["z"] + sizes["a"]
