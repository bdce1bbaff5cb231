"""Worker-to-worker exchange of Arrow tables. Functions cannot connect to each other directly,
so payloads go through a store both sides reach.

Every payload is addressed (job, channel, sender, receiver). Two backends behind one interface:
- ObjectStoreExchange: one object per payload under
  <job's scratch space>/<channel>/to-<receiver>/from-<sender>.arrow, so any payload size works
  and nothing lives in the coordinator's memory;
- RedisExchange: one hash field per payload (fleet.protocol.exchange_key), for small payloads.
Bytes moved are the Arrow IPC sizes of the payloads (reported by `put`). A worker finds both
through its StepEvent (`for_event`).
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from lakestats.fleet import protocol
from lakestats.fleet.connections import client
from lakestats.fleet.protocol import StepEvent
from lakestats.metastore.store import Store, StoreError

BATCH_ROWS = 65_536      # payloads are record batches of this size: readers can stream them


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="lz4")   # fewer bytes on the wire, cheaply
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table, max_chunksize=BATCH_ROWS)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


class Exchange:
    def put(self, channel: str, sender: int, receiver: int, table: pa.Table) -> int:
        """Send `table`; returns the bytes moved."""
        raise NotImplementedError

    def get_all(self, channel: str, receiver: int) -> list[pa.Table]:
        """Every table sent to `receiver` on `channel`, in sender order."""
        raise NotImplementedError

    def each(self, channel: str, receiver: int) -> Iterator[pa.Table]:
        """get_all's tables, read one at a time."""
        return iter(self.get_all(channel, receiver))

    def stream(self, channel: str, receiver: int) -> list[Iterator[pa.RecordBatch]]:
        """Like get_all, one batch at a time: a reader holds a batch per sender, not the
        payloads whole."""
        return [iter(t.to_batches()) for t in self.get_all(channel, receiver)]

    def clear(self) -> None:
        raise NotImplementedError


class ObjectStoreExchange(Exchange):
    def __init__(self, scratch: str):
        self.store = Store(scratch)

    def put(self, channel, sender, receiver, table):
        data = to_ipc(table)
        self.store.write_bytes(data, channel, f"to-{receiver}", f"from-{sender:06d}.arrow")
        return len(data)

    def _inbox(self, channel: str, receiver: int) -> tuple[Store, list[str]]:
        box = self.store.child(channel, f"to-{receiver}")
        try:
            return box, sorted(f.rel_path for f in box.list_files())
        except StoreError:          # nothing was sent to this receiver
            return box, []

    def get_all(self, channel, receiver):
        return list(self.each(channel, receiver))

    def each(self, channel, receiver):
        box, names = self._inbox(channel, receiver)
        return (from_ipc(box.read_bytes(name)) for name in names)

    def stream(self, channel, receiver):
        box, names = self._inbox(channel, receiver)
        return [_batches(box, name) for name in names]

    def clear(self):
        self.store.delete_dir()


def _batches(store: Store, name: str) -> Iterator[pa.RecordBatch]:
    with store.open_input(name) as f:
        yield from pa.ipc.open_stream(f)


class RedisExchange(Exchange):
    def __init__(self, redis_url: str, job: str):
        self.r = client(redis_url, raw=True)
        self.job = job

    def _key(self, channel: str, receiver: int) -> str:
        return protocol.exchange_key(self.job, channel, receiver)

    def put(self, channel, sender, receiver, table):
        data = to_ipc(table)
        key = self._key(channel, receiver)
        pipe = self.r.pipeline()
        pipe.hset(key, f"{sender:06d}", data)
        pipe.expire(key, protocol.JOB_TTL_SECONDS)
        pipe.execute()
        return len(data)

    def get_all(self, channel, receiver):
        raw = self.r.hgetall(self._key(channel, receiver))   # bytes keys and values
        return [from_ipc(raw[k]) for k in sorted(raw)]

    def clear(self):
        keys = list(self.r.scan_iter(match=protocol.exchange_key(self.job, "*", "*")))
        if keys:
            self.r.delete(*keys)


def for_event(event: StepEvent) -> tuple[ObjectStoreExchange, RedisExchange]:
    """The exchanges of the job an event belongs to: the object store, and Redis."""
    return ObjectStoreExchange(event.scratch), RedisExchange(event.redis_url, event.job)
