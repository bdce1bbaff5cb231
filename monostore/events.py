"""The event flow: S3 notifications -> partition statistics -> coalesced table reductions.

Notifications arrive at least once, out of order and duplicated (a multipart upload notifies
ObjectCreated twice for one key), with form-encoded keys. So an event is only a hint that a
key changed: the handler looks at the object as it is now (HEAD), computes the statistics of
that content into its fingerprint's directory (an idempotent write), and asks for a table
reduction. Reductions are coalesced: the first request of a window schedules one reduction
at the window's end, later ones join it; the reduction (monostore.coordinator.compute) lists the
table and reuses every partition already computed, so the published version equals that of
one clean `lakestats compute` over the files present.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import unquote_plus

from metastore import files
from metastore.store import DataFile, Store, is_hidden, s3_client
from monostore.jobs import client

DEFAULT_WINDOW_SECONDS = 10


@dataclass(frozen=True)
class Change:
    """One object event, decoded."""
    bucket: str
    key: str
    created: bool            # ObjectCreated (else ObjectRemoved)
    etag: str | None = None
    sequencer: str | None = None

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def changes(notification: dict) -> list[Change]:
    """The object changes in an S3 notification (the body of an SQS message). Test events and
    other messages hold none."""
    out = []
    for record in notification.get("Records") or []:
        name = record.get("eventName", "")
        s3 = record.get("s3") or {}
        if not name.startswith(("ObjectCreated", "ObjectRemoved")) or "object" not in s3:
            continue
        obj = s3["object"]
        out.append(Change(s3["bucket"]["name"], unquote_plus(obj["key"]),
                          name.startswith("ObjectCreated"), obj.get("eTag"), obj.get("sequencer")))
    return out


def watched_tables() -> list[str]:
    """Table roots (s3://bucket/prefix) whose files are watched: LAKESTATS_TABLES, comma
    separated, or LAKESTATS_TABLE_PREFIXES inside LAKESTATS_BUCKET (template.yaml)."""
    roots = os.environ.get("LAKESTATS_TABLES", "").split(",")
    bucket = os.environ.get("LAKESTATS_BUCKET")
    if bucket:
        roots += [f"s3://{bucket}/{p.strip().strip('/')}"
                  for p in os.environ.get("LAKESTATS_TABLE_PREFIXES", "").split(",") if p.strip()]
    return [t.strip().rstrip("/") for t in roots if t.strip()]


def table_of(uri: str, tables: list[str]) -> tuple[str, str] | None:
    """(table root, file path relative to it) of a data file of a watched table; None for
    other keys, statistics and hidden files."""
    for table in sorted(tables, key=len, reverse=True):      # the most specific root first
        if uri.startswith(table + "/"):
            rel = uri[len(table) + 1:]
            return None if is_hidden(rel) else (table, rel)
    return None


def partition_statistics(table: str, rel_path: str, options: dict) -> dict:
    """Statistics of the file as it is now; a file since removed needs none."""
    from functions.handlers import partition_stats
    store = Store(table)
    bucket, key = store.path(rel_path).split("/", 1)
    try:
        head = s3_client().head_object(Bucket=bucket, Key=key)
    except s3_client().exceptions.ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return {"rel_path": rel_path, "status": "gone"}
        raise
    data_file = DataFile(rel_path, head["ContentLength"], head["ETag"].strip('"'))
    stats = Store(stats_root_of(table))
    if stats.exists(*files.partition_dir(rel_path, data_file.fingerprint), files.STATISTICS):
        return {"rel_path": rel_path, "status": "ok", "reused": True}    # a duplicate event
    return partition_stats({"table": table, "rel_path": rel_path,
                            "fingerprint": data_file.fingerprint,
                            "stats_dir": stats.uri_of(*files.partition_dir(
                                rel_path, data_file.fingerprint)), **options})


def stats_root_of(table: str) -> str:
    return Store(table).uri_of("_lakestats")


def request_reduction(redis_url: str, table: str, window: float = DEFAULT_WINDOW_SECONDS) -> bool:
    """Ask for a reduction of `table` within `window` seconds. True when this request opened
    the window, i.e. the caller must schedule the reduction; False when one is scheduled."""
    return bool(client(redis_url).set(_window_key(table), 1, nx=True,
                                      px=max(1, int(window * 1000))))


def reduction_started(redis_url: str, table: str) -> None:
    """Requests from now on open a new window: the running reduction may not see them."""
    client(redis_url).delete(_window_key(table))


def _window_key(table: str) -> str:
    return f"lakestats:reduce:{table}"
