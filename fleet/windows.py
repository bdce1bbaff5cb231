"""Reduction windows: a table's changes within a window coalesce into one reduction.

The first request of a window opens it (SET NX with the window as TTL) and its caller
schedules the reduction for the window's end; later requests join it. A reduction closes the
window as it starts, so changes from then on open the next one: none is left out."""
from __future__ import annotations

from lakestats.fleet import protocol
from lakestats.fleet.connections import client


def request_reduction(redis_url: str, table: str, window: float) -> bool:
    """True when this request opened the window (the caller must schedule the reduction)."""
    return bool(client(redis_url).set(protocol.reduce_window(table), 1, nx=True,
                                      px=max(1, int(window * 1000))))


def reduction_started(redis_url: str, table: str) -> None:
    client(redis_url).delete(protocol.reduce_window(table))
