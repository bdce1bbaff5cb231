"""Iceberg (pyiceberg): a snapshot's data files from its manifests, with their delete files.

The table is found by its location (the newest metadata/*.metadata.json, by the version
number its name starts with) or through a SQL catalog (--catalog URI --table-name NS.NAME,
--catalog-name for a catalog not called "default").
Columns are the snapshot schema's, matched in files by field id (a renamed column is one
column, a dropped one is gone even if a new column takes its name), and a column added with an
initial-default has that value in older files' rows (formats.rows).
Position deletes are read by the worker (formats.rows), so counts and bounds stay exact;
equality deletes make a file inexact: its statistics still bound its rows (deletes only take
rows away) but overcount them.
"""
from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from lakestats.formats import (POSITION_DELETES, FormatError, Selection, Snapshot, data_file,
                               listed, relative, s3_options, with_table_columns)
from lakestats.metastore.store import Store


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
    """The current metadata file of a table found by its location: the one version-hint.text
    names (Hadoop tables: a version number or a file name), else the highest version number,
    else the only one."""
    found = [f.rel_path for f in listed(table.child("metadata"))]
    names = [n for n in found if n.endswith(".metadata.json") and "/" not in n]
    if "version-hint.text" in found:
        hint = table.read_bytes("metadata", "version-hint.text").decode().strip()
        named = [n for n in names if n == hint or n.split(".")[0] in (
            f"v{hint}", f"{hint.zfill(5)}") or n.startswith(f"{hint.zfill(5)}-")]
        if len(named) == 1:
            return named[0]
    numbered = [(int(m.group(1)), n) for n in names if (m := re.match(r"v?(\d+)", n))]
    if numbered:
        return max(numbered)[1]
    if len(names) == 1:
        return names[0]
    raise FormatError(f"{table.uri}: " + (f"which of {len(names)} metadata files is current "
                                          "is not numbered (--catalog names it)" if names else
                                          "no metadata/*.metadata.json (not an Iceberg table)"))


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
    files: their paths relative to the table root and their entries (pyiceberg's)."""
    path: str
    length: int
    spec_id: int
    added_snapshot_id: int | None
    files: list[str]
    entries: list


@dataclass
class Manifests:
    """A snapshot's data manifests, its columns' field ids, and the columns every manifest's
    partition spec partitions by (their filters prune manifests: formats.manifest_statistics)."""
    snapshot_id: int
    manifests: list[Manifest]
    field_ids: dict[str, int]
    partition_columns: list[str]


def manifests(table: Store, iceberg, picked) -> Manifests:
    """The data manifests of snapshot `picked`."""
    return _described(iceberg, picked, _read(table, iceberg, picked)[0])


def _read(table: Store, iceberg, picked) -> tuple[list[Manifest], list]:
    """Every manifest of the snapshot, each read once (one GET), side by side: the data
    manifests with their live data files, and the live delete entries of all of them (a
    writer may misfile a delete file in a data manifest)."""
    from pyiceberg.manifest import DataFileContent, ManifestContent
    manifest_files = picked.manifests(iceberg.io)
    with ThreadPoolExecutor(16) as pool:
        read = list(pool.map(lambda m: m.fetch_manifest_entry(iceberg.io, discard_deleted=True),
                             manifest_files))
    found, deletes = [], []
    for m, entries in zip(manifest_files, read):
        live = [e for e in entries if e.data_file.content == DataFileContent.DATA]
        deletes += [e for e in entries if e.data_file.content != DataFileContent.DATA]
        if m.content == ManifestContent.DATA:
            found.append(Manifest(m.manifest_path, m.manifest_length, m.partition_spec_id,
                                  m.added_snapshot_id, [relative(
                                      table, iceberg.location(), e.data_file.file_path)
                                      for e in live], live))
    return found, deletes


def schema_of(iceberg, picked):
    """The columns a snapshot is read with: the table's current schema for its current
    snapshot (a rename or a new column needs no new snapshot), else the snapshot's own."""
    current = iceberg.current_snapshot()
    if current is not None and current.snapshot_id == picked.snapshot_id:
        return iceberg.schema()
    return iceberg.schemas().get(picked.schema_id, iceberg.schema())


def _described(iceberg, picked, found: list[Manifest]) -> Manifests:
    schema = schema_of(iceberg, picked)
    specs = iceberg.specs()
    sources = [{schema.find_column_name(f.source_id) for f in specs[m.spec_id].fields}
               for m in found]
    common = set.intersection(*sources) if sources else set()
    return Manifests(picked.snapshot_id, found, {f.name: f.field_id for f in schema.fields},
                     sorted(c for c in common if c and "." not in c))


def snapshot(table: Store, selection: Selection) -> Snapshot:
    from pyiceberg.manifest import DataFileContent, FileFormat
    from pyiceberg.table.delete_file_index import DeleteFileIndex
    iceberg = load(table, selection)
    picked = chosen(iceberg, selection)
    if picked is None:        # no snapshot yet: no rows, the table's columns
        return Snapshot("iceberg", None, [], schema=_columns(iceberg.schema())[0])
    found, deletes = _read(table, iceberg, picked)
    for snapshot_id in {picked.snapshot_id, *(m.added_snapshot_id or 0 for m in found)}:
        if not -2**63 <= snapshot_id < 2**63:
            raise FormatError(f"{iceberg.metadata_location}: snapshot id {snapshot_id} is not "
                              "a 64-bit integer (Iceberg's long)")
    specs = iceberg.specs()
    positions, newest = DeleteFileIndex(), {}
    for entry in deletes:
        f = entry.data_file
        if f.file_format == FileFormat.PUFFIN:
            raise FormatError(f"{f.file_path}: an Iceberg v3 deletion vector (a Puffin delete "
                              "file), which lakestats does not read yet: its data file's rows "
                              "cannot be counted exactly")
        if f.content == DataFileContent.POSITION_DELETES:
            positions.add_delete_file(entry, partition_key=f.partition)
        else:       # equality deletes: the newest per partition, or global when unpartitioned
            key = None if specs[f.spec_id].is_unpartitioned() else (f.spec_id, f.partition)
            newest[key] = max(newest.get(key, 0), entry.sequence_number or 0)
    schema = schema_of(iceberg, picked)
    arrow_schema, defaults = _columns(schema)
    ids = {f.field_id: f.name for f in schema.fields}
    aliases = _name_mapping(iceberg, ids)
    files, inexact = [], {}
    for m in found:
        names = [p.name for p in specs[m.spec_id].fields]
        identity = _identity_columns(specs[m.spec_id], ids)
        for rel, entry in zip(m.files, m.entries):
            f, sequence = entry.data_file, entry.sequence_number or 0
            position_files = sorted(d.file_path for d in positions.for_data_file(
                sequence, f, partition_key=f.partition))
            # Iceberg's rule: an equality delete of a later data sequence number applies
            if max(newest.get(None, 0), newest.get((f.spec_id, f.partition), 0)) > sequence:
                inexact[rel] = "equality deletes not applied: counts include deleted rows"
            files.append(data_file(rel, f.file_size_in_bytes, "iceberg",
                                   dict(zip(names, f.partition)), with_table_columns(
                                       (POSITION_DELETES, f.file_path, *position_files)
                                       if position_files else (), aliases, ids=ids,
                                       defaults=_with_partition_values(
                                           defaults, arrow_schema, identity, f.partition, rel),
                                       schema=arrow_schema)))
    return Snapshot("iceberg", str(picked.snapshot_id), sorted(files, key=lambda d: d.rel_path),
                    picked.timestamp_ms, inexact, _described(iceberg, picked, found),
                    arrow_schema)


def _name_mapping(iceberg, ids: dict[int, str]) -> dict[str, str]:
    """{name a file without field ids may store: table name}, from the table's name mapping
    (`schema.name-mapping.default`: the names each field id went by); top-level columns."""
    text = iceberg.properties.get("schema.name-mapping.default")
    if not text:
        return {}
    try:
        mapping = json.loads(text)
    except ValueError as e:
        raise FormatError(f"{iceberg.metadata_location}: schema.name-mapping.default is not "
                          f"JSON ({e})") from e
    return {alias: ids[entry["field-id"]] for entry in mapping
            if entry.get("field-id") in ids for alias in entry.get("names", ())
            if alias != ids[entry["field-id"]]}


def _identity_columns(spec, ids: dict[int, str]) -> list[tuple[int, str]]:
    """(position in the partition tuple, column) of the spec's identity partition fields."""
    from pyiceberg.transforms import IdentityTransform
    return [(i, ids[p.source_id]) for i, p in enumerate(spec.fields)
            if isinstance(p.transform, IdentityTransform) and p.source_id in ids]


def _with_partition_values(defaults: pa.Table | None, schema: pa.Schema,
                           identity: list[tuple[int, str]], partition, rel: str
                           ) -> pa.Table | None:
    """The values of columns a data file may lack: an identity partition's source column is
    the file's partition value (Iceberg's rule: writers may leave it out of the file), else
    the column's initial-default."""
    if not identity:
        return defaults
    columns = {} if defaults is None else dict(zip(defaults.column_names, defaults.columns))
    try:
        for i, name in identity:
            columns[name] = pa.array([partition[i]], schema.field(name).type)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise FormatError(f"{rel}: its partition value of {name} is not read as "
                          f"{schema.field(name).type} ({e})") from e
    return pa.table(columns)


def _columns(schema) -> tuple[pa.Schema, pa.Table | None]:
    """The snapshot schema's columns in Arrow, and the initial-default of those that have one
    (the value of their rows in files written before they were added): a one-row table."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    arrow = schema_to_pyarrow(schema)
    arrow = pa.schema([f.remove_metadata().with_type(
        f.type.storage_type if isinstance(f.type, pa.BaseExtensionType) else f.type)
        for f in arrow])
    given = [f for f in schema.fields if f.initial_default is not None]
    try:
        defaults = pa.table({f.name: pa.array([f.initial_default], arrow.field(f.name).type)
                             for f in given}) if given else None
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise FormatError(f"Iceberg column default of {[f.name for f in given]} not read: "
                          f"{e}") from e
    return arrow, defaults
