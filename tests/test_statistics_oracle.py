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

from decimal import Decimal

import pyarrow.compute  # noqa: F401 (pa.compute)
import pyarrow.parquet as pq
import pytest

from lakestats.metastore.reader import StatisticsReader
from tests.oracle import check_everything, duck, kind, source, stats_rows
from tests.oracle_data import adversarial, data_files, write


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


# -- the tests ----------------------------------------------------------------------------------

def test_partition_statistics_match_the_oracle(adversarial_table):
    """Each partition (three of adversarial data, one of zero rows) through the published
    partition statistics: every statistic, the frequencies and the histogram of every column
    equal what DuckDB and exact arithmetic say about that file alone."""
    root = adversarial_table
    ts = StatisticsReader(str(root / "_lakestats"))
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
    ts = StatisticsReader(str(root / "_lakestats"))
    rels = data_files(root)
    schema = pq.read_schema(root / rels[0])
    summary = ts.summary()
    assert (summary["row_count"], summary["partitions"], summary["missing"]) == (
        duck(f"select count(*) from {source(root, rels)}")[0], 4, {})
    # the part=... directories are a column too: typed as Spark infers them
    assert [c["column"] for c in summary["columns"]] == schema.names + ["part"]
    assert check_everything(root, ts, rels, None, schema) == len(schema) - 2   # all but nested
    part = stats_rows(ts)["part"]
    assert (part["type"], part["null_count"], part["distinct_count"], part["min"],
            part["max"]) == ("int32", 0, 3, "0", "2")
    for column in summary["columns"][:-1]:  # nested columns have no distinct count at all
        nested = kind(schema.field(column["column"]).type) == "other"
        assert column["distinct_count_exact"] is (None if nested else True), column["column"]


def test_canonical_text_of_the_extremes(adversarial_table):
    """The spellings themselves: 0 never -0, infinities as inf/-inf, a float32 in its own
    shortest text, decimals exactly, lowercase hex, true/false, ISO 8601 with the zone's offset
    at that instant (EST in winter, EDT in summer, +05:30 in Kolkata, LMT before 1883), and a
    10,000-character string kept whole."""
    root = adversarial_table
    ts = StatisticsReader(str(root / "_lakestats"))
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
