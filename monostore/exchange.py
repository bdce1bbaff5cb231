"""Worker-to-worker exchange of Arrow tables, the stand-in for the seed's direct connections.

Every payload is addressed (job, channel, sender, receiver). Two backends behind one interface:
- ObjectStoreExchange (default): one object per payload under
  <root>/<job>/<channel>/to-<receiver>/from-<sender>.arrow, so any payload size works and
  nothing lives in the coordinator's memory;
- RedisExchange: one hash field per payload under a key with a TTL, for small payloads.
Bytes moved are the Arrow IPC sizes of the payloads (reported by `put`).
"""
from __future__ import annotations

import pyarrow as pa

from metastore.store import Store, StoreError
from monostore.jobs import JOB_TTL_SECONDS, client


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="lz4")   # fewer bytes on the wire, cheaply
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
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

    def clear(self) -> None:
        raise NotImplementedError


class ObjectStoreExchange(Exchange):
    def __init__(self, root: str, job: str):
        self.store = Store(root).child(job)

    def put(self, channel, sender, receiver, table):
        data = to_ipc(table)
        self.store.write_bytes(data, channel, f"to-{receiver}", f"from-{sender:06d}.arrow")
        return len(data)

    def get_all(self, channel, receiver):
        box = self.store.child(channel, f"to-{receiver}")
        try:
            names = sorted(f.rel_path for f in box.list_files())
        except StoreError:          # nothing was sent to this receiver
            return []
        return [from_ipc(box.read_bytes(name)) for name in names]

    def clear(self):
        self.store.delete_dir()


class RedisExchange(Exchange):
    def __init__(self, redis_url: str, job: str):
        self.r = client(redis_url, raw=True)
        self.prefix = f"lakestats:job:{job}:exchange:"

    def _key(self, channel: str, receiver: int) -> str:
        return f"{self.prefix}{channel}:{receiver}"

    def put(self, channel, sender, receiver, table):
        data = to_ipc(table)
        key = self._key(channel, receiver)
        pipe = self.r.pipeline()
        pipe.hset(key, f"{sender:06d}", data)
        pipe.expire(key, JOB_TTL_SECONDS)
        pipe.execute()
        return len(data)

    def get_all(self, channel, receiver):
        raw = self.r.hgetall(self._key(channel, receiver))   # bytes keys and values
        return [from_ipc(raw[k]) for k in sorted(raw)]

    def clear(self):
        keys = list(self.r.scan_iter(match=self.prefix + "*"))
        if keys:
            self.r.delete(*keys)


def make_exchange(spec: dict) -> Exchange:
    """From the JSON description the coordinator puts in worker events."""
    if spec["kind"] == "redis":
        return RedisExchange(spec["redis_url"], spec["job"])
    return ObjectStoreExchange(spec["root"], spec["job"])
