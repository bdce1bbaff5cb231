"""Which of a table format's files Spark's own Parquet reader reads as the format defines, and
the values a file keeps outside itself, given to Spark as partition values: for the
`lakestats` data source (source.py), which hands the files to Spark's native scan.

A file's reading (formats.rows) may add to the Parquet file's rows only what Spark's reader can
be told: Delta's partition values; Iceberg's identity-partition values (every row of the file
holds its partition's, whether or not the file stores the column); columns it lacks, null.
Iceberg's columns are matched by field id, as Iceberg's readers do, which Spark's reader does
when FIELD_IDS is on and the schema carries the ids. Anything else (deletes, merged slices,
mapped names, non-null defaults) is refused, naming the file.
"""
from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa

from lakestats.formats import (DELETION_VECTOR, FILE_SLICE, POSITION_DELETES, TABLE_COLUMNS,
                               FormatError, Snapshot)
from lakestats.formats.rows import one_row
from lakestats.metastore.store import DataFile

FIELD_IDS = "spark.sql.parquet.fieldId.read.enabled"
STEPS = {POSITION_DELETES: "it has position deletes",
         DELETION_VECTOR: "it has a deletion vector",
         FILE_SLICE: "it is read merged with its log files"}


def spark_schemas(snapshot: Snapshot) -> dict:
    """{"schema": the table's columns, "partitionSchema": those given outside the files}, as
    Spark's JSON; a column matched by field id (Iceberg) carries it (FIELD_IDS)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    schema = from_arrow_schema(snapshot.schema)
    ids = {name: int(i) for i, name in _spec(snapshot.files[0].reading).get("ids", {}).items()} \
        if snapshot.files else {}
    for field in schema.fields:
        if field.name in ids:
            field.metadata = {**(field.metadata or {}), "parquet.field.id": ids[field.name]}
    outside = _outside_names(snapshot)
    return {"schema": schema.json(), "partitionSchema": from_arrow_schema(
        pa.schema([snapshot.schema.field(n) for n in outside])).json()}


def needs_field_ids(snapshot: Snapshot) -> bool:
    return bool(snapshot.files) and "ids" in _spec(snapshot.files[0].reading)


def partition_texts(table_uri: str, snapshot: Snapshot, kept: list[str]) -> dict[str, list]:
    """Each kept file's values given outside it, as text Spark casts to their types; a file
    whose rows Spark's Parquet reader would not give as the format defines is refused."""
    files = {f.rel_path: f for f in snapshot.files}
    names = _outside_names(snapshot)
    out = {}
    for rel in kept:
        outside, why = _native(files[rel])
        why = snapshot.inexact.get(rel) or why or (
            None if list(outside) == names else "its partition columns differ from the table's "
            f"other files ({list(outside)}, not {names})")
        if why:
            raise FormatError(f"{table_uri}: {rel}: {why}, which Spark's Parquet reader does not "
                              "apply: read the table with spark_bridge.read or the format's "
                              "Spark connector")
        out[rel] = [_text(outside[n], table_uri, rel) for n in names]
    return out


def _outside_names(snapshot: Snapshot) -> list[str]:
    """The columns the snapshot's files keep outside themselves (the first file's)."""
    return list(_native(snapshot.files[0])[0]) if snapshot.files else []


def _native(file: DataFile) -> tuple[dict, str | None]:
    """({column: value the file's rows hold, kept outside it}, why Spark's reader would not
    give the file's rows as the format reads them, or None)."""
    outside, reading = {}, file.reading
    while reading:
        kind, *args = reading
        if kind != TABLE_COLUMNS:
            return outside, STEPS.get(kind, f"it is read as {kind!r}")
        spec, constants, defaults, *inner = args
        if json.loads(spec)["names"]:
            return outside, "its columns are mapped to the table's names (column mapping)"
        if constants:
            outside |= one_row(constants).to_pylist()[0]
        for name, value in (one_row(defaults).to_pylist()[0] if defaults else {}).items():
            if _identity(file, name, value):
                outside[name] = value
            elif value is not None:    # (null is what Spark's reader gives a missing column)
                return outside, f"it may lack column {name}, whose default is {value!r}"
        reading = tuple(inner)
    return outside, None


def _identity(file: DataFile, name: str, value) -> bool:
    """Is `value` the file's identity-partition value of `name`? (Iceberg names a partition
    field like a column only when it is that column's identity; it keeps a date as days and a
    timestamp as microseconds since the epoch.)"""
    held = file.partition_values
    if name not in held or value is None or held[name] is None:
        return name in held and value is None and held[name] is None
    if isinstance(value, dt.datetime):
        epoch = dt.datetime(1970, 1, 1, tzinfo=value.tzinfo and dt.timezone.utc)
        value = (value - epoch) // dt.timedelta(microseconds=1)
    elif isinstance(value, dt.date):
        value = (value - dt.date(1970, 1, 1)).days
    return held[name] == str(value)


def _spec(reading: tuple[str, ...]) -> dict:
    return json.loads(reading[1]) if reading and reading[0] == TABLE_COLUMNS else {}


def _text(value, table_uri: str, rel: str) -> str | None:
    """A partition value as the text Spark's cast reads back exactly (timestamps as instants)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        return value.isoformat(sep=" ")
    if isinstance(value, (bytes, dict, list)):
        raise FormatError(f"{table_uri}: {rel}: a partition value of type {type(value).__name__} "
                          "cannot be given to Spark's Parquet reader: read the table with "
                          "spark_bridge.read")
    return repr(value) if isinstance(value, float) else str(value)
