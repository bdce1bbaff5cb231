"""A new version's value index (metastore.value_index): each value of the indexed columns with
the partitions holding it.

A version that indexes the columns its previous version indexed writes a layer: the entries of
the partitions it added, and the names of those it removed. That is the cost of the change,
whatever the table's size. Every LAYERS_MAX layers (or REMOVED_MAX removed partitions, which
the manifest lists), under --exact (the quiet refold), or when the indexed columns change, the
index is written whole again: a column the previous version indexed starts from its entries
(the layers applied), less the removed partitions' and plus the added ones'; other columns
take every partition's entries. A partition's entries come from the partition index where it
keeps the column's values (a column with few in the partition: metastore.membership), else
from the partition's frequency list. Columns are read a batch at a time, so that memory holds
about BATCH_ENTRIES (value, partition) entries.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import schema
from lakestats.core.batching import runs
from lakestats.metastore import files, index, value_index
from lakestats.metastore.layout import VALUE_INDEX_ADDED, Layout
from lakestats.metastore.manifest import Manifest
from lakestats.metastore.store import Store

BATCH_ENTRIES = 4_000_000
LOW_DISTINCT = "low-distinct"
# A lookup reads one file per layer (side by side); a new file costs its own entries, and once
# per LAYERS_MAX versions the whole index is written again, which costs about as much as two
# layered versions' every other step (benchmarks/bench_latency.py: 20 single-file versions,
# 0.5 s of table-level work each, 2.2 s the whole index of 1.2 million entries)
LAYERS_MAX = 16
REMOVED_MAX = 1_000


def columns(wanted: tuple[str, ...], rows: list[dict]) -> list[str]:
    """The columns to index: those named, and with "auto" the low-distinct ones; of the
    columns with frequencies, by name."""
    names = set(wanted) - {"auto", "none"}
    auto = "auto" in wanted
    return sorted(r["column"] for r in rows if r.get("frequency_algorithm")
                  and (r["column"] in names or auto and r["frequency_algorithm"] == LOW_DISTINCT))


def build(out: Store, version: str, indexed: list[str], new_index: pa.Table, table: pa.Schema,
          partition_dir: Callable[[str], Store], previous: tuple[Layout, Manifest] | None,
          added: set[str], removed: set[str], whole: bool = False) -> list[dict]:
    """The value index of `indexed` into `out`, as a layer over the previous version's when
    it may be (unless `whole`); returns the version's value_index_layers ([]: whole)."""
    layout, before = previous if previous else (None, None)
    if before and not whole and before.value_index == indexed:
        chain = before.value_index_layers or [{"version": before.version}]
        if len(chain) <= LAYERS_MAX and \
                len(removed) + sum(len(at.get("removed", ())) for at in chain) <= REMOVED_MAX:
            _check(value_index.layers(layout, before))
            if added:
                value_index.write(out, _encoded(indexed, new_index, table, partition_dir,
                                                sorted(added), None, None), VALUE_INDEX_ADDED)
            return chain + [{"version": version, "removed": sorted(removed), "added": len(added)}]
    carried = set(before.value_index) & set(indexed) if before else set()
    old = None
    if carried:
        chain = value_index.layers(layout, before)
        gone = pa.array(sorted(removed), pa.string())

        def old(column: str) -> pa.Table | None:
            """The previous version's entries of a carried column, the removed ones' out."""
            if column not in carried:
                return None
            kept = value_index.lookup(chain, column)
            return kept.filter(pc.invert(pc.is_in(kept["path"], value_set=gone)))
    paths = new_index["path"].combine_chunks()
    value_index.write(out, _encoded(indexed, new_index, table, partition_dir,
                                    paths.to_pylist(), old, paths, carried, added))
    return []


def _check(chain: list[value_index.Layer]) -> None:
    """The previous version's layers are all there: a new layer over a lost one would publish
    an index that fails every lookup (FileNotFoundError: the compute starts anew)."""
    with ThreadPoolExecutor(16) as pool:
        for layer, there in zip(chain, pool.map(value_index.Layer.exists, chain)):
            if not there:
                raise FileNotFoundError(f"{layer.directory.uri}/{layer.name}: a layer of the "
                                        "previous version's value index is gone")


def _encoded(indexed: list[str], new_index: pa.Table, table: pa.Schema,
             partition_dir: Callable[[str], Store], read_from: list[str],
             old: Callable[[str], pa.Table | None] | None, paths: pa.Array | None,
             carried: set[str] = frozenset(), added: set[str] = frozenset()
             ) -> Iterator[pa.Table]:
    """Each column's rows over `paths` (None: sparse only): its entries in the partitions
    `read_from` (of a `carried` column, the `added` ones only) and `old(column)`."""
    share = len(read_from) / max(1, new_index.num_rows)
    path = new_index["path"].combine_chunks()
    row_of = {p: i for i, p in enumerate(path.to_pylist())}
    retyped = index.retyped_types(index.schemas(new_index), table)
    asked = {False: pc.is_in(path, value_set=pa.array(read_from, pa.string())),
             True: pc.is_in(path, value_set=pa.array(sorted(added), pa.string()))}
    for batch in _batches(indexed, carried, new_index, table, len(added), share):
        held = {c: _in_index(new_index, path, table, c, asked[c in carried]) for c in batch}
        wanted = {p: [c for c in batch if (c not in carried or p in added)
                      and not held[c][1][row_of[p]]] for p in read_from}
        lists = _frequency_lists(partition_dir, {p: c for p, c in wanted.items() if c},
                                 retyped)
        for column in batch:
            kept = old(column) if old else None
            yield value_index.encode(column, pa.concat_tables(
                [t for t in (kept, held[column][0], lists.get(column)) if t is not None]), paths)


def _in_index(new_index: pa.Table, path: pa.Array, table: pa.Schema, column: str,
              asked: pa.Array) -> tuple[pa.Table, np.ndarray]:
    """The column's (value, path, frequency) entries that the partition index already holds,
    of the partitions `asked` (a mask over its rows, whose paths are `path`), and which rows
    they cover: those whose values it keeps (a column with few of them:
    metastore.membership) and those without values. Only the others' frequencies.parquet is
    read (at 10,000 small files, 10,000 reads fewer a column)."""
    struct = new_index[schema.index_column_name(table.get_field_index(column))].combine_chunks()
    lists = pc.struct_field(struct, "values")
    kept = pc.and_(asked, pc.and_(struct.is_valid(), lists.is_valid()))
    distinct = pc.fill_null(pc.struct_field(struct, "distinct_count"), -1)
    none = pc.and_(asked, pc.or_(pc.invert(struct.is_valid()), pc.equal(distinct, 0)))
    chosen = lists.filter(kept)
    flat = pc.list_flatten(chosen)
    entries = pa.table({"value": flat.field("value"),
                        "path": path.filter(kept).take(pc.list_parent_indices(chosen)),
                        "frequency": flat.field("frequency")}, schema=value_index.ENTRIES)
    return entries, pc.or_(kept, none).to_numpy(zero_copy_only=False)


def _batches(indexed: list[str], carried: set[str], new_index: pa.Table, table: pa.Schema,
             added: int, share: float) -> Iterator[list[str]]:
    """Columns in runs whose entries to read sum to about BATCH_ENTRIES (`share`: of the
    partitions, those read)."""
    def entries(column: str) -> int:
        struct = new_index[schema.index_column_name(table.get_field_index(column))]
        distinct = pc.struct_field(struct.combine_chunks(), "distinct_count")
        held = int(pc.sum(distinct).as_py() or 0)
        # a carried column reads the added partitions' share only, roughly
        return held * added // max(1, new_index.num_rows) if column in carried \
            else int(held * share)
    return runs(((c, entries(c)) for c in indexed), BATCH_ENTRIES)


def _frequency_lists(partition_dir: Callable[[str], Store], wanted: dict[str, list[str]],
                     retyped: index.Retyped) -> dict[str, pa.Table]:
    """Each column's (value, path, frequency) rows in the partitions' lists of the columns
    wanted of each, partition by partition and in file order: slices of what was read, not
    copies (a wide table's batch holds hundreds of columns); values re-rendered in the table's
    type where a partition types the column otherwise."""
    def read(item: tuple[str, list[str]]) -> tuple[str, pa.Table]:
        path, names = item
        rows = files.read_frequencies(partition_dir(path), names)
        return path, rows.append_column("path", pa.repeat(pa.scalar(path), rows.num_rows))
    with ThreadPoolExecutor(16) as pool:
        tables = list(pool.map(read, wanted.items()))
    pieces: dict[str, list[pa.Table]] = {}
    for path, table in tables:
        for name, piece in files.column_runs(table, ("value", "path", "frequency")):
            if (path, name) in retyped:
                piece = files.retexted(piece, *retyped[path, name])
            pieces.setdefault(name, []).append(piece)
    return {name: pa.concat_tables(found) for name, found in pieces.items()}
