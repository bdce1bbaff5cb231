"""Pending reductions: a table's changes recorded in Redis until a published version holds
them, so that none is lost with the process that was to reduce them; and the windows in which
they coalesce into one reduction.

One hash per table, `lakestats:pending:<table>` (fleet.protocol):

  changes   batches that recorded changes of the table: a counter, only ever raised
  reduced   the count that the last settled reduction covered
  due       when the next reduction may start (epoch seconds): the first change after a claim
            opens a window, later ones join it; none while a reduction runs, or after it died
  failures  reductions that failed since the last settled one (their backoff)
  inexact   when the last settled reduction found the published version inexact (epoch
            seconds; monostore.report.Report.exact): the start of the table's quiet period.
            None when it was exact, and once a refold (monostore.reductions.refold) claimed
            it: one refold a quiet period, whatever becomes of it; the next reduction that
            finds the version inexact opens the next period

The invariant. A batch's SQS messages are deleted only after it raised `changes` (`record`);
`reduced` is raised to n only by a reduction that read `changes` = n while holding the table's
compute lock, before it listed the table (`claim`), and that then published a version of that
listing or found the published one current (`settle`). So a change whose message is gone is in
a published version, or `changes` > `reduced`: the table is pending, and stays so until a
reduction covers it. A pending reduction is the business of whoever holds the table's compute
lock (monostore.publish: renewed by a heartbeat, expiring LOCK_TTL after its holder died); when
no one does, of any watcher or reduce function that finds it due (monostore.reductions).

Exactness is the word of the last reduction to settle (a reduction that claimed n changes
speaks only while no reduction that claimed more has settled): so a watcher learns whether a
table waits for a refold from the one read it makes at every poll anyway (`state`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from lakestats.fleet import protocol
from lakestats.fleet.connections import client

RETRY_SECONDS = 30.0                # a failed reduction is due again after this, doubled per
RETRY_MAX_SECONDS = 3600.0          # failure since the last settled one, up to this

_SETTLE = """
if redis.call('EXISTS', KEYS[1]) == 0 then
    return 0
end
local reduced = tonumber(redis.call('HGET', KEYS[1], 'reduced') or '0')
if reduced < tonumber(ARGV[1]) then
    redis.call('HSET', KEYS[1], 'reduced', ARGV[1])
    redis.call('HDEL', KEYS[1], 'failures')
end
if reduced <= tonumber(ARGV[1]) then
    if ARGV[2] == 'exact' then
        redis.call('HDEL', KEYS[1], 'inexact')
    elseif ARGV[2] ~= '' then
        redis.call('HSET', KEYS[1], 'inexact', ARGV[2])
    end
end
return 0
"""


@dataclass(frozen=True)
class Pending:
    """A table's record."""
    changes: int
    reduced: int
    due: float | None           # None: claimed by a reduction that runs, or that died
    inexact: float | None = None    # the published version inexact since (None: exact)

    @property
    def waiting(self) -> bool:
        """Whether changes are recorded that no settled reduction covers."""
        return self.changes > self.reduced

    @property
    def at(self) -> float:
        """When a reduction may start: its window's end; at once when claimed (the claimer's
        compute lock decides)."""
        return self.due or 0.0

    def quiet(self, exact_after: float, now: float) -> bool:
        """Whether the table waits for a refold: its version inexact, no change pending, and
        quiet for `exact_after` seconds (<= 0: never)."""
        return exact_after > 0 and self.inexact is not None and not self.waiting \
            and now >= self.inexact + exact_after


def record(redis_url: str, table: str, window: float) -> tuple[int, bool]:
    """A batch's changes of the table, before its messages are deleted: the table's change count
    with them, and whether they opened a window (the caller then schedules its reduction)."""
    key = protocol.pending_changes(table)
    with client(redis_url).pipeline() as p:          # one transaction
        p.hincrby(key, "changes", 1)
        p.hsetnx(key, "due", time.time() + window)
        p.expire(key, protocol.PENDING_TTL_SECONDS)
        count, opened, _ = p.execute()
    return int(count), bool(opened)


def claim(redis_url: str, table: str, refold: bool = False) -> int:
    """A reduction's start, under the table's compute lock and before it lists the table: the
    change count it covers. The window closes: changes from now on open the next one. A
    `refold` also ends the quiet period it was started for."""
    key = protocol.pending_changes(table)
    with client(redis_url).pipeline() as p:
        p.hget(key, "changes")
        p.hdel(key, "due", *(["inexact"] if refold else []))
        p.expire(key, protocol.PENDING_TTL_SECONDS)
        changes, _, _ = p.execute()
    return int(changes or 0)


def changes(redis_url: str, table: str) -> int:
    """The table's change count."""
    return int(client(redis_url).hget(protocol.pending_changes(table), "changes") or 0)


def settle(redis_url: str, table: str, claimed: int, exact: bool | None = None) -> None:
    """A reduction that claimed `claimed` changes published (or found current) its version;
    `exact`: whether that version is (None: not known, as when a newer version won)."""
    if claimed:
        word = "" if exact is None else "exact" if exact else repr(time.time())
        client(redis_url).eval(_SETTLE, 1, protocol.pending_changes(table), claimed, word)


def retry(redis_url: str, table: str) -> float | None:
    """A reduction that claimed the table's changes failed: they are due again after a backoff
    (its seconds; None when nothing is pending)."""
    key = protocol.pending_changes(table)
    found = state(redis_url, [table]).get(table)
    if found is None or not found.waiting:
        return None
    r = client(redis_url)
    delay = min(RETRY_MAX_SECONDS, RETRY_SECONDS * 2 ** (r.hincrby(key, "failures", 1) - 1))
    r.hset(key, "due", time.time() + delay)
    return delay


def state(redis_url: str, tables: tuple[str, ...] | list[str]) -> dict[str, Pending]:
    """The tables' records (those that have one)."""
    with client(redis_url).pipeline(transaction=False) as p:
        for table in tables:
            p.hmget(protocol.pending_changes(table), "changes", "reduced", "due", "inexact")
        found = p.execute()
    return {t: Pending(int(c), int(r or 0), float(d) if d is not None else None,
                       float(i) if i is not None else None)
            for t, (c, r, d, i) in zip(tables, found) if c is not None}
