"""`lakestats status`: what the published version describes, what changed in the table since,
how long the oldest change has waited, and which statistics a change left inexact.

- pending: the table's files now against the version's (pruning.freshness: one listing, or a
  table format's current snapshot): `added` (landed since), `changed` (rewritten, or given
  deletes since), `removed`. Files the version left out (--allow-partial) are its `missing`,
  not pending changes.
- lag: how long the oldest pending change has waited, from the file's modification time (a
  local file's mtime, an S3 object's LastModified); a removal, or a file of a table format's
  snapshot, has none. 0 when nothing is pending; null when no pending change has a time.
- inexact: files whose deletes the version did not apply (Iceberg equality deletes); per
  column, a frequency list carried stale (`exact_as_of` in statistics.parquet, the rows
  changed since from the manifest); the table's sketches when they still hold removed
  partitions' values, exact as of the newest version before them that did not (read back
  through at most SKETCH_LOOKBACK manifests; null past them).
"""
from __future__ import annotations

import datetime as dt
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from lakestats.core.errors import StatisticsMissing
from lakestats.metastore.manifest import Manifest, read_manifest, version_names, version_number
from lakestats.metastore.store import Store
from lakestats.monostore.report import NoSuchTable
from lakestats.pruning.freshness import PUBLISHED, freshness
from lakestats.pruning.temporal import zone_of

if TYPE_CHECKING:
    from lakestats.metastore.layout import Layout
    from lakestats.metastore.reader import StatisticsReader

CHANGES = ("added", "changed", "removed")
SKETCH_LOOKBACK = 64         # manifests read back to find since when sketches are stale


def table_status(uri: str, reader: StatisticsReader | None,
                 time_zone: str | None = None) -> dict:
    """The object `lakestats status --json` prints. `reader`: the published version, None when
    the table has none yet (every data file is then pending, `added`). Times are ISO 8601 in
    `time_zone` (an IANA name or an offset; None: UTC). NoSuchTable when nothing is at `uri`
    and no statistics either."""
    zone = zone_of(time_zone)
    checked = time.time_ns()
    manifest = reader.manifest if reader else None
    if manifest is None and not Store(uri).root_exists():
        raise NoSuchTable(f"{uri}: no such table directory (a mistyped path?), and no "
                          "statistics of it")
    index = reader.partition_index([], PUBLISHED) if reader is not None else None
    published = set(index["path"].to_pylist()) if index is not None else set()
    now = freshness(uri, manifest, index)
    left_out = set(manifest.missing) if manifest else set()
    kinds = {p: "changed" if p in published else "added" for p in now.unknown
             if p not in left_out}
    kinds.update(dict.fromkeys(now.gone, "removed"))
    modified = {p: now.now[p].modified_ns for p in kinds if p in now.now}
    pending = [{"path": p, "change": kind, "modified": _when(modified.get(p), zone)}
               for kind in CHANGES for p, k in sorted(kinds.items()) if k == kind]
    timed = [(m, p) for p, m in modified.items() if m is not None]
    oldest = min(timed) if timed else None
    created = _parse(manifest.created) if manifest else None
    current = now.snapshot.id if now.snapshot is not None else None
    inexact = _inexact(reader) if reader else {"files": {}, "frequencies": [],
                                               "sketches": {"stale": False, "exact_as_of": None}}
    return {
        "table": uri, "checked": _when(checked, zone),
        "version": manifest.version if manifest else None,
        "created": _when(created, zone),
        "row_count": manifest.row_count if manifest else None,
        "partitions": manifest.partition_count if manifest else None,
        "format": now.form, "snapshot": manifest.snapshot if manifest else None,
        "missing": dict(manifest.missing) if manifest else {},
        "current": not pending,
        "pending": pending,
        "pending_count": {kind: sum(k == kind for k in kinds.values()) for kind in CHANGES},
        "current_snapshot": current,
        "lag": {"oldest_pending": oldest[1] if oldest else None,
                "pending_seconds": 0.0 if not pending else
                _seconds(checked - oldest[0]) if oldest else None,
                "version_age_seconds": None if created is None else _seconds(checked - created)},
        "exact": not (inexact["files"] or inexact["frequencies"]
                      or inexact["sketches"]["stale"]),
        "inexact": inexact,
    }


def _inexact(reader: StatisticsReader) -> dict:
    manifest = reader.manifest
    rows = reader.statistics(sketches=False)
    stale = []
    if "exact_as_of" in rows.column_names:
        for column, since in zip(rows["column"].to_pylist(), rows["exact_as_of"].to_pylist()):
            if since:
                held = manifest.frequency_lists.get(column, {})
                stale.append({"column": column, "exact_as_of": since,
                              "stale_rows": held.get("stale_rows")})
    sketches = {"stale": manifest.sketches_stale,
                "exact_as_of": _sketches_exact_as_of(reader.layout, manifest)
                if manifest.sketches_stale else None}
    return {"files": dict(manifest.inexact), "frequencies": stale, "sketches": sketches}


def _sketches_exact_as_of(layout: Layout, manifest: Manifest) -> str | None:
    """The newest version before `manifest`'s whose sketches held no removed values (a version
    is stale when it removed partitions or was built on a stale one): the manifests of the
    SKETCH_LOOKBACK versions before it are read, side by side; None if none of them is."""
    number = version_number(manifest.version)
    older = sorted((n for n in version_names(layout) if version_number(n) < number),
                   key=version_number, reverse=True)[:SKETCH_LOOKBACK]
    with ThreadPoolExecutor(16) as pool:
        for name, before in zip(older, pool.map(lambda n: _manifest(layout, n), older)):
            if before is not None and not before.sketches_stale:
                return name
    return None


def _manifest(layout: Layout, version: str) -> Manifest | None:
    try:
        return read_manifest(layout, version)
    except (FileNotFoundError, ValueError, StatisticsMissing):   # gone, damaged, too new
        return None


def _parse(text: str) -> int | None:
    """Nanoseconds since the epoch of an ISO 8601 time (a manifest's `created`)."""
    try:
        stamp = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)
    return round(stamp.timestamp()) * 10 ** 9      # a manifest says it to the second


def _when(ns: int | None, zone: dt.tzinfo) -> str | None:
    if ns is None:
        return None
    return dt.datetime.fromtimestamp(ns // 10 ** 9, zone).isoformat()


def _seconds(ns: int) -> float:
    return round(max(ns, 0) / 1e9, 3)
