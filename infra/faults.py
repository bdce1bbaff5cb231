"""Fault injection for the local stack, used by the fault tests.

- FaultPlan: worker processes kill themselves, or stall, at a chosen step. Its `env` installs
  `worker_hook` in the worker processes started under it (functions.worker imports the hooks
  $LAKESTATS_WORKER_HOOKS names; the Lambda package holds neither this module nor a plan).
- S3FaultProxy: an HTTP proxy in front of the S3 endpoint (moto's server, localstack) that
  answers some requests with 503 SlowDown or 500 InternalError, or drops the connection
  without an answer, as S3 does under load. Both boto3 and Arrow's S3 client go through it
  when AWS_ENDPOINT_URL points at it. It counts the requests it served, by method.
- Lambda timeouts: lakestats.local_lambda.LocalContext(remaining=[...]).
- Redis restarts: infra.redis_server.EmbeddedRedis.restart.
"""
from __future__ import annotations

import collections
import http.client
import http.server
import json
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from lakestats.fleet.protocol import StepEvent

ERRORS = {503: ("SlowDown", "Please reduce your request rate."),
          500: ("InternalError", "We encountered an internal error. Please try again.")}


class FaultPlan:
    """A plan file in `directory`, which the worker processes started under `env` follow.

    A plan is a JSON list of faults: {"step": "frequencies.send", "moment": "before" | "after"
    | "during", "action": "kill" | "sleep", "times": n, "seconds": s}. "before" is before the
    step runs, "after" once its result is recorded in Redis, "during" `seconds` into the step
    (a kill, on a timer). "sleep" holds the step back `seconds`. Each fault fires `times`
    times across all worker processes: a firing claims a marker file beside the plan, created
    exclusively.
    """

    def __init__(self, directory: Path):
        self.path = Path(directory) / "faults.json"
        self.faults: list[dict] = []
        self._write()

    def add(self, step: str, moment: str = "before", action: str = "kill", times: int = 1,
            seconds: float = 0.2) -> FaultPlan:
        self.faults.append({"step": step, "moment": moment, "action": action, "times": times,
                            "seconds": seconds})
        self._write()
        return self

    def reset(self) -> None:
        """No faults, none fired."""
        self.faults = []
        self._write()
        for marker in self.path.parent.glob(f"{self.path.name}.*.fired"):
            marker.unlink()

    def _write(self) -> None:
        self.path.write_text(json.dumps(self.faults))

    @property
    def env(self) -> dict[str, str]:
        return {"LAKESTATS_FAULTS": str(self.path), "LAKESTATS_WORKER_HOOKS": WORKER_HOOK}

    def fired(self) -> int:
        return len(list(self.path.parent.glob(f"{self.path.name}.*.fired")))

    def wait_fired(self, seconds: float = 60) -> None:
        """Until a fault has fired (its step is running, for a "before" sleep)."""
        deadline = time.monotonic() + seconds
        while not self.fired():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no fault of {self.path} fired within {seconds:g} s")
            time.sleep(0.05)


# -- in a worker process: the plan's faults fired around each step

WORKER_HOOK = "lakestats.infra.faults.worker_hook"


def worker_hook(env: Mapping[str, str]) -> Callable[[StepEvent], Iterator[None]]:
    """The hook functions.worker runs around each step: the faults of the plan that
    $LAKESTATS_FAULTS names."""
    return partial(_around, env["LAKESTATS_FAULTS"])


def _around(plan: str, call: StepEvent) -> Iterator[None]:
    _fire(plan, call.name, "before")
    timer = _arm(plan, call.name)
    try:
        yield                                   # the step runs
    finally:
        if timer:
            timer.cancel()
    yield                                       # its result is recorded
    _fire(plan, call.name, "after")


def _faults(plan: str, step: str, moment: str) -> list[tuple[int, dict]]:
    with open(plan) as f:
        return [(i, fault) for i, fault in enumerate(json.load(f))
                if fault["step"] == step and fault.get("moment", "before") == moment]


def _claim(plan: str, i: int, fault: dict) -> bool:
    for n in range(fault.get("times", 1)):
        try:
            os.close(os.open(f"{plan}.{i}.{n}.fired", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            continue
    return False


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _fire(plan: str, step: str, moment: str) -> None:
    """The plan's faults for `step` at `moment` ("before" or "after")."""
    for i, fault in _faults(plan, step, moment):
        if _claim(plan, i, fault):
            if fault.get("action", "kill") == "kill":
                _kill()
            time.sleep(fault.get("seconds", 1.0))


def _arm(plan: str, step: str) -> threading.Timer | None:
    """The plan's "during" fault for `step`, on a timer that the step's end cancels."""
    for i, fault in _faults(plan, step, "during"):
        if _claim(plan, i, fault):
            timer = threading.Timer(fault.get("seconds", 0.2), _kill)
            timer.daemon = True
            timer.start()
            return timer
    return None


# -- S3


@dataclass
class S3Faults:
    """Which requests fail: every `every`-th request matching `method` (all if None; none if
    `every` is 0), at most `limit` in all; `kind` is 503, 500 or "drop". `served` counts the
    requests by method."""
    kind: int | str = 503
    every: int = 4
    method: str | None = None
    limit: int = 1_000_000
    injected: int = 0
    seen: int = 0
    served: collections.Counter = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, method: str) -> int | str | None:
        with self.lock:
            self.served[method] += 1
            if self.method not in (None, method):
                return None
            self.seen += 1
            if not self.every or self.seen % self.every or self.injected >= self.limit:
                return None
            self.injected += 1
            return self.kind


class S3FaultProxy:
    """`with S3FaultProxy(endpoint, S3Faults(...)) as proxy:` then use proxy.url."""

    def __init__(self, target: str, faults: S3Faults | None = None):
        self.target = urlparse(target)
        self.faults = faults or S3Faults(every=0)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                body = self._body()
                fault = proxy.faults.decide(self.command)
                if fault == "drop":                     # no answer: the client's read fails
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault in ERRORS:
                    code, message = ERRORS[fault]
                    self._answer(fault, {"Content-Type": "application/xml"},
                                 f"<Error><Code>{code}</Code><Message>{message}</Message>"
                                 "</Error>".encode())
                    return
                upstream = http.client.HTTPConnection(proxy.target.hostname,
                                                      proxy.target.port, timeout=60)
                try:
                    upstream.request(self.command, self.path, body, dict(self.headers))
                    reply = upstream.getresponse()
                    self._answer(reply.status, dict(reply.getheaders()), reply.read())
                finally:
                    upstream.close()

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while (size := int(self.rfile.readline().split(b";")[0], 16)):
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass                             # trailers
                    del self.headers["Transfer-Encoding"]
                    self.headers["Content-Length"] = str(sum(map(len, chunks)))
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _answer(self, status: int, headers: dict, body: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                length = headers.get("Content-Length") if self.command == "HEAD" else len(body)
                self.send_header("Content-Length", str(length or 0))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> S3FaultProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
