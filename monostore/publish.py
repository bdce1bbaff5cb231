"""Publishing a table version: atomic for readers, safe among coordinators.

A compute holds its table's compute lock from its listing to its publication: a second
compute of the table waits for it, saying who holds it, and fails after its `wait`; two never
interleave. A heartbeat renews the lock; it expires LOCK_TTL after its holder died. A holder
whose lock Redis lost (a restart) takes it again if it is free; one whose lock another compute
took publishes nothing.

The publication lock covers two short moments, never the computing between them:
- `allocate` hands out the version's number: the next after the published version, the last
  number handed out (kept in Redis, so that two coordinators never share one) and every
  version directory (a crashed compute leaves its own, unpublished: never reused, whatever
  Redis forgot);
- `swap` points LATEST at the finished version, unless a newer one was published meanwhile.
A version's files are all written, in its own directory, between the two.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
import uuid
from typing import Callable

import redis

from lakestats.core.errors import LakestatsError, ServiceUnavailable
from lakestats.fleet import protocol
from lakestats.fleet.connections import client
from lakestats.metastore.layout import Layout
from lakestats.metastore.manifest import (latest_version, point_latest, version_name, version_names,
                                          version_number)


def _lock(layout: Layout, redis_url: str):
    # it expires if its holder dies
    return client(redis_url).lock(protocol.publish_lock(layout.uri),
                                  timeout=protocol.LOCK_TTL_SECONDS,
                                  blocking_timeout=protocol.LOCK_TTL_SECONDS)


class TableBusy(ServiceUnavailable):
    """Another compute of the table held its lock for longer than this one would wait."""


class LockLost(ServiceUnavailable):
    """The compute lock was taken from its holder: it must not publish."""


class OutOfTime(LakestatsError):
    """The compute's deadline (its Lambda's time) would pass: it gives up, publishing nothing;
    the partitions' statistics written so far are kept for the next attempt."""


class Lease:
    """A held compute lock, renewed in the background until released; and the compute's
    deadline (time.monotonic), if it has one."""
    RENEW_SECONDS = protocol.LOCK_TTL_SECONDS / 4

    def __init__(self, lock: redis.lock.Lock, what: str, deadline: float | None):
        self.lock, self.what, self.deadline, self.lost = lock, what, deadline, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True,
                                        name="lakestats-lease")
        self._thread.start()

    def _hold(self) -> None:
        """Renew the lock; take it again if Redis lost it (restarted) and no one else did."""
        try:
            self.lock.reacquire()
        except redis.exceptions.LockNotOwnedError:
            if not self.lock.redis.set(self.lock.name, self.lock.local.token, nx=True,
                                       px=int(protocol.LOCK_TTL_SECONDS * 1000)):
                self.lost = f"another compute of {self.what} took its lock"

    def _renew(self) -> None:
        while not self._stop.wait(self.RENEW_SECONDS) and not self.lost:
            with contextlib.suppress(redis.exceptions.ConnectionError):  # the next one tells
                self._hold()

    def check(self, step: str) -> None:
        """Before `step`: raise if the lock was taken, or the deadline is near."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfTime(f"out of time before {step}: nothing published; the partition "
                            "statistics computed so far are kept for the next attempt")
        self._hold()
        if self.lost:
            raise LockLost(f"{self.lost} before {step}: nothing published")

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(redis.exceptions.LockError, redis.exceptions.ConnectionError):
            self.lock.release()


@contextlib.contextmanager
def computing(layout: Layout, redis_url: str, wait: float,
              notice: Callable[[str], None] | None = None, deadline: float | None = None):
    """Hold the table's compute lock while the block runs (yields its Lease). Waits up to
    `wait` seconds for another holder, telling `notice` who it is, every 30 s. A local
    statistics root is locked by a file too: command-line computes that each embed their own
    Redis then exclude each other all the same."""
    me = f"{socket.gethostname()} pid {os.getpid()} since " \
         f"{time.strftime('%H:%M:%S')} ({uuid.uuid4().hex[:8]})"
    r = client(redis_url)
    name = protocol.compute_lock(layout.uri)
    lock = r.lock(name, timeout=protocol.LOCK_TTL_SECONDS,
                  thread_local=False)              # renewed by another thread
    with _file_lock(layout, me, wait, notice):
        _wait_for(lambda: lock.acquire(blocking=False, token=me), lambda: r.get(name),
                  layout.uri, wait, notice)
        lease = Lease(lock, layout.uri, deadline)
        try:
            yield lease
        finally:
            lease.release()


@contextlib.contextmanager
def _file_lock(layout: Layout, me: str, wait: float, notice: Callable[[str], None] | None):
    if layout.root.is_s3:
        yield
        return
    path = layout.root.path(".computing")        # hidden, as the statistics root is
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a+") as f:
        def acquire() -> bool:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False

        def holder() -> str:
            f.seek(0)
            return f.read().strip()
        _wait_for(acquire, holder, layout.uri, wait, notice)
        f.truncate(0)
        f.write(me)
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _wait_for(acquire: Callable[[], bool], holder: Callable[[], str | None], what: str,
              wait: float, notice: Callable[[str], None] | None) -> None:
    deadline, told = time.monotonic() + wait, -1e9
    while not acquire():
        who = holder() or "a compute that just ended"
        now = time.monotonic()
        if now >= deadline:
            raise TableBusy(f"{what}: another compute of the table is running ({who}); "
                            f"gave up after {wait:g} s (--wait)")
        if notice and now - told >= 30:
            notice(f"waiting for another compute of the table ({who}) to end")
            told = now
        time.sleep(min(0.5, deadline - now))


def allocate(layout: Layout, redis_url: str) -> str:
    counter = protocol.version_counter(layout.uri)
    r = client(redis_url)
    with _lock(layout, redis_url):
        taken = [latest_version(layout, lost_ok=True), *version_names(layout)]
        number = max([int(r.get(counter) or 0), *(version_number(v) for v in taken if v)]) + 1
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


def swap(layout: Layout, redis_url: str, version: str,
         lease: Lease | None = None) -> tuple[bool, str | None]:
    """Publish `version`: (whether it is now the published one, the version it replaced or,
    when a newer one won, that newer one). Not if `lease`, the compute lock, was lost."""
    with _lock(layout, redis_url):
        if lease is not None:
            lease.check("publication")
        latest = latest_version(layout, lost_ok=True)   # a lost LATEST: this one replaces it
        if latest is not None and version_number(latest) > version_number(version):
            return False, latest
        try:
            point_latest(layout, version)
        except Exception:
            # a write whose answer was lost may have landed: then the version is published,
            # and the compute must not delete it
            if latest_version(layout, lost_ok=True) != version:
                raise
    return True, latest
