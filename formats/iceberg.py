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


def snapshot(table: Store, selection: Selection) -> Snapshot:
    from pyiceberg.manifest import DataFileContent
    iceberg = load(table, selection)
    picked = chosen(iceberg, selection)
    if picked is None:
        return Snapshot("iceberg", None, [])
    specs = iceberg.specs()
    files, inexact = [], {}
    for task in iceberg.scan(snapshot_id=picked.snapshot_id).plan_files():
        f = task.file
        rel = relative(table, iceberg.location(), f.file_path)
        positions = sorted(d.file_path for d in task.delete_files
                           if d.content == DataFileContent.POSITION_DELETES)
        if any(d.content == DataFileContent.EQUALITY_DELETES for d in task.delete_files):
            inexact[rel] = "equality deletes not applied: counts include deleted rows"
        names = [p.name for p in specs[f.spec_id].fields]
        files.append(data_file(rel, f.file_size_in_bytes, "iceberg",
                               dict(zip(names, f.partition)),
                               (POSITION_DELETES, f.file_path, *positions) if positions else ()))
    return Snapshot("iceberg", str(picked.snapshot_id), sorted(files, key=lambda d: d.rel_path),
                    picked.timestamp_ms, inexact)
