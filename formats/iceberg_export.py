"""Statistics written back into an Iceberg table, where engines look for them: for the snapshot
a version of lakestats' statistics describes,

- a Puffin statistics file with one `apache-datasketches-theta-v1` blob per primitive column
  (the table-level theta sketch, core.theta; `fields` the column's field id; property `ndv`,
  lakestats' exact distinct count), as Spark's Iceberg integration reads for its cost-based
  optimizer and Trino for its estimates;
- a partition statistics file (the spec's partition-stats schema, Parquet): per partition
  tuple, its data files' records, count and bytes, and its exact records after deletes;

both committed through pyiceberg (set-statistics and set-partition-statistics), which replace
any earlier file of that snapshot. Only these two files and the two metadata fields are
written: never data, never other metadata. Opt-in: `lakestats export iceberg` or
`compute --export iceberg`, which also remember the catalog in the statistics (`follow`) so
that the event path exports every snapshot its reductions describe (`keep_current`).
"""
from __future__ import annotations

import json
import struct
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakestats.core import theta
from lakestats.formats import FormatError, Selection
from lakestats.formats.iceberg import load, manifests, schema_of
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store

MAGIC = b"PFA1"
THETA_BLOB = "apache-datasketches-theta-v1"
FOLLOWED = ("exports", "iceberg.json")       # under the statistics root: the catalog followed


@dataclass
class Exported:
    snapshot: str
    statistics_path: str
    partition_statistics_path: str | None       # None for a table never partitioned
    blobs: int
    version: str                # of the statistics exported
    followed: bool = False      # the event path keeps it current (follow)

    def as_json(self) -> dict:
        return {"snapshot": self.snapshot, "statistics_path": self.statistics_path,
                "partition_statistics_path": self.partition_statistics_path,
                "blobs": self.blobs, "version": self.version, "followed": self.followed}


def export(table_uri: str, stats: StatisticsReader, selection: Selection,
           snapshot: str | None = None) -> Exported:
    """Write and commit the Iceberg statistics of the snapshot that `stats` describes (or of
    `snapshot`, one with the same data files that the version also describes)."""
    manifest = stats.manifest
    snapshot = snapshot or manifest.snapshot
    if manifest.format != "iceberg" or snapshot is None:
        raise FormatError(f"{table_uri}: export iceberg needs statistics of an Iceberg "
                          f"snapshot; these describe a {manifest.format} table"
                          + ("" if manifest.snapshot else " without snapshots"))
    if not selection.catalog:
        raise FormatError("export iceberg commits through a catalog: --catalog URI "
                          "--table-name NAMESPACE.NAME")
    iceberg = load(Store(table_uri), selection)
    picked = iceberg.snapshot_by_id(int(snapshot))
    if picked is None:
        raise FormatError(f"{iceberg.metadata_location}: no snapshot {snapshot}, the "
                          "one the statistics describe (expired?): compute again")
    schema = schema_of(iceberg, picked)
    puffin, blobs, footer = _puffin(stats, schema, picked)
    location = iceberg.location().rstrip("/")
    name = f"{picked.snapshot_id}-{uuid.uuid4()}"
    statistics_path = f"{location}/metadata/{name}.stats"
    _write(iceberg, statistics_path, puffin)
    partitions = _partition_statistics(Store(table_uri), iceberg, picked, schema, stats)
    partition_path, partition_size = None, 0
    if partitions is not None:
        partition_path = f"{location}/metadata/partition-stats-{name}.parquet"
        sink = pa.BufferOutputStream()
        pq.write_table(partitions, sink)
        partition_size = sink.getvalue().size
        _write(iceberg, partition_path, sink.getvalue().to_pybytes())
    _commit(iceberg, picked, statistics_path, puffin, blobs, footer, partition_path,
            partition_size)
    return Exported(str(picked.snapshot_id), statistics_path, partition_path, len(blobs),
                    stats.version)


def follow(stats_root: Store, selection: Selection, exported: Exported) -> bool:
    """Remember the catalog and what was exported, for `keep_current`; False (nothing
    remembered) when the catalog's URI holds a password: statistics are no place for one."""
    if urlsplit(selection.catalog).password:
        return False
    stats_root.write_bytes(json.dumps({
        "catalog": selection.catalog, "table_name": selection.table_name,
        "catalog_name": selection.catalog_name,
        "exported": [exported.snapshot, exported.version]}).encode(), *FOLLOWED)
    return True


def unfollow(stats_root: Store) -> None:
    stats_root.delete_dir(FOLLOWED[0])


def keep_current(table_uri: str, stats_root: Store, snapshot: str | None) -> Exported | None:
    """The export of `snapshot` (a reduction's, which a published version describes), if the
    table's catalog is followed and that snapshot's statistics are not the ones exported
    last (a refold's version replaces its file); else None."""
    if snapshot is None:
        return None
    try:
        followed = json.loads(stats_root.read_bytes(*FOLLOWED))
    except FileNotFoundError:
        return None
    stats = StatisticsReader.of_snapshot(stats_root.uri, snapshot)
    if followed.pop("exported") == [snapshot, stats.version]:
        return None
    selection = Selection("iceberg", **followed)
    exported = export(table_uri, stats, selection, snapshot)
    exported.followed = follow(stats_root, selection, exported)
    return exported


def _puffin(stats: StatisticsReader, schema, picked) -> tuple[bytes, list[dict], int]:
    """The Puffin file's bytes, its blobs' metadata (one theta sketch per primitive column)
    and its footer's size."""
    rows = {r["column"]: r for r in stats.version_dir().read_parquet(
        "statistics.parquet", columns=["column", "distinct_count", "theta_sketch"]).to_pylist()}
    # files whose equality deletes lakestats does not apply count their deleted rows' values:
    # no `ndv` is claimed then (engines read none), the sketches stay, an upper bound
    claims = not stats.manifest.inexact
    body, blobs = bytearray(MAGIC), []
    for field in schema.fields:
        if not field.field_type.is_primitive or field.name not in rows:
            continue
        row = rows[field.name]
        sketch = row["theta_sketch"]
        if sketch is None and row["distinct_count"]:
            raise FormatError(f"column {field.name}: its statistics hold no theta sketch "
                              "(computed before lakestats wrote them): compute the table's "
                              "statistics again from scratch (a new --stats-root)")
        if sketch is None:                  # no values: the empty sketch
            sketch = theta.sketch(np.empty(0, np.uint64))
        blobs.append({"type": THETA_BLOB, "fields": [field.field_id],
                      "snapshot-id": picked.snapshot_id,
                      "sequence-number": picked.sequence_number or 0,
                      "offset": len(body), "length": len(sketch),
                      "properties": {"ndv": str(row["distinct_count"] or 0)} if claims
                      else {}})
        body += sketch
    payload = json.dumps({"blobs": blobs, "properties": {"created-by": "lakestats"}}).encode()
    footer = MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4) + MAGIC
    return bytes(body + footer), blobs, len(footer)


def _partition_statistics(table: Store, iceberg, picked, schema, stats: StatisticsReader
                          ) -> pa.Table | None:
    """The spec's partition statistics of the snapshot, one row per (spec, partition tuple);
    None for a table never partitioned (Iceberg writes none for one either)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, LongType, NestedField, StructType
    specs = iceberg.specs()
    unified = {}
    for spec in specs.values():
        for f in spec.partition_type(schema).fields:
            unified.setdefault(f.field_id, f)
    if not unified:
        return None
    partition_type = StructType(*[unified[i] for i in sorted(unified)])
    exact = {p["path"]: p["row_count"] for p in stats.partitions()
             if p.get("bounds_exact", True)}
    groups: dict[tuple, dict] = {}
    snapshots = {s.snapshot_id: s.timestamp_ms for s in iceberg.snapshots()}
    for m in manifests(table, iceberg, picked).manifests:
        ids = [f.field_id for f in specs[m.spec_id].fields]
        for rel, entry in zip(m.files, m.entries):
            f = entry.data_file
            values = dict(zip(ids, f.partition))
            key = (m.spec_id, tuple(values.get(i) for i in sorted(unified)))
            g = groups.setdefault(key, {"records": 0, "files": 0, "bytes": 0, "after": 0,
                                        "exact": True, "snapshot": None})
            g["records"] += f.record_count
            g["files"] += 1
            g["bytes"] += f.file_size_in_bytes
            g["after"] += exact.get(rel, 0)
            g["exact"] &= rel in exact
            if entry.snapshot_id and (g["snapshot"] is None or snapshots.get(
                    entry.snapshot_id, 0) >= snapshots.get(g["snapshot"], 0)):
                g["snapshot"] = entry.snapshot_id
    iceberg_schema = Schema(
        NestedField(1, "partition", partition_type, required=True),
        NestedField(2, "spec_id", IntegerType(), required=True),
        NestedField(3, "data_record_count", LongType(), required=True),
        NestedField(4, "data_file_count", IntegerType(), required=True),
        NestedField(5, "total_data_file_size_in_bytes", LongType(), required=True),
        NestedField(10, "total_record_count", LongType(), required=False),
        NestedField(11, "last_updated_at", LongType(), required=False),
        NestedField(12, "last_updated_snapshot_id", LongType(), required=False))
    arrow = schema_to_pyarrow(iceberg_schema)
    keys = sorted(groups, key=lambda k: (k[0], repr(k[1])))
    names = [unified[i].name for i in sorted(unified)]
    columns = {
        "partition": [dict(zip(names, k[1])) for k in keys],
        "spec_id": [k[0] for k in keys],
        "data_record_count": [groups[k]["records"] for k in keys],
        "data_file_count": [groups[k]["files"] for k in keys],
        "total_data_file_size_in_bytes": [groups[k]["bytes"] for k in keys],
        "total_record_count": [groups[k]["after"] if groups[k]["exact"] else None
                               for k in keys],
        "last_updated_at": [snapshots.get(groups[k]["snapshot"]) for k in keys],
        "last_updated_snapshot_id": [groups[k]["snapshot"] for k in keys]}
    return pa.Table.from_pydict(columns, schema=arrow)


def _write(iceberg, path: str, data: bytes) -> None:
    with iceberg.io.new_output(path).create(overwrite=False) as out:
        out.write(data)


def _commit(iceberg, picked, statistics_path: str, puffin: bytes, blobs: list[dict],
            footer: int, partition_path: str | None, partition_size: int) -> None:
    from pyiceberg.table.statistics import (BlobMetadata, PartitionStatisticsFile,
                                            StatisticsFile)
    from pyiceberg.table.update import SetPartitionStatisticsUpdate
    statistics = StatisticsFile(**{
        "snapshot-id": picked.snapshot_id, "statistics-path": statistics_path,
        "file-size-in-bytes": len(puffin), "file-footer-size-in-bytes": footer,
        "blob-metadata": [BlobMetadata(**{k: v for k, v in b.items()
                                          if k not in ("offset", "length")}) for b in blobs]})
    with iceberg.transaction() as tx:
        tx.update_statistics().set_statistics(statistics_file=statistics).commit()
        if partition_path is not None:      # pyiceberg has the update but no builder for it
            tx._apply((SetPartitionStatisticsUpdate(partition_statistics=PartitionStatisticsFile(
                **{"snapshot-id": picked.snapshot_id, "statistics-path": partition_path,
                   "file-size-in-bytes": partition_size})),))
