"""The object store's S3 reads, counted by the proxy in front of moto's server: a small
statistics file is one GET and no HEAD, ranges across the prefetched tail are exact, a
missing object is FileNotFoundError, a small Parquet output stream is one PUT, a
partition's statistics are three PUTs, which know their files' sizes without asking, and a
compute of many files lists their partitions once instead of asking after each."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from lakestats.algorithms.partitions import kernel
from lakestats.core import schema
from lakestats.metastore import files
from lakestats.metastore.layout import FREQUENCIES, HISTOGRAMS, STATISTICS, Layout
from lakestats.metastore.s3 import PART_SIZE, TAIL
from lakestats.metastore.store import DataFile, Store
from tests.tables import mixed, write


@pytest.fixture
def counted(proxied_bucket):
    """A fresh bucket's Store and the proxy's per-method counter, reset before the test."""
    bucket, proxy = proxied_bucket
    proxy.faults.served.clear()
    yield Store(f"s3://{bucket}/t"), proxy.faults.served


def counts(served) -> dict:
    out = dict(served)
    served.clear()
    return out


def test_small_files_are_one_request(counted):
    store, served = counted
    table = pa.table({"a": np.arange(1000), "s": [f"é{i}" for i in range(1000)]})
    store.write_parquet(table, "small.parquet")
    with store.parquet_writer("streamed.parquet", table.schema) as writer:
        writer.write_table(table)
    assert counts(served) == {"PUT": 2}            # no multipart upload for a small stream
    assert store.read_parquet("small.parquet").equals(table)
    assert store.read_parquet("streamed.parquet", columns=["s"]).equals(table.select(["s"]))
    assert counts(served) == {"GET": 2}
    assert store.size("small.parquet") > 0 and store.size("absent") is None
    assert counts(served) == {"HEAD": 2}           # no LIST to tell a directory


def test_a_streamed_file_knows_its_size(counted):
    store, served = counted
    rng = np.random.default_rng(0)
    big = pa.table({"b": [rng.bytes(1024) for _ in range(PART_SIZE // 1024 + 100)]})
    with store.parquet_writer("big.parquet", big.schema, compression="none") as writer:
        writer.write_table(big)
    assert counts(served)["PUT"] >= 2                  # parts of a multipart upload
    assert writer.file_size == store.size("big.parquet") > PART_SIZE


def test_a_partition_is_three_puts_recording_its_files_sizes(counted, tmp_path):
    store, served = counted
    write(tmp_path / "part.parquet", mixed(500, seed=3))
    stats = kernel.compute(Store(str(tmp_path)), "part.parquet")
    out = store.child("partition")
    kernel.write(stats, out)
    assert counts(served) == {"PUT": 3}           # no HEAD for the sizes it records
    recorded = out.read_parquet(STATISTICS).schema.metadata[schema.SIBLING_SIZES_KEY]
    assert json.loads(recorded) == {name: out.size(name) for name in (FREQUENCIES, HISTOGRAMS)}
    assert files.intact(out) is None


def test_ranges_across_the_tail_and_missing_objects(counted):
    store, served = counted
    data = np.random.default_rng(0).bytes(3 * TAIL + 123)
    store.write_bytes(data, "blob")
    store.write_bytes(b"", "empty")
    with store.open_input("blob") as f:
        for start, size in [(0, 10), (len(data) - TAIL - 5, 20), (len(data) - 7, 100),
                            (TAIL, 2 * TAIL), (5, None)]:
            f.seek(start)
            assert f.read(size) == data[start:None if size is None else start + size]
    assert store.read_range(TAIL - 1, 3, "blob") == data[TAIL - 1:TAIL + 2]
    assert store.read_bytes("blob") == data and store.read_bytes("empty") == b""
    with store.open_input("empty") as f:
        assert f.read() == b""
    for read in (lambda: store.read_bytes("absent"), lambda: store.open_input("absent"),
                 lambda: store.read_parquet("absent")):
        with pytest.raises(FileNotFoundError, match="absent"):
            read()


def test_many_changed_files_list_their_partitions_once(counted, tmp_path):
    store, served = counted
    layout = Layout(store.uri_of("_lakestats"))
    changed = [DataFile(f"day={d}/part {i}.parquet", 100 + i, f'"etag{i}"')
               for d in ("2024-01-01", "2024-01-02") for i in range(6)]
    assert files.reusable(layout, changed, published=0) == [False] * 12
    assert counts(served) == {"GET": 1}         # one LIST, not a GET of each file's statistics
    write(tmp_path / "part.parquet", mixed(200, seed=4))
    stats = kernel.compute(Store(str(tmp_path)), "part.parquet")
    for f in changed[:10]:                      # a compute that did not publish left these
        kernel.write(stats, layout.partition(f.rel_path, f.fingerprint))
    counts(served)
    assert files.reusable(layout, changed, published=0) == [True] * 10 + [False] * 2
    assert counts(served) == {"GET": 11}        # the LIST and each statistics.parquet: no HEAD
    cut = layout.partition(changed[0].rel_path, changed[0].fingerprint)
    cut.write_bytes(cut.read_bytes(HISTOGRAMS)[:100], HISTOGRAMS)        # truncated
    assert files.reusable(layout, changed, published=0) == [False] + [True] * 9 + [False] * 2
    assert cut.size(STATISTICS) is None         # what cannot be trusted is gone
    counts(served)
    assert files.reusable(layout, changed[1:2], published=10_000) == [True]
    assert counts(served) == {"GET": 1, "HEAD": 2}    # a few of many: asked after, not listed
