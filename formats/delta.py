"""Delta Lake (delta-rs): a version's data files from its transaction log.

Columns are the table's: under column mapping a file stores a column by its physical name,
read under the logical one, and partition columns (the log's typed partitionValues) are
columns of each file's rows (formats.rows), with every statistic.

A file with a deletion vector is read without the rows it deletes (formats.rows), so its
statistics stay exact. A file's vector only ever grows (a new one replaces it with more rows
deleted), so the count of rows it deletes names it in the file's fingerprint.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.formats import (DELETION_VECTOR, FormatError, Selection, Snapshot, data_file,
                               object_store_options, relative, with_table_columns)
from lakestats.metastore.store import Store, StoreError


def load(table: Store, selection: Selection = Selection()):
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError
    try:
        delta = DeltaTable(table.uri if table.is_s3 else table.root,
                           storage_options=object_store_options(table))
        if selection.snapshot is not None:
            delta.load_as_version(int(selection.snapshot))
        elif selection.as_of:
            delta.load_as_version(selection.as_of)
    except (DeltaError, TableNotFoundError, ValueError) as e:
        raise FormatError(f"{table.uri}: cannot read the Delta table at "
                          f"{selection.snapshot or selection.as_of or 'its last version'} ({e})")
    return delta


def stored_names(schema) -> dict[str, str]:
    """{stored: table name} of the columns that column mapping (name or id mode) stores
    under another name: files hold the physical names, the table's are the logical ones."""
    out = {}
    for f in schema.fields:
        stored = (f.metadata or {}).get("delta.columnMapping.physicalName")
        if stored and stored != f.name:
            out[stored] = f.name
    return out


def snapshot(table: Store, selection: Selection) -> Snapshot:
    delta = load(table, selection)
    version = delta.version()
    actions = pa.table(delta.get_add_actions(flatten=False))
    vectors = pa.table(delta.deletion_vectors())
    masks = vectors["selection_vector"].combine_chunks()
    counts = np.bincount(pc.list_parent_indices(masks).to_numpy()[
        ~pc.list_flatten(masks).to_numpy(zero_copy_only=False)], minlength=len(masks))
    deleted = {relative(table, delta.table_uri, path, encoded=True): (path, str(n))
               for path, n in zip(vectors["filepath"].to_pylist(), counts.tolist())}
    files = []
    typed = actions["partition"].combine_chunks() if "partition" in actions.column_names \
        else None
    partitions = typed.to_pylist() if typed is not None else [None] * actions.num_rows
    names, schema = stored_names(delta.schema()), pa.schema(delta.schema().to_arrow())
    for i, (path, size, partition) in enumerate(zip(
            actions["path"].to_pylist(), actions["size_bytes"].to_pylist(), partitions)):
        rel = relative(table, delta.table_uri, path, encoded=True)
        reading = (DELETION_VECTOR, str(version), *deleted[rel]) if rel in deleted else ()
        constants = None if typed is None else pa.Table.from_struct_array(typed.slice(i, 1))
        files.append(data_file(rel, size, "delta", partition or {},
                               with_table_columns(reading, names, constants, schema=schema)))
    return Snapshot("delta", str(version), sorted(files, key=lambda f: f.rel_path),
                    commit_time(table, version), schema=schema)


def commit_time(table: Store, version: int) -> int | None:
    """The version's commit time (ms): its commit's commitInfo (one GET; delta-rs' history
    lists the whole log, and on some S3 servers never returns); None when the log no longer
    holds the commit (a checkpoint replaced it)."""
    try:
        commit = table.read_bytes("_delta_log", f"{version:020d}.json")
    except (StoreError, OSError):
        return None
    for line in commit.splitlines():
        info = json.loads(line).get("commitInfo") if line.strip() else None
        if info:
            return info.get("inCommitTimestamp") or info.get("timestamp")
    return None
