"""value_index.parquet (table level): for each value of the indexed columns, the partitions
holding it and how often, so that "which partitions hold v?" reads one row group of one file.

One row per (column, value), ordered by column (table order), then value bytes, in row groups
of a bounded number of list entries, so a lookup reads the group that its column's and value's
row-group statistics point to:

  column       string         the table column
  value        string         canonical text of the value
  frequency    int64          its rows in the table
  partitions   list<string>   sparse rows: the partitions (data files) holding it, in path
                              order; null for dense rows
  frequencies  list<int64>    sparse rows: its rows in each of `partitions`; dense rows (the
                              value is in most partitions): one count per partition of the
                              version's partition index, in its (path) order, 0 where absent

A version's index may be layered (the manifest's `value_index_layers`), so that a new file
costs its own entries: the full value_index.parquet of an earlier version (the base), then for
each version since, the partitions it removed and value_index_added.parquet, the entries of the
partitions it added (sparse rows only). A lookup reads each layer's row groups of the value,
drops from what the layers before gave the partitions a layer removed, and adds the layer's
own (`lookup`). algorithms.frequencies.value_index decides when to write a layer and when a
full index again (compaction).
"""
from __future__ import annotations

import bisect
import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.metastore.layout import INDEX, VALUE_INDEX, VALUE_INDEX_ADDED, Layout

if TYPE_CHECKING:
    from lakestats.metastore.manifest import Manifest
    from lakestats.metastore.store import Store

SCHEMA = pa.schema([("column", pa.string()), ("value", pa.string()), ("frequency", pa.int64()),
                    ("partitions", pa.list_(pa.string())), ("frequencies", pa.list_(pa.int64()))])
# list entries and rows per row group, at most: a lookup decodes one group, whatever the
# number of partitions (a dense row of a table of P partitions holds P entries)
GROUP_ENTRIES = 1 << 16
GROUP_ROWS = 4_096
ENTRIES = pa.schema([("value", pa.string()), ("path", pa.string()), ("frequency", pa.int64())])


def encode(column: str, entries: pa.Table, paths: pa.Array | None) -> pa.Table:
    """A column's rows from its (value, path, frequency) entries, one per value and partition
    holding it; `paths` are the version's partitions in index order (None: sparse rows only,
    as a layer's are)."""
    if entries.num_rows == 0:
        return SCHEMA.empty_table()
    distinct, order, starts, path = _by_value_and_path(entries)
    holders = np.diff(np.append(starts, len(order)))
    counts = entries["frequency"].to_numpy()[order]
    path_codes = path.indices.to_numpy()[order]
    totals = np.add.reduceat(counts, starts)
    n = 0 if paths is None else len(paths)
    dense = holders * 2 > n if paths is not None else np.zeros(len(starts), bool)
    # sparse rows: their slices of the entries
    sparse_rows = np.flatnonzero(~dense)
    take = np.flatnonzero(np.repeat(~dense, holders))     # their entries, in order
    offsets = np.concatenate([[0], np.cumsum(holders[sparse_rows])]).astype(np.int32)
    sparse = pa.table({
        "column": pa.repeat(pa.scalar(column), sparse_rows.size),
        "value": distinct.take(pa.array(sparse_rows)),
        "frequency": totals[sparse_rows],
        "partitions": pa.ListArray.from_arrays(offsets, path.dictionary.take(
            pa.array(path_codes[take]))),
        "frequencies": pa.ListArray.from_arrays(offsets, pa.array(counts[take]))}, schema=SCHEMA)
    dense_rows = np.flatnonzero(dense)
    if not dense_rows.size:
        return sparse
    ordinal = pc.index_in(path.dictionary, value_set=paths).to_numpy(
        zero_copy_only=False)[path_codes]
    row_of = np.repeat(np.arange(len(starts)), holders)
    mine = dense[row_of]
    grid = np.zeros((dense_rows.size, n), np.int64)
    grid[(np.cumsum(dense) - 1)[row_of[mine]], ordinal[mine]] = counts[mine]
    dense_table = pa.table({
        "column": pa.repeat(pa.scalar(column), dense_rows.size),
        "value": distinct.take(pa.array(dense_rows)),
        "frequency": totals[dense_rows],
        "partitions": pa.nulls(dense_rows.size, pa.list_(pa.string())),
        "frequencies": pa.ListArray.from_arrays(
            pa.array(np.arange(dense_rows.size + 1, dtype=np.int32) * n), pa.array(grid.ravel()))},
        schema=SCHEMA)
    return pa.concat_tables([sparse, dense_table]).take(  # rows back in value order
        np.argsort(np.concatenate([sparse_rows, dense_rows])))


def _by_value_and_path(entries: pa.Table
                       ) -> tuple[pa.Array, np.ndarray, np.ndarray, pa.DictionaryArray]:
    """The distinct values in byte order; the order of the entries by (value, path) bytes;
    where each value's entries start in it; the paths, dictionary-encoded. Text is sorted
    once per distinct value and path, the entries by integer ranks (sorting the entries'
    text was half of a wide table's index)."""
    value = pc.dictionary_encode(entries["value"].combine_chunks())
    path = pc.dictionary_encode(entries["path"].combine_chunks())
    value_order = pc.sort_indices(value.dictionary).to_numpy()
    value_rank = _ranks(value_order)[value.indices.to_numpy()]
    path_rank = _ranks(pc.sort_indices(path.dictionary).to_numpy())[path.indices.to_numpy()]
    order = np.argsort(value_rank * len(path.dictionary) + path_rank)   # pairs are unique
    value_rank = value_rank[order]
    starts = np.flatnonzero(np.append(True, value_rank[1:] != value_rank[:-1]))
    return value.dictionary.take(pa.array(value_order)), order, starts, path


def _ranks(order: np.ndarray) -> np.ndarray:
    """Each item's place in `order` (a permutation)."""
    ranks = np.empty(len(order), np.int64)
    ranks[order] = np.arange(len(order))
    return ranks


def entries(rows: pa.Table, paths: Callable[[], pa.Array]) -> pa.Table:
    """(value, path, frequency) of a column's rows (as `encode` wrote them over `paths()`,
    called only if there are dense rows)."""
    parts = []
    for dense in (False, True):
        chosen = rows.filter(pc.is_null(rows["partitions"]) if dense
                             else pc.is_valid(rows["partitions"]))
        if not chosen.num_rows:
            continue
        lists = chosen["frequencies"].combine_chunks()
        counts = pc.list_flatten(lists).to_numpy()
        parent = pc.list_parent_indices(lists).to_numpy()
        if dense:
            over = paths()
            where = np.arange(len(counts)) % len(over)
            held = counts > 0
            path = over.take(pa.array(where[held]))
            parent, counts = parent[held], counts[held]
        else:
            path = pc.list_flatten(chosen["partitions"].combine_chunks())
        parts.append(pa.table({"value": chosen["value"].combine_chunks().take(pa.array(parent)),
                               "path": path, "frequency": counts}))
    return pa.concat_tables(parts) if parts else ENTRIES.empty_table()


@dataclass(frozen=True)
class Layer:
    """One file of a version's value index: a full index (`full`), or the entries of the
    partitions a version added, after the partitions it `removed` left the layers before."""
    directory: Store
    full: bool
    removed: tuple[str, ...] = ()
    added: int = 0                     # partitions in the file (a full layer: any)

    @property
    def name(self) -> str | None:
        """Its file (None: the version added no partition)."""
        return VALUE_INDEX if self.full else VALUE_INDEX_ADDED if self.added else None

    def exists(self) -> bool:
        return self.name is None or self.directory.exists(self.name)

    @functools.cached_property
    def file(self) -> pq.ParquetFile:
        """Its file, opened once for every column looked up."""
        return self.directory.open_parquet(self.name)

    @functools.cached_property
    def paths(self) -> pa.Array:
        """What a full layer's dense rows count over: its version's partitions, in order."""
        return self.directory.read_parquet(INDEX, columns=["path"])["path"].combine_chunks()


def layers(layout: Layout, manifest: Manifest) -> list[Layer]:
    """The layers of a version's value index, base first."""
    if not manifest.value_index_layers:
        return [Layer(layout.version(manifest.version), True)]
    base, *since = manifest.value_index_layers
    return [Layer(layout.version(base["version"]), True)] + [
        Layer(layout.version(at["version"]), False, tuple(at["removed"]), at["added"])
        for at in since]


def lookup(chain: list[Layer], column: str, values: list[str] | None = None) -> pa.Table:
    """(value, path, frequency) of a column's values (all, or `values`) as the layers give
    them: each layer's file read side by side, then applied in order."""
    def rows(layer: Layer) -> pa.Table:
        if layer.name is None:
            return ENTRIES.empty_table()             # a version that only removed files
        return entries(read(layer.file, column, values), lambda: layer.paths)
    if len(chain) == 1:
        found = [rows(chain[0])]
    else:
        with ThreadPoolExecutor(16) as pool:
            found = list(pool.map(rows, chain))
    out = ENTRIES.empty_table()
    for layer, own in zip(chain, found):
        if layer.removed and out.num_rows:
            gone = pa.array(layer.removed, pa.string())
            out = out.filter(pc.invert(pc.is_in(out["path"], value_set=gone)))
        out = pa.concat_tables([out, own]) if own.num_rows else out
    return out


def write(out: Store, tables: Iterator[pa.Table], name: str = VALUE_INDEX) -> None:
    """The columns' rows, in the order given, in row groups of up to GROUP_ENTRIES list entries
    and GROUP_ROWS rows (the rows of columns with few values share groups)."""
    with out.parquet_writer(name, SCHEMA) as writer:
        pending = SCHEMA.empty_table()
        for table in tables:
            pending = _write_full(writer, pa.concat_tables([pending, table]), final=False)
        _write_full(writer, pending, final=True)


def _write_full(writer: pq.ParquetWriter, table: pa.Table, final: bool) -> pa.Table:
    """Writes the row groups that are full (all, if final); returns the rows left."""
    ends = np.cumsum(pc.list_value_length(table["frequencies"]).to_numpy(zero_copy_only=False))
    start = 0
    while start < table.num_rows:
        before = ends[start - 1] if start else 0
        stop = int(np.searchsorted(ends, before + GROUP_ENTRIES, "right"))
        stop = min(max(stop, start + 1), start + GROUP_ROWS)
        if stop == table.num_rows and not final and ends[-1] - before < GROUP_ENTRIES \
                and stop - start < GROUP_ROWS:
            break                          # not full: waits for the next column's rows
        writer.write_table(table.slice(start, stop - start), row_group_size=GROUP_ROWS)
        start = stop
    return table.slice(start)


def read(parquet: pq.ParquetFile, column: str, values: list[str] | None = None) -> pa.Table:
    """A column's rows (of `values` only, if given), from the row groups that may hold them."""
    meta = parquet.metadata
    wanted = sorted(values) if values is not None else None
    groups = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        name, value = group.column(0).statistics, group.column(1).statistics
        if name is not None and name.has_min_max and not name.min <= column <= name.max:
            continue
        if wanted is not None and value is not None and value.has_min_max:
            first = bisect.bisect_left(wanted, value.min)
            if first == len(wanted) or wanted[first] > value.max:
                continue
        groups.append(g)
    rows = parquet.read_row_groups(groups) if groups else SCHEMA.empty_table()
    keep = pc.equal(rows["column"], column)
    if values is not None:
        keep = pc.and_(keep, pc.is_in(rows["value"], pa.array(values, pa.string())))
    return rows.filter(keep)
