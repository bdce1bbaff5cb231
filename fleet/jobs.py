"""A coordinator's job: the records of its calls in Redis (attempts, results) and, for the
algorithms that move data between workers, its exchanges; all gone when the job ends."""
from __future__ import annotations

import dataclasses
import json
import uuid

from lakestats.fleet import protocol
from lakestats.fleet.connections import client
from lakestats.fleet.exchange import ObjectStoreExchange, RedisExchange
from lakestats.fleet.protocol import JobLost, StepEvent
from lakestats.metastore.layout import Layout


# a worker's record, unless the job has ended (its keys deleted): a call still running then
# would recreate them, left until their TTL
_RECORD = """
if redis.call('exists', KEYS[2]) == 0 then
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
  redis.call('expire', KEYS[1], ARGV[3])
end"""


class Job:
    """Every key under lakestats:job:<id>: with a TTL, deleted by `finish`."""

    def __init__(self, redis_url: str, job_id: str | None = None):
        self.redis_url = redis_url
        self.id = job_id or uuid.uuid4().hex[:12]
        self.r = client(redis_url)

    def attempt(self, event: StepEvent) -> int:
        """Count one more attempt of a call; returns the count."""
        key = protocol.job_key(self.id, "attempts")
        pipe = self.r.pipeline()
        pipe.hincrby(key, event.key, 1)
        pipe.expire(key, protocol.JOB_TTL_SECONDS)
        return pipe.execute()[0]

    def record(self, event: StepEvent, result: dict) -> None:
        """The worker's own record of a call's result: it survives an invocation that failed
        after the step was done."""
        self.r.eval(_RECORD, 2, protocol.job_key(self.id, "results"),
                    protocol.ended_key(self.id), event.key, json.dumps(result),
                    protocol.JOB_TTL_SECONDS)

    def result(self, event: StepEvent) -> dict | None:
        raw = self.r.hget(protocol.job_key(self.id, "results"), event.key)
        return json.loads(raw) if raw else None

    def start(self) -> None:
        self.r.set(protocol.job_key(self.id, "alive"), 1, ex=protocol.JOB_TTL_SECONDS)

    def check(self, step: str) -> None:
        """Raise JobLost if Redis no longer has the job's records, when `step` ended."""
        if not self.r.exists(protocol.job_key(self.id, "alive")):
            raise JobLost(f"{step}: Redis lost the job's records (did it restart?); "
                          "its results cannot be trusted, nothing published")

    def finish(self) -> None:
        self.r.set(protocol.ended_key(self.id), 1, ex=protocol.JOB_TTL_SECONDS)   # first
        keys = list(self.r.scan_iter(match=protocol.job_key(self.id, "*")))
        if keys:
            self.r.delete(*keys)


class JobScope:
    """A job with its exchanges: payloads travel through the object store, in the job's
    scratch space under `layout` (when one is given), and, small ones, through Redis. Use it as
    a context manager: the exchanges and the job's keys are deleted when it ends, failed or
    not. A `stateful` job's steps hand each other data through Redis: each step's end checks
    that Redis still has the job's records."""

    def __init__(self, redis_url: str, layout: Layout | None = None, stateful: bool = True):
        self.job = Job(redis_url)
        self.stateful = stateful
        self.scratch = layout.scratch(self.job.id) if layout is not None else None
        self.objects = ObjectStoreExchange(self.scratch.uri) if self.scratch else None
        self.small = RedisExchange(redis_url, self.job.id)

    def stamp(self, event: StepEvent) -> StepEvent:
        """The event, addressed to this job."""
        return dataclasses.replace(event, job=self.job.id, redis_url=self.job.redis_url,
                                   scratch=self.scratch.uri if self.scratch else "")

    def check(self, step: str) -> None:
        if self.stateful:
            self.job.check(step)

    def __enter__(self) -> JobScope:
        if self.stateful:
            self.job.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.objects is not None:
            self.objects.clear()
        self.small.clear()
        self.job.finish()
