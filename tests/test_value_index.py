"""Value -> partitions (`lakestats where`, StatisticsReader.partitions_with): equal to DuckDB's
GROUP BY file over the data, for values held by most partitions (dense rows) and by few
(sparse), through added, removed and rewritten files; and pruning on = and IN uses it."""
from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.algorithms.frequencies import value_index
from lakestats.core.settings import FrequencySettings
from lakestats.cli import main
from lakestats.metastore import value_index as stored
from lakestats.metastore.layout import VALUE_INDEX, Layout
from lakestats.metastore.reader import StatisticsNotFound, StatisticsReader

INT64 = np.iinfo(np.int64)


def part(k: int) -> pa.Table:
    rng = np.random.default_rng(k)
    n = 300
    city = rng.choice(["Zürich", "Oslo", "", "東京"], n).tolist()
    city[k % n] = f"rare-{k % 4}"                          # in a few partitions only
    floats = rng.choice([0.5, -0.0, 0.0, np.nan, np.inf], n)
    return pa.table({
        "city": pa.array(city, pa.string()),
        "big": pa.array(rng.choice([INT64.min, INT64.max, 0, k], n), pa.int64()),
        "f": pa.array(floats, pa.float64()),
        "day": pa.array((rng.integers(0, 3, n) + 10_000).astype(np.int32)).cast(pa.date32()),
        "price": pa.array([Decimal(int(v)) / 100 for v in rng.integers(0, 5, n)],
                          pa.decimal128(9, 2)),
        "id": pa.array(np.arange(n) + 1000 * k, pa.int64()),   # unique: not low-distinct
    })


def duck_where(root: Path, column: str, literal: str) -> dict[str, int]:
    rows = duckdb.sql(f"SELECT filename, count(*) FROM read_parquet('{root}/*.parquet', "
                      f"filename=true) WHERE {column} = {literal} GROUP BY filename").fetchall()
    return {str(Path(f).relative_to(root)): n for f, n in sorted(rows)}


PROBES = [("city", "Oslo", "'Oslo'"), ("city", "東京", "'東京'"), ("city", "", "''"),
          ("city", "rare-1", "'rare-1'"), ("city", "nowhere", "'nowhere'"),
          ("big", str(INT64.min), f"{INT64.min}"), ("big", "7", "7"),
          ("f", "0", "0.0"), ("f", "-0.0", "0.0"), ("f", "Infinity", "'Infinity'::DOUBLE"),
          ("day", "1997-05-20", "DATE '1997-05-20'"), ("price", "0.03", "0.03"),
          ("price", "0.030", "0.03")]


def check(root: Path, stats: StatisticsReader) -> None:
    for column, text, literal in PROBES:
        got = stats.partitions_with(column, text)
        want = duck_where(root, column, literal)
        assert got["frequency_by_partition"] == want, (column, text)
        assert got["partitions"] == sorted(want)
        entries = stored.lookup(stored.layers(stats.layout, stats.manifest), column,
                                [got["value"]])
        assert entries.num_rows == len(want), (column, text)        # one entry a partition


def test_where_equals_duckdb_through_changes(tmp_path, run):
    root = tmp_path / "t"
    root.mkdir()
    for k in range(12):
        pq.write_table(part(k), root / f"p{k:02}.parquet", row_group_size=100)
    run(root)
    stats = StatisticsReader(Layout.of_table(str(root)).uri)
    # every column of a small table is low-distinct
    assert stats.manifest.value_index == ["big", "city", "day", "f", "id", "price"]
    check(root, stats)
    pq.write_table(part(40), root / "p40.parquet")              # added
    (root / "p03.parquet").unlink()                               # removed
    pq.write_table(part(41), root / "p05.parquet")              # rewritten
    report = run(root)
    assert (report.computed, report.removed) == (2, 1)
    check(root, StatisticsReader(Layout.of_table(str(root)).uri))


def test_layers_through_many_versions_then_whole_again(tmp_path, run):
    """Versions that add, remove and rewrite files write layers (their own partitions'
    entries), each version still equal to DuckDB; past LAYERS_MAX layers, and under --exact,
    the index is written whole again."""
    root = tmp_path / "t"
    root.mkdir()
    for k in range(6):
        pq.write_table(part(k), root / f"p{k:02}.parquet")
    run(root)
    layout = Layout.of_table(str(root))
    depths = []
    for step in range(value_index.LAYERS_MAX + 2):
        k = 50 + step
        pq.write_table(part(k), root / f"p{k:02}.parquet")                  # added
        if step % 3 == 1:
            (root / f"p{k - 1:02}.parquet").unlink()                         # one a layer added
        if step % 3 == 2:
            pq.write_table(part(100 + step), root / f"p{step:02}.parquet")   # rewritten
        run(root)
        stats = StatisticsReader(layout.uri)
        depths.append(len(stats.manifest.value_index_layers))
        check(root, stats)
    # the base and one layer a version, until a version would make one more than LAYERS_MAX
    assert depths == [*range(2, value_index.LAYERS_MAX + 2), 0, 2], depths
    pq.write_table(part(99), root / "p99.parquet")
    run(root, exact=True)
    stats = StatisticsReader(layout.uri)
    assert stats.manifest.value_index_layers == []
    check(root, stats)


def test_a_lost_layer_means_a_whole_index_again(tmp_path, run):
    """A layer of the published index is gone (its base here): the next version does not
    layer over it, it writes the whole index, and the lookups are DuckDB's again."""
    root = tmp_path / "t"
    root.mkdir()
    for k in range(4):
        pq.write_table(part(k), root / f"p{k:02}.parquet")
    base = run(root).version
    pq.write_table(part(60), root / "p60.parquet")
    run(root)
    layout = Layout.of_table(str(root))
    assert StatisticsReader(layout.uri).manifest.value_index_layers[0] == {"version": base}
    (Path(layout.version(base).uri) / VALUE_INDEX).unlink()
    pq.write_table(part(61), root / "p61.parquet")
    run(root)
    stats = StatisticsReader(layout.uri)
    assert stats.manifest.value_index_layers == []
    check(root, stats)


def test_named_columns_and_the_command_line(tmp_path, run, capsys):
    root = tmp_path / "t"
    root.mkdir()
    for k in range(3):
        pq.write_table(part(k), root / f"p{k}.parquet")
    # low-duplicate frequencies: the id column is indexed only because it is named
    run(root, value_index=("id",), frequencies=FrequencySettings("low-duplicate"))
    stats = StatisticsReader(Layout.of_table(str(root)).uri)
    assert stats.manifest.value_index == ["id"]
    assert stats.partitions_with("id", "1005")["frequency_by_partition"] == {"p1.parquet": 1}
    with pytest.raises(StatisticsNotFound, match="no value index"):
        stats.partitions_with("city", "Oslo")
    assert main(["where", str(root), "id", "2001", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "column": "id", "value": "2001", "partitions": ["p2.parquet"],
        "frequency_by_partition": {"p2.parquet": 1}}
    assert main(["where", str(root), "city", "Oslo"]) == 1
    assert "no value index" in capsys.readouterr().err


def test_pruning_on_equality_and_in_uses_the_value_index(tmp_path, run, capsys):
    root = tmp_path / "t"
    root.mkdir()
    for k in range(12):
        pq.write_table(part(k), root / f"p{k:02}.parquet")
    run(root)
    absent = ", ".join(str(500 + 1000 * k + i) for k in range(12) for i in range(25))
    present = "1005, 7299"
    for where, want in [("city = 'rare-2'", set(duck_where(root, "city", "'rare-2'"))),
                        # ids: 300 values a partition, so Bloom filters (1% false positives
                        # each: most partitions would pass 300 absent values)
                        (f"id IN ({absent})", set()),
                        (f"id IN ({present})", {"p01.parquet", "p07.parquet"})]:
        assert main(["prune", str(root), "--where", where, "--json"]) == 0
        assert set(json.loads(capsys.readouterr().out)["kept"]) == want, where
