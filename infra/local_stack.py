"""The local stack in the background (`lakestats local up / down`), the same one the tests use.

moto's S3+SQS server over HTTP (or localstack's, `up --localstack`: infra.localstack) and a
real redis-server (the embedded binary), started detached; their endpoints, process ids (or
process groups) and folders go to a state file so that `down` can stop them. With --bucket,
the bucket, an event queue and the bucket's notifications to it are created too, and the
printed watch command names that queue and the table (--table, a prefix in the bucket), so
that `lakestats watch` sees its files land.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from lakestats.core.errors import LakestatsError
from lakestats.infra.redis_server import redis_server_binary

STATE = Path(".lakestats-local")
# the only fake: an account that the local stack accepts
LOCAL_ACCOUNT = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}
TABLE = "orders"             # the table the printed watch command maintains, by default


class StackUp(LakestatsError):
    """A local stack is already up (its state file is there): `local down` first."""


def moto_in_process():
    """moto's S3+SQS server in this process, on a free loopback port: (server, endpoint)."""
    import logging

    from moto.server import ThreadedMotoServer
    logging.getLogger("werkzeug").setLevel(logging.WARNING)   # a line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def free_port() -> int:
    """A loopback port free now (for a server started next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _detached(args: list[str], log: Path) -> int:
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                start_new_session=True).pid


def wait_for(ready, what: str, seconds: float = 20, logs: str = "") -> None:
    """Until ready() is true (an OSError counts as not yet); a RuntimeError after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start within {seconds:g} s"
                       + (f" (see {logs})" if logs else ""))


def up(state: Path = STATE, bucket: str | None = None, queue: str = "lakestats-events",
       table: str = TABLE, s3_server: Callable[[], dict] | None = None) -> dict:
    """Redis and an S3+SQS server in the background: moto's, or what `s3_server()` starts
    (infra.localstack.detached): it returns once the server serves, with its
    "AWS_ENDPOINT_URL" and what `down` stops, "groups" (process groups) and "dirs" (folders).
    With `bucket`, the bucket and its event queue ("QUEUE_URL"), and "TABLE", the URI of
    `table` in it. If anything fails to start, what did start is stopped."""
    if (state / "state.json").exists():
        raise StackUp(f"a local stack is already up ({state}/state.json); "
                      "`lakestats local down` first")
    state.mkdir(parents=True, exist_ok=True)
    redis_port = free_port()
    info: dict = {"REDIS_URL": f"redis://127.0.0.1:{redis_port}", "pids": [], "groups": [],
                  "dirs": []}
    logs = f"{state}/*.log"
    try:
        info["pids"].append(_detached([redis_server_binary(), "--port", str(redis_port),
                                       "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                       "no"], state / "redis.log"))
        _save(state, info)
        if s3_server is None:
            s3_port = free_port()
            info["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{s3_port}"
            info["pids"].append(_detached([sys.executable, "-m", "moto.server", "-H",
                                           "127.0.0.1", "-p", str(s3_port)], state / "moto.log"))
            _save(state, info)
            wait_for(lambda: urllib.request.urlopen(
                info["AWS_ENDPOINT_URL"] + "/moto-api/data.json", timeout=1), "moto", logs=logs)
        else:
            started = s3_server()
            info.update({**started, "pids": info["pids"] + started.get("pids", []),
                         "groups": started.get("groups", []), "dirs": started.get("dirs", [])})
            _save(state, info)
        import redis
        wait_for(lambda: redis.Redis.from_url(info["REDIS_URL"]).ping(), "redis-server",
                 logs=logs)
        if bucket:
            info["QUEUE_URL"] = wire_bucket(info["AWS_ENDPOINT_URL"], bucket, queue)
            info["TABLE"] = f"s3://{bucket}/{table}"
            _save(state, info)
    except BaseException:
        down(state)
        raise
    return info


def _save(state: Path, info: dict) -> None:
    (state / "state.json").write_text(json.dumps(info))


def wire_bucket(endpoint: str, bucket: str, queue: str, region: str = "us-east-1") -> str:
    """A bucket whose object events go to an SQS queue through EventBridge, as template.yaml
    wires them: statistics files' events are left out. Returns the queue URL."""
    import boto3

    from lakestats.metastore.layout import object_events_pattern
    kwargs = dict(endpoint_url=endpoint, region_name=region,
                  aws_access_key_id=LOCAL_ACCOUNT["AWS_ACCESS_KEY_ID"],
                  aws_secret_access_key=LOCAL_ACCOUNT["AWS_SECRET_ACCESS_KEY"])
    s3, sqs, events = (boto3.client(name, **kwargs) for name in ("s3", "sqs", "events"))
    s3.create_bucket(Bucket=bucket)
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    rule = f"{bucket}-objects"
    events.put_rule(Name=rule, EventPattern=json.dumps(object_events_pattern(bucket)))
    events.put_targets(Rule=rule, Targets=[{"Id": queue, "Arn": arn}])
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
        "EventBridgeConfiguration": {}})
    return url


def down(state: Path = STATE) -> int:
    """Stop what `up` started (its processes, its process groups with their children) and
    remove its folders; returns how many it stopped."""
    path = state / "state.json"
    if not path.exists():
        return 0
    info = json.loads(path.read_text())
    stopped = 0
    for pid in info["pids"]:
        try:
            os.kill(pid, signal.SIGTERM)
            stopped += 1
        except ProcessLookupError:
            pass
    for group in info.get("groups", []):
        stopped += stop_group(group)
    for folder in info.get("dirs", []):
        shutil.rmtree(folder, ignore_errors=True)
    path.unlink()
    return stopped


def stop_group(group: int, seconds: float = 20) -> int:
    """SIGTERM to a process group, SIGKILL to what is left of it after `seconds`: 1 if it was
    running, else 0."""
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return 0
    deadline = time.monotonic() + seconds
    while not _group_gone(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    return 1


def _group_gone(group: int) -> bool:
    with contextlib.suppress(ChildProcessError):     # this process started it: reap it
        os.waitpid(group, os.WNOHANG)
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def exports(info: dict) -> str:
    lines = [f"export AWS_ENDPOINT_URL={info['AWS_ENDPOINT_URL']}",
             "export " + " ".join(f"{k}={v}" for k, v in LOCAL_ACCOUNT.items()),
             f"export REDIS_URL={info['REDIS_URL']}"]
    if "QUEUE_URL" in info:             # a comment: `eval` of the exports does not run it
        lines.append("# " + shlex.join(["lakestats", "watch", "--queue", info["QUEUE_URL"],
                                        "--tables", info["TABLE"]]))
    return "\n".join(lines)
