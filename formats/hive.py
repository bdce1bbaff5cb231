"""Hive-style directory columns of a plain directory of Parquet files: `sale_date=2024-03-01/`
makes `sale_date` a column of every row of the files under it, with every statistic, as Spark
reads such a table.

Types are Spark's partition-column inference (PartitioningUtils): each value is the first of
int, bigint, decimal(p, 0), double (as Java parses it: `NaN`, `1d`, `0x1p3`), date or string
it parses as (`__HIVE_DEFAULT_PARTITION__` is null), and a column's type is its values' types
widened as Spark widens them (int and double: double; bigint or a decimal beside a double:
string, as a double would lose digits). Spark also infers timestamps (`2024-01-01 10%3A30%3A00`),
read in the session's time zone; here they are strings (`SPARK_TIMESTAMP` finds them, and plans
leave comparisons with them to Spark). So a file's column depends on its
neighbours' values: the type enters the file's reading, hence its
fingerprint, and a value that changes the inferred type recomputes the column's files. A
file seen alone (an event) takes the type the published statistics give the column when its
value parses as it, as a compute would.
"""
from __future__ import annotations

import datetime as dt
import decimal
import functools
import re
from collections.abc import Iterable, Mapping

import pyarrow as pa

from lakestats.formats import with_table_columns
from lakestats.metastore.store import DataFile, directory_values, reading_digest

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)
_INTEGER = re.compile(r"[-+]?\d+")
_DECIMAL = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")         # Java's BigDecimal
# Java's Double.parseDouble, after it trims the text: a decimal or hexadecimal float with an
# optional f/d suffix, or NaN or Infinity
_DOUBLE = re.compile(r"[-+]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?"
                     r"|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][-+]?\d+)[fFdD]?)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_DECIMAL_DIGITS = 38
# a value Spark may type as a timestamp ("yyyy-MM-dd HH:mm:ss[.S]", or a date beside such
# values), generously: a date and a time of day
SPARK_TIMESTAMP = r"^\s*[+-]?\d{4,}-\d{1,2}-\d{1,2}[ T]\d{1,2}:\d{1,2}"


def parse(text: str | None, t: pa.DataType):
    """`text` as a value of type `t`; ValueError if it is not one."""
    if text is None or text == DEFAULT_PARTITION:
        return None
    if pa.types.is_integer(t):
        if not _INTEGER.fullmatch(text):
            raise ValueError(text)
        value, (low, high) = int(text), INT32 if t == pa.int32() else INT64
        if not low <= value <= high:
            raise ValueError(text)
        return value
    if pa.types.is_decimal(t):
        value = _whole_decimal(text)
        if value is None or len(value.as_tuple().digits) > t.precision:
            raise ValueError(text)
        return value
    if pa.types.is_floating(t):
        return _java_double(text)
    if pa.types.is_date(t):
        if not _DATE.fullmatch(text):
            raise ValueError(text)
        return dt.date.fromisoformat(text)
    return text


def guess(text: str):
    """A directory value as a plan guesses it where the statistics give no type (an integer, a
    date, or text)."""
    for parse_value in (int, dt.date.fromisoformat):
        try:
            return parse_value(text)
        except ValueError:
            pass
    return text


def _whole_decimal(text: str) -> decimal.Decimal | None:
    """A whole number as Spark takes one from Java's BigDecimal, of scale 0: "5.", "1.5e1",
    "1e5" (not "1.5", whose scale is 1)."""
    if not _DECIMAL.fullmatch(text):
        return None
    value = decimal.Decimal(text)
    return decimal.Decimal(int(value)) if value.as_tuple().exponent >= 0 else None


def _java_double(text: str) -> float:
    trimmed = text.strip("".join(map(chr, range(33))))     # Java's trim: code points <= 32
    if not _DOUBLE.fullmatch(trimmed):
        raise ValueError(text)
    number = trimmed.rstrip("fFdD")             # the suffix (hexadecimal digits end in p<n>)
    return float.fromhex(number) if "x" in number.lower() else float(number)


def _value_type(text: str | None) -> pa.DataType | None:
    """The type Spark infers for one directory value (None: null)."""
    if text is None or text == DEFAULT_PARTITION:
        return None
    for t in (pa.int32(), pa.int64()):
        if _parses(text, t):
            return t
    whole = _whole_decimal(text)
    if whole is not None and len(whole.as_tuple().digits) <= MAX_DECIMAL_DIGITS:
        return pa.decimal128(len(whole.as_tuple().digits), 0)
    for t in (pa.float64(), pa.date32()):
        if _parses(text, t):
            return t
    return pa.string()


def _parses(text: str, t: pa.DataType) -> bool:
    try:
        parse(text, t)
        return True
    except ValueError:
        return False


# a whole number's digits, as a decimal(p, 0) of it (DecimalType.forType)
_DIGITS = {pa.int32(): 10, pa.int64(): 20}


def _wider(a: pa.DataType | None, b: pa.DataType | None) -> pa.DataType | None:
    """Spark's findWiderTypeForPartitionColumn over the types _value_type gives."""
    if a is None or b is None or a == b:
        return b if a is None else a
    if pa.types.is_string(a) or pa.types.is_string(b):
        return pa.string()
    whole = [t for t in (a, b) if pa.types.is_integer(t) or pa.types.is_decimal(t)]
    if len(whole) == 2:
        if not (pa.types.is_decimal(a) or pa.types.is_decimal(b)):
            return pa.int64()
        return pa.decimal128(max(_DIGITS.get(t) or t.precision for t in whole), 0)
    if pa.types.is_float64(a) or pa.types.is_float64(b):      # int and double: double
        return pa.float64() if pa.int32() in (a, b) else pa.string()
    return pa.string()                                          # a date and a number


def infer(values: Iterable[str | None]) -> pa.DataType:
    """The type of a directory column from its values, as Spark infers it: a column whose
    every value is null (the default partition) is a string, as Spark makes its NullType."""
    values = [v for v in values if v is not None and v != DEFAULT_PARTITION]
    for t in (pa.int32(), pa.int64(), pa.date32()):   # the common cases, a value's test each
        if values and infer_as(values, t):
            return t
    return functools.reduce(_wider, map(_value_type, values), None) or pa.string()


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
