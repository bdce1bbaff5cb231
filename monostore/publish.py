"""Publishing a table version: atomic for readers, safe among coordinators.

The publication lock covers two short moments, never the computing between them:
- `allocate` hands out the version's number: the next after both the published version and
  the last number handed out (kept in Redis, so that two coordinators never share one);
- `swap` points LATEST at the finished version, unless a newer one was published meanwhile.
A version's files are all written, in its own directory, between the two.
"""
from __future__ import annotations

from fleet import protocol
from fleet.connections import client
from metastore.layout import Layout
from metastore.manifest import latest_version, point_latest, version_name, version_number


def _lock(layout: Layout, redis_url: str):
    # it expires if its holder dies
    return client(redis_url).lock(protocol.publish_lock(layout.uri),
                                  timeout=protocol.LOCK_TTL_SECONDS,
                                  blocking_timeout=protocol.LOCK_TTL_SECONDS)


def allocate(layout: Layout, redis_url: str) -> str:
    counter = protocol.version_counter(layout.uri)
    r = client(redis_url)
    with _lock(layout, redis_url):
        latest = latest_version(layout)
        number = max(version_number(latest) if latest else 0, int(r.get(counter) or 0)) + 1
        r.set(counter, number, ex=protocol.JOB_TTL_SECONDS)
    return version_name(number)


def release(layout: Layout, redis_url: str, version: str) -> None:
    """Give back a number whose version will not be published, if it is still the last one
    handed out."""
    counter = protocol.version_counter(layout.uri)
    r = client(redis_url)
    with _lock(layout, redis_url):
        if int(r.get(counter) or 0) == version_number(version):
            r.set(counter, version_number(version) - 1, ex=protocol.JOB_TTL_SECONDS)


def swap(layout: Layout, redis_url: str, version: str) -> tuple[bool, str | None]:
    """Publish `version`: (whether it is now the published one, the version it replaced or,
    when a newer one won, that newer one)."""
    with _lock(layout, redis_url):
        latest = latest_version(layout)
        if latest is not None and version_number(latest) > version_number(version):
            return False, latest
        point_latest(layout, version)
    return True, latest
