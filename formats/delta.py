"""Delta Lake (delta-rs): a version's data files from its transaction log.

Files with deletion vectors are listed as inexact: their statistics bound their rows but
count the deleted ones too.
"""
from __future__ import annotations

import pyarrow as pa

from formats import FormatError, Selection, Snapshot, data_file, object_store_options, relative
from metastore.store import Store


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


def snapshot(table: Store, selection: Selection) -> Snapshot:
    delta = load(table, selection)
    version = delta.version()
    actions = pa.table(delta.get_add_actions(flatten=False))
    vectors = {relative(table, delta.table_uri, path)
               for path in pa.table(delta.deletion_vectors())["filepath"].to_pylist()}
    files = []
    partitions = actions["partition"].to_pylist() if "partition" in actions.column_names \
        else [None] * actions.num_rows
    for path, size, partition in zip(actions["path"].to_pylist(),
                                     actions["size_bytes"].to_pylist(), partitions):
        files.append(data_file(relative(table, delta.table_uri, path), size, "delta",
                               partition or {}))
    when = next((h.get("timestamp") for h in delta.history() if h.get("version") == version),
                None)
    return Snapshot("delta", str(version), sorted(files, key=lambda f: f.rel_path), when,
                    {p: "deletion vector not applied: counts include deleted rows"
                     for p in sorted(vectors)})
