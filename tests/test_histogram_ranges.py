"""Histogram range lookups (`histogram --range`, StatisticsReader.histogram(low=, high=)):
equal to the full histogram filtered here, on 1,000 and 10,000 bins, reading only the row
groups that hold the range."""
from __future__ import annotations

import json
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.cli import main
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsReader
from tests.oracle import parse

ROWS = 60_000


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranges") / "t"
    root.mkdir()
    rng = np.random.default_rng(7)
    for k in range(3):
        floats = rng.normal(0, 1000, ROWS)
        floats[:4] = [np.inf, -np.inf, np.nan, -0.0]
        ints = rng.integers(-50_000, 50_000, ROWS)
        ints[:2] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max] if k == 2 else [0, 1]
        pq.write_table(pa.table({
            "i": ints,
            "f": floats,
            "dec": pa.array([Decimal(int(v)) / 100 for v in rng.integers(-10**6, 10**6, ROWS)],
                            pa.decimal128(12, 2)),
            "day": pa.array(rng.integers(0, 20_000, ROWS).astype(np.int32)).cast(pa.date32()),
            "ts": pa.array(rng.integers(0, 2 * 10**15, ROWS)).cast(pa.timestamp("us", "UTC")),
        }), root / f"p{k}.parquet", row_group_size=20_000)
    return root


def edge_type(t: pa.DataType) -> pa.DataType:
    return pa.float64() if pa.types.is_decimal(t) or pa.types.is_floating(t) else t


def overlapping(bins: list[dict], low, high, t: pa.DataType) -> list[dict]:
    """The full histogram's bins whose [lower, upper] meets [low, high]."""
    et = edge_type(t)
    return [b for b in bins if (high is None or parse(b["lower"], et) <= high)
            and (low is None or parse(b["upper"], et) >= low)]


def bound(text: str | None, t: pa.DataType):
    if text is None:
        return None
    return float(Decimal(text)) if pa.types.is_decimal(t) else parse(text, edge_type(t))


RANGES = {
    "i": [("-10", "30"), ("-50000", "-49000"), (None, "-40000"), ("49990", None), ("7", "7"),
          ("100000", "200000")],
    "f": [("-10", "30"), ("-Infinity", "-2500"), ("3000", None), (None, None), ("0", "0")],
    "dec": [("-100.50", "100.25"), (None, "-9000"), ("9999.99", None)],
    "day": [("1990-01-01", "1990-03-31"), (None, "1970-01-05")],
    "ts": [("2000-01-01T00:00:00+00:00", "2001-06-30T12:00:00.5+00:00"), ("2030-01-01T00:00:00+00:00", None)],
}


@pytest.mark.parametrize("bins", [1000, 10_000])
def test_range_equals_the_full_histogram_filtered(table, run, tmp_path, bins, monkeypatch):
    root = str(tmp_path / f"stats{bins}")
    run(table, stats_root=root, max_bins=bins)
    stats = StatisticsReader(Layout.of_table(str(table), root).uri)
    read = []
    original = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups",
                        lambda self, groups, **kw: read.append(list(groups))
                        or original(self, groups, **kw))
    for column, ranges in RANGES.items():
        t = stats.schema().field(column).type
        full = stats.histogram(column)
        for low, high in ranges:
            read.clear()
            got = stats.histogram(column, low=low, high=high)
            assert got == overlapping(full, bound(low, t), bound(high, t), t), (column, low, high)
            if bins == 10_000 and column == "i" and (low, high) == ("-10", "30"):
                groups = pq.ParquetFile(Layout.of_table(str(table), root).version(
                    stats.version).path("histograms.parquet")).num_row_groups
                assert groups > 10 and len(read[0]) <= 2, (groups, read)
    # a partition's histogram too
    part = stats.histogram("i", "p2.parquet")
    assert stats.histogram("i", "p2.parquet", low="-10", high="30") == overlapping(
        part, -10, 30, pa.int64())


def test_range_on_the_command_line(table, run, tmp_path, capsys):
    root = str(tmp_path / "stats")
    run(table, stats_root=root)
    assert main(["histogram", str(table), "i", "--stats-root", root, "--range", "-10..30",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    stats = StatisticsReader(Layout.of_table(str(table), root).uri)
    assert got == {"column": "i", "bins": overlapping(stats.histogram("i"), -10, 30, pa.int64())}
    assert got["bins"] and all(math.isfinite(int(b["count"])) for b in got["bins"])
    assert main(["histogram", str(table), "i", "--stats-root", root, "--range", "1.5..3"]) == 1
    assert "'1.5' is not a int64 value" in capsys.readouterr().err
    assert main(["histogram", str(table), "i", "--stats-root", root, "--range", "7"]) == 2
    assert "LOW..HIGH" in capsys.readouterr().err
