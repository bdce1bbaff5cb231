"""A table version's manifest.json and the LATEST pointer.

manifest.json: {"version": "v000003", "created": ISO 8601, "table": table URI,
                "row_count": n, "partition_count": n,
                "schema": base64 Arrow IPC schema of the table,
                "missing": {rel_path: reason}, "settings": what the statistics depend on,
                "frequency_lists": {column: {"version": whose frequencies.parquet holds the
                                              column's list, "stale_rows": rows changed since
                                              it was exact}},
                "sketches_stale": true when the table's sketches still hold the values of
                                  partitions removed since they were merged anew,
                "files": {name: bytes} of the version's files, as written}
                The partitions themselves are in the version's partition index
                (partitions.parquet, metastore.index), read only by lookups that need them.
                "format": parquet | iceberg | delta | hudi, "snapshot": the table format's
                snapshot the version describes (Iceberg snapshot id, Delta version, Hudi
                instant; null for a plain directory), "snapshot_ms": its commit time,
                "inexact": {rel_path: why} files whose deletes were not applied
LATEST:        {"version": "v000003"}
snapshots/<snapshot>.json   {"version": ...}: the version that describes a format's snapshot

Without LATEST (lost, deleted), or when the manifest it names is gone, the newest version
with a manifest is the published one: a manifest is written after every other file of its
version.
"""
from __future__ import annotations

import json

from metastore.layout import LATEST, MANIFEST, Layout
from metastore.store import StoreError


def dumps(obj) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True).encode()


def version_name(number: int) -> str:
    return f"v{number:06d}"


def version_number(name: str) -> int:
    return int(name.lstrip("v"))


def latest_version(layout: Layout) -> str | None:
    return _named(layout) or _newest_complete(layout)


def _named(layout: Layout) -> str | None:
    try:
        return json.loads(layout.root.read_bytes(LATEST))["version"]
    except (FileNotFoundError, OSError, ValueError, KeyError):
        return None


def _newest_complete(layout: Layout) -> str | None:
    try:
        listed = layout.root.child("versions").list_files()
    except StoreError as e:
        if isinstance(e.__cause__, FileNotFoundError):
            return None                  # a local root without versions
        raise
    complete = [f.rel_path.split("/")[0] for f in listed
                if f.rel_path.count("/") == 1 and f.rel_path.endswith("/" + MANIFEST)]
    return max(complete, key=version_number, default=None)


def read_manifest(layout: Layout, version: str | None = None) -> dict | None:
    """The manifest of `version`, by default of the published one (None if there is none)."""
    if version is None:
        named = _named(layout)
        if named is not None:
            try:
                return json.loads(layout.version(named).read_bytes(MANIFEST))
            except FileNotFoundError:
                pass
        version = _newest_complete(layout)
        if version is None:
            return None
    return json.loads(layout.version(version).read_bytes(MANIFEST))


def write_manifest(layout: Layout, manifest: dict) -> None:
    layout.version(manifest["version"]).write_bytes(dumps(manifest), MANIFEST)


def point_snapshot(layout: Layout, snapshot: str, version: str) -> None:
    layout.root.write_bytes(dumps({"version": version}), "snapshots", f"{snapshot}.json")


def snapshot_version(layout: Layout, snapshot: str) -> str | None:
    """The version that describes a table format's snapshot (None if none was computed)."""
    try:
        return json.loads(layout.root.read_bytes("snapshots", f"{snapshot}.json"))["version"]
    except FileNotFoundError:
        return None


def point_latest(layout: Layout, version: str) -> None:
    """The atomic switch: readers see the old version or this one."""
    layout.root.write_bytes(dumps({"version": version}), LATEST)
