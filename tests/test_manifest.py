"""A version's manifest.json as a typed Manifest: what compute writes reads back as written,
manifests written before manifest_version existed still read (as version 1), a newer format
version is refused naming the file, and a misspelt field is an error, not a silent None."""
from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pytest

from lakestats.core.errors import StatisticsMissing
from lakestats.core.settings import Settings
from lakestats.metastore import files
from lakestats.metastore.layout import LATEST, MANIFEST, Layout
from lakestats.metastore.manifest import (MANIFEST_VERSION, Manifest, ManifestTooNew,
                                          read_manifest, record_file, write_manifest)
from lakestats.metastore.reader import StatisticsNotFound, StatisticsReader
from tests.tables import mixed, write

SCHEMA = files.encode_schema(pa.schema([("id", pa.int64()), ("city", pa.string())]))

# manifest.json as compute wrote it before manifest_version existed (the keys of a plain
# directory's version, "inexact" absent as Snapshot.describe leaves it without deletes)
BEFORE_MANIFEST_VERSION = {
    "version": "v000002", "created": "2026-11-01T10:00:00Z", "table": "s3://lake/events",
    "row_count": 1200, "partition_count": 3, "schema": SCHEMA,
    "missing": {"day=3/c.parquet": "ArrowInvalid: not a Parquet file"},
    "settings": Settings().recorded(), "format": "parquet", "snapshot": None,
    "snapshot_ms": None,
    "frequency_lists": {"id": {"version": "v000001", "stale_rows": 40},
                        "city": {"version": "v000002", "stale_rows": 0}},
    "sketches_stale": True, "value_index": ["city"],
    "files": {"statistics.parquet": 4096, "partitions.parquet": 2048},
}


def publish_raw(root, data: dict) -> Layout:
    """A version directory holding `data` as its manifest.json, published by LATEST."""
    layout = Layout(str(root))
    layout.version(data["version"]).write_bytes(json.dumps(data).encode(), MANIFEST)
    layout.root.write_bytes(json.dumps({"version": data["version"]}).encode(), LATEST)
    return layout


def on_disk(layout: Layout, version: str) -> dict:
    return json.loads(layout.version(version).read_bytes(MANIFEST))


def test_a_computed_manifest_round_trips(tmp_path, run):
    """Every key compute writes is a field; reading and writing again changes nothing."""
    write(tmp_path / "a.parquet", mixed(500, seed=1))
    run(tmp_path)
    layout = Layout(f"{tmp_path}/_lakestats")
    raw = on_disk(layout, "v000001")
    manifest = read_manifest(layout, "v000001")
    assert manifest == StatisticsReader(layout.uri).manifest
    assert manifest.as_json() == raw and Manifest.from_json(raw) == manifest
    assert manifest.unknown_keys == {}                  # compute writes only known keys
    assert raw["manifest_version"] == manifest.manifest_version == MANIFEST_VERSION
    assert (manifest.version, manifest.table, manifest.format, manifest.snapshot) == \
        ("v000001", str(tmp_path), "parquet", None)
    assert manifest.row_count == 500 and manifest.partition_count == 1
    assert set(manifest.files) == {f.rel_path for f in layout.version("v000001").list_files()
                                   if f.rel_path != MANIFEST}
    assert set(manifest.frequency_lists) <= {f.name for f in files.decode_schema(
        manifest.schema)}


def test_write_and_record_file_go_through_the_manifest(tmp_path):
    layout = Layout(str(tmp_path))
    version = layout.version("v000002")
    version.write_bytes(b"x" * 10, "statistics.parquet")
    written = write_manifest(layout, Manifest.from_json(BEFORE_MANIFEST_VERSION))
    assert written.files == {"statistics.parquet": 10}     # the sizes found, not the ones given
    assert read_manifest(layout, "v000002") == written
    version.write_bytes(b"r" * 7, "ranks.parquet")
    recorded = record_file(layout, "v000002", "ranks.parquet")
    assert recorded == dataclasses.replace(
        written, files={"statistics.parquet": 10, "ranks.parquet": 7})
    assert read_manifest(layout, "v000002") == recorded


def test_a_manifest_without_manifest_version_reads_as_version_1(tmp_path):
    layout = publish_raw(tmp_path, BEFORE_MANIFEST_VERSION)
    manifest = StatisticsReader(layout.uri).manifest
    assert manifest.manifest_version == 1
    assert (manifest.row_count, manifest.partition_count, manifest.missing, manifest.value_index,
            manifest.sketches_stale, manifest.inexact) == (
        1200, 3, {"day=3/c.parquet": "ArrowInvalid: not a Parquet file"}, ["city"], True, {})
    assert manifest.frequency_lists["id"] == {"version": "v000001", "stale_rows": 40}
    # written back (record_file's rewrite), it keeps every key and gains manifest_version
    assert manifest.as_json() == {**BEFORE_MANIFEST_VERSION, "manifest_version": 1,
                                  "inexact": {}, "value_index_layers": []}


def test_the_oldest_manifests_still_read(tmp_path):
    """Before table formats, value indexes and frequency lists: the keys absent take their
    defaults; before the partition index (a "partitions" map), the version is refused as
    written by an older lakestats, and the unknown key survives a rewrite."""
    old = {k: BEFORE_MANIFEST_VERSION[k] for k in (
        "version", "created", "table", "row_count", "partition_count", "schema", "missing",
        "settings")}
    manifest = StatisticsReader(publish_raw(tmp_path / "a", old).uri).manifest
    assert (manifest.format, manifest.snapshot, manifest.snapshot_ms, manifest.value_index,
            manifest.frequency_lists, manifest.files, manifest.sketches_stale) == \
        ("parquet", None, None, [], {}, {}, False)

    first = {**{k: old[k] for k in ("version", "created", "table", "row_count", "schema",
                                     "missing")},
             "partitions": {"a.parquet": {"size": 10, "row_count": 1200}}}
    layout = publish_raw(tmp_path / "b", first)
    with pytest.raises(StatisticsNotFound, match="written by an older lakestats"):
        StatisticsReader(layout.uri)
    manifest = read_manifest(layout)
    assert manifest.partition_count is None and manifest.settings == {}
    assert manifest.unknown_keys == {"partitions": first["partitions"]}
    assert manifest.as_json()["partitions"] == first["partitions"]


def test_a_newer_manifest_version_is_refused_naming_the_file(tmp_path):
    newer = {**BEFORE_MANIFEST_VERSION, "manifest_version": MANIFEST_VERSION + 1,
             "layout_of_the_future": True}
    layout = publish_raw(tmp_path, newer)
    path = layout.version("v000002").uri_of(MANIFEST)
    expected = (rf"{path}: manifest_version {MANIFEST_VERSION + 1}, .* reads up to "
                rf"manifest_version {MANIFEST_VERSION}\b")
    for read in (lambda: StatisticsReader(layout.uri), lambda: read_manifest(layout),
                 lambda: read_manifest(layout, "v000002")):
        with pytest.raises(ManifestTooNew, match=expected) as refused:
            read()                  # a compute too: never taken for "nothing published"
        assert isinstance(refused.value, StatisticsMissing)
    before = layout.version("v000002").read_bytes(MANIFEST)
    layout.version("v000002").write_bytes(b"r", "ranks.parquet")
    with pytest.raises(ManifestTooNew):
        record_file(layout, "v000002", "ranks.parquet")
    assert layout.version("v000002").read_bytes(MANIFEST) == before     # not rewritten


def test_a_misspelt_field_is_an_error():
    manifest = Manifest.from_json(BEFORE_MANIFEST_VERSION)
    with pytest.raises(AttributeError):
        _ = manifest.row_cont
    with pytest.raises(AttributeError):
        _ = manifest.get                     # no dict-like access left to fall back on
    with pytest.raises(TypeError):
        _ = manifest["row_count"]
    with pytest.raises(TypeError):
        dataclasses.replace(manifest, row_cont=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.row_count = 1
