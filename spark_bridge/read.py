"""Pruned reads: a DataFrame over only the data files a query can need (pruning.plan).

The predicate, order and limit are applied by Spark as well, so results equal those of the same
query over every file (Hive directory values typed over every directory, as Spark types them);
`df.inputFiles()` lists the files kept. Local tables, and S3 tables when
Spark has the S3A filesystem, are read by Spark itself. Without S3A (a bare local PySpark), S3
files are read through Arrow and handed to Spark: same rows, no input files to list (the
directory values as text, which Spark types as it would reading the table). So are a table
format's files, with the rows its reader defines (deletes applied).
"""
from __future__ import annotations

import os
import tempfile
from typing import Collection

import pyarrow as pa
import pyarrow.parquet as pq

from lakestats.core import types as ty
from lakestats.formats import FormatError, Snapshot, hive
from lakestats.formats.rows import open_rows
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import DataFile, Store, directory_values
from lakestats.pruning import PruneResult, parse_order
from lakestats.pruning.predicate import quoted
from lakestats.pruning import prune as prune_files


def prune(table_uri: str, where: str | None = None, limit: int | None = None,
          order_by: str | None = None, *, stats_root: str | None = None,
          assume_current: bool = False, time_zone: str | None = None) -> PruneResult:
    """kept (in scan order) / skipped / fully_matching / unknown data files, relative to the
    table. Files newer than the statistics are `unknown`: kept, never skipped, unless
    `assume_current` (pruning.freshness). Timestamps without a zone are read in `time_zone`
    (None: UTC; `read` takes the Spark session's)."""
    return prune_files(Layout.of_table(table_uri, stats_root).uri, where, limit, order_by,
                       table_uri=table_uri, assume_current=assume_current, time_zone=time_zone)


def read(spark, table_uri: str, where: str | None = None, order_by: str | None = None,
         limit: int | None = None, *, stats_root: str | None = None,
         assume_current: bool = False):
    """The table's rows (where, ordered, limited) from only the files the query can need, as
    the table is now: files newer than the statistics are read whole, files gone are not
    read (`assume_current` trusts the statistics instead of listing the table). Timestamps
    without a zone are read in the session's time zone, as Spark reads them."""
    stats = StatisticsReader(Layout.of_table(table_uri, stats_root).uri)
    result = prune_files(stats, where, limit, order_by, table_uri=table_uri,
                         assume_current=assume_current, time_zone=session_time_zone(spark),
                         hive_types=infers_hive_types(spark))
    df = files_frame(spark, table_uri, result.kept,
                     snapshot=result.freshness.snapshot_to_read(),
                     listed=result.freshness.files())
    if where:
        df = df.where(where)
    if order_by:
        df = df.orderBy(*_order(order_by))
    if limit is not None:
        df = df.limit(limit)
    return df


def files_frame(spark, table_uri: str, kept: list[str], every: bool = False,
                snapshot: Snapshot | None = None, listed: Collection[str] | None = None):
    """A DataFrame over some of a table's data files (paths relative to the table); `every`
    when they are all of them: the table's directory is read instead. The files of a table
    format's `snapshot` hold the rows its reader defines: they are read through Arrow with
    their deletes applied (formats.rows), their partition values added. `listed`: a plain
    directory's file paths (pruning.freshness.Freshness.files), over which a read through
    Arrow has Spark type the Hive values as it types them over the whole table (else over
    the files read)."""
    table = Store(table_uri)
    if snapshot is not None:
        for rel in sorted(set(kept) & set(snapshot.inexact)):
            raise FormatError(f"{table.uri}: {rel}: {snapshot.inexact[rel]}: its rows cannot "
                              "be read exactly here (read the table with the format's Spark "
                              "connector)")
        files = {f.rel_path: f for f in snapshot.files}
        return _through_arrow(spark, table, [files[rel] for rel in kept], snapshot.schema,
                              next(iter(snapshot.files), None))
    if table.is_s3 and not has_s3a(spark):      # directory values as text, typed by Spark
        frame = _through_arrow(spark, table, [DataFile(rel, 0, "") for rel in kept],
                               first=DataFile(next(iter(listed)), 0, "") if listed else None)
        return _typed_as_spark(spark, frame, {rel.rpartition("/")[0]
                                              for rel in (listed or kept)})
    uri = spark_uri(table)
    if every:
        return spark.read.parquet(uri)
    reader = spark.read.option("basePath", uri)      # Hive directories stay columns
    if not kept or any("=" in rel.rpartition("/")[0] for rel in kept):
        # Spark types directory values over the directories it lists: over the kept files
        # alone, p=05 would be 5, not the whole table's '05'. Its columns are the table's.
        whole = _whole_schema(spark, uri)
        if whole is None:
            return _empty(spark, table)
        if not kept:
            return spark.createDataFrame([], whole)
        reader = reader.schema(whole)
    # past this many paths Spark lists them with a job of one task each; files need none
    threshold = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    saved = spark.conf.get(threshold)
    spark.conf.set(threshold, str(max(int(saved), len(kept) + 1)))
    try:
        return reader.parquet(*[f"{uri}/{p}" for p in kept])
    finally:
        spark.conf.set(threshold, saved)


def spark_uri(table: Store) -> str:
    """The table as Spark's filesystems name it (S3 through S3A)."""
    return table.uri.replace("s3://", "s3a://", 1) if table.is_s3 else f"file:{table.root}"


def session_time_zone(spark) -> str:
    return spark.conf.get("spark.sql.session.timeZone")


def infers_hive_types(spark) -> bool:
    """Whether the session types Hive directory values as numbers, dates and timestamps
    (else every one is text)."""
    return spark.conf.get("spark.sql.sources.partitionColumnTypeInference.enabled",
                          "true").lower() != "false"


def _order(order_by: str):
    from pyspark.sql import functions as F
    column, descending = parse_order(order_by)
    ordered = F.col(quoted(column))         # a dot in the name is no path
    return [ordered.desc() if descending else ordered.asc()]


def _whole_schema(spark, uri: str):
    """The table's schema as Spark reads the whole directory (None: no file to read it from)."""
    from pyspark.errors import AnalysisException
    try:
        return spark.read.parquet(uri).schema
    except AnalysisException:      # UNABLE_TO_INFER_SCHEMA: no data file
        return None


def has_s3a(spark) -> bool:
    try:
        spark._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")
        return True
    except Exception:  # noqa: BLE001 - py4j raises its own error for a missing class
        return False


def _through_arrow(spark, table: Store, kept: list[DataFile],
                   schema: pa.Schema | None = None, first: DataFile | None = None):
    """`schema`: the table's, when the format says (formats.Snapshot.schema); `first`: the
    file whose columns an empty frame takes otherwise (else the first one listed)."""
    columns = None if schema is None else schema.names
    parts = []
    for file in kept:
        rows = open_rows(table, file.rel_path, file.reading).read()
        parts.append(_as_table(rows, file, columns))
    if not parts:
        return _frame(spark, schema.empty_table()) if schema is not None \
            else _empty(spark, table, first)
    return _frame(spark, pa.concat_tables(parts, promote_options="permissive"))


def _typed_as_spark(spark, frame, directories: set[str]):
    """The frame's Hive directory columns (text) as Spark types them reading the table: Spark
    infers their types over a local copy of the table's directories, an empty file in each,
    with the session's own rules (inference on or off, timestamps in its time zone, its
    timestamp type), and casts the text as its inference does."""
    from pyspark.sql import functions as F
    names = {k for d in directories for k, _ in directory_values(d)}
    if not names:
        return frame
    with tempfile.TemporaryDirectory() as copy:
        for directory in directories:
            os.makedirs(os.path.join(copy, directory), exist_ok=True)
            pq.write_table(pa.table({"_": pa.array([], pa.int8())}),
                           os.path.join(copy, directory, "empty.parquet"))
        types = {f.name: f.dataType for f in spark.read.parquet(f"file:{copy}").schema
                 if f.name in names}
    for name, spark_type in types.items():         # in place; a dot in a name is no path
        frame = frame.withColumn(name, F.col(quoted(name)).cast(spark_type))
    return frame


def _frame(spark, rows: pa.Table):
    """A DataFrame of Arrow rows; types Spark cannot take (views, dictionaries, float16)
    made plain."""
    return spark.createDataFrame(rows.cast(pa.schema(
        [f.with_type(ty.value_type(f.type)) for f in rows.schema])))


def _as_table(rows: pa.Table, file: DataFile, columns: list[str] | None) -> pa.Table:
    """A file's rows with the partition values it does not hold as (string) columns, as in
    Spark, and only the table's columns."""
    for name, value in file.partition_values.items():
        if name not in rows.column_names:
            rows = rows.append_column(name, pa.repeat(pa.scalar(
                None if value == hive.DEFAULT_PARTITION else value, pa.string()), rows.num_rows))
    if columns is None:
        return rows
    held = set(rows.column_names)          # once: a wide file's names, not once a column
    return rows.select([c for c in columns if c in held])


def _empty(spark, table: Store, first: DataFile | None = None):
    """No file can match: an empty DataFrame with the table's columns (those of `first`, a
    listed file, its Hive values typed over the table; else of the first file listed now)."""
    first = first or next(iter(hive.listed(table.list_entries())), None)
    if first is None:
        return spark.createDataFrame([], "value string")
    schema = open_rows(table, first.rel_path, first.reading).schema
    return _frame(spark, _as_table(schema.empty_table(), first, None))
