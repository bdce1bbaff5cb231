"""A table's pending changes (fleet.windows) reduced into a version, exactly once and never
stuck, whoever dies on the way.

`reduce_table` claims the changes recorded so far (holding the table's compute lock, before it
lists the table), computes and publishes a version, then settles them. One that fails leaves
them pending, due again after a backoff; one that dies leaves them pending and claimed, and
its lock expires LOCK_TTL after its last heartbeat. `reduce_pending` is how the others take a
pending reduction over: a watcher at start and at each poll, the reduce function for its
messages and on its schedule (`reduce_due`); not while a compute of the table holds the lock
(what it does not cover stays pending for the one after it).

`refold` makes a table exact again when quiet: incremental versions may leave statistics
inexact (frequency lists carried stale, sketches holding removed files' values; README,
Incremental versions), and each reduction says in the table's record whether the version it
published or found is (fleet.windows). Once nothing is pending and the last reduction is
`settings.exact_after` seconds old, a watcher at its polls, or the reduce function on its
schedule (`refold_quiet`), runs a reduction with settings.exact: under the compute lock like
any, it recomputes only what is inexact (no partition, as none changed). Its claim ends the
quiet period, so it runs once whatever becomes of it, until a change leaves the table inexact
again; it gives way to a change recorded since its claim before the table-level work (Yielded:
the change's own reduction follows, and the refold comes again after the next quiet period).
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable

from lakestats.core.errors import LakestatsError
from lakestats.core.settings import REDUCTION_COMPACT_FRACTION, Settings
from lakestats.fleet import protocol, windows
from lakestats.fleet.connections import client
from lakestats.fleet.invokers import Invoker
from lakestats.formats.iceberg_export import keep_current
from lakestats.metastore.layout import Layout
from lakestats.metastore.store import Store
from lakestats.monostore.compute import compute
from lakestats.monostore.publish import TableBusy
from lakestats.monostore.report import Report


class Yielded(LakestatsError):
    """A refold gave way to a change recorded since it claimed the table: nothing published."""


def reduce_table(table_uri: str, invoker: Invoker, settings: Settings,
                 deadline: float | None = None,
                 checkpoint: Callable[[str], None] | None = None,
                 refold: bool = False) -> Report:
    """A version covering every change recorded before it listed the table (a compute of it,
    which `checkpoint` follows: monostore.compute). Changes recorded from then on open the next
    window. A `refold` (with settings.exact) ends the table's quiet period, and raises Yielded
    before the table-level work if a change was recorded since it claimed."""
    claimed: list[int] = []
    settings = dataclasses.replace(settings, compact_fraction=max(
        settings.compact_fraction, REDUCTION_COMPACT_FRACTION))

    def moment(name: str) -> None:
        if name == "listing":                    # the table's compute lock is held
            claimed.append(windows.claim(settings.redis_url, table_uri, refold))
        elif name == "table-level" and refold and \
                windows.changes(settings.redis_url, table_uri) > claimed[0]:
            raise Yielded(f"{table_uri}: changed since its refold began: its reduction first")
        if checkpoint is not None:
            checkpoint(name)
    try:
        # a configured table emptied by the events (its prefix gone) gets its empty version
        report = compute(table_uri, invoker, settings, deadline=deadline, create=True,
                         checkpoint=moment)
    except Yielded:
        raise                                    # the change that came is due in its window
    except BaseException:
        if claimed:                              # pending still: due again after a backoff
            with contextlib.suppress(Exception):    # the first failure is the one to report
                windows.retry(settings.redis_url, table_uri)
        raise
    if claimed:
        windows.settle(settings.redis_url, table_uri, claimed[0], report.exact)
    report.export = _export_current(table_uri, report)
    return report


def _export_current(table_uri: str, report: Report) -> dict | None:
    """The statistics of the reduction's Iceberg snapshot exported, if its catalog is followed
    (formats.iceberg_export.keep_current): what export --json prints, or the error, which
    leaves the version published and the next reduction to try again."""
    if report.snapshot.get("format") != "iceberg":
        return None
    try:
        exported = keep_current(table_uri, Store(Layout.of_table(table_uri).uri),
                                report.snapshot.get("snapshot"))
    except Exception as e:  # noqa: BLE001 - the catalog's failure is not the version's
        return {"error": f"{type(e).__name__}: {e}"}
    return exported and exported.as_json()


def reduce_pending(table_uri: str, invoker: Invoker, settings: Settings,
                   deadline: float | None = None,
                   checkpoint: Callable[[str], None] | None = None,
                   wait: float = 0.0) -> Report | None:
    """The table's pending changes reduced now, whatever their window; None when none are
    pending, or when another compute of the table holds its lock for more than `wait` seconds
    (the changes it does not cover stay pending)."""
    found = windows.state(settings.redis_url, [table_uri]).get(table_uri)
    if found is None or not found.waiting or (not wait and computing(table_uri, settings)):
        return None
    try:
        return reduce_table(table_uri, invoker, dataclasses.replace(settings, lock_wait=wait),
                            deadline, checkpoint)
    except TableBusy:
        return None


def reduce_due(tables: tuple[str, ...], invoker: Invoker, settings: Settings,
               deadline: float | None = None,
               failed: Callable[[str, Exception], None] | None = None) -> list[Report]:
    """The tables' pending reductions that are due (their window closed, or a reduction that
    claimed them ended without settling), one after another while `deadline` allows: what the
    reduce function's schedule runs. `failed` hears those that fail (pending still)."""
    return _one_by_one(tables, settings, lambda found, now: found.waiting and found.at <= now,
                       lambda table: reduce_pending(table, invoker, settings, deadline),
                       deadline, failed)


def refold(table_uri: str, invoker: Invoker, settings: Settings,
           deadline: float | None = None,
           checkpoint: Callable[[str], None] | None = None) -> Report | None:
    """The table made exact again, if it is quiet (fleet.windows.Pending.quiet); None when it
    is not, when another compute of the table holds its lock, or when a change came
    meanwhile (Yielded)."""
    found = windows.state(settings.redis_url, [table_uri]).get(table_uri)
    if found is None or not found.quiet(settings.exact_after, time.time()) \
            or computing(table_uri, settings):
        return None
    try:
        return reduce_table(table_uri, invoker, dataclasses.replace(
            settings, exact=True, lock_wait=0.0), deadline, checkpoint, refold=True)
    except (TableBusy, Yielded):
        return None


def refold_quiet(tables: tuple[str, ...], invoker: Invoker, settings: Settings,
                 deadline: float | None = None,
                 failed: Callable[[str, Exception], None] | None = None) -> list[Report]:
    """The tables quiet since a version left them inexact, refolded one after another while
    `deadline` allows: what the reduce function's schedule runs after the due reductions.
    `failed` hears those that fail (not tried again before their next quiet period)."""
    return _one_by_one(tables, settings,
                       lambda found, now: found.quiet(settings.exact_after, now),
                       lambda table: refold(table, invoker, settings, deadline), deadline, failed)


def _one_by_one(tables: tuple[str, ...], settings: Settings, ready: Callable, run: Callable,
                deadline: float | None, failed: Callable[[str, Exception], None] | None
                ) -> list[Report]:
    """`run` of each table whose pending record is `ready`, one after another while
    `deadline` allows; `failed` hears those that fail."""
    reports, now = [], time.time()
    for table, found in windows.state(settings.redis_url, tables).items():
        if not ready(found, now):
            continue
        if deadline is not None and time.monotonic() > deadline:
            break
        try:
            report = run(table)
        except Exception as e:  # noqa: BLE001 - one table's failure leaves the others to run
            if failed is not None:
                failed(table, e)
            continue
        if report is not None:
            reports.append(report)
    return reports


def computing(table_uri: str, settings: Settings) -> bool:
    """Whether a compute of the table holds its lock."""
    return bool(client(settings.redis_url).exists(
        protocol.compute_lock(Layout.of_table(table_uri).uri)))
