"""The table's columns as each format defines them, against the format's own reader: Delta's
column mapping, partition values and deletion vectors in tables Spark and Databricks wrote,
Spark's INT96 timestamps, Iceberg's schema evolution by field id and its initial-default,
and data-file paths as each format spells them."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lakestats.formats import FormatError, relative
from lakestats.metastore.layout import Layout
from lakestats.metastore.store import Store
from tests.test_formats import (DELTA_SAMPLES, batch, check_snapshot, compute_snapshot,
                                unzipped)


def test_iceberg_columns_by_field_id_and_initial_default(invoker, settings, tmp_path):
    """Schema evolution as Iceberg defines it, each snapshot against pyiceberg's own read: a
    renamed column keeps its statistics, a dropped one is gone even when a new column takes
    its name, a column added with a default has it in older files' rows, int widens to long,
    float to double and a decimal to more digits: older files' values read as the table's type
    (a float's shortest text as a double is not its float's) and merge with newer ones."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import DecimalType, DoubleType, IntegerType, LongType, StringType
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"file://{tmp_path}")
    catalog.create_namespace("lake")
    first = batch(0).select(["i32", "i64", "text", "day", "f32", "dec9"])
    table = catalog.create_table("lake.evolving", schema=first.schema)
    table.append(first)
    with table.update_schema() as update:
        update.rename_column("i64", "renamed")
        update.delete_column("text")
        update.update_column("i32", LongType())
        update.update_column("f32", DoubleType())
        update.update_column("dec9", DecimalType(12, 2))
    with table.update_schema() as update:
        update.add_column("text", StringType())                    # a new column, old name
        update.add_column("level", IntegerType(), default_value=7)
    table = catalog.load_table("lake.evolving")
    later = batch(1)
    table.append(pa.table({"i32": later["i32"].cast(pa.int64()), "renamed": later["i64"],
                           "day": later["day"], "text": later["text"],
                           "f32": later["f64"], "dec9": later["dec9"].cast(pa.decimal128(12, 2)),
                           "level": pa.array(range(later.num_rows), pa.int32())}))
    table = catalog.load_table("lake.evolving")
    root = table.location().removeprefix("file://")
    compute_snapshot(root, invoker, settings)
    rows = table.scan().to_arrow()
    assert rows["level"].null_count == 0
    assert rows["text"].null_count == first.num_rows + later["text"].null_count
    check_snapshot(Layout.of_table(root).uri, str(table.current_snapshot().snapshot_id), rows,
                   tmp_path)


def test_delta_partition_columns_are_columns(invoker, settings, tmp_path):
    """Partition columns of every type Delta partitions by, nulls among them, get every
    statistic, equal to delta-rs' own read; `where` and `frequencies` answer on them."""
    from deltalake import DeltaTable, QueryBuilder, write_deltalake
    root = tmp_path / "by-everything"
    keys = {"day": pa.array([None, "1970-01-01", "2024-02-29"], pa.string()).cast(pa.date32()),
            "at": pa.array([0, None, -86_400_000_001], pa.timestamp("us", "UTC")),
            "big": pa.array([-2**63, 2**63 - 1, None], pa.int64()),
            # not "": delta-rs 1.6 reads an empty partition value as "" but lists it as null
            "city": pa.array(["Zürich", "東京", None], pa.string()),
            # not negative: delta-rs 1.6 writes -3.25 as the partition value '-3.-25'
            "price": pa.array(["0.10", None, "3.25"], pa.string()).cast(pa.decimal128(9, 2)),
            "flag": pa.array([True, None, False])}
    for k in range(3):
        n = 40 + k
        data = {name: pa.repeat(values[k], n) for name, values in keys.items()}
        write_deltalake(root, pa.table({"v": pa.array(range(n), pa.int64()), **data}),
                        partition_by=list(keys), mode="append")
    compute_snapshot(str(root), invoker, settings)
    rows = pa.table(QueryBuilder().register("t", DeltaTable(root)).execute(
        "SELECT * FROM t").read_all())
    ts = check_snapshot(Layout.of_table(str(root)).uri, "2", rows, tmp_path)
    assert set(keys) < set(ts.schema().names)
    assert ts.partitions_with("city", "Zürich")["frequency_by_partition"] == {
        p["path"]: 40 for p in ts.partitions() if p["partition_values"]["city"] == "Zürich"}
    assert {v["value"]: v["frequency"] for v in ts.frequency_list("big")["values"]} == {
        str(-2**63): 40, str(2**63 - 1): 41}


def test_a_partition_column_read_alone_has_the_files_rows(tmp_path):
    """A column the file does not store, read without any it stores (the kernel's last batch
    of a wide file, a rank's sort), has as many rows as the file, in every row group."""
    from deltalake import write_deltalake

    from lakestats.formats import open_snapshot
    from lakestats.formats.rows import open_rows
    root = tmp_path / "t"
    data = pa.table({"v": pa.array(range(10), pa.int64()),
                     "day": pa.repeat(pa.scalar(1, pa.int32()), 10).cast(pa.date32()),
                     "at": pa.repeat(pa.scalar(0, pa.timestamp("us", "UTC")), 10)})
    write_deltalake(root, data, partition_by=["day"])
    [file] = open_snapshot(str(root)).files
    rows = open_rows(Store(str(root)), file.rel_path, file.reading, whole=False)
    assert rows.read(["day"]).num_rows == 10
    assert sum(t.num_rows for t in rows.row_groups(["day"])) == 10
    assert rows.read(["at", "day"]).schema.field("at").type == pa.timestamp("us", "UTC")


def test_spark_int96_timestamps_in_a_delta_table(invoker, settings, tmp_path):
    """Spark's INT96 timestamps (to the microsecond, UTC-adjusted, no zone in the file) are
    the Delta table's UTC timestamps, 9999-12-31 included (read in nanoseconds, it wraps
    around to 1816, as delta-rs reads it)."""
    import datetime as dt
    [root] = unzipped(sorted((DELTA_SAMPLES / "int96").glob("*.zip")), tmp_path,
                      "_delta_log/00000000000000000000.json")
    compute_snapshot(str(root), invoker, settings)
    utc = dt.timezone.utc
    rows = pa.table({"BIG_DATE": pa.array([dt.datetime(9999, 12, 31, tzinfo=utc),
                                           dt.datetime(9999, 12, 30, tzinfo=utc)],
                                          pa.timestamp("us", "UTC")),
                     "NORMAL_DATE": pa.array([dt.datetime(2022, 1, 1, tzinfo=utc),
                                              dt.datetime(2022, 2, 1, tzinfo=utc)],
                                             pa.timestamp("us", "UTC")),
                     "SOME_VALUE": pa.array([1, 2], pa.int32())})
    ts = check_snapshot(Layout.of_table(str(root)).uri, "0", rows, tmp_path)
    assert ts.schema().field("BIG_DATE").type == pa.timestamp("us", "UTC")


def test_delta_deletion_vectors(invoker, settings, tmp_path):
    """Every version of tables whose deletes are deletion vectors (written by Spark; delta-rs
    cannot write them) against delta-rs' query engine, which applies them."""
    from deltalake import DeltaTable, QueryBuilder
    zips = sorted(DELTA_SAMPLES.glob("*.zip"))
    roots = unzipped(zips, tmp_path, "_delta_log/00000000000000000000.json")
    assert len(roots) == len(zips)
    for root in roots:
        stats_root = Layout.of_table(str(root)).uri
        latest = DeltaTable(root).version()
        for version in range(latest + 1):
            report = compute_snapshot(str(root), invoker, settings, snapshot=str(version))
            assert "inexact" not in report.snapshot
            reader = DeltaTable(root, version=version)
            rows = pa.table(QueryBuilder().register("t", reader).execute(
                "SELECT * FROM t").read_all())
            oracle = tmp_path / f"{root.name}-{version}"
            oracle.mkdir()
            check_snapshot(stats_root, str(version), rows, oracle)


def test_paths_are_literal_in_iceberg_and_uri_encoded_in_delta(tmp_path):
    """Iceberg writes data-file paths literally (a partition on a timestamptz has `%3A` in
    its folder names); Delta writes them URI-encoded (a folder `c%20d` is `c%2520d` in its
    log), whether relative or absolute."""
    table = Store(str(tmp_path))
    folder = "data/ts=1970-01-01T00%3A00%3A00%2B00%3A00/s=a+b/f.parquet"
    for path in (folder, f"file://{tmp_path}/{folder}", f"{tmp_path}/{folder}"):
        assert relative(table, f"file://{tmp_path}", path) == folder
    for path in ("city=c%2520d/f.parquet", f"file://{tmp_path}/city=c%2520d/f.parquet"):
        assert relative(table, str(tmp_path), path, encoded=True) == "city=c%20d/f.parquet"
    with pytest.raises(FormatError, match="outside the table root"):
        relative(table, str(tmp_path), "/elsewhere/f.parquet")


def test_a_directory_column_of_nulls_alone_is_a_string(run, tmp_path):
    """Spark infers NullType for a partition column whose every value is the default
    partition, and reads it as a string: `k = 'a'` is a query (it was typed int32, and the
    plan refused the comparison)."""
    from lakestats.formats.hive import infer
    from lakestats.pruning import prune
    from tests.tables import write
    assert infer(["__HIVE_DEFAULT_PARTITION__", None]) == pa.string()
    assert infer(["__HIVE_DEFAULT_PARTITION__", "7"]) == pa.int32()
    write(tmp_path / "k=__HIVE_DEFAULT_PARTITION__" / "f.parquet", pa.table({"x": [3]}))
    run(tmp_path)
    assert prune(f"{tmp_path}/_lakestats", "k = 'a'").kept == []
    assert prune(f"{tmp_path}/_lakestats", "k IS NULL").kept == [
        "k=__HIVE_DEFAULT_PARTITION__/f.parquet"]


def test_hive_directory_columns_are_typed_columns(run, tmp_path):
    """sale_date=.../year=... directories of a plain table are columns with every statistic,
    typed as Spark infers them over the table (int, date; the default partition is null); a
    value that changes the inferred type recomputes the files; the event path types a new file
    as a compute does, so its statistics are reused."""
    from lakestats.algorithms.partitions.step import statistics_of_object
    from lakestats.core.settings import PartitionSettings
    from lakestats.formats import open_snapshot
    from lakestats.metastore.reader import StatisticsReader
    from tests.oracle import check_everything
    from tests.tables import mixed, run_cli, write
    dirs = ["year=2024/sale_date=2024-03-01", "year=2024/sale_date=2024-03-02",
            "year=2025/sale_date=__HIVE_DEFAULT_PARTITION__"]
    table, written = tmp_path / "t", {}

    def put(d: str, rows: pa.Table) -> None:
        written[d] = rows.select(["qty", "city"])
        write(table / d / "part.parquet", written[d])
    for i, d in enumerate(dirs):
        put(d, mixed(300 + 100 * i, seed=i))

    def expected_rows(year_type: pa.DataType) -> pa.Table:
        parts = []
        for d, rows in written.items():
            year, day = (p.split("=")[1] for p in d.split("/"))
            day = None if day.startswith("__") else day
            parts.append(rows.append_column("year", pa.array([year] * rows.num_rows)
                                            .cast(year_type))
                         .append_column("sale_date", pa.array([day] * rows.num_rows)
                                        .cast(pa.date32())))
        return pa.concat_tables(parts)

    def check(year_type: pa.DataType) -> None:
        ts = StatisticsReader(Layout.of_table(str(table)).uri)
        schema = ts.schema()
        assert (schema.field("year").type, schema.field("sale_date").type) == (
            year_type, pa.date32())
        oracle = tmp_path / f"oracle-{year_type}"
        write(oracle / "rows.parquet", expected_rows(year_type))
        assert check_everything(oracle, ts, ["rows.parquet"], None, schema, finest=False) == 4

    assert run(table).published
    check(pa.int32())
    where = run_cli("where", table, "sale_date", "2024-03-02", "--json")
    assert where.returncode == 0, where.stderr
    assert json.loads(where.stdout)["partitions"] == [f"{dirs[1]}/part.parquet"]
    pruned = run_cli("prune", table, "--where", "sale_date = DATE'2024-03-01' AND year = 2024")
    assert pruned.returncode == 0 and f"{dirs[0]}/part.parquet" in pruned.stdout

    # a file seen alone (an event) is typed as a compute types it
    put("year=2026/sale_date=2024-03-03", mixed(50, seed=7))
    alone = statistics_of_object(str(table), "year=2026/sale_date=2024-03-03/part.parquet",
                                 Layout.of_table(str(table)), PartitionSettings())
    listed = {f.rel_path: f for f in open_snapshot(str(table)).files}
    assert alone.fingerprint == listed["year=2026/sale_date=2024-03-03/part.parquet"].fingerprint
    assert run(table).reused == len(written)

    # a value that is not an integer makes year a string: every file is read again
    put("year=unknown/sale_date=2024-03-04", mixed(70, seed=9))
    assert run(table).computed == len(written)
    check(pa.string())


def test_iceberg_name_mapping_reads_files_without_field_ids(invoker, settings, tmp_path):
    """A file added without field ids (add_files) is matched through the table's name mapping,
    also after its column was renamed (the mapping keeps the old name), as pyiceberg reads it."""
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"file://{tmp_path}")
    catalog.create_namespace("lake")
    first = batch(0).select(["i64", "text"])
    table = catalog.create_table("lake.mapped", schema=first.schema)
    table.append(first)
    root = table.location().removeprefix("file://")
    added = f"{root}/data/added.parquet"      # no field ids
    pq.write_table(batch(1).select(["i64", "text"]), added)
    table.add_files([added])                  # sets the name mapping
    with table.update_schema() as update:
        update.rename_column("i64", "ident")
    table = catalog.load_table("lake.mapped")
    assert "i64" in table.properties["schema.name-mapping.default"]
    rows = table.scan().to_arrow()
    assert rows["ident"].null_count == first["i64"].null_count + batch(1)["i64"].null_count
    compute_snapshot(root, invoker, settings)
    check_snapshot(Layout.of_table(root).uri, str(table.current_snapshot().snapshot_id), rows,
                   tmp_path)
