"""S3 object notifications, decoded: which objects of which watched tables changed.

Notifications arrive at least once, out of order and duplicated (a multipart upload notifies
ObjectCreated twice for one key), with form-encoded keys: an event is only a hint that a key
changed, and the handler looks at the object as it is now.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote_plus

from metastore.store import is_hidden


@dataclass(frozen=True)
class Change:
    """One object event."""
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


def table_of(uri: str, tables: tuple[str, ...]) -> tuple[str, str] | None:
    """(table root, file path relative to it) of a data file of a watched table; None for
    other keys, statistics and hidden files."""
    for table in sorted(tables, key=len, reverse=True):      # the most specific root first
        if uri.startswith(table + "/"):
            rel = uri[len(table) + 1:]
            return None if is_hidden(rel) else (table, rel)
    return None
