"""Table formats: which data files a snapshot of the table holds, and how to read each.

A plain directory's data files are its Parquet files (Store.list_files). An Iceberg, Delta or
Hudi table's are those of one snapshot of its log, never a deleted or uncommitted file, with
partition values from the format's metadata. A file whose rows the format changes without
rewriting it (Iceberg position deletes, Delta deletion vectors, a Hudi merge-on-read log)
carries how to read it (DataFile.reading, applied by formats.rows on the worker), and that
enters its fingerprint: new deletes recompute that file only. What lakestats cannot read
exactly (Iceberg equality deletes) is listed in Snapshot.inexact, and the version records it.
"""
from __future__ import annotations

import base64
import importlib
import json
import posixpath
from dataclasses import dataclass, field
from urllib.parse import unquote

import pyarrow as pa

from lakestats.core.errors import FormatUnsupported, LakestatsError
from lakestats.metastore.store import DataFile, Store, StoreError, s3_client

FORMATS = ("parquet", "iceberg", "delta", "hudi")
# DataFile.reading's kinds (formats.rows applies them)
POSITION_DELETES = "iceberg-position-deletes"    # data file URI, its delete files' URIs
DELETION_VECTOR = "delta-deletion-vector"        # version, data file URI, deleted row count
FILE_SLICE = "hudi-file-slice"                   # base file, log files (relative paths)
# wraps another way of reading: how the file's columns map to the table's (JSON: "names",
# stored -> table name; "ids", Iceberg field id -> table name; "types", table name -> the
# table's type of a column that a file may store narrower, as Arrow prints it), then two
# one-row Arrow IPC
# streams in base64 ("" for none): values of columns the file does not store (partition
# values), and defaults of columns a file may lack (Iceberg's initial-default); then the
# reading wrapped
TABLE_COLUMNS = "table-columns"


class FormatError(FormatUnsupported):
    """The table is not of the format asked for, or its snapshot cannot be read."""


@dataclass(frozen=True)
class Selection:
    """Which table and snapshot: `lakestats compute --format --snapshot --as-of --catalog`."""
    format: str = "auto"
    snapshot: str | None = None        # Iceberg snapshot id, Delta version, Hudi instant
    as_of: str | None = None           # ISO 8601 timestamp: the snapshot current then
    catalog: str | None = None         # an Iceberg catalog's URI (SQL or REST), with table_name
    table_name: str | None = None
    catalog_name: str = "default"      # the name the catalog's tables are registered under


@dataclass
class Snapshot:
    format: str
    id: str | None                     # None for a plain directory
    files: list[DataFile]
    timestamp_ms: int | None = None
    inexact: dict[str, str] = field(default_factory=dict)    # rel_path -> why
    manifests: object = None           # Iceberg: formats.iceberg.Manifests
    # the table's columns when the format says (Delta): files may hold more, such as the
    # _change_type of Spark's change data feed, or fewer; None: every column files hold
    schema: pa.Schema | None = None

    @property
    def columns(self) -> tuple[str, ...] | None:
        return None if self.schema is None else tuple(self.schema.names)

    def describe(self) -> dict:
        """What a version records of the snapshot it describes."""
        return {"format": self.format, "snapshot": self.id, "snapshot_ms": self.timestamp_ms,
                **({"inexact": self.inexact} if self.inexact else {})}


def detect(table: Store) -> str:
    """The table's format, from what its root holds."""
    if table.exists(".hoodie", "hoodie.properties"):
        return "hudi"
    if listed(table.child("_delta_log")):
        return "delta"
    if any(f.rel_path.endswith(".metadata.json") for f in listed(table.child("metadata"))):
        return "iceberg"
    return "parquet"


def listed(root: Store) -> list[DataFile]:
    try:
        return root.list_files()
    except StoreError:
        return []


def open_snapshot(table_uri: str, selection: Selection = Selection()) -> Snapshot:
    """The data files of the selected snapshot (the current one unless one is named)."""
    table = Store(table_uri)
    name = selection.format
    if name == "auto":
        name = "iceberg" if selection.catalog else detect(table)
    if name not in FORMATS:
        raise FormatError(f"--format {name}: expected auto or one of {', '.join(FORMATS)}")
    if name == "parquet":
        if selection.snapshot or selection.as_of:
            raise FormatError(f"{table.uri}: a plain directory of Parquet files has no "
                              "snapshots (--format iceberg, delta or hudi)")
        from lakestats.formats import hive
        return Snapshot("parquet", None, hive.listed(table.list_entries()))
    module = importlib.import_module(f"{__name__}.{name}")
    try:
        return module.snapshot(table, selection)
    except ImportError as e:
        raise FormatError(f"{table.uri}: {name} tables need the {e.name} package "
                          "(pip install 'lakestats[formats]')") from e
    except LakestatsError:
        raise
    except Exception as e:     # noqa: BLE001 (pyiceberg, delta-rs and hudi-rs share no base)
        first = (str(e).strip().splitlines() or [""])[0]
        raise FormatError(f"{table.uri}: {name} cannot read the table's snapshot "
                          f"({type(e).__name__}: {first})") from e


def relative(table: Store, location: str, path: str, encoded: bool = False) -> str:
    """A data file's path relative to the table root, from the format's own path of it (an
    absolute URI under `location`, the table's location as the format records it, or a
    relative one: to the table root, or when `location` is itself relative, as some writers
    record it, a path under it). `encoded`: the format writes paths URI-encoded (Delta), not
    literally (Iceberg: a partition on a timestamptz has `%3A` in its folder names)."""
    decoded = unquote if encoded else str
    for base in {_bare(location), _bare(table.uri if table.is_s3 else table.root)}:
        if _bare(path).startswith(base + "/"):
            return decoded(_bare(path)[len(base) + 1:])
    if not _absolute(path) and _absolute(location) and not _bare(path).startswith("../"):
        return decoded(path)
    raise FormatError(f"{path}: the data file lies outside the table root {table.uri}")


def _absolute(path: str) -> bool:
    return "://" in path or path.startswith("/") or path.startswith("file:")


def _bare(uri: str) -> str:
    """A URI without its scheme's spelling: file:///a, file:/a and /a are one path; s3a is s3."""
    for prefix, bare in (("file://", ""), ("file:", ""), ("s3a://", "s3://"),
                         ("s3n://", "s3://")):
        if uri.startswith(prefix):
            uri = bare + uri[len(prefix):]
            break
    return uri.rstrip("/") if "://" in uri else posixpath.normpath(uri)


def data_file(rel_path: str, size: int, format_name: str, partition: dict | None,
              reading: tuple[str, ...] = ()) -> DataFile:
    """A snapshot's data file. Formats never rewrite a data file in place, so its size and
    how it is read (its deletes, its columns) fingerprint its rows."""
    values = None if partition is None else tuple(
        (k, None if v is None else str(v)) for k, v in partition.items())
    return DataFile(rel_path, size, format_name, values, reading)


def with_table_columns(reading: tuple[str, ...], names: dict[str, str] | None = None,
                       constants: pa.Table | None = None, ids: dict[int, str] | None = None,
                       defaults: pa.Table | None = None, schema: pa.Schema | None = None
                       ) -> tuple[str, ...]:
    """`reading` with the file's columns mapped to the table's (`names`: stored name -> table
    name; `ids`: field id -> table name, a stored column whose id is not there dropped), the
    columns of one-row `constants` added, and those of one-row `defaults` added where the file
    lacks them; a column the file stores narrower than the table's `schema` types it (a type
    promotion: int to long, float to double, a wider decimal, date to timestamp, or to string
    as Hudi allows) is read as the table's type, and a timestamp stored without a zone is in
    the zone the table gives it (Spark's INT96: UTC-adjusted, no zone in the file), at the
    stored precision. formats.rows applies them."""
    types = {f.name: str(f.type) for f in schema or [] if promotion_target(f.type)}
    if not (names or ids or types or _columns(constants) or _columns(defaults)):
        return reading
    spec = {"names": names or {}, **({"ids": {str(k): v for k, v in ids.items()}} if ids
                                     else {}), **({"types": types} if types else {})}
    return (TABLE_COLUMNS, json.dumps(spec, sort_keys=True), _ipc(constants), _ipc(defaults),
            *reading)


def promotion_target(t: pa.DataType) -> bool:
    """Whether a file may store a column of the table's type `t` as another type, to be read
    as `t` (formats.rows.promoted)."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_timestamp(t) or t in (pa.string(), pa.large_string()))


def _columns(table: pa.Table | None) -> int:
    return 0 if table is None else table.num_columns


def _ipc(table: pa.Table | None) -> str:
    """A one-row table as an Arrow IPC stream in base64, its field metadata left out ("" for
    none)."""
    if not _columns(table):
        return ""
    table = table.cast(pa.schema([f.remove_metadata() for f in table.schema]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


def s3_options() -> dict:
    """The endpoint, region and credentials botocore resolved (the AWS SDK's configuration),
    for the formats' own S3 clients."""
    meta = s3_client().meta
    options = {"region": meta.region_name or "us-east-1"}
    if meta.endpoint_url and not meta.endpoint_url.split("//")[-1].endswith("amazonaws.com"):
        options["endpoint"] = meta.endpoint_url
    import boto3
    credentials = boto3.Session().get_credentials()
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        options.update(key=frozen.access_key, secret=frozen.secret_key)
        if frozen.token:
            options["token"] = frozen.token
    return options


def object_store_options(table: Store) -> dict | None:
    """Storage options of the Rust object_store crate (delta-rs, hudi-rs) for the table."""
    if not table.is_s3:
        return None
    options = s3_options()
    out = {"AWS_REGION": options["region"], "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    if "endpoint" in options:
        out.update(AWS_ENDPOINT_URL=options["endpoint"],
                   AWS_ALLOW_HTTP=str(options["endpoint"].startswith("http:")).lower())
    for name, key in (("AWS_ACCESS_KEY_ID", "key"), ("AWS_SECRET_ACCESS_KEY", "secret"),
                      ("AWS_SESSION_TOKEN", "token")):
        if key in options:
            out[name] = options[key]
    return out
