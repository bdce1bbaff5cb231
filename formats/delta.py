"""Delta Lake (delta-rs): a version's data files from its transaction log.

A file with a deletion vector is read without the rows it deletes (formats.rows), so its
statistics stay exact. A file's vector only ever grows (a new one replaces it with more rows
deleted), so the count of rows it deletes names it in the file's fingerprint.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.formats import (DELETION_VECTOR, FormatError, Selection, Snapshot, data_file,
                               object_store_options, relative)
from lakestats.metastore.store import Store


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
    vectors = pa.table(delta.deletion_vectors())
    masks = vectors["selection_vector"].combine_chunks()
    counts = np.bincount(pc.list_parent_indices(masks).to_numpy()[
        ~pc.list_flatten(masks).to_numpy(zero_copy_only=False)], minlength=len(masks))
    deleted = {relative(table, delta.table_uri, path): (path, str(n))
               for path, n in zip(vectors["filepath"].to_pylist(), counts.tolist())}
    files = []
    partitions = actions["partition"].to_pylist() if "partition" in actions.column_names \
        else [None] * actions.num_rows
    for path, size, partition in zip(actions["path"].to_pylist(),
                                     actions["size_bytes"].to_pylist(), partitions):
        rel = relative(table, delta.table_uri, path)
        reading = (DELETION_VECTOR, str(version), *deleted[rel]) if rel in deleted else ()
        files.append(data_file(rel, size, "delta", partition or {}, reading))
    when = next((h.get("timestamp") for h in delta.history() if h.get("version") == version),
                None)
    return Snapshot("delta", str(version), sorted(files, key=lambda f: f.rel_path), when,
                    columns=tuple(f.name for f in delta.schema().fields))
