"""A pack's digest (algorithms.partitions.digest) holds what its files' own statistics say,
and the table level reads it instead of them."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa

from lakestats.algorithms.partitions import digest, reduce, step
from lakestats.algorithms.partitions.digest import Digests
from lakestats.algorithms.partitions.driver import packs
from lakestats.core.settings import PACK_BYTES, Settings
from lakestats.fleet.protocol import PARTITION_PACK, PackTask, PartitionTask, StepEvent
from lakestats.metastore import files
from lakestats.metastore.layout import INDEX, Layout
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
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
    table = tmp_path / "t"
    for i in range(3):
        write(table / f"m{i}.parquet", mixed(200, seed=i))
    write(table / "tricky.parquet", tricky(100))
    (table / "bad.parquet").write_bytes(b"not parquet")
    layout = Layout.of_table(str(table))
    data = sorted(Store(str(table)).list_files(), key=lambda f: f.rel_path)
    settings = Settings(partition=Settings().partition.__class__(statistics=(PLUGIN,)))
    p = settings.partition
    digests = Digests(layout.scratch("digests-test"))
    result = step.partition_pack(StepEvent(PARTITION_PACK, "pack", PackTask([PartitionTask(
        str(table), f.rel_path, f.fingerprint, layout.partition(f.rel_path, f.fingerprint).uri,
        p.max_bins, p.bloom_min_distinct, p.statistics, f.reading, p.range_set_size)
        for f in data], digests.name(0))))
    statuses = {r.rel_path: r.status for r in result.results}
    assert statuses.pop("bad.parquet") == "failed" and set(statuses.values()) == {"ok"}
    digests.record(0, [f for f in data if f.rel_path != "bad.parquet"])
    held = digests.read(data)
    assert sorted(held) == ["m0.parquet", "m1.parquet", "m2.parquet", "tricky.parquet"]
    for f in data[1:]:
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
    changed = [f if f.rel_path != "m1.parquet" else type(f)(f.rel_path, f.size, '"other"')
               for f in data]
    assert "m1.parquet" not in digests.read(changed)      # another version of the file
    digests.clear()
    assert not Store(layout.scratch("digests-test").uri).root_exists()


def test_the_table_level_reads_digests_not_each_files_statistics(tmp_path, run, invoker,
                                                                 monkeypatch):
    """Packs' files are indexed from their digests: the same version as from the files."""
    for root in ("packed", "alone"):
        for i in range(24):
            write(tmp_path / root / f"day={i % 3}" / f"m{i:02d}.parquet", mixed(50, seed=i))
        write(tmp_path / root / "day=9" / "tricky.parquet", tricky(40))
    reads = []
    original = reduce.statistics
    monkeypatch.setattr(reduce, "statistics", lambda d: reads.append(d) or original(d))
    report = run(tmp_path / "packed", statistics=(PLUGIN,))
    alone = [g for g in packs([f.size for f in Store(str(tmp_path / "packed")).list_files()],
                              PACK_BYTES, invoker.workers) if len(g) == 1]
    assert report.computed == 25 and len(reads) == len(alone) < 5
    run(tmp_path / "alone", statistics=(PLUGIN,), pack_bytes=0)    # one file a call
    assert len(reads) == len(alone) + 25
    assert published_files(f"{tmp_path}/packed/_lakestats") == \
        published_files(f"{tmp_path}/alone/_lakestats")
    indexes = [StatisticsReader(f"{tmp_path}/{root}/_lakestats").version_dir().read_parquet(
        INDEX).drop_columns(["etag", "fingerprint"]) for root in ("packed", "alone")]
    assert indexes[0].equals(indexes[1])        # membership's values and Bloom filters too
    scratch = tmp_path / "packed" / "_lakestats" / "exchange"
    assert not scratch.exists() or not any(scratch.iterdir())
