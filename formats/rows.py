"""The worker side of table formats: a data file's rows as the format's reader returns them,
the one way lakestats reads a data file (partition statistics, exact ranks, the Spark bridge).

A file is read as it is, except:
- Iceberg position deletes and Delta deletion vectors: the positions that the delete files
  list for this file, or that its deletion vector marks, are dropped, row group by row group;
- a Hudi merge-on-read slice with log files: hudi-rs reads it merged, and the merged rows
  are read, as an in-memory Parquet file.
"""
from __future__ import annotations

from dataclasses import dataclass
from posixpath import dirname
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.formats import DELETION_VECTOR, FILE_SLICE, POSITION_DELETES, FormatError, Selection
from lakestats.metastore.store import Store


@dataclass
class Rows:
    """A data file's rows: those of `parquet` (a merged Hudi slice: in memory) but the ones at
    the `deleted` positions (sorted, unique; None: none)."""
    parquet: pq.ParquetFile
    deleted: np.ndarray | None = None

    @property
    def schema(self) -> pa.Schema:
        return self.parquet.schema_arrow

    @property
    def num_rows(self) -> int:
        stored = self.parquet.metadata.num_rows
        return stored - (0 if self.deleted is None else int(np.searchsorted(self.deleted,
                                                                             stored)))

    def row_groups(self, columns: list[str] | None = None) -> Iterator[pa.Table]:
        """The rows of each row group in turn (of the top-level `columns` only, if given):
        memory holds one row group's."""
        start = 0
        for group in range(self.parquet.num_row_groups):
            table = self.parquet.read_row_group(group, columns=columns)
            yield self._kept(table, start)
            start += table.num_rows

    def read(self, columns: list[str] | None = None) -> pa.Table:
        """Every row at once (of the top-level `columns` only, if given)."""
        return self._kept(self.parquet.read(columns=columns), 0)

    def _kept(self, table: pa.Table, start: int) -> pa.Table:
        """`table`, the stored rows from position `start` on, without the deleted ones."""
        if self.deleted is None:
            return table
        lo, hi = np.searchsorted(self.deleted, [start, start + table.num_rows])
        if lo == hi:
            return table
        keep = np.ones(table.num_rows, bool)
        keep[self.deleted[lo:hi] - start] = False
        return table.filter(keep)


def open_rows(table: Store, rel_path: str, reading: tuple[str, ...] = (), whole: bool = True
              ) -> Rows:
    """The rows of the data file at `rel_path`, read as `reading` says (DataFile.reading).
    whole=False when only some columns are read: on S3, a GET per column chunk read rather
    than one of the whole file."""
    if not reading:
        return Rows(table.open_parquet(rel_path, whole=whole))
    kind, *args = reading
    if kind == POSITION_DELETES:
        data_uri, *delete_uris = args
        return Rows(table.open_parquet(rel_path, whole=whole),
                    deleted_positions(data_uri, delete_uris))
    if kind == DELETION_VECTOR:
        return Rows(table.open_parquet(rel_path, whole=whole), vector_positions(table, *args))
    if kind == FILE_SLICE:
        return Rows(_merged_slice(table, *args))
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
    from lakestats.formats.delta import load
    vectors = pa.table(load(table, Selection("delta", version)).deletion_vectors())
    mine = vectors.filter(pc.equal(vectors["filepath"], data_uri))["selection_vector"]
    if not len(mine):
        raise FormatError(f"{data_uri}: no deletion vector at version {version}")
    return np.flatnonzero(~mine[0].values.to_numpy(zero_copy_only=False))


def _merged_slice(table: Store, base: str, *logs: str) -> pq.ParquetFile:
    from lakestats.formats.hudi import load
    reader = load(table).create_file_group_reader_with_options()
    merged = pa.Table.from_batches([reader.read_file_slice_from_paths(base, list(logs))])
    sink = pa.BufferOutputStream()
    pq.write_table(merged, sink)
    return pq.ParquetFile(pa.BufferReader(sink.getvalue()))
