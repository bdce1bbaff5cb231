"""Iceberg manifest-level statistics (core.schema.MANIFEST_FIELDS): per data manifest of a
snapshot, the totals of its live data files, aggregated from the version's partition index
(lakestats' exact per-file statistics) with pyarrow's group-by. Built once per snapshot at
compute time, for O(files x columns); a lookup then reads O(manifests x columns asked)."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import schema
from lakestats.core.types import to_text
from lakestats.formats import FormatError, Selection
from lakestats.formats.iceberg import Manifests, load, manifests
from lakestats.metastore import files
from lakestats.metastore.index import read, value_type
from lakestats.metastore.layout import Layout
from lakestats.metastore.manifest import read_manifest
from lakestats.metastore.reader import StatisticsNotFound
from lakestats.metastore.store import Store

SUFFIX = ".manifests.parquet"


def build(found: Manifests, index: pa.Table, table_schema: pa.Schema) -> pa.Table:
    """The manifest statistics of a snapshot from its manifests and the partition index of
    the version that describes it."""
    count = len(found.manifests)
    lengths = [len(m.files) for m in found.manifests]
    owner = np.repeat(np.arange(count), lengths)
    found_at = pc.index_in(pa.array([f for m in found.manifests for f in m.files], pa.string()),
                           value_set=index["path"].combine_chunks())
    indexed = found_at.is_valid().to_numpy(zero_copy_only=False)
    group = np.full(index.num_rows, -1, np.int64)
    group[pc.fill_null(found_at, 0).to_numpy()[indexed]] = owner[indexed]
    present = np.bincount(owner[indexed], minlength=count)

    keep = group >= 0
    flat = {"g": pa.array(group[keep]), "rows": index["row_count"].filter(keep),
            "size": index["size"].filter(keep)}
    aggregates = [("rows", "sum"), ("size", "sum")]
    for k, f in enumerate(table_schema):
        struct = index[schema.index_column_name(k)].filter(keep).combine_chunks()
        # a file without the column reads as nulls in all its rows
        flat[f"n{k}"] = pc.coalesce(pc.struct_field(struct, "null_count"), flat["rows"])
        flat[f"x{k}"] = pc.coalesce(pc.struct_field(struct, "nan_count"), 0)
        aggregates += [(f"n{k}", "sum"), (f"x{k}", "sum")]
        if value_type(f) is not None:
            flat[f"lo{k}"] = pc.struct_field(struct, "min")
            flat[f"hi{k}"] = pc.struct_field(struct, "max")
            aggregates += [(f"lo{k}", "min"), (f"hi{k}", "max")]
    summed = pa.table(flat).group_by("g").aggregate(aggregates)
    # manifests whose files all lack statistics have no group: take() leaves them null
    slot = np.full(count, -1, np.int64)
    slot[summed["g"].to_numpy()] = np.arange(summed.num_rows)
    take = pa.array(slot, mask=slot < 0)

    def of(name: str) -> pa.Array:
        return summed[name].combine_chunks().take(take)

    arrays = [pa.array([found.snapshot_id] * count, pa.int64()),
              pa.array([m.path for m in found.manifests], pa.string()),
              pa.array([m.length for m in found.manifests], pa.int64()),
              pa.array([m.spec_id for m in found.manifests], pa.int32()),
              pa.array([m.added_snapshot_id for m in found.manifests], pa.int64()),
              pa.array(lengths, pa.int64()), pa.array(np.array(lengths) - present, pa.int64()),
              pc.coalesce(of("rows_sum"), 0), pc.coalesce(of("size_sum"), 0)]
    for k, f in enumerate(table_schema):
        children = [_column_sizes(found, found.field_ids.get(f.name)),
                    pc.coalesce(of(f"n{k}_sum"), 0), pc.coalesce(of(f"x{k}_sum"), 0)]
        if value_type(f) is not None:
            children += [of(f"lo{k}_min"), of(f"hi{k}_max")]
        arrays.append(pa.StructArray.from_arrays(
            children, fields=list(schema.manifest_column_type(value_type(f)))))
    names = schema.MANIFEST_BASE + [schema.index_column_name(k) for k in range(len(table_schema))]
    return pa.Table.from_arrays(arrays, names=names).replace_schema_metadata({
        schema.MANIFEST_TABLE_SCHEMA_KEY: files.encode_schema(table_schema),
        schema.MANIFEST_FIELD_IDS_KEY: json.dumps(found.field_ids),
        schema.MANIFEST_PARTITION_COLUMNS_KEY: json.dumps(found.partition_columns)})


def _column_sizes(found: Manifests, field_id: int | None) -> pa.Array:
    """Per manifest, the bytes its files store of the column; null where a file's writer
    recorded none."""
    out = []
    for m in found.manifests:
        sizes = [(e.data_file.column_sizes or {}).get(field_id) for e in m.entries]
        out.append(None if field_id is None or None in sizes else sum(sizes))
    return pa.array(out, pa.int64())


def write(layout: Layout, snapshot_id: str, table: pa.Table) -> None:
    layout.root.write_parquet(table, "snapshots", snapshot_id + SUFFIX)


class Stored:
    """A snapshot's manifest statistics as stored: the footer first, then only the columns a
    lookup asks for."""

    def __init__(self, layout: Layout, snapshot_id: str):
        self.directory, self.name = layout.root.child("snapshots"), snapshot_id + SUFFIX
        self._file = self.directory.open_parquet(self.name)
        meta = self._file.schema_arrow.metadata
        self.table_schema = files.decode_schema(meta[schema.MANIFEST_TABLE_SCHEMA_KEY].decode())
        self.field_ids = json.loads(meta[schema.MANIFEST_FIELD_IDS_KEY])
        self.partition_columns = json.loads(meta[schema.MANIFEST_PARTITION_COLUMNS_KEY])

    def read(self, columns: list[str] | None = None) -> pa.Table:
        """Base fields and the struct columns of `columns` (all columns by default)."""
        wanted = self.table_schema.names if columns is None else columns
        unknown = [c for c in wanted if c not in self.table_schema.names]
        if unknown:
            raise StatisticsNotFound(f"no column {unknown[0]!r} in the table (columns: "
                                     f"{', '.join(self.table_schema.names)})")
        return self._file.read(columns=schema.MANIFEST_BASE + [
            schema.index_column_name(self.table_schema.get_field_index(c)) for c in wanted])


def as_json(table: pa.Table, table_schema: pa.Schema, columns: list[str]) -> list[dict]:
    """One object per manifest, the proposal's names, maps keyed by column name; bounds in
    canonical text."""
    out = table.select(schema.MANIFEST_BASE).to_pylist()
    maps = {"total_column_sizes": "total_column_size",
            "total_null_value_counts": "total_null_value_count",
            "total_nan_value_counts": "total_nan_value_count",
            "lower_bounds": "lower_bound", "upper_bounds": "upper_bound"}
    for row in out:
        row.update({name: {} for name in maps})
    for c in columns:
        struct = table[schema.index_column_name(table_schema.get_field_index(c))].combine_chunks()
        for name, child in maps.items():
            if struct.type.get_field_index(child) < 0:
                continue
            values = pc.struct_field(struct, child)
            if child.endswith("_bound"):
                values = to_text(values)
            for row, v in zip(out, values.to_pylist()):
                if v is not None:
                    row[name][c] = v
    return out


def refresh(layout: Layout, version: str, found: Manifests) -> None:
    """Build and store the manifest statistics of snapshot `found` from `version`, the
    table version that describes it."""
    table_schema = files.decode_schema(read_manifest(layout, version).schema)
    index = read(layout.version(version), table_schema)
    write(layout, str(found.snapshot_id), build(found, index, table_schema))


def stored(layout: Layout, table: Store, selection: Selection, snapshot_id: str,
           version: str) -> Stored:
    """The snapshot's manifest statistics, built from `version` first when missing (a
    version computed before they existed, or whose compute stopped before writing them)."""
    try:
        return Stored(layout, snapshot_id)
    except FileNotFoundError:
        pass
    iceberg = load(table, selection)
    picked = iceberg.snapshot_by_id(int(snapshot_id))
    if picked is None:
        raise FormatError(f"{iceberg.metadata_location}: no snapshot {snapshot_id}")
    refresh(layout, version, manifests(table, iceberg, picked))
    return Stored(layout, snapshot_id)
