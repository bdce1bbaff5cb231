"""The per-partition kernel: one data file in, three statistics files out.

The file is read column by column and, within a column, row group by row group, so peak memory
stays near one decoded column chunk plus the column's distinct values.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from algorithms.partitions.column_stats import ColumnStats
from core.settings import PartitionSettings
from metastore import files
from metastore.layout import HISTOGRAMS, STATISTICS
from metastore.store import Store


class PartitionError(Exception):
    """The data file itself is bad (not Parquet, truncated, unreadable); retrying will not help."""


@dataclass
class PartitionStats:
    statistics: pa.Table
    frequencies: pa.Table
    histograms: pa.Table
    row_count: int


def compute(table: Store, rel_path: str,
            settings: PartitionSettings = PartitionSettings()) -> PartitionStats:
    # Bad data fails this partition for good (PartitionError); other I/O errors propagate, and
    # the coordinator retries them as it retries any failed invocation.
    try:
        parquet = table.open_parquet(rel_path, whole=True)
        data_schema = parquet.schema_arrow
    except FileNotFoundError as e:
        raise PartitionError(f"{rel_path}: file not found") from e
    except PermissionError as e:
        raise PartitionError(f"{rel_path}: not readable ({e})") from e
    except pa.ArrowInvalid as e:
        raise PartitionError(f"{rel_path}: not a readable Parquet file ({e})") from e
    rows, frequencies, histograms = [], [], []
    for field in data_schema:
        try:
            row, counts, histogram = _column(parquet, field, settings)
        except (pa.ArrowException, ValueError, OverflowError) as e:   # not OSError: retried
            raise PartitionError(f"{rel_path}: column {field.name!r}: {e}") from e
        rows.append(row)
        if counts is not None:
            frequencies.append((field.name, counts))
        if histogram is not None:
            histograms.append((field.name, field.type, histogram))
    row_count = parquet.metadata.num_rows
    return PartitionStats(files.statistics_table(rows, data_schema, row_count),
                          files.frequencies_table(frequencies),
                          files.histograms_table(histograms), row_count)


def _column(parquet, field: pa.Field, settings: PartitionSettings):
    column = ColumnStats(field.name, field.type, settings.max_bins, settings.bloom_min_distinct)
    for group in range(parquet.num_row_groups):
        column.add(parquet.read_row_group(group, columns=[field.name]).column(0).combine_chunks())
    return column.finish()


def write(stats: PartitionStats, out: Store) -> None:
    """statistics.parquet goes last: its presence marks the directory complete."""
    files.write_frequencies(out, stats.frequencies)
    out.write_parquet(stats.histograms, HISTOGRAMS)
    out.write_parquet(stats.statistics, STATISTICS)
