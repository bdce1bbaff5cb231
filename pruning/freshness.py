"""The table as it is now, against the version its statistics describe.

A plan may skip a file only when the statistics describe it as it is now. So every plan first
lists the table's current files (a plain directory: one listing, each file's size plus ETag or
mtime, the same fingerprint compute uses; a table format: its current snapshot, where a file
given deletes since changes its fingerprint) and sorts the version's files into:

- described: in the table now, unchanged: the statistics decide;
- gone: removed since: never read;
- unknown: landed or rewritten since, or left without statistics by --allow-partial: always
  read, never fully matching, their rows unbounded for LIMIT and top-k.

`assume_current` skips the listing for a caller who knows the statistics are current; the
version's own files are then taken as the table's (and the files --allow-partial left out
are still read whole). A table without statistics (no manifest) has every file unknown.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from lakestats.formats import Selection, Snapshot, detect, open_snapshot
from lakestats.metastore.manifest import Manifest
from lakestats.metastore.store import DataFile, Store


@dataclass
class Freshness:
    table_uri: str
    manifest: Manifest | None            # None: the table has no statistics
    form: str                            # the table's format
    assumed_current: bool
    now: dict[str, DataFile] = field(default_factory=dict)   # the table's files now
    gone: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)          # sorted
    snapshot: Snapshot | None = None     # a table format's current snapshot (None: a listing)

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


def freshness(table_uri: str, manifest: Manifest | None, published: dict[str, str],
              assume_current: bool = False, listed: Future | None = None) -> Freshness:
    """`published`: the version's files, path -> fingerprint; `manifest`: the version's, None
    for a table without statistics (its format is then found at its root); `listed`: the
    table's snapshot, from `list_ahead`."""
    form = manifest.format if manifest else detect(Store(table_uri))
    if assume_current and manifest:
        return Freshness(table_uri, manifest, form, True, unknown=sorted(manifest.missing))
    snapshot = listed.result() if listed else open_snapshot(table_uri, Selection(form))
    now = {f.rel_path: f for f in snapshot.files}
    gone = {p for p in published if p not in now}
    unknown = sorted(p for p, f in now.items() if published.get(p) != f.fingerprint)
    return Freshness(table_uri, manifest, form, False, now, gone, unknown,
                     None if form == "parquet" else snapshot)


_LISTER = ThreadPoolExecutor(8, thread_name_prefix="lakestats-listing")   # plans side by side


def list_ahead(table_uri: str, manifest: Manifest, assume_current: bool) -> Future | None:
    """The table's current snapshot, listed in the background while a plan reads the
    statistics (Arrow's reads let go of the interpreter); None when no listing is needed."""
    if assume_current:
        return None
    return _LISTER.submit(open_snapshot, table_uri, Selection(manifest.format))
