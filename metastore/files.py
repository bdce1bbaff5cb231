"""The three statistics files as Arrow tables: built from the kernel's results, written to and
read from a statistics directory (metastore.layout says which)."""
from __future__ import annotations

import base64
import math
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core import histogram as hist
from core import schema
from core import types as ty
from core.binning import edge_type, edges_array
from metastore.layout import FREQUENCIES

if TYPE_CHECKING:
    from metastore.store import Store

DATA_SCHEMA_KEY = b"lakestats.data_schema"
ROW_COUNT_KEY = b"lakestats.row_count"
# a table's statistics.parquet: one row per column, read a row group at a time
STATISTICS_ROW_GROUP = 64


# -- data schema, kept in statistics.parquet's metadata so tables can reconcile drifted files

def encode_schema(s: pa.Schema) -> str:
    return base64.b64encode(s.remove_metadata().serialize().to_pybytes()).decode()


def decode_schema(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


# -- statistics.parquet

def statistics_table(rows: list[dict], data_schema: pa.Schema, row_count: int) -> pa.Table:
    table = pa.Table.from_pylist(rows, schema=schema.STATISTICS_SCHEMA)
    return table.replace_schema_metadata({DATA_SCHEMA_KEY: encode_schema(data_schema),
                                          ROW_COUNT_KEY: str(row_count)})


def row_count_of(statistics: pa.Table) -> int:
    return int(statistics.schema.metadata[ROW_COUNT_KEY])


def data_schema_of(statistics: pa.Table) -> pa.Schema:
    return decode_schema(statistics.schema.metadata[DATA_SCHEMA_KEY].decode())


# -- frequencies.parquet

def frequencies_table(per_column: list[tuple[str, pa.Table]]) -> pa.Table:
    """A partition's rows of (column, value, frequency): columns in the order given, then
    decreasing frequency, ties in the order the values first appear in the data file, which
    is deterministic and spares sorting text (the table level orders ties by value)."""
    parts = []
    for name, counts in per_column:
        if counts.num_rows == 0:
            continue
        order = np.argsort(-counts["frequency"].to_numpy(), kind="stable")
        counts = counts.take(order)
        parts.append(pa.table({"column": pa.array([name] * counts.num_rows, pa.string()),
                               "value": counts["value"], "frequency": counts["frequency"]},
                              schema=schema.FREQUENCIES_SCHEMA))
    if not parts:
        return schema.FREQUENCIES_SCHEMA.empty_table()
    return pa.concat_tables(parts)


def write_frequencies(out: Store, table: pa.Table) -> None:
    """A row group never holds two columns' values: reading one column's frequencies reads
    its row groups only (picked from the row-group statistics of `column`)."""
    names = table["column"].combine_chunks()
    ends = pc.run_end_encode(names).run_ends.to_numpy() if len(names) else []
    with out.atomic_output(FREQUENCIES) as sink, pq.ParquetWriter(
            sink, schema.FREQUENCIES_SCHEMA, compression="zstd") as writer:
        start = 0
        for end in ends:
            writer.write_table(table.slice(start, end - start), row_group_size=schema.FREQUENCIES_ROW_GROUP)
            start = end


def read_frequencies(store: Store, columns: list[str]) -> pa.Table:
    """(column, value, frequency) rows of `columns`, in file order."""
    parquet = store.open_parquet(FREQUENCIES)
    wanted, groups = set(columns), []
    meta = parquet.metadata
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(0).statistics
        if stats is None or not stats.has_min_max or stats.min in wanted or stats.max in wanted \
                or stats.min != stats.max:
            groups.append(i)
    table = parquet.read_row_groups(groups) if groups else schema.FREQUENCIES_SCHEMA.empty_table()
    return table.filter(pc.is_in(table["column"], pa.array(columns, pa.string())))


# -- histograms.parquet

def histogram_column(h: hist.Histogram, arrow_type: pa.DataType) -> tuple[pa.Field, pa.Array]:
    etype = edge_type(arrow_type)
    lowers, uppers = hist.edges(h)
    counts = list(h.counts)
    if h.neg_inf:
        lowers, uppers, counts = [-math.inf] + lowers, [-math.inf] + uppers, [h.neg_inf] + counts
    if h.pos_inf:
        lowers, uppers, counts = lowers + [math.inf], uppers + [math.inf], counts + [h.pos_inf]
    cell = pa.StructArray.from_arrays(
        [edges_array(lowers, etype), edges_array(uppers, etype), pa.array(counts, pa.int64())],
        names=["lower", "upper", "count"])
    low_key, high_key = schema.HISTOGRAM_RANGE_KEYS
    field = pa.field("", schema.histogram_cell_type(etype), metadata={
        schema.HISTOGRAM_EXPONENT_KEY: str(h.exponent), schema.HISTOGRAM_START_KEY: str(h.start),
        low_key: repr(h.low), high_key: repr(h.high)})
    return field, cell


def histograms_table(columns: list[tuple[str, pa.DataType, hist.Histogram]]) -> pa.Table:
    built = [(name, *histogram_column(h, t)) for name, t, h in columns if h is not None]
    length = max((len(cell) for _, _, cell in built), default=0)
    fields, arrays = [], []
    for name, field, cell in built:
        fields.append(field.with_name(name))
        arrays.append(pa.concat_arrays([cell, pa.nulls(length - len(cell), cell.type)])
                      if len(cell) < length else cell)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def read_histogram(table: pa.Table, name: str) -> hist.Histogram | None:
    if name not in table.column_names:
        return None
    field = table.schema.field(name)
    cells = table[name].combine_chunks().drop_null()
    lower, upper, count = (cells.field(k) for k in ("lower", "upper", "count"))
    float_domain = pa.types.is_floating(lower.type)
    counts = count.to_numpy(zero_copy_only=False).astype(np.int64)
    neg_inf = pos_inf = 0
    if float_domain and len(cells):
        lo = lower.to_numpy(zero_copy_only=False)
        hi = upper.to_numpy(zero_copy_only=False)
        neg = (lo == -np.inf) & (hi == -np.inf)
        pos = (lo == np.inf) & (hi == np.inf)
        neg_inf, pos_inf = int(counts[neg].sum()), int(counts[pos].sum())
        counts = counts[~(neg | pos)]
    meta = field.metadata or {}
    number = float if float_domain else int
    low, high = (None if meta[k] == b"None" else number(meta[k]) for k in schema.HISTOGRAM_RANGE_KEYS)
    return hist.Histogram(int(meta[schema.HISTOGRAM_EXPONENT_KEY]),
                          int(meta[schema.HISTOGRAM_START_KEY]), counts, neg_inf, pos_inf,
                          float_domain, low, high)


def histogram_bins(table: pa.Table, name: str) -> list[dict]:
    """Bins as {lower, upper, count} with canonical text edges (for the CLI and JSON)."""
    cells = table[name].combine_chunks().drop_null()
    lowers = ty.to_text(cells.field("lower")).to_pylist()
    uppers = ty.to_text(cells.field("upper")).to_pylist()
    return [{"lower": lo, "upper": hi, "count": c}
            for lo, hi, c in zip(lowers, uppers, cells.field("count").to_pylist())]


# -- as JSON

def column_statistics(table: pa.Table) -> list[dict]:
    """statistics.parquet rows as JSON-ready dicts (sketches left out; non-finite floats as text)."""
    keep = [n for n in table.column_names if n not in schema.SKETCH_NAMES]
    rows = table.select(keep).to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = ty.scalar_text(pa.scalar(value))
    return rows


def filter_columns(table: pa.Table, columns: list[str] | None) -> pa.Table:
    if not columns:
        return table
    return table.filter(pc.is_in(table["column"], pa.array(columns, pa.string())))
