"""Every command ends with the status it means, and leaves nothing behind: a lookup on an S3
table exits 0 on a busy machine too (Arrow's threads once aborted the interpreter's teardown:
exit 134 after complete output); SIGTERM stops a command as Ctrl-C does, its embedded
redis-server, worker processes and temporary folder gone; a process killed outright takes its
redis-server along. Real processes, a real redis-server, moto's S3 server."""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.infra.local_stack import wire_bucket
from tests.tables import mixed

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads processes from /proc; Linux's parent-death signal")

LAKESTATS = [sys.executable, "-m", "lakestats.cli"]
ROWS = 3 * 500


def own_redis() -> dict:
    """The environment without REDIS_URL: the command embeds its own redis-server."""
    return {k: v for k, v in os.environ.items() if k != "REDIS_URL"}


def children(pid: int) -> list[int]:
    """The process's children, whichever of its threads started them."""
    found = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError):
            with open(path) as f:
                found += [int(c) for c in f.read().split()]
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def running(pid: int, name: str) -> bool:
    """The process runs (a zombie has ended) and is still the one named (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X") and name in command_line(pid)


def redis_of(pid: int) -> tuple[int, str]:
    """The embedded redis-server among the process's children: its pid and its folder."""
    for child in children(pid):
        line = command_line(child)
        if "redis-server" in line:
            return child, re.search(r"(/\S*lakestats-redis-[^/\s]+)", line).group(1)
    raise AssertionError(f"no redis-server among {pid}'s children")


def gone_within(pid: int, name: str, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while running(pid, name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def busy(processes: int = 2):
    """The CPU loaded by processes that spin."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(processes)]
    try:
        yield
    finally:
        for p in spinning:
            p.kill()
            p.wait()


@pytest.fixture
def s3_table(s3_endpoint, run) -> str:
    bucket = f"exits-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    for i in range(3):
        sink = pa.BufferOutputStream()
        pq.write_table(mixed(ROWS // 3, seed=i), sink)
        s3.put_object(Bucket=bucket, Key=f"t/part-{i}.parquet",
                      Body=sink.getvalue().to_pybytes())
    table = f"s3://{bucket}/t"
    run(table)
    return table


@pytest.mark.slow
def test_a_lookup_on_s3_exits_0_on_a_busy_machine(s3_table):
    failures = []
    with busy(2):
        for _ in range(20):      # before the fix, 11 of 30 aborted
            done = subprocess.run([*LAKESTATS, "show", s3_table, "--json"], capture_output=True,
                                  text=True, env=own_redis(), timeout=120)
            if done.returncode != 0 or done.stderr:
                failures.append((done.returncode, done.stderr[-300:]))
            else:
                assert json.loads(done.stdout)["row_count"] == ROWS
    assert not failures, failures


def _ctrl_c_as_at_a_terminal() -> None:
    """SIGINT as a command started at a terminal gets it: a shell running these tests in the
    background (a CI job) may have SIGINT ignored or blocked, and children inherit both."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def watching(s3_endpoint: str) -> tuple[subprocess.Popen, list[str]]:
    """`lakestats watch` with its embedded Redis, once it watches and a worker runs; the
    lines of its stderr, as they come."""
    bucket = f"exits-{uuid.uuid4().hex[:8]}"
    queue = wire_bucket(s3_endpoint, bucket, f"events-{bucket}")
    process = subprocess.Popen([*LAKESTATS, "watch", "--queue", queue, "--tables",
                                f"s3://{bucket}/t"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True,
                               env={**own_redis(), "PYTHONFAULTHANDLER": "1"},
                               preexec_fn=_ctrl_c_as_at_a_terminal)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True).start()
    deadline = time.monotonic() + 60
    while not ("watching" in "".join(lines) and
               any("spawn_main" in command_line(c) for c in children(process.pid))):
        assert process.poll() is None, "".join(lines)
        assert time.monotonic() < deadline, "watch did not start"
        time.sleep(0.05)
    return process, lines


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_watch_leaving_nothing_behind(s3_endpoint, stop):
    process, lines = watching(s3_endpoint)
    redis, folder = redis_of(process.pid)
    workers = [c for c in children(process.pid) if "spawn_main" in command_line(c)]
    process.send_signal(stop)                   # the process alone, not its group
    try:
        code = process.wait(timeout=60)
    except subprocess.TimeoutExpired:           # where it hangs: every thread's stack
        process.send_signal(signal.SIGABRT)
        process.wait(timeout=30)
        time.sleep(0.5)
        raise AssertionError("".join(lines)[-8000:]) from None
    time.sleep(0.2)                             # the reader thread has the last lines
    assert code == 0, lines                     # watch's status on Ctrl-C
    assert gone_within(redis, "redis-server")
    assert all(gone_within(w, "spawn_main") for w in workers)
    assert not os.path.exists(folder)
    time.sleep(0.2)                             # the reader thread has the last lines
    assert "Traceback" not in "".join(lines) and "Error" not in "".join(lines), lines


HOLDER = """
import time
from lakestats.infra.redis_server import redis_url
with redis_url() as url:
    print(url, flush=True)
    time.sleep(300)
"""


@pytest.mark.services                         # a real redis-server of its own
def test_a_process_killed_outright_takes_its_redis_server_along():
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE,
                              text=True, env=own_redis())
    folder = None
    try:
        assert holder.stdout.readline().startswith("unix://")
        redis, folder = redis_of(holder.pid)
        assert running(redis, "redis-server")
        holder.kill()                           # SIGKILL: no cleanup of its own runs
        holder.wait(timeout=30)
        assert gone_within(redis, "redis-server")
    finally:
        holder.kill()
        holder.wait()
        if folder:
            shutil.rmtree(folder, ignore_errors=True)      # left by a SIGKILL, as expected
