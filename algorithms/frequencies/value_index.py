"""A new version's value index (metastore.value_index): each value of the indexed columns with
the partitions holding it. A column the previous version indexed starts from that version's
entries, less the removed partitions' and plus the added partitions' frequency lists: the cost
of the change and the column's list. Other columns read every partition's list, a batch of
columns at a time so that memory holds about BATCH_ENTRIES (value, partition) entries."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import schema
from lakestats.core.batching import runs
from lakestats.metastore import files, value_index
from lakestats.metastore.store import Store

BATCH_ENTRIES = 4_000_000
LOW_DISTINCT = "low-distinct"


def columns(wanted: tuple[str, ...], rows: list[dict]) -> list[str]:
    """The columns to index: those named, and with "auto" the low-distinct ones; of the
    columns with frequencies, by name."""
    names = set(wanted) - {"auto", "none"}
    auto = "auto" in wanted
    return sorted(r["column"] for r in rows if r.get("frequency_algorithm")
                  and (r["column"] in names or auto and r["frequency_algorithm"] == LOW_DISTINCT))


def build(out: Store, indexed: list[str], new_index: pa.Table, table: pa.Schema,
          partition_dir: Callable[[str], Store],
          previous: tuple[Store, pa.Array, list[str]] | None,
          added: set[str], removed: set[str]) -> None:
    """value_index.parquet of `indexed` into `out`; `previous` is the previous version's
    directory, partition paths and indexed columns."""
    paths = new_index["path"].combine_chunks()
    carried = set(previous[2]) & set(indexed) if previous else set()
    value_index.write(out, _encoded(indexed, carried, new_index, table, paths, partition_dir,
                                    previous, added, removed))


def _encoded(indexed, carried, new_index, table, paths, partition_dir, previous, added,
             removed) -> Iterator[pa.Table]:
    every = paths.to_pylist()
    old_file = value_index.open_file(previous[0]) if carried else None     # its footer once
    gone_paths = pa.array(sorted(removed), pa.string())
    for batch in _batches(indexed, carried, new_index, table, len(added)):
        wanted = {p: [c for c in batch if c not in carried or p in added] for p in every}
        lists = _frequency_lists(partition_dir, {p: c for p, c in wanted.items() if c})
        for column in batch:
            new = lists.filter(pc.equal(lists["column"], column)).select(
                ["value", "path", "frequency"])
            if column in carried:
                old = value_index.entries(value_index.read(old_file, column), previous[1])
                gone = pc.is_in(old["path"], value_set=gone_paths)
                new = pa.concat_tables([old.filter(pc.invert(gone)), new])
            yield value_index.encode(column, new, paths)


def _batches(indexed: list[str], carried: set[str], new_index: pa.Table, table: pa.Schema,
             added: int) -> Iterator[list[str]]:
    """Columns in runs whose entries to read sum to about BATCH_ENTRIES."""
    def entries(column: str) -> int:
        struct = new_index[schema.index_column_name(table.get_field_index(column))]
        distinct = pc.struct_field(struct.combine_chunks(), "distinct_count")
        held = int(pc.sum(distinct).as_py() or 0)
        # a carried column reads the added partitions' share only, roughly
        return held * added // max(1, new_index.num_rows) if column in carried else held
    return runs(((c, entries(c)) for c in indexed), BATCH_ENTRIES)


def _frequency_lists(partition_dir: Callable[[str], Store], wanted: dict[str, list[str]]
                     ) -> pa.Table:
    """(column, value, frequency, path) of the partitions' lists of the columns wanted of each."""
    def read(item: tuple[str, list[str]]) -> pa.Table:
        path, names = item
        rows = files.read_frequencies(partition_dir(path), names)
        return rows.append_column("path", pa.repeat(pa.scalar(path), rows.num_rows))
    with ThreadPoolExecutor(16) as pool:
        tables = list(pool.map(read, wanted.items()))
    if not tables:
        return schema.FREQUENCIES_SCHEMA.empty_table().append_column(
            "path", pa.array([], pa.string()))
    return pa.concat_tables(tables)
