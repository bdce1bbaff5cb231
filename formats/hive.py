"""Hive-style directory columns of a plain directory of Parquet files: `sale_date=2024-03-01/`
makes `sale_date` a column of every row of the files under it, with every statistic, as Spark
reads such a table.

Types are Spark's partition-column inference over the table's values of the column (int,
then bigint, double, date, else string; `__HIVE_DEFAULT_PARTITION__` is null), so a file's
column depends on its neighbours' values: the type enters the file's reading, hence its
fingerprint, and a value that changes the inferred type recomputes the column's files. A
file seen alone (an event) takes the type the published statistics give the column when its
value parses as it, as a compute would.
"""
from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Mapping

import pyarrow as pa

from lakestats.formats import with_table_columns
from lakestats.metastore.store import DataFile, directory_values, reading_digest

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)
# Spark's order: the first type every value of the column parses as
TYPES = (pa.int32(), pa.int64(), pa.float64(), pa.date32(), pa.string())


def parse(text: str | None, t: pa.DataType):
    """`text` as a value of type `t`; ValueError if it is not one."""
    if text is None or text == DEFAULT_PARTITION:
        return None
    if pa.types.is_integer(t):
        if not re.fullmatch(r"[-+]?\d+", text):
            raise ValueError(text)
        value, (low, high) = int(text), INT32 if t == pa.int32() else INT64
        if not low <= value <= high:
            raise ValueError(text)
        return value
    if pa.types.is_floating(t):
        if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
            raise ValueError(text)
        return float(text)
    if pa.types.is_date(t):
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            raise ValueError(text)
        return dt.date.fromisoformat(text)
    return text


def infer(values: Iterable[str | None]) -> pa.DataType:
    """The type of a directory column from its values, as Spark infers it: a column whose
    every value is null (the default partition) is a string, as Spark makes its NullType."""
    values = list(values)
    if all(v is None or v == DEFAULT_PARTITION for v in values):
        return pa.string()
    return next(t for t in TYPES if infer_as(values, t))      # every value is a string


def with_columns(files: list[DataFile], known: pa.Schema | None = None) -> list[DataFile]:
    """`files` with their directory values as typed columns of their rows: typed as inferred
    over `files`, or for the columns `known` types (the published statistics', for a file
    seen alone), as it types them where the values parse."""
    # a file's values are its directory's (or its format's): gathered once per place
    places = [(f.rel_path.rpartition("/")[0], f.partition) for f in files]
    own: dict[tuple, dict[str, str | None]] = {}
    for f, place in zip(files, places):
        if place not in own:
            own[place] = f.partition_values
    readings = _readings(own, known)
    if readings is None:
        return files
    return [DataFile(f.rel_path, f.size, f.etag, f.partition, readings[place], f.modified_ns)
            if readings[place] else f for f, place in zip(files, places)]


def listed(entries: list[tuple[str, int, str, int | None]]) -> list[DataFile]:
    """A plain directory's listing (Store.list_entries) as DataFiles typed as with_columns
    types them, each made once."""
    listing = Listing(entries)
    return [listing.file(i) for i in range(len(entries))]


class Listing(Mapping):
    """A plain directory's files now (Store.list_entries), by path, typed as with_columns
    types them: their paths, sizes, ETags and reading digests as columns, for a plan to
    compare with the published ones as arrays (pruning.freshness); a file's DataFile is made
    when it is asked for."""

    def __init__(self, entries: list[tuple[str, int, str, int | None]]):
        self.entries = entries
        self.paths, self.sizes, self.etags, _ = (list(c) for c in zip(*entries)) if entries \
            else ([], [], [], [])
        self._directories = [p.rpartition("/")[0] for p in self.paths]
        self._readings = _readings({d: dict(directory_values(d))
                                    for d in set(self._directories)}) or {}
        self._position: dict[str, int] | None = None

    def reading_digests(self) -> list[str]:
        """Each file's metastore.store.reading_digest, one per directory."""
        digests = {d: reading_digest(r) for d, r in self._readings.items()}
        return [digests.get(d, "") for d in self._directories]

    def file(self, i: int) -> DataFile:
        path, size, etag, modified = self.entries[i]
        return DataFile(path, size, etag, None, self._readings.get(self._directories[i], ()),
                        modified)

    def __getitem__(self, path: str) -> DataFile:
        return self.file(self._positions()[path])

    def __contains__(self, path) -> bool:
        return path in self._positions()

    def _positions(self) -> dict[str, int]:
        if self._position is None:
            self._position = {p: i for i, p in enumerate(self.paths)}
        return self._position

    def __iter__(self):
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self.paths)


def _readings(own: dict, known: pa.Schema | None = None) -> dict | None:
    """How the files of each place (with these directory values) are read; None when no
    place has any."""
    values: dict[str, set] = {}
    for found in own.values():
        for k, v in found.items():
            values.setdefault(k, set()).add(v)
    if not values:
        return None
    types = {k: infer(vs) for k, vs in values.items()}
    if known is not None:
        for k, vs in values.items():
            if k in known.names and infer_as(vs, known.field(k).type):
                types[k] = known.field(k).type
    return {place: _reading(tuple(found.items()), tuple(types[k] for k in found))
            for place, found in own.items()}


def infer_as(values: Iterable[str | None], t: pa.DataType) -> bool:
    """Whether every value is one of type `t`."""
    try:
        for v in values:
            parse(v, t)
        return True
    except ValueError:
        return False


@functools.lru_cache(maxsize=1 << 12)    # a table's directories, planned again and again
def _reading(own: tuple[tuple[str, str | None], ...], types: tuple[pa.DataType, ...]
             ) -> tuple[str, ...]:
    """How a file with these directory values (of these types) is read: with them as typed
    columns."""
    if not own:
        return ()
    return with_table_columns((), constants=pa.table({
        k: pa.array([parse(v, t)], t) for (k, v), t in zip(own, types)}))
