"""The per-partition kernel: one data file in, three statistics files out.

The file is read in batches of columns (one column, unless the columns are small) and, within a
batch, row group by row group, so peak memory stays near READ_BATCH_BYTES or one decoded column
chunk, plus the batch's distinct values and the values not counted yet (at most
column_stats.UNCOUNTED_BYTES of a column: they are counted at once, not a row group at a time).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from lakestats.algorithms.partitions.column_stats import ColumnStats
from lakestats.core import udf
from lakestats.core.batching import runs
from lakestats.core.histogram import Histogram
from lakestats.core.errors import DataCorrupt
from lakestats.core.settings import PartitionSettings
from lakestats.formats import FormatError
from lakestats.formats.rows import Rows, open_rows
from lakestats.metastore import files, histograms
from lakestats.metastore.layout import FREQUENCIES, HISTOGRAMS
from lakestats.metastore.store import Store


# decoded bytes of the columns read together (Parquet's uncompressed sizes, whole file)
READ_BATCH_BYTES = 64 << 20


class PartitionError(DataCorrupt):
    """The data file itself is bad (not Parquet, truncated, unreadable); retrying will not help."""


@dataclass
class PartitionStats:
    statistics: pa.Table
    frequencies: pa.Table
    histograms: pa.Table
    row_count: int
    binned: dict[str, Histogram]        # the histograms as built (a fold takes them)


def compute(table: Store, rel_path: str, settings: PartitionSettings = PartitionSettings(),
            reading: tuple[str, ...] = ()) -> PartitionStats:
    """`reading`: how a table format's file is read (formats.rows), e.g. with its deletes."""
    # Bad data fails this partition for good (PartitionError); other I/O errors propagate, and
    # the coordinator retries them as it retries any failed invocation.
    try:
        data = open_rows(table, rel_path, reading)
        data_schema = data.schema
    except FileNotFoundError as e:
        raise PartitionError(f"{rel_path}: file not found") from e
    except PermissionError as e:
        raise PartitionError(f"{rel_path}: not readable ({e})") from e
    except pa.ArrowInvalid as e:
        raise PartitionError(f"{rel_path}: not a readable Parquet file ({e})") from e
    except FormatError as e:
        raise PartitionError(f"{rel_path}: {e}") from e
    statistics = udf.load(settings.statistics)
    rows, frequencies, binned, failed = [], [], [], {}
    for batch in _column_batches(data):
        fields = [data_schema.field(k) for k in batch]
        for field, (row, counts, histogram, errors) in _columns(data, fields, settings,
                                                                 statistics, rel_path):
            rows.append(row)
            for name, error in errors.items():
                failed.setdefault(name, {})[field.name] = error
            if counts is not None:
                frequencies.append((field.name, counts))
            if histogram is not None:
                binned.append((field.name, field.type, histogram))
    return PartitionStats(files.statistics_table(rows, data_schema, data.num_rows, statistics,
                                                 failed),
                          files.frequencies_table(frequencies),
                          histograms.histograms_table(binned), data.num_rows,
                          {name: h for name, _, h in binned if h is not None})


def _column_batches(data: Rows) -> Iterator[list[int]]:
    """The top-level columns in runs decoding to about READ_BATCH_BYTES in the whole file (a
    batch's value counts are held together): a wide file costs a few reads per row group, not
    one per column; a column larger than that is read alone, as before. A column the file
    does not store (formats.rows: a partition value) costs nothing."""
    meta = data.parquet.metadata
    unknown = len(data.schema)
    top = {stored: k for k, name in enumerate(data.schema.names)
           if (stored := data.stored_name(name)) is not None}
    leaf_top = [_top_level(meta.schema.column(j).path, top, unknown)
                for j in range(meta.num_columns)]
    sizes = np.zeros(unknown + 1, np.int64)           # the last: leaves of no known column
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        np.add.at(sizes, leaf_top, [group.column(j).total_uncompressed_size
                                    for j in range(meta.num_columns)])
    yield from runs(enumerate(sizes[:-1].tolist()), READ_BATCH_BYTES)


def _top_level(path: str, top: dict[str, int], unknown: int) -> int:
    """The top-level column of a leaf's dotted path (names may hold dots themselves)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in top:
            return top[".".join(parts[:i])]
    return unknown


def _columns(data: Rows, fields: list[pa.Field], settings: PartitionSettings,
             statistics: list[udf.Statistic], rel_path: str
             ) -> Iterator[tuple[pa.Field, tuple]]:
    """Each of the fields with its statistics row, value counts, histogram and the errors
    of user-defined statistics."""
    stats = [ColumnStats(f.name, f.type, settings.max_bins, settings.bloom_min_distinct,
                         statistics, settings.range_set_size) for f in fields]
    field = None
    try:        # not OSError: retried
        for table in data.row_groups([f.name for f in fields]):
            for field, column, chunk in zip(fields, stats, table.columns):
                column.add(chunk.combine_chunks())
            field = None               # a read error names no column unless one is read alone
        for field, column in zip(fields, stats):
            yield field, (*column.finish(), column.plugins.errors)
    except (pa.ArrowException, ValueError, OverflowError) as e:
        if field is None and len(fields) > 1:       # read alone, a bad column names itself
            for f in fields:
                yield from _columns(data, [f], settings, statistics, rel_path)
            return
        where = f"column {field.name!r}" if field else f"column {fields[0].name!r}"
        raise PartitionError(f"{rel_path}: {where}: {e}") from e


def write(stats: PartitionStats, out: Store) -> pa.Table:
    """statistics.parquet goes last: its presence marks the directory complete, and it
    records the other files' sizes (files.intact checks them). Returns it as written."""
    sizes = {FREQUENCIES: files.write_frequencies(out, stats.frequencies),
             HISTOGRAMS: histograms.write(out, stats.histograms, ranged=False)}
    statistics = files.with_sibling_sizes(stats.statistics, sizes)
    files.write_statistics(out, statistics)
    return statistics
