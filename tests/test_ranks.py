"""Exact ranks and quantiles by distributed sort, against a sort in the test (percentile_disc)."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from lakestats.algorithms.ranks.driver import compute_ranks
from lakestats.core import types as ty
from lakestats.core.settings import FrequencySettings
from lakestats.metastore.reader import StatisticsReader
from tests.tables import write

QS = [0, 0.001, 0.01, 0.25, 0.5, 0.75, 0.99, 0.999, 1]
RNG = np.random.default_rng(11)
N = 6000


def floats_with_specials() -> pa.Array:
    values = list(RNG.normal(0, 100, N - 700)) + [math.nan] * 300 + [math.inf] * 100 \
        + [-math.inf] * 100 + [-0.0] * 100 + [None] * 100
    RNG.shuffle(values)
    return pa.array(values, pa.float64())


CASES = {
    "uniform": lambda: pa.array(RNG.integers(-10**6, 10**6, N)),
    "zipf": lambda: pa.array(RNG.zipf(1.3, N) % 10**9),
    "all equal": lambda: pa.array(np.full(N, 7)),
    "two values": lambda: pa.array(RNG.choice([3, 90], N)),
    "60% one value": lambda: pa.array(np.where(RNG.random(N) < 0.6, 42, RNG.integers(0, 10**6, N))),
    "NaN, inf, nulls": floats_with_specials,
    "dates": lambda: pa.array(np.datetime64("1990-01-01") + RNG.integers(0, 20_000, N), pa.date32()),
    "zoned timestamps": lambda: pa.array(RNG.integers(0, 2 * 10**15, N),
                                         pa.timestamp("us", "America/New_York")),
    "decimals": lambda: pa.array([Decimal(int(v)) / 1000 for v in RNG.integers(-10**9, 10**9, N)],
                                 pa.decimal128(20, 3)),
    "strings": lambda: pa.array(["".join(RNG.choice(list("abcé😀 Z"), RNG.integers(0, 6)))
                                 for _ in range(N)]),
}


def percentile_disc(values: list, q: float):
    """Oracle: sort the non-null values (NaN after +inf), take 1-based position ceil(q*n)."""
    present = [v for v in values if v is not None]
    ordered = sorted(present, key=lambda v: (isinstance(v, float) and v != v, v))
    position = max(1, math.ceil(Fraction(str(q)) * len(ordered)))
    return ordered[position - 1]


def same(text: str, expected, arrow_type: pa.DataType) -> bool:
    got = ty.from_text([text], arrow_type)[0].as_py()
    if isinstance(expected, float) and expected != expected:
        return got != got
    return got == expected


def split(column: pa.Array, sizes: list[int]) -> list[pa.Array]:
    bounds = np.cumsum([0] + sizes)
    return [column.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]


LAYOUTS = {"4 partitions": [N // 4] * 4, "1 partition": [N], "50 partitions": [N // 50] * 50,
           "very unequal": [5, 40, 4000, 1, 1954]}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["4 partitions"])
def test_exact_quantiles_match_a_sort(tmp_path, run, invoker, settings, case, layout):
    check(tmp_path, run, invoker, settings, CASES[case](), LAYOUTS[layout])


@pytest.mark.parametrize("layout", ["1 partition", "50 partitions", "very unequal"])
def test_partition_layouts(tmp_path, run, invoker, settings, layout):
    check(tmp_path, run, invoker, settings, CASES["zipf"](), LAYOUTS[layout])


def check(tmp_path, run, invoker, settings, column: pa.Array, sizes: list[int]) -> None:
    for i, piece in enumerate(split(column, sizes)):
        write(tmp_path / f"p{i:03d}.parquet", pa.table({"x": piece}))
    run(tmp_path)
    root = f"{tmp_path}/_lakestats"
    report = compute_ranks(root, invoker, settings, ["x"])
    assert report.columns["x"]["values"] == len(column) - column.null_count
    stats = StatisticsReader(root)
    got = stats.exact_quantiles("x", QS)
    values = column.to_pylist()
    for q, text in zip(QS, got):
        assert same(text, percentile_disc(values, q), column.type), (q, text)
    # rank: smaller non-null values and the count of a present value
    probe = percentile_disc(values, 0.5)
    answer = stats.rank("x", ty.scalar_text(pa.scalar(probe, column.type)))
    present = [v for v in values if v is not None]
    nan = isinstance(probe, float) and probe != probe
    equal = sum(1 for v in present if (v != v if nan else v == probe))
    smaller = len(present) - sum(1 for v in present if v != v) if nan else \
        sum(1 for v in present if v == v and v < probe) if isinstance(probe, float) else \
        sum(1 for v in present if v < probe)
    assert (answer["smaller"], answer["count"]) == (smaller, equal)


def test_ranks_file_holds_sql_rank(tmp_path, run, invoker, settings):
    values = pa.array([5, 1, 5, None, 3, 3, 3, 9])
    write(tmp_path / "a.parquet", pa.table({"x": values.slice(0, 4), "s": ["b", "a", "b", None]}))
    write(tmp_path / "b.parquet", pa.table({"x": values.slice(4), "s": ["c", "a", "a", "d"]}))
    run(tmp_path)
    compute_ranks(f"{tmp_path}/_lakestats", invoker, settings, ["s", "x"])
    ranks = pa.parquet.read_table(tmp_path / "_lakestats" / "versions" / "v000001" / "ranks.parquet")
    assert ranks.select(["column", "value", "rank", "count"]).to_pylist() == [
        {"column": "x", "value": "1", "rank": 1, "count": 1},
        {"column": "x", "value": "3", "rank": 2, "count": 3},
        {"column": "x", "value": "5", "rank": 5, "count": 2},
        {"column": "x", "value": "9", "rank": 7, "count": 1},
        {"column": "s", "value": "a", "rank": 1, "count": 3},
        {"column": "s", "value": "b", "rank": 4, "count": 2},
        {"column": "s", "value": "c", "rank": 6, "count": 1},
        {"column": "s", "value": "d", "rank": 7, "count": 1}]


def test_a_column_without_values_has_null_quantiles(tmp_path, run, invoker, settings):
    """No partition sends a sample: no splitters, every quantile null, every rank zero."""
    for name in ("a", "b"):
        write(tmp_path / f"{name}.parquet", pa.table({"x": pa.array([None] * 4, pa.int64()),
                                                      "y": [1, 2, 3, 4]}))
    run(tmp_path)
    compute_ranks(f"{tmp_path}/_lakestats", invoker, settings, ["x", "y"])
    stats = StatisticsReader(f"{tmp_path}/_lakestats")
    assert stats.exact_quantiles("x", [0, 0.5, 1]) == [None, None, None]
    assert stats.exact_quantiles("y", [0, 0.5, 1]) == ["1", "2", "4"]
    assert stats.rank("x", "3") == {"column": "x", "value": "3", "smaller": 0, "count": 0}


def test_a_file_without_the_column_adds_no_values(tmp_path, run, invoker, settings):
    """A file that lacks the column (plain or under a Hive directory) holds only nulls of it."""
    write(tmp_path / "a.parquet", pa.table({"x": pa.array([5, 1, 9], pa.int64()), "s": list("abc")}))
    write(tmp_path / "b.parquet", pa.table({"s": list("de")}))
    write(tmp_path / "k=1" / "c.parquet", pa.table({"s": list("f")}))
    run(tmp_path)
    compute_ranks(f"{tmp_path}/_lakestats", invoker, settings, ["x"])
    stats = StatisticsReader(f"{tmp_path}/_lakestats")
    assert stats.exact_quantiles("x", [0, 0.5, 1]) == ["1", "5", "9"]


def test_approximate_quantiles_fall_within_their_bound(tmp_path, run):
    values = RNG.lognormal(3, 1, 40_000)
    for i in range(4):
        write(tmp_path / f"{i}.parquet", pa.table({"x": values[i * 10_000:(i + 1) * 10_000]}))
    # near-unique: values seen once are not stored, so the KLL sketch answers
    run(tmp_path, frequencies=FrequencySettings(low_distinct_max=1000))
    answer = StatisticsReader(f"{tmp_path}/_lakestats").quantiles("x", QS[1:-1])
    assert answer["exact"] is False and 0 < answer["rank_error"] < 0.02
    ordered = np.sort(values)
    for q, text in zip(QS[1:-1], answer["quantiles"]):
        true_rank = np.searchsorted(ordered, float(text), side="right") / len(ordered)
        assert abs(true_rank - q) <= answer["rank_error"] + 1 / len(ordered), (q, text)


def test_zoned_timestamp_order_is_by_instant(tmp_path, run, invoker, settings):
    stamps = [dt.datetime(2024, 3, 10, h, tzinfo=dt.timezone.utc) for h in range(24)]
    write(tmp_path / "a.parquet", pa.table({"t": pa.array(stamps, pa.timestamp("us", "Asia/Kolkata"))}))
    run(tmp_path)
    compute_ranks(f"{tmp_path}/_lakestats", invoker, settings, ["t"])
    low, high = StatisticsReader(f"{tmp_path}/_lakestats").exact_quantiles("t", [0, 1])
    assert dt.datetime.fromisoformat(low) == stamps[0]
    assert dt.datetime.fromisoformat(high) == stamps[-1]


def test_ranks_of_a_table_on_s3(s3_endpoint, run, invoker, settings, tmp_path):
    import boto3
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="ranks")
    column = CASES["strings"]()
    for i, piece in enumerate(split(column, [2000, 3000, 1000])):
        path = write(tmp_path / f"{i}.parquet", pa.table({"x": piece}))
        s3.upload_file(str(path), "ranks", f"t/{i}.parquet")
    run("s3://ranks/t")
    compute_ranks("s3://ranks/t/_lakestats", invoker, settings, ["x"])
    got = StatisticsReader("s3://ranks/t/_lakestats").exact_quantiles("x", QS)
    assert got == [percentile_disc(column.to_pylist(), q) for q in QS]
    # the exchange is cleaned up: only statistics remain under the statistics root
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="ranks", Prefix="t/_lakestats/exchange")
            .get("Contents", []) if not o["Key"].endswith("/")]   # a directory marker may stay
    assert keys == []


def test_exact_quantiles_sort_only_what_the_frequencies_do_not_hold(tmp_path, run):
    """A column whose frequency list holds every value answers --exact from it, with no
    distributed sort; a near-unique one (values seen once are not listed) is sorted."""
    import lakestats
    few = floats_with_specials().to_numpy(zero_copy_only=False).round(-2)
    values = {"few": pa.array(few, from_pandas=True), "unique": floats_with_specials()}
    for i, piece in enumerate(split(pa.array(range(N)), [N // 4] * 4)):
        rows = piece.to_numpy()
        write(tmp_path / f"p{i}.parquet", pa.table({k: v.take(rows) for k, v in values.items()}))
    run(tmp_path, frequencies=FrequencySettings(low_distinct_max=100))
    stats = lakestats.open(str(tmp_path))
    for column, sorted_ in (("few", False), ("unique", True)):
        got = stats.quantiles(column, QS, exact=True)
        assert got["exact"]
        expected = [percentile_disc(values[column].to_pylist(), q) for q in QS]
        assert all(same(g["value"], e, pa.float64()) for g, e in zip(got["quantiles"],
                                                                     expected)), column
        assert stats.has_ranks(column) == sorted_, column
