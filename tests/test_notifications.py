"""Object events through EventBridge, as template.yaml and the local stack wire them: one
message per data file written or removed, none for the statistics lakestats writes."""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.formats import open_snapshot
from lakestats.functions.notifications import BadEvent, changes, commit_of, table_of
from lakestats.infra.local_stack import wire_bucket
from lakestats.metastore.layout import object_events_pattern
from lakestats.metastore.store import s3_filesystem
from tests.public_tables import at_its_location, tables_under, unzipped
from tests.tables import mixed


def drained(queue: str, quiet_seconds: float = 2.0) -> list[dict]:
    """Every message of the queue, received until it stays empty for quiet_seconds."""
    sqs, out, quiet_since = boto3.client("sqs"), [], time.monotonic()
    while time.monotonic() - quiet_since < quiet_seconds:
        got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                                  WaitTimeSeconds=1).get("Messages", [])
        if got:
            quiet_since = time.monotonic()
        for message in got:
            out.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return out


def test_one_message_per_data_file_and_none_for_statistics(s3_endpoint, run):
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    queue = wire_bucket(s3_endpoint, bucket, f"events-{bucket}")
    s3 = boto3.client("s3")
    keys = [f"orders/part-{i}.parquet" for i in range(3)] + ["orders/year=2024/a.parquet"]
    for i, key in enumerate(keys):
        sink = pa.BufferOutputStream()
        pq.write_table(mixed(200, seed=i + 1), sink)
        s3.put_object(Bucket=bucket, Key=key, Body=sink.getvalue().to_pybytes())
    # pyarrow's S3 filesystem writes through a multipart upload
    pq.write_table(mixed(200, seed=9), f"{bucket}/orders/part-9.parquet",
                   filesystem=s3_filesystem())
    keys.append("orders/part-9.parquet")
    report = run(f"s3://{bucket}/orders")           # writes the statistics under _lakestats/
    assert report.published
    written = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert any("/_lakestats/" in k for k in written)
    s3.delete_object(Bucket=bucket, Key=keys[0])
    events = [c for body in drained(queue) for c in changes(body)]
    assert sorted((c.key, c.created) for c in events) == sorted(
        [(k, True) for k in keys] + [(keys[0], False)])


def test_the_pattern_leaves_out_statistics_only():
    pattern = object_events_pattern("lake")
    assert pattern["detail"]["bucket"]["name"] == ["lake"]
    assert pattern["detail-type"] == ["Object Created", "Object Deleted"]


def test_eventbridge_and_s3_events_decode_alike():
    bridge = {"source": "aws.s3", "detail-type": "Object Created", "time": "t1",
              "detail": {"bucket": {"name": "lake"}, "object": {
                  "key": "orders/a%20b%2Bc.parquet", "etag": "e1", "sequencer": "s1"}}}
    s3 = {"Records": [{"eventName": "ObjectCreated:Put", "s3": {
        "bucket": {"name": "lake"}, "object": {"key": "orders/a+b%2Bc.parquet", "eTag": "e1"}}}]}
    (a,), (b,) = changes(bridge), changes(s3)
    assert (a.uri, a.created, a.etag) == (b.uri, b.created, b.etag) == (
        "s3://lake/orders/a b+c.parquet", True, "e1")
    removed = changes({**bridge, "detail-type": "Object Deleted"})[0]
    assert not removed.created and removed.sequencer == "s1@t1"
    assert changes({**bridge, "detail-type": "Object Restore Completed"}) == []
    with pytest.raises(BadEvent, match="detail.bucket.name"):
        changes({**bridge, "detail": {"object": {"key": "k"}}})


@pytest.mark.slow
def test_localstack_routes_the_same(localstack_endpoint):
    """localstack's EventBridge, as AWS's, sends URL-encoded keys; statistics stay out."""
    kwargs = dict(endpoint_url=localstack_endpoint, region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
    queue = wire_bucket(localstack_endpoint, "lake", "events")
    s3, sqs = boto3.client("s3", **kwargs), boto3.client("sqs", **kwargs)
    s3.put_object(Bucket="lake", Key="orders/a b+c.parquet", Body=b"1")
    for key in ("orders/_lakestats/LATEST", "_lakestats/LATEST", "t/.hoodie/lakestats/LATEST"):
        s3.put_object(Bucket="lake", Key=key, Body=b"1")
    s3.delete_object(Bucket="lake", Key="orders/a b+c.parquet")
    events, deadline = [], time.monotonic() + 20
    while len(events) < 2 and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                                           WaitTimeSeconds=1).get("Messages", []):
            events += changes(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    time.sleep(1)                       # a statistics file's event would have come by now
    events += [c for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get(
        "Messages", []) for c in changes(json.loads(m["Body"]))]
    assert sorted((c.key, c.created) for c in events) == [("orders/a b+c.parquet", False),
                                                          ("orders/a b+c.parquet", True)]


VENDORED = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("fmt", ["delta", "hudi", "iceberg"])
def test_commits_wake_their_table_and_data_files_are_data(fmt, tmp_path):
    """Over tables other writers wrote: each data file of the current snapshot is a data
    file to the event handler, the file that made the snapshot a commit, and the files a
    commit names (Iceberg manifests) neither."""
    roots = [(root, found) for root, found in tables_under(unzipped(VENDORED / fmt, tmp_path))
             if "refused" not in root.parts]      # a v3 deletion vector: no snapshot read
    assert roots
    named = 0
    for root, found in roots:
        with at_its_location(root, found):
            snapshot = open_snapshot(str(root))
        assert found == snapshot.format
        table = "s3://lake/t"
        uri = f"{table}/".__add__
        for f in snapshot.files:
            if not f.rel_path.startswith(("..", "/")) and "://" not in f.rel_path:
                assert table_of(uri(f.rel_path), (table,)) == (table, f.rel_path), root
        files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
        commits = {rel for rel in files if commit_of(uri(rel), (table,))}
        if fmt == "delta":
            assert f"_delta_log/{int(snapshot.id):020d}.json" in commits, root
        elif fmt == "hudi" and snapshot.id:
            assert any(rel.rsplit("/", 1)[-1].startswith(snapshot.id) for rel in commits), root
        elif fmt == "iceberg":
            assert max(rel for rel in files if rel.endswith(".metadata.json")) in commits
            manifests = [rel for rel in files if rel.endswith(".avro")]
            named += len(manifests)
            assert not any(table_of(uri(rel), (table,)) or commit_of(uri(rel), (table,))
                           for rel in manifests), root
        assert not commits & {f.rel_path for f in snapshot.files}, root
    assert named or fmt != "iceberg"
