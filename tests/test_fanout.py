"""The fan-out on a real Redis: a dead worker, a stuck call, stuck workers and throttling
retried as they should be; job state that does not outlive the job; the Lambda invoker."""
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

from lakestats.fleet.connections import client
from lakestats.fleet.fanout import THROTTLE_PAUSE, fan_out
from lakestats.fleet.invokers.aws_lambda import LambdaInvoker
from lakestats.fleet.jobs import JobScope
from lakestats.fleet.protocol import (RANK_MERGE, InvocationError, RankResult, RankTask, StepEvent,
                                      StepFailed)
from lakestats.metastore.reader import StatisticsReader
from tests.tables import mixed, write


def test_job_survives_a_killed_worker(tmp_path, run, invoker, redis_url):
    """SIGKILL one worker process while partitions are in flight: the pool is rebuilt, the lost
    partitions are retried, and the statistics are those of every row."""
    for i in range(24):
        write(tmp_path / f"part-{i:02d}.parquet", mixed(60_000, seed=i))
    worker, outcome = computing(tmp_path, run)
    partitions = tmp_path / "_lakestats" / "partitions"
    deadline = time.monotonic() + 120
    while not list(partitions.glob("*/*/statistics.parquet")):   # first partition is done
        assert time.monotonic() < deadline, "no partition finished"
        time.sleep(0.02)
    job_keys = list(client(redis_url).scan_iter(match="lakestats:job:*"))
    assert job_keys and all(client(redis_url).ttl(k) > 0 for k in job_keys)   # no orphans ever
    os.kill(invoker.pids()[0], signal.SIGKILL)
    worker.join(180)

    report = finished(outcome)
    assert report.retries >= 1 and not report.failed and report.computed == 24
    paths = sorted(str(p) for p in tmp_path.glob("part-*.parquet"))
    rows, non_null, total = duckdb.sql(
        f"select count(*), count(qty), sum(qty)::varchar from read_parquet({paths!r})").fetchall()[0]
    qty = {c["column"]: c for c in StatisticsReader(f"{tmp_path}/_lakestats").summary()["columns"]}["qty"]
    assert (qty["row_count"], qty["row_count"] - qty["null_count"], qty["sum"]) == (rows, non_null, total)
    # the job's keys are gone once it ends
    assert not list(client(redis_url).scan_iter(match="lakestats:job:*"))


def computing(tmp_path, run, **changes) -> tuple[threading.Thread, dict]:
    """compute() in a thread; its outcome for `finished`."""
    outcome = {}

    def compute():
        try:
            outcome["report"] = run(tmp_path, **changes)
        except Exception as e:  # noqa: BLE001 - raised again by `finished`
            outcome["error"] = e
    thread = threading.Thread(target=compute)
    thread.start()
    return thread, outcome


def finished(outcome: dict):
    """The compute's report, or the reason it has none."""
    if "error" in outcome:
        raise outcome["error"]
    assert "report" in outcome, "the compute did not end in time"
    return outcome["report"]


def started(tmp_path, run, files: int, **changes):
    """compute() of `files` files in a thread, returned a little after a partition is written:
    the workers are busy inside their next calls. (Right at a call's end, a worker stopped
    between recording its result and replying would be given up without a retry: the fan-out
    takes the recorded result.)"""
    for i in range(files):
        write(tmp_path / f"part-{i:02d}.parquet", mixed(60_000, seed=i))
    thread, outcome = computing(tmp_path, run, **changes)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "_lakestats" / "partitions").glob("*/*/statistics.parquet")):
        assert time.monotonic() < deadline, "no partition finished"
        time.sleep(0.01)
    time.sleep(0.1)                                   # a 60,000-row call takes longer
    return thread, outcome


def stop_until_done(thread: threading.Thread, pids: list[int]) -> None:
    """SIGSTOP the processes until the job ends, and never leave one behind."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        thread.join(120)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_stuck_call_is_retried_alone(tmp_path, run, invoker):
    """One worker stops while both run calls: past the timeout only its call is stopped (its
    process killed) and retried; the call in flight on the other worker, and every later one,
    finish on their first attempt."""
    thread, outcome = started(tmp_path, run, 12, timeout=4)
    stop_until_done(thread, invoker.pids()[:1])
    report = finished(outcome)
    assert (report.retries, report.failed, report.computed) == (1, {}, 12)
    total = sum(pq.ParquetFile(p).metadata.num_rows for p in tmp_path.glob("part-*.parquet"))
    assert StatisticsReader(f"{tmp_path}/_lakestats").summary()["row_count"] == total


def test_job_survives_stuck_workers(tmp_path, run, invoker):
    """Every worker stops mid-job: past the timeout the coordinator kills them, and the calls
    they held are retried on fresh workers."""
    thread, outcome = started(tmp_path, run, 12, timeout=3)
    stop_until_done(thread, invoker.pids())
    report = finished(outcome)
    assert report.retries >= 1 and not report.failed and report.computed == 12
    total = sum(pq.ParquetFile(p).metadata.num_rows for p in tmp_path.glob("part-*.parquet"))
    assert StatisticsReader(f"{tmp_path}/_lakestats").summary()["row_count"] == total


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


def test_throttled_calls_wait_and_do_not_count_as_attempts(redis_url):
    """Lambda refuses a call twice (TooManyRequests), then runs it: with one attempt allowed,
    the fan-out still gets the result, after pausing; a function error is not forgiven."""
    lam = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x",
                       aws_secret_access_key="x")
    event = StepEvent(RANK_MERGE, "range 0", RankTask(0, 0, "field"))
    with Stubber(lam) as stub, JobScope(redis_url) as scope:
        for _ in range(2):
            stub.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)
        stub.add_response("invoke", {"StatusCode": 200, "Payload": _payload(
            {"values": 7, "distinct": 2, "bytes": 10})})
        stub.add_response("invoke", {"StatusCode": 200, "FunctionError": "Unhandled",
                                     "Payload": _payload({"errorMessage": "boom"})})
        with LambdaInvoker("lakestats-steps", workers=1, client=lam) as inv:
            started = time.monotonic()
            [outcome] = fan_out(inv, scope, [event], max_attempts=1, timeout=60)
            assert (outcome.result, outcome.attempts) == (RankResult(7, 2, 10), 1)
            assert time.monotonic() - started >= 2 * 0.5 * THROTTLE_PAUSE[0]
            with pytest.raises(StepFailed, match="ranks.merge range 0: .*boom"):
                fan_out(inv, scope, [event], max_attempts=1, timeout=60)
        stub.assert_no_pending_responses()
