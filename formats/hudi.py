"""Apache Hudi (hudi-rs, read-only): an instant's file slices from the table's timeline.

A merge-on-read slice with log files, and a base file that is not Parquet (Lance), are read
by the worker through hudi-rs (formats.rows), so their statistics are those of the rows a
snapshot query returns. Columns are the table schema's: with its meta fields (`_hoodie_*`)
unless the table does not populate them (files then hold them empty, and hudi-rs leaves
them out).
"""
from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa

from lakestats.formats import (FILE_SLICE, FormatError, Selection, Snapshot, data_file,
                               object_store_options, with_table_columns)
from lakestats.metastore.store import Store


def load(table: Store):
    import hudi
    builder = hudi.HudiTableBuilder.from_base_uri(table.uri if table.is_s3 else table.root)
    for key, value in (object_store_options(table) or {}).items():
        builder = builder.with_storage_option(key.lower(), value)
    try:
        return builder.build()
    except Exception as e:           # hudi-rs raises its own HudiCoreError
        raise FormatError(f"{table.uri}: cannot read the Hudi table ({e})") from e


def snapshot(table: Store, selection: Selection) -> Snapshot:
    import hudi
    hoodie = load(table)
    timeline = hoodie.get_timeline()
    instants = sorted(timeline.get_completed_commits() + timeline.get_completed_deltacommits()
                      + timeline.get_completed_replacecommits(), key=lambda i: i.timestamp)
    upto = selection.snapshot or (selection.as_of and instant_of(selection.as_of))
    if selection.snapshot and upto not in {i.timestamp for i in instants}:
        raise FormatError(f"{table.uri}: no completed instant {selection.snapshot}")
    options = hudi.HudiReadOptions()
    if upto:
        options = options.with_as_of_timestamp(upto)
        instants = [i for i in instants if i.timestamp <= upto]
    try:
        slices = hoodie.get_file_slices(options)
    except Exception as e:
        raise FormatError(f"{table.uri}: cannot list the Hudi file slices as of "
                          f"{upto or 'the last instant'} ({e})") from e
    names = [f.name for f in hoodie.get_partition_schema()]
    meta = hoodie.hudi_options().get("hoodie.populate.meta.fields", "true") != "false"
    schema = pa.schema(hoodie.get_schema_with_meta_fields() if meta else hoodie.get_schema())
    files = []
    for s in slices:
        base = s.base_file_relative_path()
        logs = s.log_files_relative_paths() if s.has_log_files() else []
        merged = logs or not base.endswith(".parquet")
        files.append(data_file(base, s.base_file_size, "hudi",
                               _partition(s.partition_path, names),
                               with_table_columns((FILE_SLICE, base, *logs) if merged else (),
                                                  schema=schema)))
    last = instants[-1] if instants else None
    return Snapshot("hudi", last.timestamp if last else None,
                    sorted(files, key=lambda f: f.rel_path), last.epoch_mills if last else None,
                    schema=schema)


def instant_of(iso_time: str) -> str:
    """An ISO 8601 time as a Hudi instant (yyyyMMddHHmmssSSS, UTC)."""
    when = datetime.fromisoformat(iso_time)
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return when.strftime("%Y%m%d%H%M%S%f")[:17]


def _partition(path: str, names: list[str]) -> dict:
    """A slice's partition values from its partition path: k=v/... (Hive style) or v/..., or
    the whole path when it is one field's (a timestamp-based key generator's 2024/01/15/09 is
    `_hoodie_partition_path`'s value)."""
    if not path:
        return {}
    parts = path.split("/")
    if all("=" in p for p in parts):
        return dict(p.split("=", 1) for p in parts)
    if len(names) == 1:
        return {names[0]: path}
    if len(parts) != len(names):
        raise FormatError(f"{path}: a partition path of {len(parts)} parts for the "
                          f"partition fields {names}")
    return dict(zip(names, parts))
