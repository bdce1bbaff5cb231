"""A table version's manifest.json and the LATEST pointer.

manifest.json: {"manifest_version": the format of this file (MANIFEST_VERSION; absent: 1),
                "version": "v000003", "created": ISO 8601, "table": table URI,
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
                "inexact": {rel_path: why} files whose deletes were not applied,
                "value_index": [column] the columns value_index.parquet indexes,
                "value_index_layers": [] when the version's own value_index.parquet holds the
                                      index; else its layers, base first: [{"version": base},
                                      {"version": v, "removed": [rel_path], "added": n}, ...]
                                      (metastore.value_index)}
                Read and written only as a Manifest (below), which spells these keys.
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
from dataclasses import dataclass, field, fields, replace

from lakestats.core.errors import StatisticsMissing
from lakestats.metastore.layout import LATEST, MANIFEST, Layout
from lakestats.metastore.store import Store, StoreError

# The format of manifest.json that this code reads and writes. A manifest written before the
# field existed is version 1: the same keys, those added over time absent (the defaults below).
MANIFEST_VERSION = 1


class ManifestTooNew(StatisticsMissing):
    """A manifest.json written by a newer lakestats, in a format this one does not read."""


@dataclass(frozen=True)
class Manifest:
    """A table version's manifest.json (the keys: the module docstring). Each field is the
    JSON key of its name: from_json and as_json are the only code that spells the keys.
    Defaults are what an absent key means in a manifest an older lakestats wrote. Values
    inside stay as JSON has them (dicts, lists); updates go through dataclasses.replace."""
    version: str
    created: str
    table: str
    row_count: int
    schema: str                          # base64 Arrow IPC (metastore.files.encode_schema)
    partition_count: int | None = None   # None: written before the partition index
    missing: dict[str, str] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)     # core.settings.Settings.recorded()
    format: str = "parquet"
    snapshot: str | None = None
    snapshot_ms: int | None = None
    inexact: dict[str, str] = field(default_factory=dict)
    frequency_lists: dict[str, dict] = field(default_factory=dict)
    sketches_stale: bool = False
    value_index: list[str] = field(default_factory=list)
    value_index_layers: list[dict] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)
    manifest_version: int = MANIFEST_VERSION
    # Keys this code does not know, in a manifest of its format version or an older one (the
    # "partitions" of the first manifests, or a key a newer lakestats added without a new
    # format version): kept and written back as read, so that record_file's rewrite of a
    # manifest drops nothing. A newer format version is refused, never rewritten.
    unknown_keys: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict, source: str = MANIFEST) -> Manifest:
        """`source`: the file, for the error refusing a manifest_version newer than ours."""
        found = data.get("manifest_version", 1)
        if found > MANIFEST_VERSION:
            raise ManifestTooNew(f"{source}: manifest_version {found}, written by a newer "
                                 f"lakestats; this one reads up to manifest_version "
                                 f"{MANIFEST_VERSION} (upgrade lakestats)")
        keys = {f.name for f in fields(cls)} - {"unknown_keys"}
        known = {k: v for k, v in data.items() if k in keys}
        return cls(**{**known, "manifest_version": found},
                   unknown_keys={k: v for k, v in data.items() if k not in keys})

    @property
    def stale(self) -> bool:
        """Whether `compute --exact` would refold anything: a frequency list carried stale
        (rows changed since it was exact), or sketches holding removed partitions' values."""
        return self.sketches_stale or any(v.get("stale_rows") for v in
                                          self.frequency_lists.values())

    def as_json(self) -> dict:
        known = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "unknown_keys"}
        return {**self.unknown_keys, **known}


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


def _load(directory: Store) -> Manifest:
    return Manifest.from_json(json.loads(directory.read_bytes(MANIFEST)),
                              directory.uri_of(MANIFEST))


def published_manifest(layout: Layout) -> Manifest | None:
    """The published version's manifest, for readers: None if none was ever published;
    LatestLost if which version is published cannot be told."""
    version = latest_version(layout)
    if version is None:
        return None
    try:
        return _load(layout.version(version))
    except FileNotFoundError:
        raise LatestLost(f"{layout.uri}: {LATEST} names {version}, whose {MANIFEST} is "
                         f"missing; {REPUBLISH}") from None


def read_manifest(layout: Layout, version: str | None = None) -> Manifest | None:
    """The manifest of `version`; by default of the version a compute builds upon: the
    published one, None when there is none or which one it is cannot be told (the compute
    then starts from the partitions' statistics). Readers use published_manifest."""
    if version is None:
        try:
            return published_manifest(layout)
        except LatestLost:
            return None
    return _load(layout.version(version))


def write_manifest(layout: Layout, manifest: Manifest) -> Manifest:
    """Written last of its version: its "files" are the sizes of every other file there.
    Returns the manifest written."""
    directory = layout.version(manifest.version)
    sizes = {f.rel_path: f.size for f in directory.list_files() if f.rel_path != MANIFEST}
    written = replace(manifest, files=sizes)
    directory.write_bytes(dumps(written.as_json()), MANIFEST)
    return written


def record_file(layout: Layout, version: str, name: str) -> Manifest:
    """Add a file written after its version was published (ranks.parquet) to the manifest's
    sizes: one atomic rewrite, once the file is whole. Readers take the file only at the size
    recorded (a file not recorded, or since replaced, is not the version's). Returns the
    manifest written."""
    directory = layout.version(version)
    manifest = _load(directory)
    written = replace(manifest, files={**manifest.files, name: directory.size(name)})
    directory.write_bytes(dumps(written.as_json()), MANIFEST)
    return written


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
