"""The serverless event flow on moto's S3+SQS server (and once on localstack's) with a real
Redis: S3 notifications -> partition statistics -> coalesced table versions, equal to one clean
compute."""
from __future__ import annotations

import json
import os
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

from lakestats.core.settings import Settings
from lakestats.infra.local_stack import wire_bucket
from lakestats.metastore.reader import StatisticsReader
from lakestats.formats import open_snapshot
from lakestats.metastore.store import s3_client, s3_filesystem
from tests.tables import mixed, published_files
from tests.test_formats import batch, partitioned_iceberg
from tests.test_formats_on_s3 import iceberg_s3, storage_options
from tests.test_iceberg_export import check_export

pytestmark = pytest.mark.slow

TABLE = "orders"


@pytest.fixture
def lake(s3_endpoint, redis_url, monkeypatch):
    """A fresh bucket whose object events go to a fresh queue; the watcher's environment (a
    `lakestats watch` process reads it) and settings."""
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    queue = wire_bucket(s3_endpoint, bucket, f"events-{bucket}")
    table = f"s3://{bucket}/{TABLE}"
    monkeypatch.setenv("LAKESTATS_TABLES", table)
    monkeypatch.setenv("REDIS_URL", redis_url)
    return bucket, queue, table


def watch_settings(redis_url: str, table: str) -> Settings:
    return Settings(redis_url=redis_url, tables=(table,), reduce_window=1)


def put(bucket: str, key: str, table: pa.Table, multipart: bool = False) -> None:
    if multipart:      # pyarrow writes through a multipart upload: two ObjectCreated events
        pq.write_table(table, f"{bucket}/{key}", filesystem=s3_filesystem())
    else:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=sink.getvalue().to_pybytes())


def settled(queue: str, table: str) -> bool:
    """Queue drained and the published version covers exactly the files present."""
    attrs = boto3.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    if int(attrs["ApproximateNumberOfMessages"]) or int(attrs["ApproximateNumberOfMessagesNotVisible"]):
        return False
    try:
        partitions = StatisticsReader(f"{table}/_lakestats").partitions()
    except Exception:  # noqa: BLE001 - nothing published yet
        return False
    present = {f.rel_path: f.fingerprint for f in open_snapshot(table).files}
    return {p["path"]: p["fingerprint"] for p in partitions} == present


def wait_until(condition, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the event flow did not settle"
        time.sleep(0.5)


def assert_equals_clean_compute(table: str, run) -> None:
    clean = f"{table}-clean-stats"
    run(table, stats_root=clean)
    got, want = published_files(f"{table}/_lakestats"), published_files(clean)
    for name in want:
        for g, w in zip(got[name], want[name]):
            assert g == w, (name, {k: (g[k], w.get(k)) for k in g if g[k] != w.get(k)})
        assert len(got[name]) == len(want[name]), name


def watching(queue: str, settings: Settings, log=None, visibility: int = 10):
    """A watcher in a thread of this process: (its stop event, the thread, its reports)."""
    from lakestats.watch import watch
    stop = threading.Event()
    reports = []
    thread = threading.Thread(target=watch, args=(queue, settings), kwargs=dict(
        wait_seconds=1, visibility_seconds=visibility, stop=stop.is_set,
        on_reduced=reports.append, log=log), daemon=True)
    thread.start()
    return stop, thread, reports


def test_events_in_flight_end_as_one_clean_compute(lake, run, redis_url):
    bucket, queue, table = lake
    for i in range(3):
        put(bucket, f"{TABLE}/day={i}/part.parquet", mixed(2000, seed=i))
    stop, thread, reports = watching(queue, watch_settings(redis_url, table))
    try:
        for i in range(3, 8):                      # five more, two by multipart upload
            put(bucket, f"{TABLE}/day={i}/part +{i}.parquet", mixed(1500, seed=i),
                multipart=i % 2 == 0)
        boto3.client("s3").delete_object(Bucket=bucket, Key=f"{TABLE}/day=1/part.parquet")
        put(bucket, f"{TABLE}/day=2/part.parquet", mixed(900, seed=42))   # new content
        sqs = boto3.client("sqs")                  # duplicated and stale events
        stale = {"Records": [{"eventName": "ObjectCreated:Put", "s3": {
            "bucket": {"name": bucket},
            "object": {"key": f"{TABLE}/day%3D2/part.parquet", "eTag": "stale", "size": 1}}}]}
        for _ in range(2):
            sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(stale))
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({"Event": "s3:TestEvent"}))
        put(bucket, "elsewhere/x.parquet", mixed(10, seed=1))          # not a watched table
        wait_until(lambda: settled(queue, table))
    finally:
        stop.set()
        thread.join(timeout=30)
    assert len(reports) < 10                       # coalesced, not one version per event
    assert_equals_clean_compute(table, run)


def test_a_killed_watcher_redelivers_without_double_counting(lake, run, redis_url):
    bucket, queue, table = lake
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    watcher = subprocess.Popen(
        [sys.executable, "-m", "lakestats.cli", "watch", "--queue", queue, "--visibility", "5",
         "--window", "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for i in range(6):
        put(bucket, f"{TABLE}/part-{i}.parquet", mixed(40_000, seed=i))
    sqs = boto3.client("sqs")
    wait_until(lambda: int(sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=[
        "ApproximateNumberOfMessagesNotVisible"])["Attributes"][
        "ApproximateNumberOfMessagesNotVisible"]) > 0, 60)
    watcher.send_signal(signal.SIGKILL)            # mid-batch: its messages come back
    watcher.wait()
    stop, thread, _ = watching(queue, watch_settings(redis_url, table))
    try:
        wait_until(lambda: settled(queue, table))
    finally:
        stop.set()
        thread.join(timeout=30)
    assert_equals_clean_compute(table, run)


def describes(table: str, snapshot: str) -> bool:
    """Whether the published version describes the table format's snapshot."""
    try:
        return StatisticsReader(f"{table}/_lakestats").manifest.snapshot == snapshot
    except Exception:  # noqa: BLE001 - nothing published yet
        return False


def test_a_delta_commit_alone_wakes_its_reduction(lake, redis_url, s3_endpoint):
    """A delete of whole partitions writes only a commit to _delta_log/: the version follows."""
    from deltalake import DeltaTable, write_deltalake
    bucket, queue, table = lake
    options = storage_options(s3_endpoint)
    write_deltalake(table, batch(0, n=200).append_column("p", pa.array([0, 1] * 100)),
                    partition_by=["p"], storage_options=options)
    stop, thread, _ = watching(queue, watch_settings(redis_url, table))
    try:
        wait_until(lambda: describes(table, "0"))
        DeltaTable(table, storage_options=options).delete("p = 1")
        wait_until(lambda: describes(table, "1"))
    finally:
        stop.set()
        thread.join(timeout=30)
    assert StatisticsReader(f"{table}/_lakestats").manifest.row_count == 100


def test_a_followed_iceberg_catalog_gets_every_new_snapshot(lake, redis_url, s3_endpoint,
                                                             tmp_path):
    """Exported once, then each snapshot the event path reduces is exported by the
    reduction: the current snapshot has its own statistics files, read back by pyiceberg."""
    from lakestats import api
    from lakestats.formats import Selection
    from lakestats.formats.iceberg_export import export, follow
    from lakestats.metastore.store import Store
    bucket, queue, table = lake
    catalog, iceberg = partitioned_iceberg(tmp_path, "events", table, **iceberg_s3(s3_endpoint))
    selection = Selection("iceberg", catalog=f"sqlite:///{tmp_path}/catalog.db",
                          table_name="lake.events", catalog_name="test")
    stop, thread, reports = watching(queue, watch_settings(redis_url, table))
    try:
        wait_until(lambda: describes(table, str(iceberg.current_snapshot().snapshot_id)))
        statistics = api.open(table)
        first = export(table, statistics.reader, selection)
        assert follow(Store(statistics.root), selection, first)
        catalog.load_table("lake.events").append(batch(5, n=5000))
        current = str(catalog.load_table("lake.events").current_snapshot().snapshot_id)
        wait_until(lambda: any((r.get("export") or {}).get("snapshot") == current
                               for r in reports))
    finally:
        stop.set()
        thread.join(timeout=30)
    [out] = [r["export"] for r in reports if (r.get("export") or {}).get("snapshot") == current]
    assert out["followed"]
    check_export(catalog.load_table("lake.events"), out)
    # the export's own commit woke one reduction, which found nothing to do
    assert not [r for r in reports if r.get("export") and "error" in r["export"]]


@pytest.fixture
def on_localstack(localstack_endpoint, monkeypatch):
    """The AWS configuration pointed at localstack for one test: the S3 client cached for moto
    is not used in it, the one made for localstack does not outlive it (the S3 filesystems
    Stores make follow that client)."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", localstack_endpoint)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    s3_client.cache_clear()
    yield localstack_endpoint
    s3_client.cache_clear()


def test_flow_on_localstack(on_localstack, redis_url):
    """The same flow against localstack's S3 and SQS."""
    from lakestats.fleet.invokers import make_invoker
    from lakestats.monostore.compute import compute
    endpoint = on_localstack
    assert s3_client().meta.endpoint_url == endpoint
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    queue = wire_bucket(endpoint, bucket, f"events-{bucket}")
    table = f"s3://{bucket}/{TABLE}"
    stop, thread, _ = watching(queue, watch_settings(redis_url, table))
    try:
        for i in range(3):      # one through pyarrow's S3 filesystem (a multipart upload)
            put(bucket, f"{TABLE}/part-{i}.parquet", mixed(1000, seed=i), multipart=i == 2)
        wait_until(lambda: settled(queue, table))
    finally:
        stop.set()
        thread.join(timeout=30)
    with make_invoker("local", 2) as invoker:      # workers spawned with localstack's endpoint
        assert_equals_clean_compute(table, lambda t, stats_root: compute(
            t, invoker, Settings(redis_url=redis_url), stats_root=stats_root))
