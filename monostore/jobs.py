"""The Redis protocol of a job: its state, per-partition results and attempts.

Every key of a job lives under lakestats:job:<id>: and carries a TTL, so a coordinator that dies
midway leaves nothing behind for long; a job that ends deletes its keys at once.
"""
from __future__ import annotations

import json
import time
import uuid

import redis

JOB_TTL_SECONDS = 6 * 3600
_clients: dict[tuple[str, bool], redis.Redis] = {}


def client(url: str, raw: bool = False) -> redis.Redis:
    """One connection pool per URL and process (workers report many results); raw clients
    return bytes, the others text."""
    if (url, raw) not in _clients:
        # a reduction in Redis (ZUNIONSTORE of a million values) may take seconds: the unix
        # socket default of 5 s would cut it off
        _clients[url, raw] = redis.Redis.from_url(url, decode_responses=not raw,
                                                  socket_timeout=600)
    return _clients[url, raw]


class Job:
    def __init__(self, redis_url: str, job_id: str | None = None):
        self.redis_url = redis_url
        self.id = job_id or uuid.uuid4().hex[:12]
        self.r = client(redis_url)
        self.prefix = f"lakestats:job:{self.id}:"

    def key(self, name: str) -> str:
        return self.prefix + name

    def _write(self, name: str, mapping: dict) -> None:
        pipe = self.r.pipeline()
        pipe.hset(self.key(name), mapping=mapping)
        pipe.expire(self.key(name), JOB_TTL_SECONDS)
        pipe.execute()

    # -- coordinator side
    def start(self, **meta) -> None:
        self._write("state", {"status": "running", "started": time.time(), **meta})

    def finish(self) -> None:
        keys = list(self.r.scan_iter(match=self.prefix + "*"))
        if keys:
            self.r.delete(*keys)

    def attempt(self, rel_path: str) -> int:
        pipe = self.r.pipeline()
        pipe.hincrby(self.key("attempts"), rel_path, 1)
        pipe.expire(self.key("attempts"), JOB_TTL_SECONDS)
        return pipe.execute()[0]

    def attempts(self, rel_path: str) -> int:
        return int(self.r.hget(self.key("attempts"), rel_path) or 0)

    def result(self, rel_path: str) -> dict | None:
        raw = self.r.hget(self.key("results"), rel_path)
        return json.loads(raw) if raw else None

    def set_status(self, status: str, **meta) -> None:
        self._write("state", {"status": status, **meta})

    def state(self) -> dict:
        return self.r.hgetall(self.key("state"))

    # -- worker side
    def report(self, rel_path: str, result: dict) -> None:
        self._write("results", {rel_path: json.dumps(result)})
