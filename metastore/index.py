"""The partition index of a table version (partitions.parquet, core.schema.INDEX_FIELDS): one
row per partition, sorted by path, with each table column's statistics in a struct column of
its own, min and max typed. A version's index is the previous one minus the partitions that
left plus those that came: building it reads the new partitions' statistics only."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import schema
from lakestats.core import types as ty
from lakestats.metastore import files
from lakestats.metastore.layout import INDEX
from lakestats.metastore.store import DataFile, Store, reading_digest

_STATISTICS = [n for n in schema.STATISTIC_NAMES if n not in schema.SKETCH_NAMES]


def value_type(field: pa.Field) -> pa.DataType | None:
    """The type of the column's typed min and max in the index; None for nested columns."""
    return None if ty.kind_of(field.type) == ty.OTHER else ty.value_type(field.type)


def build(parts: list[tuple[DataFile, pa.Table]], table_schema: pa.Schema,
          membership: dict[str, dict[str, dict]] | None = None) -> pa.Table:
    """The index rows of partitions, from their statistics.parquet tables and the membership
    fields metastore.membership collected (path -> column -> fields). The partitions' rows
    are one table, cut by column with Arrow: no Python object per statistic (at 10,000
    partitions, 3 s of dicts before)."""
    membership = membership or {}
    parts = sorted(parts, key=lambda p: p[0].rel_path)
    paths = [f.rel_path for f, _ in parts]
    arrays = [pa.array(paths, pa.string()),
              pa.array([f.size for f, _ in parts], pa.int64()),
              pa.array([f.etag for f, _ in parts], pa.string()),
              pa.array([f.fingerprint for f, _ in parts], pa.string()),
              pa.array([files.row_count_of(stats) for _, stats in parts], pa.int64()),
              pa.array([list(f.partition_values.items()) for f, _ in parts],
                       schema.INDEX_FIELDS[5][1]),
              pa.array([stats.schema.metadata[files.DATA_SCHEMA_KEY].decode()
                        for _, stats in parts], pa.string()),
              pa.array([reading_digest(f.reading) for f, _ in parts], pa.string())]
    rows = pa.concat_tables([stats.select(_STATISTICS) for _, stats in parts]) if parts \
        else schema.STATISTICS_SCHEMA.empty_table().select(_STATISTICS)
    states = [list(s.items()) or None for _, stats in parts for s in files.plugin_states(stats)]
    # where[i, j]: the row of table column i in partition j's statistics, -1 where it has none
    n = len(parts)
    where = np.full((len(table_schema), n), -1, np.int64)
    k = pc.fill_null(pc.index_in(rows["column"], value_set=pa.array(table_schema.names,
                                                                     pa.string())), -1)
    k = k.to_numpy(zero_copy_only=False)
    owner = np.repeat(np.arange(n), [stats.num_rows for _, stats in parts])
    known = np.flatnonzero(k >= 0)
    where[k[known], owner[known]] = known
    at = pa.array(where.ravel(), pa.int64(), mask=where.ravel() < 0)
    taken = {name: rows[name].take(at).combine_chunks() for name in _STATISTICS
             if name != "column"}        # every column's statistics at once, sliced below
    names = list(schema.INDEX_BASE)
    for i, field in enumerate(table_schema):
        mine = where[i]
        member = [membership.get(p, {}).get(field.name, {}) if w >= 0 else None
                  for p, w in zip(paths, mine.tolist())]
        arrays.append(_column({name: c.slice(i * n, n) for name, c in taken.items()}, mine,
                              member, states, field))
        names.append(schema.index_column_name(i))
    return pa.Table.from_arrays(arrays, names=names)


MEMBERSHIP = ("bloom_pack", "bloom_offset", "bloom_length")      # besides the values


def _column(taken: dict[str, pa.Array], where: np.ndarray, member: list[dict | None],
            states: list[list | None], field: pa.Field) -> pa.StructArray:
    """A column's struct over the partitions: its statistics in each (`taken`, null where the
    partition lacks it: `where` -1) and the membership fields."""
    absent = where < 0
    struct = schema.index_column_type(value_type(field))
    children = []
    for child in struct:
        if child.name in ("min", "max"):
            children.append(ty.from_text(taken[child.name], field.type))
        elif child.name == "range_set":
            children.append(_range_sets(taken["range_set"], field.type, child.type))
        elif child.name == "values":
            children.append(_values([m.get("values") if m else None for m in member],
                                    child.type))
        elif child.name in MEMBERSHIP:
            children.append(pa.array([m.get(child.name) if m else None for m in member],
                                     child.type))
        elif child.name == "plugin_states":
            children.append(pa.array([None if w < 0 else states[w] for w in where.tolist()],
                                     child.type))
        else:
            children.append(taken[child.name].cast(child.type))
    return pa.StructArray.from_arrays(children, fields=list(struct), mask=pa.array(absent))


def _values(tables: list[pa.Table | None], list_type: pa.DataType) -> pa.ListArray:
    """The membership values (metastore.membership: a table of (value, frequency), or None)
    as one list array, without a Python object per value."""
    item = list_type.value_type
    held = [t for t in tables if t is not None]
    flat = pa.concat_tables(held) if held else pa.table({f.name: pa.array([], f.type)
                                                          for f in item})
    items = pa.StructArray.from_arrays([flat[f.name].combine_chunks().cast(f.type)
                                        for f in item], fields=list(item))
    sizes = np.array([0 if t is None else t.num_rows for t in tables], np.int32)
    offsets = pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, items, type=list_type,
                                    mask=pa.array([t is None for t in tables], pa.bool_()))


def _range_sets(texts: pa.ListArray, arrow_type: pa.DataType,
                list_type: pa.DataType) -> pa.ListArray:
    """Range-sets as statistics.parquet keeps them (flat text) into typed (low, high) lists."""
    typed = ty.from_text(pc.list_flatten(texts), arrow_type)
    bounds = pa.StructArray.from_arrays([typed[0::2], typed[1::2]],
                                        fields=list(list_type.value_type))
    sizes = pc.fill_null(pc.list_value_length(texts), 0).to_numpy(zero_copy_only=False) // 2
    offsets = pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, bounds, type=list_type, mask=texts.is_null())


def plugin_states(index: pa.Table, k: int) -> pa.Table:
    """The user-defined statistics' states of the index's column k: (row, statistic, state),
    one per partition (row position) and statistic with a state there; state null where the
    statistic failed."""
    struct = index[schema.index_column_name(k)].combine_chunks()
    if struct.type.get_field_index("plugin_states") < 0 or not len(struct):
        return pa.table({"row": pa.array([], pa.int64()), "statistic": pa.array([], pa.string()),
                         "state": pa.array([], pa.binary())})
    states = pc.struct_field(struct, "plugin_states")
    held = states.is_valid()
    entries = states.filter(held).cast(pa.list_(pa.struct([("key", pa.string()),
                                                           ("value", pa.binary())])))
    flat = pc.list_flatten(entries)
    rows = np.flatnonzero(held.to_numpy(zero_copy_only=False))[
        pc.list_parent_indices(entries).to_numpy()]
    return pa.table({"row": pa.array(rows, pa.int64()), "statistic": flat.field("key"),
                     "state": flat.field("value")})


def without(index: pa.Table, paths: set[str]) -> pa.Table:
    return index.filter(pc.invert(pc.is_in(index["path"], pa.array(sorted(paths), pa.string()))))


def combine(old: pa.Table | None, old_schema: pa.Schema | None, added: pa.Table,
            table_schema: pa.Schema) -> pa.Table:
    """`old` rows (over `old_schema`) and `added` ones (built over `table_schema`), re-keyed
    to table_schema's columns, sorted by path."""
    if old is None or old.num_rows == 0:
        return added.sort_by("path")
    positions = {f.name: k for k, f in enumerate(old_schema)}
    arrays = [old[n] if n in old.column_names else pa.nulls(old.num_rows, t)  # written before
              for n, t, _ in schema.INDEX_FIELDS]
    for k, field in enumerate(table_schema):
        target = schema.index_column_type(value_type(field))
        if field.name in positions:
            column = old[schema.index_column_name(positions[field.name])].combine_chunks()
            arrays.append(_retyped(column, target) if column.type != target else column)
        else:                                  # a column that came with the added partitions
            arrays.append(pa.nulls(old.num_rows, target))
    old = pa.Table.from_arrays(arrays, names=added.column_names)
    return pa.concat_tables([old, added]).sort_by("path")


def _retyped(column: pa.StructArray, target: pa.DataType) -> pa.StructArray:
    """A column's old rows in the type it widened to. Their membership values and Bloom
    filters are text in the type before, which the wider one may spell otherwise
    ("...05.000" for "...05.000000"): left out, a plan reads such a partition's frequencies
    (files.values_as) as the table's type spells them."""
    column = column.cast(target)
    children = [pa.nulls(len(column), f.type) if f.name == "values" or f.name in MEMBERSHIP
                else column.field(f.name) for f in target]
    return pa.StructArray.from_arrays(children, fields=list(target), mask=column.is_null())


def write(out: Store, index: pa.Table) -> None:
    # one column chunk per statistic per table column (23,000 at 1,000 columns), of a row
    # per partition: the cost is per chunk, and zstd's per-page setup, dictionaries and
    # statistics more than doubled it (0.84 s against 0.37 s there). Only path is filtered
    # on. Snappy also reads a 1,000-file index 3x faster than zstd, for 1.5x its bytes.
    out.write_parquet(index, INDEX, compression="snappy", use_dictionary=False,
                      write_statistics=["path"])


def read(directory: Store, table_schema: pa.Schema, columns: list[str] | None = None,
         base: list[str] | None = None, filters=None) -> pa.Table:
    """The index of the version in `directory`: base fields (all, or `base`) and the struct
    columns of `columns` (all, or none with an empty list), named c<k> by the table schema;
    only the rows `filters` keeps, if given."""
    return directory.read_parquet(INDEX, columns=names(table_schema, columns, base),
                                  filters=filters)


def names(table_schema: pa.Schema, columns: list[str] | None = None,
          base: list[str] | None = None) -> list[str]:
    """The index's column names read() reads."""
    wanted = table_schema.names if columns is None else columns
    return list(schema.INDEX_BASE if base is None else base) + [
        schema.index_column_name(table_schema.get_field_index(c)) for c in wanted]


ENTRY = ["path", "etag", "fingerprint", "partition_values", "row_count", "size"]   # JSON order


def fields(index_schema: pa.Schema, names: list[str], leave_out: tuple[str, ...]) -> list[str]:
    """`names` with each column's statistics spelt out, but those in `leave_out` (Parquet
    reads a struct's fields alone)."""
    structs = {f.name: f.type for f in index_schema if pa.types.is_struct(f.type)}
    return [n for name in names for n in ([f"{name}.{f.name}" for f in structs[name]
                                           if f.name not in leave_out]
                                          if name in structs else [name])]


def statistic(struct: pa.StructArray, name: str) -> pa.Array:
    """A column's statistic over the partitions, null where a partition lacks the column."""
    return pc.if_else(struct.is_valid(), pc.struct_field(struct, name), None)


def entries(index: pa.Table) -> dict[str, dict]:
    """path -> size, etag, fingerprint, partition_values, row_count: what a version holds."""
    rows = index.select(ENTRY).to_pylist()
    return {r.pop("path"): {**r, "partition_values": dict(r["partition_values"])} for r in rows}


def retyped(parts: list[tuple[str, pa.Schema]], table: pa.Schema
            ) -> list[tuple[str, pa.Field, pa.DataType]]:
    """(path, field, the table's type) of each file's column typed otherwise than the table."""
    types = dict(zip(table.names, table.types))     # not table.field(): linear in the width
    return [(path, f, types[f.name]) for path, s in sorted(parts, key=lambda p: p[0])
            for f in s if types.get(f.name, f.type) != f.type]


# (path, column) -> (the file's type of the column, the table's), for the columns `retyped`
Retyped = dict[tuple[str, str], tuple[pa.DataType, pa.DataType]]


def retyped_types(parts: list[tuple[str, pa.Schema]], table: pa.Schema) -> Retyped:
    return {(path, f.name): (f.type, wider) for path, f, wider in retyped(parts, table)}


def schemas(index: pa.Table) -> list[tuple[str, pa.Schema]]:
    """(path, data schema) of each partition, in path order."""
    decoded: dict[str, pa.Schema] = {}        # few distinct schemas: each decoded once
    return [(path, decoded.get(text) or decoded.setdefault(text, files.decode_schema(text)))
            for path, text in zip(index["path"].to_pylist(), index["schema"].to_pylist())]
