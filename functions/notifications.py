"""S3 object notifications, decoded: which objects of which watched tables changed.

They come through EventBridge (template.yaml's rule, and the local stack's), whose pattern
(metastore.layout.object_events_pattern) drops the events of statistics files, so that lakestats' own writes wake
nothing: one message per data file written. S3's own notification format (QueueConfigurations)
is read too. Notifications arrive at least once, out of order and duplicated (S3's own notify
a multipart upload twice). Keys come URL-encoded in both (localstack's EventBridge events as
AWS's; moto's server sends them as they are, so a key with `+` or `%` reads wrong there). An
event is only a hint that a key changed: the handler looks at the object as it is now, and a
reduction lists the table. A table format's commit (format_file) wakes its table's reduction,
as a data file does; the files a commit names wake nothing of their own.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote_plus

from lakestats.core.errors import LakestatsError
from lakestats.metastore.store import is_hidden


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


# EventBridge's detail types of object events: created?
DETAIL_TYPES = {"Object Created": True, "Object Deleted": False}


class BadEvent(LakestatsError, ValueError):
    """A message that is not a well-formed S3 notification; the message says what is wrong."""


def changes(notification: dict) -> list[Change]:
    """The object changes in an S3 notification (the body of an SQS message). Test events and
    other messages hold none; a record without a bucket name or key raises BadEvent."""
    if not isinstance(notification, dict):
        raise BadEvent(f"not a JSON object: {type(notification).__name__}")
    if notification.get("source") == "aws.s3":
        return _eventbridge_changes(notification)
    out = []
    for record in notification.get("Records") or []:
        name = record.get("eventName", "") if isinstance(record, dict) else ""
        if not isinstance(name, str) or not name.startswith(("ObjectCreated", "ObjectRemoved")):
            continue
        s3 = record.get("s3")
        try:
            bucket, obj = s3["bucket"]["name"], s3["object"]
            key = obj["key"]
        except (KeyError, TypeError):
            raise BadEvent(f"{name} record without s3.bucket.name and s3.object.key") from None
        if not (isinstance(bucket, str) and bucket and isinstance(key, str) and key):
            raise BadEvent(f"{name} record with an empty or non-text bucket name or key")
        out.append(Change(bucket, unquote_plus(key), name.startswith("ObjectCreated"),
                          obj.get("eTag"), obj.get("sequencer")))
    return out


def _eventbridge_changes(event: dict) -> list[Change]:
    """The one object change of an EventBridge S3 event."""
    kind = event.get("detail-type")
    if kind not in DETAIL_TYPES:
        return []
    try:
        bucket, obj = event["detail"]["bucket"]["name"], event["detail"]["object"]
        key = obj["key"]
    except (KeyError, TypeError):
        raise BadEvent(f"{kind} event without detail.bucket.name and detail.object.key") from None
    if not (isinstance(bucket, str) and bucket and isinstance(key, str) and key):
        raise BadEvent(f"{kind} event with an empty or non-text bucket name or key")
    # a removal is told apart from another of the same key by its sequencer, with the event's
    # time: a stand-in (moto) may send one sequencer for every event
    sequencer = f"{obj.get('sequencer')}@{event.get('time')}"
    return [Change(bucket, unquote_plus(key), DETAIL_TYPES[kind],
                   obj.get("etag") or obj.get("eTag"), sequencer)]


def table_of(uri: str, tables: tuple[str, ...]) -> tuple[str, str] | None:
    """(table root, file path relative to it) of a data file of a watched table; None for
    other keys, statistics and hidden files, a table format's log and metadata (format_file),
    and paths that are not plain."""
    table = _root_of(uri, tables)
    if table is None:
        return None
    rel = uri[len(table) + 1:]
    return (table, rel) if _plain(rel) and not is_hidden(rel) and format_file(rel) is None \
        else None


def commit_of(uri: str, tables: tuple[str, ...]) -> str | None:
    """The watched table of which the key is a commit (format_file): a new snapshot, which
    wakes the table's reduction with no statistics of its own to compute."""
    table = _root_of(uri, tables)
    return table if table is not None and format_file(uri[len(table) + 1:]) == "commit" \
        else None


def format_file(rel: str) -> str | None:
    """"commit" for a file that makes a table format's snapshots: Delta's log (_delta_log/),
    Hudi's timeline (.hoodie/, .hoodie/timeline/), Iceberg's table metadata (metadata/
    *.metadata.json, version-hint.text); "metadata" for the files a commit names or a
    writer keeps aside (Iceberg's manifests and statistics files, Hudi's metadata table and
    scratch folders, Delta's temporary files): none wakes anything, as the commit does;
    None for the rest, data files of a plain table among them."""
    parts = rel.split("/")
    top, name = parts[0], parts[-1]
    if top == "_delta_log":
        return "commit" if len(parts) == 2 and (not name.startswith(("_", "."))
                                                or name == "_last_checkpoint") else "metadata"
    if top == ".hoodie":
        return "commit" if len(parts) == 2 or (len(parts) == 3 and parts[1] == "timeline") \
            else "metadata"
    if top == "metadata" and len(parts) == 2:
        if name.endswith(".metadata.json") or name == "version-hint.text":
            return "commit"
        if name.endswith((".avro", ".stats")) or name.startswith("partition-stats-"):
            return "metadata"
    return None


def refused(uri: str, tables: tuple[str, ...]) -> bool:
    """A key no event of a watched table names: outside them all, with `.` or `..` parts
    (they could name statistics outside the table's), or empty parts outside hidden paths.
    Hidden files of a table, its statistics among them, and directory markers (a key ending
    in /) are ignored, not refused."""
    table = _root_of(uri, tables)
    if table is None:
        return True
    parts = uri[len(table) + 1:].split("/")
    return any(p in (".", "..") for p in parts) or ("" in parts[:-1] and not is_hidden(parts[0]))


def _root_of(uri: str, tables: tuple[str, ...]) -> str | None:
    for table in sorted(tables, key=len, reverse=True):      # the most specific root first
        if uri.startswith(table + "/"):
            return table
    return None


def _plain(rel: str) -> bool:
    return all(part not in ("", ".", "..") for part in rel.split("/"))
