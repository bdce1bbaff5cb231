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
                "files": {name: bytes} of every other file of the version, as written;
                         ranks.parquet, written after publication, is added once whole}
                The partitions themselves are in the version's partition index
                (partitions.parquet, metastore.index), read only by lookups that need them.
                "format": parquet | iceberg | delta | hudi, "snapshot": the table format's
                snapshot the version describes (Iceberg snapshot id, Delta version, Hudi
                instant; null for a plain directory), "snapshot_ms": its commit time,
                "inexact": {rel_path: why} files whose deletes were not applied
LATEST:        {"version": "v000003"}
snapshots/<snapshot>.json   {"version": ...}: the version that describes a format's snapshot

LATEST alone says which version is published: a version directory may be one a compute left
unpublished (it crashed before the swap, or lost to a newer version), manifest and all. So
readers never guess: without LATEST while version directories exist (LATEST lost, or no
version ever published), with a LATEST that does not parse, or naming a version whose manifest
is gone, they fail (LatestLost), saying that `lakestats compute` publishes anew; a table
without any version directory has no statistics yet. The next compute builds from the
partitions' statistics, as if none were published, and numbers its version past every
version directory (monostore.publish), never into one a crash left.
"""
from __future__ import annotations

import json

from lakestats.core.errors import StatisticsMissing
from lakestats.metastore.layout import LATEST, MANIFEST, Layout
from lakestats.metastore.store import StoreError


def dumps(obj) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True).encode()


def version_name(number: int) -> str:
    return f"v{number:06d}"


def version_number(name: str) -> int:
    return int(name.lstrip("v"))


class LatestLost(StatisticsMissing):
    """Which version is published cannot be told (LATEST lost or damaged, or the manifest it
    names gone): readers fail rather than guess; the next compute publishes anew."""


REPUBLISH = "run lakestats compute to publish the statistics anew"


def version_names(layout: Layout) -> list[str]:
    """Every version directory, published or not."""
    return [n for n in layout.root.child("versions").list_dirs()
            if n.startswith("v") and n[1:].isdigit()]


def latest_version(layout: Layout, lost_ok: bool = False) -> str | None:
    """The version LATEST names; None if none was ever published (no LATEST, no version
    directory). A lost or damaged LATEST raises LatestLost, or gives None with `lost_ok` (a
    compute then publishes anew); one that does not read (transient errors are retried
    first) raises StoreError."""
    try:
        data = layout.root.read_bytes(LATEST)
    except FileNotFoundError:
        if lost_ok or not version_names(layout):
            return None
        raise LatestLost(f"{layout.uri}: {LATEST} is missing while version directories exist "
                         "(it was lost, or no version was ever published): which one is "
                         f"published cannot be told; {REPUBLISH}") from None
    except OSError as e:
        raise StoreError(f"{layout.uri}: cannot read {LATEST} ({e}); try again") from e
    try:
        return json.loads(data)["version"]
    except (ValueError, KeyError, TypeError):
        if lost_ok:
            return None
        raise LatestLost(f"{layout.uri}: {LATEST} is damaged ({data[:80]!r}); "
                         f"{REPUBLISH}") from None


def published_manifest(layout: Layout) -> dict | None:
    """The published version's manifest, for readers: None if none was ever published;
    LatestLost if which version is published cannot be told."""
    version = latest_version(layout)
    if version is None:
        return None
    try:
        return json.loads(layout.version(version).read_bytes(MANIFEST))
    except FileNotFoundError:
        raise LatestLost(f"{layout.uri}: {LATEST} names {version}, whose {MANIFEST} is "
                         f"missing; {REPUBLISH}") from None


def read_manifest(layout: Layout, version: str | None = None) -> dict | None:
    """The manifest of `version`; by default of the version a compute builds upon: the
    published one, None when there is none or which one it is cannot be told (the compute
    then starts from the partitions' statistics). Readers use published_manifest."""
    if version is None:
        try:
            return published_manifest(layout)
        except LatestLost:
            return None
    return json.loads(layout.version(version).read_bytes(MANIFEST))


def write_manifest(layout: Layout, manifest: dict) -> None:
    """Written last of its version: "files" records the size of every other file there."""
    directory = layout.version(manifest["version"])
    sizes = {f.rel_path: f.size for f in directory.list_files() if f.rel_path != MANIFEST}
    directory.write_bytes(dumps({**manifest, "files": sizes}), MANIFEST)


def record_file(layout: Layout, version: str, name: str) -> None:
    """Add a file written after its version was published (ranks.parquet) to the manifest's
    sizes: one atomic rewrite, once the file is whole. Readers take the file only at the size
    recorded (a file not recorded, or since replaced, is not the version's)."""
    directory = layout.version(version)
    manifest = read_manifest(layout, version)
    manifest["files"] = {**manifest.get("files", {}), name: directory.size(name)}
    directory.write_bytes(dumps(manifest), MANIFEST)


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
