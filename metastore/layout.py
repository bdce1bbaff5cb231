"""Where everything lives under a statistics root (by default <table>/_lakestats, and
<table>/.hoodie/lakestats in a Hudi table):

    partitions/<rel_path>/<fingerprint>/  one data file's statistics, files below; its
                                          statistics.parquet is written last and marks the
                                          directory complete
    versions/<version>/                   a table version: the same three files, manifest.json,
                                          partitions.parquet (the partition index),
                                          value_index.parquet (value -> partitions; or a
                                          layer of it, value_index_added.parquet) and, when
                                          ranks were asked for, ranks.parquet
    LATEST                                {"version": ...}: the published version, replaced
                                          atomically once the version's files are all written
    exchange/<job>/                       a running job's scratch space (the worker exchange),
                                          deleted when the job ends
"""
from __future__ import annotations

import functools

from lakestats.core.errors import UsageError
from lakestats.metastore.store import Store, is_hidden

STATISTICS, FREQUENCIES = "statistics.parquet", "frequencies.parquet"
HISTOGRAMS, RANKS = "histograms.parquet", "ranks.parquet"
MANIFEST, LATEST, INDEX = "manifest.json", "LATEST", "partitions.parquet"
VALUE_INDEX = "value_index.parquet"
VALUE_INDEX_ADDED = "value_index_added.parquet"   # a layer: the partitions a version added
BLOOMS = "blooms.bin"          # the Bloom filters of the partitions a version added
STATS_DIR = "_lakestats"       # hidden from the table's data files by its leading underscore
# in a Hudi table: hudi-rs takes files below the root for base files (a non-partitioned
# table's, or a partition's when it walks the partition directories) and fails on ours
HUDI_STATS_DIR = ".hoodie/lakestats"
# the object keys of statistics, wherever a table is in its bucket (EventBridge wildcards)
STATISTICS_KEYS = tuple(f"{anywhere}{folder}/*" for folder in (STATS_DIR, HUDI_STATS_DIR)
                        for anywhere in ("", "*/"))


def object_events_pattern(bucket: str) -> dict:
    """The EventBridge pattern of the bucket's object events that may concern data files:
    created or deleted objects, statistics left out (lakestats' own writes wake nothing)."""
    return {"source": ["aws.s3"], "detail-type": ["Object Created", "Object Deleted"],
            "detail": {"bucket": {"name": [bucket]}, "object": {
                "key": [{"anything-but": {"wildcard": list(STATISTICS_KEYS)}}]}}}


class Layout:
    """The paths of one statistics root."""

    def __init__(self, stats_root: str):
        self.root = Store(stats_root)
        self.uri = self.root.uri

    @classmethod
    def of_table(cls, table_uri: str, stats_root: str | None = None) -> Layout:
        table = Store(table_uri)
        if stats_root:
            _outside_the_data(table, Store(stats_root))
            return cls(stats_root)
        return cls(table.uri_of(HUDI_STATS_DIR if _is_hudi(table.uri) else STATS_DIR))

    def partition(self, rel_path: str, fingerprint: str) -> Store:
        return self.root.child("partitions", rel_path, fingerprint)

    def partition_files(self, wanted: set[str]) -> dict[str, dict[str, int]]:
        """The files of the `wanted` partition directories ("<rel_path>/<fingerprint>") that
        exist, from one listing of them all (a LIST a thousand keys on S3): directory -> file
        name -> bytes. A partition of a data file whose path is hidden is not listed (it is
        computed again)."""
        root = self.root.child("partitions")
        if not (root.is_s3 or root.root_exists()):
            return {}
        found: dict[str, dict[str, int]] = {}
        for path, size, _, _ in root.list_entries():
            directory, _, name = path.rpartition("/")
            if directory in wanted:
                found.setdefault(directory, {})[name] = size
        return found

    def version(self, version: str) -> Store:
        return self.root.child("versions", version)

    def scratch(self, job: str) -> Store:
        return self.root.child("exchange", job)


def _outside_the_data(table: Store, stats: Store) -> None:
    """A statistics root inside the table must be hidden (a directory named _... or ...):
    a table's listing would otherwise take its files for data files, and its writes would
    wake the table's watcher, whose compute writes again."""
    inside = stats.is_s3 == table.is_s3 and (stats.root + "/").startswith(table.root + "/")
    if inside and not is_hidden(stats.root[len(table.root):].strip("/")):
        raise UsageError(f"--stats-root {stats.uri} is inside the table {table.uri}, where its "
                         "files would be read as data: name a hidden directory in it (_stats, "
                         ".stats) or one outside the table")


@functools.lru_cache(maxsize=1024)
def _is_hudi(table_uri: str) -> bool:
    """One existence check per process and table (a HEAD on S3): a table does not change
    format under a running process."""
    return Store(table_uri).exists(".hoodie", "hoodie.properties")
