"""Pruned reads: a DataFrame over only the data files a query can need (pruning.plan).

The predicate, order and limit are applied by Spark as well, so results equal those of the same
query over every file; `df.inputFiles()` lists the files kept. Local tables, and S3 tables when
Spark has the S3A filesystem, are read by Spark itself. Without S3A (a bare local PySpark), S3
files are read through Arrow and handed to Spark: same rows, no input files to list.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from metastore.layout import Layout
from metastore.store import DataFile, Store
from pruning import PruneResult, parse_order
from pruning import prune as prune_files


def prune(table_uri: str, where: str | None = None, limit: int | None = None,
          order_by: str | None = None, *, stats_root: str | None = None) -> PruneResult:
    """kept (in scan order) / skipped / fully_matching data files, relative to the table."""
    return prune_files(Layout.of_table(table_uri, stats_root).uri, where, limit, order_by)


def read(spark, table_uri: str, where: str | None = None, order_by: str | None = None,
         limit: int | None = None, *, stats_root: str | None = None):
    result = prune(table_uri, where, limit, order_by, stats_root=stats_root)
    df = files_frame(spark, table_uri, result.kept)
    if where:
        df = df.where(where)
    if order_by:
        df = df.orderBy(*_order(order_by))
    if limit is not None:
        df = df.limit(limit)
    return df


def files_frame(spark, table_uri: str, kept: list[str], every: bool = False):
    """A DataFrame over some of a table's data files (paths relative to the table); `every`
    when they are all of them: the table's directory is read instead."""
    table = Store(table_uri)
    if table.is_s3 and not _has_s3a(spark):
        return _through_arrow(spark, table, kept)
    uri = table.uri.replace("s3://", "s3a://", 1)
    if every:
        return spark.read.parquet(uri)
    if not kept:
        return _empty(spark, table)
    reader = spark.read.option("basePath", uri)      # Hive directories stay columns
    # past this many paths Spark lists them with a job of one task each; files need none
    threshold = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    saved = spark.conf.get(threshold)
    spark.conf.set(threshold, str(max(int(saved), len(kept) + 1)))
    try:
        return reader.parquet(*[f"{uri}/{p}" for p in kept])
    finally:
        spark.conf.set(threshold, saved)


def _order(order_by: str):
    from pyspark.sql import functions as F
    column, descending = parse_order(order_by)
    return [F.col(column).desc() if descending else F.col(column).asc()]


def _has_s3a(spark) -> bool:
    try:
        spark._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")
        return True
    except Exception:  # noqa: BLE001 - py4j raises its own error for a missing class
        return False


def _through_arrow(spark, table: Store, kept: list[str]):
    parts = []
    for rel in kept:            # Hive directory values become (string) columns, as in Spark
        part = pq.read_table(table.path(rel), filesystem=table.fs)
        for name, value in DataFile(rel, 0, "").partition_values.items():
            part = part.append_column(name, pa.repeat(pa.scalar(value), part.num_rows))
        parts.append(part)
    if not parts:
        return _empty(spark, table)
    return spark.createDataFrame(pa.concat_tables(parts, promote_options="permissive"))


def _empty(spark, table: Store):
    """No file can match: an empty DataFrame with the table's columns."""
    first = next(iter(table.list_files()), None)
    if first is None:
        return spark.createDataFrame([], "value string")
    schema = pq.read_schema(table.fs.open_input_file(table.path(first.rel_path)))
    return spark.createDataFrame(schema.empty_table())
