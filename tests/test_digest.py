"""A pack's digest (algorithms.partitions.digest) holds what its files' own statistics say,
and the table level reads it instead of them."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq

from lakestats.algorithms.frequencies import steps
from lakestats.algorithms.partitions import digest, fold, reduce, step
from lakestats.algorithms.partitions.digest import Digests
from lakestats.algorithms.partitions.driver import packs
from lakestats.algorithms.partitions.fold import Folds
from lakestats.core.settings import PACK_BYTES, PartitionSettings
from lakestats.fleet.protocol import (PARTITION_PACK, FrequencyColumn, PackTask, PartitionCounts,
                                      PartitionTask, StepEvent)
from lakestats.metastore import files
from lakestats.metastore.layout import INDEX, Layout
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import DataFile, Store
from tests.tables import mixed, published_files, write
from tests.test_user_statistics import PLUGIN


def tricky(n: int) -> pa.Table:
    """Few values (unicode, empty, a NaN beside -0.0), all nulls, a struct, wide decimals."""
    return pa.table({
        "few": pa.array(["", "é", "東京", None] * (n // 4)),
        "nan": pa.array([float("nan"), -0.0, 0.0, 1e308] * (n // 4)),
        "nulls": pa.array([None] * n, pa.int64()),
        "nested": pa.array([{"a": i} for i in range(n)]),
        "money": pa.array([10 ** 30 + i for i in range(n)], pa.decimal128(38, 0)),
        "at": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] * n,
                       pa.timestamp("us", "Europe/Oslo")),
    })


def test_a_digest_holds_its_files_statistics_as_they_read(tmp_path):
    """Pack 0: three files of one schema (folded into one partial); pack 1: files of two
    schemas (no partial) and a bad file (left out)."""
    table = tmp_path / "t"
    for i in range(4):
        write(table / f"m{i}.parquet", mixed(200, seed=i))
    write(table / "tricky.parquet", tricky(100))
    (table / "bad.parquet").write_bytes(b"not parquet")
    layout = Layout.of_table(str(table))
    data = {f.rel_path: f for f in Store(str(table)).list_files()}
    p = PartitionSettings(statistics=(PLUGIN,))
    digests = Digests(layout.scratch("digests-test"))
    for k, pack in enumerate([["m0.parquet", "m1.parquet", "m2.parquet"],
                              ["bad.parquet", "m3.parquet", "tricky.parquet"]]):
        result = step.partition_pack(StepEvent(PARTITION_PACK, "pack", PackTask([PartitionTask(
            str(table), f.rel_path, f.fingerprint,
            layout.partition(f.rel_path, f.fingerprint).uri, p.max_bins, p.bloom_min_distinct,
            p.statistics, f.reading, p.range_set_size) for f in map(data.get, pack)],
            digests.name(k))))
        assert [r.status for r in result.results] == (["ok"] * 3 if k == 0 else
                                                      ["failed", "ok", "ok"])
        digests.record(k, [data[path] for path in pack if path != "bad.parquet"])
    ok = [f for path, f in sorted(data.items()) if path != "bad.parquet"]
    held = digests.read(list(data.values()))
    assert sorted(held) == [f.rel_path for f in ok]
    for f in ok:
        directory = layout.partition(f.rel_path, f.fingerprint)
        statistics, few = held[f.rel_path]
        expected = reduce.statistics(directory)
        assert statistics.equals(expected), f.rel_path
        assert statistics.schema.metadata == expected.schema.metadata
        wanted = [r["column"] for r in expected.to_pylist()
                  if 0 < (r["distinct_count"] or 0) <= p.bloom_min_distinct]
        assert wanted and sorted(few) == sorted(wanted)
        runs = dict(files.column_runs(files.read_frequencies(directory, wanted),
                                      ("value", "frequency")))
        assert all(few[c].equals(runs[c]) for c in wanted)
        uri = digests.frequencies(f.rel_path, f.fingerprint)     # a worker's reads
        names = expected["column"].to_pylist()
        specs = [FrequencyColumn(k, name, "binned", False) for k, name in enumerate(names)]
        lists = steps._read(PartitionCounts(directory.uri, list(range(len(names))), [], uri),
                            specs)
        assert digest.frequencies(uri, directory.uri) is not None
        alone = steps._read(PartitionCounts(directory.uri, list(range(len(names)))), specs)
        assert lists.keys() == alone.keys() and all(lists[k].equals(alone[k]) for k in lists)
    m1 = data["m1.parquet"]
    changed = [f if f is not m1 else DataFile(f.rel_path, f.size, '"other"') for f in ok]
    assert "m1.parquet" not in digests.read(changed)      # another version of the file
    assert digests.frequencies("m1.parquet", '"other"') == ""

    schema = pa.unify_schemas([pq.read_schema(table / f.rel_path) for f in ok])
    [(members, partial)] = digests.partials(ok, schema)       # pack 1 has two schemas
    assert members == ["m0.parquet", "m1.parquet", "m2.parquet"]
    by_file = fold.sources([layout.partition(f.rel_path, f.fingerprint) for f in ok[:3]],
                           len(schema))
    one, many = Folds(schema, p.max_bins, [partial]), Folds(schema, p.max_bins, by_file)
    for name in ("id", "qty", "price", "day"):      # the partial folds as its files do
        a, b = one.histogram(name), many.histogram(name)
        assert (a.exponent, a.start, a.counts.tolist(), a.low, a.high) == \
            (b.exponent, b.start, b.counts.tolist(), b.low, b.high)
        assert {k: v for k, v in one.sketches(name).items() if k != "quantile_sketch"} == \
            {k: v for k, v in many.sketches(name).items() if k != "quantile_sketch"}
    for wanted, table_schema in [(changed, schema), (ok[1:], schema),   # not all of them
                                 (ok, schema.set(0, pa.field("id", pa.float64())))]:
        assert list(digests.partials(wanted, table_schema)) == []
    digests.clear()
    assert not Store(layout.scratch("digests-test").uri).root_exists()


def test_the_table_level_reads_digests_not_each_files_statistics(tmp_path, run, invoker,
                                                                 monkeypatch):
    """Packs' files are indexed and folded from their digests (but for the pack of two
    schemas, folded file by file): the same version as from the files."""
    for root in ("packed", "alone"):
        for i in range(24):
            write(tmp_path / root / f"p={i % 3}" / f"m{i:02d}.parquet", mixed(50, seed=i))
        write(tmp_path / root / "p=9" / "tricky.parquet", tricky(40))
    data = sorted(Store(str(tmp_path / "packed")).list_files(), key=lambda f: f.rel_path)
    groups = packs([f.size for f in data], PACK_BYTES, invoker.workers)
    unpacked = sum(len(g) for g in groups if len(g) == 1)
    unfolded = unpacked + sum(len(g) for g in groups if len(g) > 1 and any(
        data[i].rel_path.endswith("tricky.parquet") for i in g))
    reads, folds, lists = [], [], []
    handed = Digests.frequencies
    monkeypatch.setattr(Digests, "frequencies", lambda self, p, f: lists.append(
        (p, handed(self, p, f))) or lists[-1][1])
    statistics, sources = reduce.statistics, fold._sketches_and_histograms
    monkeypatch.setattr(reduce, "statistics", lambda d: reads.append(d) or statistics(d))
    monkeypatch.setattr(fold, "_sketches_and_histograms", lambda d: folds.append(d) or sources(d))
    report = run(tmp_path / "packed", statistics=(PLUGIN,))
    assert report.computed == 25 and (len(reads), len(folds)) == (unpacked, unfolded)
    assert unfolded < 13 and len({p for p, uri in lists if uri}) == 25 - unpacked
    run(tmp_path / "alone", statistics=(PLUGIN,), pack_bytes=0)    # one file a call
    assert (len(reads), len(folds)) == (unpacked + 25, unfolded + 25)
    assert published_files(f"{tmp_path}/packed/_lakestats") == \
        published_files(f"{tmp_path}/alone/_lakestats")
    indexes = [StatisticsReader(f"{tmp_path}/{root}/_lakestats").version_dir().read_parquet(
        INDEX).drop_columns(["etag", "fingerprint"]) for root in ("packed", "alone")]
    assert indexes[0].equals(indexes[1])        # membership's values and Bloom filters too
    scratch = tmp_path / "packed" / "_lakestats" / "exchange"
    assert not scratch.exists() or not any(scratch.iterdir())
