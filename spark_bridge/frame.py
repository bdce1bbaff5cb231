"""Statistics as data: a table's statistics, per table and per partition, as a Spark DataFrame."""
from __future__ import annotations

import pyarrow as pa

from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsReader


def statistics_frame(spark, table_uri: str, *, stats_root: str | None = None):
    """One row per (level, partition, column): level 'table' (partition null) or 'partition'
    (partition = the data file's path relative to the table), then the statistics.parquet
    columns without the sketches."""
    stats = StatisticsReader(Layout.of_table(table_uri, stats_root).uri)
    parts = [_tagged(stats.statistics(sketches=False), "table", None)]
    for path in (p["path"] for p in stats.partitions()):
        parts.append(_tagged(stats.statistics(partition=path, sketches=False), "partition", path))
    # files written before a user-defined statistic existed lack its column
    return spark.createDataFrame(pa.concat_tables(parts, promote_options="permissive")
                                 .replace_schema_metadata(None))


def _tagged(table: pa.Table, level: str, partition: str | None) -> pa.Table:
    n = table.num_rows
    table = table.replace_schema_metadata(None)
    return table.add_column(0, "partition", pa.array([partition] * n, pa.string())) \
                .add_column(0, "level", pa.array([level] * n, pa.string()))
