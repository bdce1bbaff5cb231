"""Iceberg (pyiceberg): a snapshot's data files from its manifests, with their delete files.

The table is found by its location (the newest metadata/*.metadata.json, by the version
number its name starts with) or through a SQL catalog (--catalog URI --table-name NS.NAME,
--catalog-name for a catalog not called "default").
Position deletes are read by the worker (formats.rows), so counts and bounds stay exact;
equality deletes make a file inexact: its statistics still bound its rows (deletes only take
rows away) but overcount them.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from formats import (POSITION_DELETES, FormatError, Selection, Snapshot, data_file, listed,
                     relative, s3_options)
from metastore.store import Store


def load(table: Store, selection: Selection = Selection()):
    """The pyiceberg table: from the catalog if one is given, else from the table root."""
    properties = _properties(table)
    if selection.catalog:
        from pyiceberg.catalog import load_catalog
        if not selection.table_name:
            raise FormatError("--catalog needs --table-name NAMESPACE.NAME")
        try:        # the URI's scheme picks the catalog: sqlite:// or postgresql:// SQL, http REST
            return load_catalog(selection.catalog_name, uri=selection.catalog,
                                **properties).load_table(selection.table_name)
        except Exception as e:       # pyiceberg's errors have no common base
            raise FormatError(f"{selection.catalog}: no Iceberg table {selection.table_name} in "
                              f"catalog {selection.catalog_name!r} ({e})") from e
    from pyiceberg.table import StaticTable
    return StaticTable.from_metadata(table.uri_of("metadata", newest_metadata(table)),
                                     properties)


def newest_metadata(table: Store) -> str:
    names = [f.rel_path for f in listed(table.child("metadata"))
             if f.rel_path.endswith(".metadata.json") and "/" not in f.rel_path]
    numbered = [(int(m.group(1)), n) for n in names if (m := re.match(r"v?(\d+)", n))]
    if not numbered:
        raise FormatError(f"{table.uri}: no metadata/*.metadata.json (not an Iceberg table)")
    return max(numbered)[1]


def _properties(table: Store) -> dict:
    if not table.is_s3:
        return {}
    options = s3_options()
    names = {"endpoint": "s3.endpoint", "region": "s3.region", "key": "s3.access-key-id",
             "secret": "s3.secret-access-key", "token": "s3.session-token"}
    return {names[k]: v for k, v in options.items()}


def chosen(iceberg, selection: Selection):
    """The snapshot asked for (None: a table without snapshots)."""
    if selection.snapshot:
        found = iceberg.snapshot_by_id(int(selection.snapshot))
        if found is None:
            raise FormatError(f"{iceberg.metadata_location}: no snapshot {selection.snapshot}")
        return found
    if selection.as_of:
        when = datetime.fromisoformat(selection.as_of)
        found = iceberg.snapshot_as_of_timestamp(int(when.timestamp() * 1000))
        if found is None:
            raise FormatError(f"{iceberg.metadata_location}: no snapshot as of {selection.as_of}")
        return found
    return iceberg.current_snapshot()


@dataclass
class Manifest:
    """A data manifest of a snapshot, as the manifest list records it, with its live data
    files and the bytes each stores per column (field id -> bytes, as the writer recorded)."""
    path: str
    length: int
    spec_id: int
    added_snapshot_id: int | None
    files: list[str] = field(default_factory=list)           # relative to the table root
    column_sizes: list[dict[int, int]] = field(default_factory=list)
    sequence_numbers: list[int] = field(default_factory=list)   # the files' data sequence
    partitions: list = field(default_factory=list)               # the files' partition tuples


@dataclass
class Manifests:
    """A snapshot's data manifests, its columns' field ids, and the columns every manifest's
    partition spec partitions by (their filters prune manifests: formats.manifest_statistics)."""
    snapshot_id: int
    manifests: list[Manifest]
    field_ids: dict[str, int]
    partition_columns: list[str]


def manifests(table: Store, iceberg, picked) -> Manifests:
    """The manifests of snapshot `picked`, read side by side (one GET each)."""
    from pyiceberg.manifest import DataFileContent, ManifestContent
    listed_ = [m for m in picked.manifests(iceberg.io) if m.content == ManifestContent.DATA]

    def read(m) -> Manifest:
        out = Manifest(m.manifest_path, m.manifest_length, m.partition_spec_id,
                       m.added_snapshot_id)
        for entry in m.fetch_manifest_entry(iceberg.io, discard_deleted=True):
            if entry.data_file.content != DataFileContent.DATA:    # a writer's misfiling
                continue
            out.files.append(relative(table, iceberg.location(), entry.data_file.file_path))
            out.column_sizes.append(entry.data_file.column_sizes or {})
            out.sequence_numbers.append(entry.sequence_number or 0)
            out.partitions.append(entry.data_file.partition)
        return out

    with ThreadPoolExecutor(16) as pool:
        found = list(pool.map(read, listed_))
    schema = iceberg.schemas().get(picked.schema_id, iceberg.schema())
    specs = iceberg.specs()
    sources = [{schema.find_column_name(f.source_id) for f in specs[m.spec_id].fields}
               for m in found]
    common = set.intersection(*sources) if sources else set()
    return Manifests(picked.snapshot_id, found, {f.name: f.field_id for f in schema.fields},
                     sorted(c for c in common if c and "." not in c))


def snapshot(table: Store, selection: Selection) -> Snapshot:
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.table import ManifestGroupPlanner
    iceberg = load(table, selection)
    picked = chosen(iceberg, selection)
    if picked is None:
        return Snapshot("iceberg", None, [])
    equality = []

    def diverted(entry) -> bool:
        """pyiceberg's planner refuses equality deletes: they are set aside, and flag the
        files they apply to."""
        if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
            equality.append(entry)
            return False
        return True

    specs = iceberg.specs()
    files = []
    for task in ManifestGroupPlanner(iceberg.metadata, iceberg.io).plan_files(
            picked.manifests(iceberg.io), diverted):
        f = task.file
        positions = sorted(d.file_path for d in task.delete_files
                           if d.content == DataFileContent.POSITION_DELETES)
        names = [p.name for p in specs[f.spec_id].fields]
        files.append(data_file(relative(table, iceberg.location(), f.file_path),
                               f.file_size_in_bytes, "iceberg", dict(zip(names, f.partition)),
                               (POSITION_DELETES, f.file_path, *positions) if positions else ()))
    found = manifests(table, iceberg, picked)
    return Snapshot("iceberg", str(picked.snapshot_id), sorted(files, key=lambda d: d.rel_path),
                    picked.timestamp_ms, _equality_deleted(found, equality, specs), found)


def _equality_deleted(found: Manifests, equality: list, specs: dict) -> dict[str, str]:
    """The data files that equality deletes apply to (Iceberg's rule: a delete of a later
    data sequence number, in the file's partition or, from an unpartitioned spec, in any)."""
    newest: dict = {}
    for entry in equality:
        f = entry.data_file
        key = None if specs[f.spec_id].is_unpartitioned() else (f.spec_id, f.partition)
        newest[key] = max(newest.get(key, 0), entry.sequence_number or 0)
    return {rel: "equality deletes not applied: counts include deleted rows"
            for m in found.manifests
            for rel, seq, partition in zip(m.files, m.sequence_numbers, m.partitions)
            if max(newest.get(None, 0), newest.get((m.spec_id, partition), 0)) > seq}
