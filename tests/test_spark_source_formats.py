"""The `lakestats` Spark data source over table formats: the files Spark's own Parquet reader
reads as the format defines are handed to it, with the partition values they keep outside
themselves and Iceberg's field ids; the others are refused naming the file."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakestats import spark_bridge


def test_table_formats_read_natively_or_refused(spark, tmp_path, invoker, settings):
    """A Delta table's files, its partition values given outside them (a null one too), read by
    Spark's Parquet reader; other writers' tables whose rows that reader would not give as the
    format defines (deletion vectors, column mapping) refused, naming the file and why."""
    from deltalake import DeltaTable, QueryBuilder, write_deltalake

    from tests.test_formats import DELTA_SAMPLES, batch, compute_snapshot, unzipped
    plain, partitioned = tmp_path / "plain", tmp_path / "partitioned"
    write_deltalake(plain, batch(0))
    write_deltalake(plain, batch(1), mode="append")
    first = batch(0)
    first = first.set_column(first.schema.get_field_index("part"), "part",
                             pa.array([0, None, 1] * 40, pa.int32()))
    write_deltalake(partitioned, first, partition_by=["part"])
    for root in (plain, partitioned):
        compute_snapshot(str(root), invoker, settings)
        expected = pa.table(QueryBuilder().register("t", DeltaTable(root))
                            .execute("SELECT * FROM t").read_all())
        got = spark.read.format("lakestats").load(str(root))
        assert sorted(got.columns) == sorted(expected.column_names)
        for column in ("i32", "part", "text"):
            assert sorted(repr(r[0]) for r in got.select(column).collect()) == \
                sorted(repr(v) for v in expected[column].to_pylist()), (root, column)
    frame = spark.read.format("lakestats").load(str(partitioned))
    assert frame.where("part IS NULL").count() == 40
    assert spark_bridge.explain(frame.where("part = 1"))["kept"] == \
        spark_bridge.prune(str(partitioned), where="part = 1").kept
    samples = {"table-with-dv-small": "it has a deletion vector",
               "table_with_column_mapping": "mapped to the table's names"}
    for root in unzipped([DELTA_SAMPLES / f"{name}.zip" for name in samples], tmp_path,
                         "_delta_log/00000000000000000000.json"):
        compute_snapshot(str(root), invoker, settings)
        why = next(w for name, w in samples.items() if name in str(root))
        with pytest.raises(Exception, match=f"{why}.*read the table with spark_bridge.read"):
            spark.read.format("lakestats").load(str(root)).collect()


def test_iceberg_columns_are_matched_by_field_id(spark, tmp_path, invoker, settings):
    """Iceberg's identity partition and a renamed column: Spark's reader matches the files'
    columns by field id, so the old files' `i32` is the table's `renamed`."""
    from tests.test_formats import batch, compute_snapshot, partitioned_iceberg
    catalog, table = partitioned_iceberg(tmp_path, "renames")
    with table.update_schema() as update:
        update.rename_column("i32", "renamed")
    table = catalog.load_table("lake.renames")
    fresh = batch(2).rename_columns(["renamed" if n == "i32" else n for n in batch(2).column_names])
    table.append(fresh)
    root = table.location().removeprefix("file://")
    compute_snapshot(root, invoker, settings)
    expected = table.scan().to_arrow()
    got = spark.read.format("lakestats").load(root)
    assert sorted(got.columns) == sorted(expected.column_names)
    for column in ("renamed", "part", "text"):
        assert sorted(repr(r[0]) for r in got.select(column).collect()) == \
            sorted(repr(v) for v in expected[column].to_pylist()), column
    where = "renamed > 0 AND part = 1"
    assert sorted(spark_bridge.explain(got.where(where))["kept"]) == \
        sorted(spark_bridge.prune(root, where=where).kept)


def test_other_writers_tables_read_as_their_format_reads_them(spark, invoker, settings,
                                                               tmp_path):
    """Every vendored table of delta-rs, hudi-rs and duckdb-iceberg: the source's rows are
    spark_bridge.read's (the format's rows, which test_public_tables checks against each
    format's own library), or the read fails naming one of the table's files; never other
    rows."""
    from pyspark.sql import functions as F

    from lakestats.monostore.compute import compute
    from tests.public_tables import at_its_location, tables_under, unzipped
    data = Path(__file__).resolve().parent / "data"
    zips = [p for folder in ("delta", "hudi", "iceberg") for p in sorted(
        (data / folder).glob("*.zip"))]
    same, refused = [], []
    for k, archive in enumerate(zips):
        for root, fmt in tables_under(unzipped(archive, tmp_path / f"z{k}")):
            with at_its_location(root, fmt):
                compute(str(root), invoker, settings)
                expected = spark_bridge.read(spark, str(root))
                try:
                    got = spark.read.format("lakestats").load(str(root))
                    columns = [F.col(f"`{c}`").cast("string") for c in expected.columns]
                    rows = sorted(repr(tuple(r)) for r in got.select(columns).collect())
                except Exception as e:      # noqa: BLE001 - Spark's and the planner's alike
                    assert str(root) in str(e), (root, str(e)[:2000])
                    refused.append(root.name)
                    continue
                assert rows == sorted(repr(tuple(r)) for r in expected.select(columns).collect()), \
                    root
                same.append(root.name)
    assert "delta-2.2.0-partitioned-types" in same and len(same) >= 10, (same, refused)
