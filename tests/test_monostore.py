"""The coordinator on a real Redis: retries after a worker dies, bounded job state, invokers."""
from __future__ import annotations

import io
import json
import os
import signal
import threading
import time

import boto3
import duckdb
import pyarrow.parquet as pq
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from metastore.reader import TableStatistics
from monostore.invokers import InvocationError
from monostore.invokers.aws_lambda import LambdaInvoker
from monostore.jobs import client
from tests.tables import mixed, write


def test_job_survives_a_killed_worker(tmp_path, run, invoker, redis_url):
    """SIGKILL one worker process while partitions are in flight: the pool is rebuilt, the lost
    partitions are retried, and the statistics are those of every row."""
    for i in range(24):
        write(tmp_path / f"part-{i:02d}.parquet", mixed(60_000, seed=i))
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("report", run(tmp_path)))
    worker.start()
    partitions = tmp_path / "_lakestats" / "partitions"
    deadline = time.monotonic() + 120
    while not list(partitions.glob("*/*/statistics.parquet")):   # first partition is done
        assert time.monotonic() < deadline, "no partition finished"
        time.sleep(0.02)
    job_keys = list(client(redis_url).scan_iter(match="lakestats:job:*"))
    assert job_keys and all(client(redis_url).ttl(k) > 0 for k in job_keys)   # no orphans ever
    os.kill(invoker.pids()[0], signal.SIGKILL)
    worker.join(180)

    report = outcome["report"]
    assert report.retries >= 1 and not report.failed and report.computed == 24
    paths = sorted(str(p) for p in tmp_path.glob("part-*.parquet"))
    rows, non_null, total = duckdb.sql(
        f"select count(*), count(qty), sum(qty)::varchar from read_parquet({paths!r})").fetchall()[0]
    qty = {c["column"]: c for c in TableStatistics(f"{tmp_path}/_lakestats").summary()["columns"]}["qty"]
    assert (qty["row_count"], qty["row_count"] - qty["null_count"], qty["sum"]) == (rows, non_null, total)
    # the job's keys are gone once it ends
    assert not list(client(redis_url).scan_iter(match="lakestats:job:*"))


def test_job_survives_stuck_workers(tmp_path, run, invoker):
    """SIGSTOP every worker mid-job: past the partition timeout the coordinator kills them, and
    the partitions they held are retried on fresh workers."""
    for i in range(12):
        write(tmp_path / f"part-{i:02d}.parquet", mixed(60_000, seed=i))
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault(
        "report", run(tmp_path, partition_timeout=3)))
    worker.start()
    partitions = tmp_path / "_lakestats" / "partitions"
    deadline = time.monotonic() + 60
    while not list(partitions.glob("*/*/statistics.parquet")):   # workers are busy
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stopped = invoker.pids()
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        worker.join(120)
    finally:
        for pid in stopped:                      # never leave a stopped process behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    report = outcome["report"]
    assert report.retries >= 1 and not report.failed and report.computed == 12
    total = sum(pq.ParquetFile(p).metadata.num_rows for p in tmp_path.glob("part-*.parquet"))
    assert TableStatistics(f"{tmp_path}/_lakestats").summary()["row_count"] == total


def _payload(obj) -> StreamingBody:
    raw = json.dumps(obj).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def test_lambda_invoker_sends_the_handler_event():
    lam = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x",
                       aws_secret_access_key="x")
    event = {"action": "partition_stats", "rel_path": "a.parquet"}
    with Stubber(lam) as stub:
        stub.add_response("invoke", {"StatusCode": 200, "Payload": _payload({"status": "ok"})},
                          {"FunctionName": "lakestats-partition", "InvocationType": "RequestResponse",
                           "Payload": json.dumps(event).encode()})
        stub.add_response("invoke", {"StatusCode": 200, "FunctionError": "Unhandled",
                                     "Payload": _payload({"errorMessage": "boom"})},
                          {"FunctionName": "lakestats-partition", "InvocationType": "RequestResponse",
                           "Payload": json.dumps(event).encode()})
        with LambdaInvoker("lakestats-partition", workers=1, client=lam) as inv:
            assert inv.submit(event).result() == {"status": "ok"}
            with pytest.raises(InvocationError, match="boom"):
                inv.submit(event).result()
        stub.assert_no_pending_responses()
