"""The worker side of table formats: a data file's rows as the format's reader returns them.

A file is read as it is, except:
- Iceberg position deletes and Delta deletion vectors: the positions that the delete files
  list for this file, or that its deletion vector marks, are dropped (the kernel skips them
  row group by row group);
- a Hudi merge-on-read slice with log files: hudi-rs reads it merged, and the merged rows
  are statistics' input, as an in-memory Parquet file.
"""
from __future__ import annotations

from posixpath import dirname

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from formats import DELETION_VECTOR, FILE_SLICE, POSITION_DELETES, FormatError, Selection
from metastore.store import Store


def open_rows(table: Store, rel_path: str, reading: tuple[str, ...] = ()
              ) -> tuple[pq.ParquetFile, np.ndarray | None]:
    """The file to read and the sorted row positions to leave out (None: none)."""
    if not reading:
        return table.open_parquet(rel_path, whole=True), None
    kind, *args = reading
    if kind == POSITION_DELETES:
        data_uri, *delete_uris = args
        return table.open_parquet(rel_path, whole=True), deleted_positions(data_uri, delete_uris)
    if kind == DELETION_VECTOR:
        return table.open_parquet(rel_path, whole=True), vector_positions(table, *args)
    if kind == FILE_SLICE:
        return _merged_slice(table, *args), None
    raise FormatError(f"{rel_path}: unknown way of reading {kind!r} (a newer coordinator?)")


def deleted_positions(data_uri: str, delete_uris: list[str]) -> np.ndarray:
    """The positions of `data_uri` that Iceberg position delete files list, sorted, unique."""
    found = []
    for uri in delete_uris:
        folder = Store(dirname(uri))
        deletes = folder.read_parquet(uri.rsplit("/", 1)[1], columns=["file_path", "pos"])
        found.append(deletes.filter(pc.equal(deletes["file_path"], data_uri))["pos"]
                     .to_numpy(zero_copy_only=False))
    return np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)


def vector_positions(table: Store, version: str, data_uri: str, _cardinality: str
                     ) -> np.ndarray:
    """The positions that the Delta deletion vector of `data_uri` at `version` deletes.
    delta-rs materializes the version's deletion vectors; this file's is kept."""
    from formats.delta import load
    vectors = pa.table(load(table, Selection("delta", version)).deletion_vectors())
    mine = vectors.filter(pc.equal(vectors["filepath"], data_uri))["selection_vector"]
    if not len(mine):
        raise FormatError(f"{data_uri}: no deletion vector at version {version}")
    return np.flatnonzero(~mine[0].values.to_numpy(zero_copy_only=False))


def _merged_slice(table: Store, base: str, *logs: str) -> pq.ParquetFile:
    from formats.hudi import load
    reader = load(table).create_file_group_reader_with_options()
    merged = pa.Table.from_batches([reader.read_file_slice_from_paths(base, list(logs))])
    sink = pa.BufferOutputStream()
    pq.write_table(merged, sink)
    return pq.ParquetFile(pa.BufferReader(sink.getvalue()))


def kept_mask(deleted: np.ndarray, start: int, rows: int) -> pa.Array | None:
    """Which of the rows [start, start + rows) are kept; None when all are."""
    lo, hi = np.searchsorted(deleted, [start, start + rows])
    if lo == hi:
        return None
    keep = np.ones(rows, bool)
    keep[deleted[lo:hi] - start] = False
    return pa.array(keep)
