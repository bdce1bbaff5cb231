"""The local stack in the background (`lakestats local up / down`), the same one the tests use.

moto's S3+SQS server over HTTP and a real redis-server (the embedded binary), started detached;
their endpoints and process ids go to a state file so that `down` can stop them. With
--bucket, the bucket, an event queue and the bucket's notifications to it are created too, so
that `lakestats watch --queue URL` sees files land.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from lakestats.infra.redis_server import redis_server_binary

STATE = Path(".lakestats-local")
# the only fake: an account that the local stack accepts
LOCAL_ACCOUNT = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}


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


def up(state: Path = STATE, bucket: str | None = None, queue: str = "lakestats-events") -> dict:
    if (state / "state.json").exists():
        raise RuntimeError(f"a local stack is already up ({state}/state.json); "
                           "`lakestats local down` first")
    state.mkdir(parents=True, exist_ok=True)
    s3_port, redis_port = free_port(), free_port()
    pids = [_detached([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                       str(s3_port)], state / "moto.log"),
            _detached([redis_server_binary(), "--port", str(redis_port), "--bind", "127.0.0.1",
                       "--save", "", "--appendonly", "no"], state / "redis.log")]
    endpoint, redis_url = f"http://127.0.0.1:{s3_port}", f"redis://127.0.0.1:{redis_port}"
    info = {"AWS_ENDPOINT_URL": endpoint, "REDIS_URL": redis_url, "pids": pids}
    (state / "state.json").write_text(json.dumps(info))
    logs = f"{state}/*.log"
    wait_for(lambda: urllib.request.urlopen(endpoint + "/moto-api/data.json", timeout=1), "moto",
             logs=logs)
    import redis
    wait_for(lambda: redis.Redis.from_url(redis_url).ping(), "redis-server", logs=logs)
    if bucket:
        info["QUEUE_URL"] = wire_bucket(endpoint, bucket, queue)
        (state / "state.json").write_text(json.dumps(info))
    return info


def wire_bucket(endpoint: str, bucket: str, queue: str, region: str = "us-east-1") -> str:
    """A bucket whose object events go to an SQS queue; returns the queue URL."""
    import boto3
    kwargs = dict(endpoint_url=endpoint, region_name=region,
                  aws_access_key_id=LOCAL_ACCOUNT["AWS_ACCESS_KEY_ID"],
                  aws_secret_access_key=LOCAL_ACCOUNT["AWS_SECRET_ACCESS_KEY"])
    s3, sqs = boto3.client("s3", **kwargs), boto3.client("sqs", **kwargs)
    s3.create_bucket(Bucket=bucket)
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
        "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*",
                                                             "s3:ObjectRemoved:*"]}]})
    return url


def down(state: Path = STATE) -> int:
    path = state / "state.json"
    if not path.exists():
        return 0
    stopped = 0
    for pid in json.loads(path.read_text())["pids"]:
        try:
            os.kill(pid, signal.SIGTERM)
            stopped += 1
        except ProcessLookupError:
            pass
    path.unlink()
    return stopped


def exports(info: dict) -> str:
    lines = [f"export AWS_ENDPOINT_URL={info['AWS_ENDPOINT_URL']}",
             "export " + " ".join(f"{k}={v}" for k, v in LOCAL_ACCOUNT.items()),
             f"export REDIS_URL={info['REDIS_URL']}"]
    if "QUEUE_URL" in info:
        lines.append(f"# lakestats watch --queue {info['QUEUE_URL']} --tables s3://BUCKET/TABLE")
    return "\n".join(lines)
