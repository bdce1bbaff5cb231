"""The worker side of table formats: a data file's rows as the format's reader returns them,
the one way lakestats reads a data file (partition statistics, exact ranks, the Spark bridge).

A file is read as it is, except:
- Iceberg position deletes and Delta deletion vectors: the positions that the delete files
  list for this file, or that its deletion vector marks, are dropped, row group by row group;
- a Hudi merge-on-read slice with log files: hudi-rs reads it merged, and the merged rows
  are read, as an in-memory Parquet file;
- columns as the table names them (Delta column mapping: a file stores `col-5f42...` for the
  table's `Company`; Iceberg: by field id, so that a renamed column is the same column and a
  dropped one, even if re-added under its name, is gone), and columns the file does not
  store: its partition values (Delta's partitionValues, typed) and the defaults of columns
  added after it was written (Iceberg's initial-default), each a column of that one value, so
  that they get every statistic (TABLE_COLUMNS).
"""
from __future__ import annotations

import base64
import functools
import json
import re
from dataclasses import dataclass, field
from posixpath import dirname
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.formats import (DELETION_VECTOR, FILE_SLICE, POSITION_DELETES, TABLE_COLUMNS,
                               FormatError, Selection)
from lakestats.metastore.store import Store

SPARK_VERSION = b"org.apache.spark.version"       # the footer key of files Spark wrote


@dataclass
class Rows:
    """A data file's rows: those of `parquet` (a merged Hudi slice: in memory) but the ones at
    the `deleted` positions (sorted, unique; None: none), its columns named as `names` says
    (stored -> table name) but the `dropped` ones, and `constants`' columns (one row) added to
    every row."""
    parquet: pq.ParquetFile
    deleted: np.ndarray | None = None
    names: dict[str, str] = field(default_factory=dict)
    constants: pa.Table | None = None
    dropped: frozenset[str] = frozenset()
    types: dict[str, pa.DataType] = field(default_factory=dict)   # table name -> its type

    @functools.cached_property
    def schema(self) -> pa.Schema:
        added = [] if self.constants is None else list(self.constants.schema)
        own = [self._typed(f.with_name(self.names.get(f.name, f.name)))
               for f in self.parquet.schema_arrow if f.name not in self.dropped]
        return pa.schema([f for f in own if f.name not in {a.name for a in added}] + added)

    def _typed(self, f: pa.Field) -> pa.Field:
        """A stored column (under its table name) as the table types it."""
        target = self.types.get(f.name)
        return f if target is None else f.with_type(promoted(f.type, target))

    def stored_name(self, name: str) -> str | None:
        """The file's name of a column of `schema` (None: a constant, not stored)."""
        if self.constants is not None and name in self.constants.column_names:
            return None
        return self._stored.get(name, name)

    @functools.cached_property
    def _stored(self) -> dict[str, str]:
        return {table: stored for stored, table in self.names.items()}

    @property
    def num_rows(self) -> int:
        stored = self.parquet.metadata.num_rows
        return stored - (0 if self.deleted is None else int(np.searchsorted(self.deleted,
                                                                             stored)))

    def row_groups(self, columns: list[str] | None = None) -> Iterator[pa.Table]:
        """The rows of each row group in turn (of the top-level `columns` only, if given):
        memory holds one row group's."""
        start, stored = 0, self._to_read(columns)
        for group in range(self.parquet.num_row_groups):
            table = self.parquet.read_row_group(group, columns=stored)
            yield self._shaped(self._kept(table, start), columns)
            start += table.num_rows

    def read(self, columns: list[str] | None = None) -> pa.Table:
        """Every row at once (of the top-level `columns` only, if given)."""
        return self._shaped(self._kept(self.parquet.read(columns=self._to_read(columns)), 0),
                            columns)

    def _to_read(self, columns: list[str] | None) -> list[str] | None:
        if columns is None:
            return None if self.constants is None and not self.dropped else [
                f.name for f in self.parquet.schema_arrow if f.name not in self.dropped
                and self.stored_name(self.names.get(f.name, f.name)) is not None]
        return [n for n in map(self.stored_name, columns) if n is not None]

    def _shaped(self, table: pa.Table, columns: list[str] | None) -> pa.Table:
        """Stored columns under the table's names, the constants added, in `columns` order."""
        if not self.names and self.constants is None and not self.dropped and not self.types:
            return table
        table = table.rename_columns([self.names.get(n, n) for n in table.column_names])
        typed = pa.schema([self._typed(f) for f in table.schema])
        if typed != table.schema:       # (a cast of no column would lose the row count)
            table = table.cast(typed)
        for name in ([] if self.constants is None else self.constants.column_names):
            if columns is None or name in columns:
                value = self.constants[name][0]
                table = table.append_column(self.constants.schema.field(name),
                                            pa.repeat(value, table.num_rows))
        return table.select(columns if columns is not None else self.schema.names)

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
        parquet = data_parquet(table, rel_path, whole)
        return Rows(parquet, types=int96_instants(parquet))
    kind, *args = reading
    if kind == TABLE_COLUMNS:
        spec, constants, defaults, *inner = args
        return _mapped(open_rows(table, rel_path, tuple(inner), whole), json.loads(spec),
                       one_row(constants), one_row(defaults))
    if kind == POSITION_DELETES:
        data_uri, *delete_uris = args
        return Rows(data_parquet(table, rel_path, whole),
                    deleted_positions(data_uri, delete_uris))
    if kind == DELETION_VECTOR:
        return Rows(data_parquet(table, rel_path, whole), vector_positions(table, *args))
    if kind == FILE_SLICE:
        return Rows(_merged_slice(table, *args))
    raise FormatError(f"{rel_path}: unknown way of reading {kind!r} (a newer coordinator?)")


def data_parquet(table: Store, rel_path: str, whole: bool = True) -> pq.ParquetFile:
    """A data file, opened. Spark writes timestamps as INT96 to the microsecond; read in
    Arrow's default nanoseconds, one past 2262 (Spark's 9999-12-31) wraps around to 1816
    (delta-rs reads them so): a Spark file's INT96 columns are read in microseconds."""
    parquet = table.open_parquet(rel_path, whole=whole)
    meta = parquet.metadata
    if SPARK_VERSION in (meta.metadata or {}) and _int96_columns(meta):
        return table.open_parquet(rel_path, whole=whole, int96_unit="us")
    return parquet


def int96_instants(parquet: pq.ParquetFile) -> dict[str, pa.DataType]:
    """A plain file's INT96 columns as UTC instants: Spark reads INT96 (Spark's, Hive's,
    Impala's) as an instant, which a session shows in its own zone; Arrow reads it without a
    zone, which would be wall-clock time, so plans in another zone compared other instants.
    (Table formats type them from the table's schema.)"""
    arrow = parquet.schema_arrow
    names = set(arrow.names)
    return {name: pa.timestamp(arrow.field(name).type.unit, "UTC")
            for name in _int96_columns(parquet.metadata)
            if name in names and pa.types.is_timestamp(arrow.field(name).type)}


def _int96_columns(meta: pq.FileMetaData) -> list[str]:
    """The paths of the file's INT96 leaf columns."""
    leaves = (meta.schema.column(j) for j in range(meta.num_columns))
    return [leaf.path for leaf in leaves if leaf.physical_type == "INT96"]


def _mapped(rows: Rows, spec: dict, constants: pa.Table | None, defaults: pa.Table | None
            ) -> Rows:
    """The file's rows with its columns mapped to the table's (formats.TABLE_COLUMNS)."""
    names, dropped = dict(spec["names"]), set()
    stored = rows.parquet.schema_arrow
    ids = [(f.name, (f.metadata or {}).get(b"PARQUET:field_id")) for f in stored]
    if "ids" in spec and any(i is not None for _, i in ids):   # else by name (name mapping)
        for name, i in ids:
            mapped = None if i is None else spec["ids"].get(i.decode())
            if mapped is None:
                dropped.add(name)
            else:
                names[name] = mapped
    if defaults is not None:
        held = {names.get(f.name, f.name) for f in stored if f.name not in dropped}
        lacking = [n for n in defaults.column_names if n not in held]
        if lacking:
            extra = defaults.select(lacking)
            constants = extra if constants is None else pa.Table.from_arrays(
                constants.columns + extra.columns, schema=pa.schema(
                    list(constants.schema) + list(extra.schema)))
    types = {names.get(stored, stored): t for stored, t in rows.types.items()}   # INT96
    types.update({name: parse_type(text) for name, text in spec.get("types", {}).items()})
    return Rows(rows.parquet, rows.deleted, names, constants, frozenset(dropped), types)


def promoted(stored: pa.DataType, table: pa.DataType) -> pa.DataType:
    """The type a column stored as `stored` is read as, in a table that types it `table`:
    the table's where that is a promotion the formats allow (to a wider integer, float to
    double, to a decimal of no less scale and integer digits, date to timestamp, a primitive
    to string), a timestamp without a zone in the table's zone at the stored precision, else
    as stored (lakestats' own checks then see the difference)."""
    if stored == table:
        return stored
    if pa.types.is_timestamp(stored) and pa.types.is_timestamp(table):
        return pa.timestamp(stored.unit, table.tz) if stored.tz is None else stored
    widens = (
        (pa.types.is_integer(stored) and pa.types.is_integer(table)
         and table.bit_width > stored.bit_width and pa.types.is_signed_integer(table))
        or (pa.types.is_floating(stored) and pa.types.is_floating(table)
            and table.bit_width > stored.bit_width)
        or (pa.types.is_decimal(stored) and pa.types.is_decimal(table)
            and table.scale >= stored.scale
            and table.precision - table.scale >= stored.precision - stored.scale)
        or (pa.types.is_integer(stored) and pa.types.is_decimal(table)
            and table.precision - table.scale >= len(str(2 ** stored.bit_width)))
        or (pa.types.is_date(stored) and pa.types.is_timestamp(table))
        or (table in (pa.string(), pa.large_string()) and (
            pa.types.is_integer(stored) or pa.types.is_floating(stored)
            or pa.types.is_decimal(stored) or pa.types.is_string(stored)
            or pa.types.is_large_string(stored) or pa.types.is_string_view(stored))))
    return table if widens else stored


def parse_type(text: str) -> pa.DataType:
    """An Arrow type from its printed form, for the types formats.promotion_target admits."""
    if m := re.fullmatch(r"(decimal(?:32|64|128|256))\((\d+), (-?\d+)\)", text):
        return getattr(pa, m.group(1))(int(m.group(2)), int(m.group(3)))
    if m := re.fullmatch(r"timestamp\[(\w+), tz=(.+)\]", text):
        return pa.timestamp(m.group(1), m.group(2))
    return pa.type_for_alias(text)


def one_row(stream: str) -> pa.Table | None:
    return pa.ipc.open_stream(base64.b64decode(stream)).read_all() if stream else None


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
