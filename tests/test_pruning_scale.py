"""A plan over thousands of partitions reads one file, the version's partition index, plus the
Bloom filters of only the partitions its ranges keep; never a partition's own statistics (three
index batches here; benchmarks/bench_planning_freshness.py times plans at 10,000)."""
from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from lakestats.metastore.store import Store
from lakestats.monostore.compute import INDEX_BATCH
from lakestats.pruning import prune
from tests.tables import write

pytestmark = pytest.mark.slow

FILES, ROWS = 3_000, 100


@pytest.fixture(scope="module")
def table(tmp_path_factory, run):
    """File i: keys i, i + FILES, ... (every file's range spans nearly all keys, so only Bloom
    filters can tell the files apart) and one day, i // 100 days after 2024-01-01."""
    root = tmp_path_factory.mktemp("thousands")
    start = dt.date(2024, 1, 1)
    for i in range(FILES):
        write(root / f"part-{i:05d}.parquet", pa.table({
            "key": pa.array(i + FILES * np.arange(ROWS), pa.int64()),
            "day": pa.array([start + dt.timedelta(days=i // 100)] * ROWS, pa.date32())}))
    report = run(root)
    assert report.computed == FILES and report.published
    return root


@pytest.fixture
def reads(monkeypatch):
    """Every object a Store opens, by path."""
    seen: Counter[str] = Counter()
    for method in ("read_parquet", "open_parquet", "read_bytes", "read_range"):
        original = getattr(Store, method)

        def counted(self, *args, _original=original, _method=method, **kwargs):
            parts = args[2:] if _method == "read_range" else args
            seen[self.path(*parts)] += 1
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(Store, method, counted)
    return seen


def partition_reads(reads: Counter) -> list[str]:
    return [p for p in reads if "/partitions/" in p]


def test_a_key_lookup_reads_the_index_once_and_only_kept_blooms(table, reads):
    key = 7 * FILES + 1_321                              # only file 1321 holds it
    result = prune(f"{table}/_lakestats", f"key = {key}")
    assert "part-01321.parquet" in result.kept
    assert len(result.kept) < FILES // 20               # the Bloom filters pruned (1% errors)
    index_reads = [p for p in reads if p.endswith("/partitions.parquet")]
    assert [reads[p] for p in index_reads] == [1]
    assert partition_reads(reads) == []
    # filters are packed column by column within each batch the coordinator indexes at once
    assert sum(n for p, n in reads.items() if p.endswith("/blooms.bin")) <= FILES // INDEX_BATCH


def test_a_date_range_reads_no_bloom_filter(table, reads):
    result = prune(f"{table}/_lakestats", "day BETWEEN DATE '2024-01-11' AND DATE '2024-01-12'")
    first = (dt.date(2024, 1, 11) - dt.date(2024, 1, 1)).days * 100
    assert result.kept == [f"part-{i:05d}.parquet" for i in range(first, first + 200)]
    assert sorted(result.fully_matching) == result.kept
    assert [p for p in reads if p.endswith("/blooms.bin")] == []
    assert partition_reads(reads) == []
    assert sum(n for p, n in reads.items() if p.endswith("/partitions.parquet")) == 1
