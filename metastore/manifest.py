"""A table version's manifest.json and the LATEST pointer.

manifest.json: {"version": "v000003", "created": ISO 8601, "table": table URI,
                "row_count": n, "partition_count": n,
                "schema": base64 Arrow IPC schema of the table,
                "missing": {rel_path: reason}, "settings": what the statistics depend on,
                "frequency_lists": {column: {"version": whose frequencies.parquet holds the
                                              column's list, "stale_rows": rows changed since
                                              it was exact}},
                "sketches_stale": true when the table's sketches still hold the values of
                                  partitions removed since they were merged anew}
                The partitions themselves are in the version's partition index
                (partitions.parquet, metastore.index), read only by lookups that need them.
LATEST:        {"version": "v000003"}
"""
from __future__ import annotations

import json

from metastore.layout import LATEST, MANIFEST, Layout


def dumps(obj) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True).encode()


def version_name(number: int) -> str:
    return f"v{number:06d}"


def version_number(name: str) -> int:
    return int(name.lstrip("v"))


def latest_version(layout: Layout) -> str | None:
    try:
        return json.loads(layout.root.read_bytes(LATEST))["version"]
    except (FileNotFoundError, OSError):
        return None


def read_manifest(layout: Layout, version: str | None = None) -> dict | None:
    """The manifest of `version`, by default of the published one (None if there is none)."""
    version = version or latest_version(layout)
    if version is None:
        return None
    return json.loads(layout.version(version).read_bytes(MANIFEST))


def write_manifest(layout: Layout, manifest: dict) -> None:
    layout.version(manifest["version"]).write_bytes(dumps(manifest), MANIFEST)


def point_latest(layout: Layout, version: str) -> None:
    """The atomic switch: readers see the old version or this one."""
    layout.root.write_bytes(dumps({"version": version}), LATEST)
