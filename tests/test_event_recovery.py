"""No change is lost with the process that was to reduce it (fleet.windows): a watcher killed
at any moment of the event flow (after it received messages, inside a batch, during a
reduction, just before and just after the LATEST swap) is followed by one that publishes the
truth within a bounded time, nothing left pending; and on the Lambda path, the reduce
function's schedule takes over a reduction that died. On moto's S3+SQS server with a real
Redis; the watcher holds still at the moment an infra.faults plan names, and is killed there."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import boto3
import pytest

from lakestats.core.settings import Settings
from lakestats.fleet import protocol, windows
from lakestats.fleet.connections import client
from lakestats.infra.faults import FaultPlan
from lakestats.metastore.layout import Layout
from lakestats.metastore.manifest import latest_version
from lakestats.metastore.reader import StatisticsReader
from tests.tables import mixed, published_files
from tests.test_serverless import (TABLE, lake, put, settled, wait_until,  # noqa: F401
                                   watch_settings, watching)

pytestmark = pytest.mark.slow

# the moments (infra.faults plan steps) at which the watcher dies, in its process or a worker's
MOMENTS = ["watch.received", "batch.record", "reduce.table-level", "reduce.publish",
           "reduce.published"]


def pending(redis_url: str, table: str) -> bool:
    found = windows.state(redis_url, [table]).get(table)
    return found is not None and found.waiting


def assert_equals_clean_compute(table: str, run) -> None:
    """The published files equal a clean compute's; but for the distinct-count sketches of a
    version built on one that a file has left since: they keep its values until --exact
    (README, Incremental versions)."""
    stale = StatisticsReader(f"{table}/_lakestats").manifest.sketches_stale
    run(table, stats_root=f"{table}-clean-stats")
    got, want = (published_files(root) for root in (f"{table}/_lakestats",
                                                     f"{table}-clean-stats"))
    for name in want:
        if stale:
            for row in got[name] + want[name]:
                row.pop("ndv_sketch", None)
                row.pop("theta_sketch", None)
        assert got[name] == want[name], name


@pytest.mark.parametrize("moment", MOMENTS)
def test_a_watcher_killed_at_any_moment_loses_no_change(moment, lake, redis_url,  # noqa: F811
                                                        tmp_path, run):
    bucket, queue, table = lake
    rows = {f"part-{i}.parquet": 500 + i for i in range(3)}
    for name, n in rows.items():
        put(bucket, f"{TABLE}/{name}", mixed(n, seed=n))
    plan = FaultPlan(tmp_path).add(moment, "before", action="sleep", seconds=120)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "lakestats.cli", "watch", "--queue", queue, "--visibility", "5",
         "--window", "1"], env={**os.environ, "PYTHONPATH": os.getcwd(), **plan.env},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        plan.wait_fired(60)                     # it holds still at the moment...
    finally:
        os.killpg(watcher.pid, signal.SIGKILL)  # ... and dies there, its workers with it
        watcher.wait()
    if moment.startswith("reduce."):
        # its reduction claimed the changes, whose messages are gone; its compute lock expires
        # LOCK_TTL after its last heartbeat, as nothing renews it: expired here at once
        lock, r = protocol.compute_lock(Layout.of_table(table).uri), client(redis_url)
        assert pending(redis_url, table)
        assert 0 < r.pttl(lock) <= protocol.LOCK_TTL_SECONDS * 1000
        r.pexpire(lock, 1)
    if moment == "reduce.published":
        assert latest_version(Layout.of_table(table)) is not None
    # the table changes while no watcher runs
    boto3.client("s3").delete_object(Bucket=bucket, Key=f"{TABLE}/part-0.parquet")
    del rows["part-0.parquet"]
    rows["part-3.parquet"] = 700
    put(bucket, f"{TABLE}/part-3.parquet", mixed(700, seed=700))
    log = io.StringIO()
    stop, thread, _ = watching(queue, watch_settings(redis_url, table), log, visibility=5)
    try:
        wait_until(lambda: settled(queue, table) and not pending(redis_url, table), 60)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert StatisticsReader(f"{table}/_lakestats").manifest.row_count == sum(rows.values())
    assert_equals_clean_compute(table, run)
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    versions = [line for line in lines if "added" in line and line["published"]]
    # a version says what it changed, though the batches computed its partitions
    assert versions and all(v["added"] + v["changed"] + v["removed"] for v in versions)
    batches = [line for line in lines if "lag_seconds" in line]
    # every change a batch of the second watcher handled is logged once a version holds it
    assert sum(b["files"] for b in batches) >= (5 if moment in MOMENTS[:2] else 2)
    assert all(b["lag_seconds"] >= 0 and b["rows"] >= 0 for b in batches)


def receive(queue: str, n: int) -> list[dict]:
    sqs, out = boto3.client("sqs"), {}
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                     VisibilityTimeout=60,
                                     AttributeNames=["All"]).get("Messages", []):
            out[m["MessageId"]] = m
    return list(out.values())


def test_the_reduce_functions_schedule_takes_over_a_reduction_that_died(
        lake, redis_url, monkeypatch):  # noqa: F811
    from lakestats.functions import lambda_handlers
    from lakestats.local_lambda import LocalContext
    from lakestats.watch import lambda_event
    bucket, queue, table = lake
    for i in range(2):
        put(bucket, f"{TABLE}/part-{i}.parquet", mixed(400, seed=i))
    settings = Settings(redis_url=redis_url, tables=(table,), reduce_window=0)
    arn = "arn:aws:sqs:us-east-1:123456789012:events"
    event = lambda_event(receive(queue, 2), arn, "us-east-1")
    # the partition function: its messages are acknowledged once it answers
    response, touched = lambda_handlers.partition_batch(event, LocalContext(), settings)
    assert response["batchItemFailures"] == []
    assert [(t.table, t.files, t.rows, t.opened) for t in touched] == [(table, 2, 800, True)]
    assert touched[0].newest is not None and touched[0].newest <= time.time()
    # the reduce function it asked for claims the changes and dies (its lock expired since)
    windows.claim(redis_url, table)
    assert pending(redis_url, table)
    monkeypatch.setattr(lambda_handlers, "SETTINGS", settings)
    # a request for a table with nothing pending computes nothing
    other = f"s3://{bucket}/elsewhere"
    request = lambda_event([{"MessageId": "m1", "ReceiptHandle": "r1",
                             "Body": json.dumps({"table": other})}], arn, "us-east-1")
    assert lambda_handlers.table_reduce_handler(request, LocalContext()) == {
        "batchItemFailures": []}
    assert latest_version(Layout.of_table(other)) is None
    scheduled = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    assert lambda_handlers.table_reduce_handler(scheduled, LocalContext()) == {
        "reduced": [table], "exact_again": []}
    assert not pending(redis_url, table)
    assert StatisticsReader(f"{table}/_lakestats").manifest.row_count == 800
    # nothing due: the next run of the schedule does nothing
    assert lambda_handlers.table_reduce_handler(scheduled, LocalContext()) == {
        "reduced": [], "exact_again": []}
