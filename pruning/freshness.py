"""The table as it is now, against the version its statistics describe.

A plan may skip a file only when the statistics describe it as it is now. So every plan first
lists the table's current files (a plain directory: one listing, each file's size plus ETag or
mtime and how its directory values are typed, what the fingerprint compute uses hashes,
compared with the partition index's as arrays; a table format: its current snapshot, where a
file given deletes since changes its fingerprint) and sorts the version's files into:

- described: in the table now, unchanged: the statistics decide;
- gone: removed since: never read;
- unknown: landed or rewritten since, or left without statistics by --allow-partial: always
  read, never fully matching, their rows unbounded for LIMIT and top-k.

`assume_current` skips the listing for a caller who knows the statistics are current; the
version's own files are then taken as the table's (and the files --allow-partial left out
are still read whole). A table without statistics (no manifest) has every file unknown.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.formats import Selection, Snapshot, detect, open_snapshot
from lakestats.formats.hive import Listing
from lakestats.metastore.manifest import Manifest
from lakestats.metastore.store import DataFile, Store


@dataclass
class Freshness:
    table_uri: str
    manifest: Manifest | None            # None: the table has no statistics
    form: str                            # the table's format
    assumed_current: bool
    now: Mapping[str, DataFile] = field(default_factory=dict)   # the table's files now
    gone: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)          # sorted
    snapshot: Snapshot | None = None     # a table format's current snapshot (None: a listing)
    published: list[str] = field(default_factory=list)   # assume_current: the version's files

    def __post_init__(self):
        self._unknown = set(self.unknown)
        self.version = self.manifest.version if self.manifest else None

    def snapshot_to_read(self) -> Snapshot | None:
        """The table format's snapshot whose rows a read returns: the current one, or under
        assume_current the statistics' (None for a plain directory)."""
        if self.snapshot is None and self.form != "parquet":
            self.snapshot = open_snapshot(self.table_uri, Selection(
                self.form, self.manifest.snapshot if self.manifest else None))
        return self.snapshot

    def files(self) -> Collection[str]:
        """The table's file paths as a read takes them: those listed now, or under
        assume_current those the statistics describe."""
        return self.published if self.assumed_current else self.now

    def described(self, path: str) -> bool:
        """Do the statistics of `path` describe the file as it is now?"""
        return path not in self.gone and path not in self._unknown

    def described_all(self, paths: list[str]) -> np.ndarray:
        """`described` of each path, as an array."""
        if not (self.gone or self._unknown):
            return np.ones(len(paths), bool)
        return np.fromiter((self.described(p) for p in paths), bool, len(paths))

    def notice(self) -> str | None:
        """The one line a user is told, or None when the statistics are current."""
        if self.assumed_current:
            return (f"statistics version {self.version} assumed current (--assume-current): "
                    "files landed or changed since are not looked for")
        if not self.unknown or self.version is None:
            return None
        n = len(self.unknown)
        return (f"{n} file{'s' if n != 1 else ''} newer than statistics version {self.version}: "
                f"read whole")


# what freshness reads of the version's partition index (metastore.index)
PUBLISHED = ["path", "size", "etag", "fingerprint", "reading"]


def freshness(table_uri: str, manifest: Manifest | None, published: pa.Table | None,
              assume_current: bool = False, listed: Future | None = None) -> Freshness:
    """`published`: the version's partition index, its PUBLISHED fields (path and fingerprint
    at least), None for a table without statistics; `manifest`: the version's, None for a
    table without statistics (its format is then found at its root); `listed`: the table's
    files now, from `list_ahead`."""
    form = manifest.format if manifest else detect(Store(table_uri))
    if assume_current and manifest:
        return Freshness(table_uri, manifest, form, True, unknown=sorted(manifest.missing),
                         published=[] if published is None else published["path"].to_pylist())
    now = listed.result() if listed else _now(table_uri, form)
    if isinstance(now, Listing):
        gone, unknown = _compared(now, published)
        return Freshness(table_uri, manifest, form, False, now, gone, unknown)
    fingerprints = {} if published is None else dict(zip(
        published["path"].to_pylist(), published["fingerprint"].to_pylist()))
    files = {f.rel_path: f for f in now.files}
    gone = {p for p in fingerprints if p not in files}
    unknown = sorted(p for p, f in files.items() if fingerprints.get(p) != f.fingerprint)
    return Freshness(table_uri, manifest, form, False, files, gone, unknown, now)


def _now(table_uri: str, form: str) -> Listing | Snapshot:
    """A plain directory's listing, or a table format's current snapshot."""
    if form == "parquet":
        return Listing(Store(table_uri).list_entries())
    return open_snapshot(table_uri, Selection(form))


def _compared(now: Listing, published: pa.Table | None) -> tuple[set[str], list[str]]:
    """A plain directory's files gone and unknown (sorted), compared with the published ones
    as arrays: a file whose size, ETag and reading digest are the published ones has the
    published fingerprint, which was hashed from them (an index row written before the
    digest: the file's fingerprint is hashed and compared)."""
    if published is None or published.num_rows == 0:
        return set(), list(now.paths)
    paths = published["path"]
    n = len(now)
    if published.num_rows == n and paths.to_pylist() == now.paths:   # nothing landed or left
        found, rows, gone = np.arange(n), published, set()
    else:
        listed = pa.array(now.paths, pa.string())
        at = pc.fill_null(pc.index_in(listed, value_set=paths), -1).to_numpy()
        found = np.flatnonzero(at >= 0)
        rows = published.take(at[found])
        gone = set(paths.filter(pc.invert(pc.is_in(paths, value_set=listed))).to_pylist())
    described = np.zeros(n, bool)
    if {"size", "etag", "reading"} <= set(published.column_names):
        same = pc.and_kleene(
            pc.equal(pa.array(now.etags, pa.string()).take(found), rows["etag"]),
            pc.equal(pa.array(now.reading_digests(), pa.string()).take(found),
                     rows["reading"]))
        described[found] = pc.fill_null(same, False).to_numpy(zero_copy_only=False) & (
            np.asarray(now.sizes, np.int64)[found] == rows["size"].to_numpy())
        hashed = np.flatnonzero(rows["reading"].is_null().to_numpy(zero_copy_only=False))
    else:
        hashed = np.arange(found.size)
    if hashed.size:
        fingerprints = rows["fingerprint"].take(hashed).to_pylist()
        described[found[hashed]] = [now.file(i).fingerprint == f for i, f in
                                    zip(found[hashed].tolist(), fingerprints)]
    return gone, [now.paths[i] for i in np.flatnonzero(~described).tolist()]


_LISTER = ThreadPoolExecutor(8, thread_name_prefix="lakestats-listing")   # plans side by side


def list_ahead(table_uri: str, manifest: Manifest, assume_current: bool) -> Future | None:
    """The table's files now, listed in the background while a plan reads the statistics
    (Arrow's reads let go of the interpreter); None when no listing is needed."""
    if assume_current:
        return None
    return _LISTER.submit(_now, table_uri, manifest.format)
