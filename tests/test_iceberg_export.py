"""lakestats export iceberg and compute --export iceberg: a Puffin statistics file and a
partition statistics file committed for the snapshot the statistics describe, read back
through pyiceberg; the theta sketches deserialize with DataSketches and estimate the exact
distinct counts within their error bounds, `ndv` is the exact count, and a new snapshot
gets its own files."""
from __future__ import annotations

import json
from pathlib import Path

import datasketches as ds
import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakestats.core import theta
from lakestats.formats import Selection
from lakestats.formats.iceberg_export import FOLLOWED, Exported, follow, unfollow
from lakestats.metastore.store import Store
from tests.tables import run_cli
from tests.test_formats import batch, partitioned_iceberg


@pytest.fixture
def lake(tmp_path):
    catalog, table = partitioned_iceberg(tmp_path, "exported")
    flags = ["--catalog", f"sqlite:///{tmp_path}/catalog.db", "--table-name", "lake.exported",
             "--catalog-name", "test"]
    return catalog, table.location().removeprefix("file://"), flags


def check_export(table, out: dict) -> None:
    """The current snapshot's statistics files, against pyiceberg's read of the table."""
    from pyiceberg.table.puffin import PuffinFile
    snapshot = table.current_snapshot()
    assert out["snapshot"] == str(snapshot.snapshot_id)
    [stats] = [s for s in table.metadata.statistics if s.snapshot_id == snapshot.snapshot_id]
    assert stats.statistics_path == out["statistics_path"]
    rows = table.scan().to_arrow()
    with table.io.new_input(stats.statistics_path).open() as f:
        puffin = PuffinFile(f.read())
    schema = table.schema()
    primitive = [f for f in schema.fields if f.field_type.is_primitive]
    assert len(puffin.footer.blobs) == len(primitive) == out["blobs"]
    for blob in puffin.footer.blobs:
        assert blob.type == "apache-datasketches-theta-v1" and blob.snapshot_id == \
            snapshot.snapshot_id
        [field_id] = blob.fields
        name = schema.find_column_name(field_id)
        # as Spark counts: NaN once, -0.0 equal to 0.0 (DuckDB's semantics, the oracle's)
        exact = duckdb.sql(f'SELECT count(DISTINCT "{name}") FROM rows').fetchall()[0][0]
        assert int(blob.properties["ndv"]) == exact, name
        sketch = ds.compact_theta_sketch.deserialize(puffin.get_blob_payload(blob),
                                                     seed=theta.SEED)
        assert sketch.get_lower_bound(3) <= exact <= sketch.get_upper_bound(3), name
        if exact <= theta.K:                   # exact mode: the very distinct values
            assert sketch.get_estimate() == exact, name
    # the partition statistics: one row per partition, the rows pyiceberg reads of it
    [part] = [s for s in table.metadata.partition_statistics
              if s.snapshot_id == snapshot.snapshot_id]
    assert part.statistics_path == out["partition_statistics_path"]
    with table.io.new_input(part.statistics_path).open() as f:
        partitions = pq.read_table(pa.BufferReader(f.read()))
    counts = dict(zip(*pc.value_counts(rows["part"]).flatten()))
    by_part = {r["partition"]["part"]: r["total_record_count"] for r in partitions.to_pylist()}
    assert {k.as_py(): v.as_py() for k, v in counts.items()} == by_part
    assert partitions.schema.field("data_record_count").metadata[b"PARQUET:field_id"] == b"3"


def test_compute_export_iceberg_and_a_new_snapshot(lake, tmp_path):
    catalog, root, flags = lake
    done = run_cli("compute", root, *flags, "--export", "iceberg", "--json")
    assert done.returncode == 0, done.stderr
    check_export(catalog.load_table("lake.exported"), json.loads(done.stdout)["export"])
    first = catalog.load_table("lake.exported").current_snapshot().snapshot_id

    catalog.load_table("lake.exported").append(batch(5, n=5000))   # beyond K distinct values
    done = run_cli("compute", root, *flags, "--export", "iceberg", "--json")
    assert done.returncode == 0, done.stderr
    table = catalog.load_table("lake.exported")
    check_export(table, json.loads(done.stdout)["export"])
    # the earlier snapshot keeps its own file; the new one has another
    assert {s.snapshot_id for s in table.metadata.statistics} == {
        first, table.current_snapshot().snapshot_id}

    again = run_cli("export", "iceberg", root, *flags, "--json", "--no-follow")
    assert again.returncode == 0, again.stderr
    out = json.loads(again.stdout)
    check_export(catalog.load_table("lake.exported"), out)
    followed = Path(root, "_lakestats", *FOLLOWED)
    assert not out["followed"] and not followed.exists()
    assert json.loads(done.stdout)["export"]["followed"]


def test_a_catalog_password_is_never_remembered(tmp_path):
    exported = Exported("1", "s", "p", 0, "v")
    root = Store(str(tmp_path))
    assert follow(root, Selection("iceberg", catalog="sqlite:///c.db", table_name="a.b"),
                  exported)
    assert json.loads(root.read_bytes(*FOLLOWED))["catalog"] == "sqlite:///c.db"
    unfollow(root)
    assert not follow(root, Selection("iceberg", catalog="postgresql://u:secret@h/db",
                                      table_name="a.b"), exported)
    assert not root.exists(*FOLLOWED)


def test_export_refuses_what_it_cannot_do(lake, tmp_path):
    _, root, flags = lake
    missing = run_cli("export", "iceberg", root, *flags)
    assert missing.returncode != 0 and "statistics" in missing.stderr.lower()
    assert run_cli("compute", root, "--quiet").returncode == 0
    no_catalog = run_cli("export", "iceberg", root)
    assert no_catalog.returncode == 1 and "--catalog" in no_catalog.stderr
    alone = run_cli("compute", root, "--no-follow")
    assert alone.returncode == 2 and "--export" in alone.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"x": [1]}), plain / "a.parquet")
    assert run_cli("compute", str(plain), "--quiet").returncode == 0
    wrong = run_cli("export", "iceberg", str(plain), *flags)
    assert wrong.returncode == 1 and "parquet table" in wrong.stderr
