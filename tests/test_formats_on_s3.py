"""Iceberg, Delta and Hudi tables on S3 (moto's server over HTTP), read end to end from s3://:
the snapshot's files listed by the format's library through S3, deletes and merged slices
read by the workers from S3, and every statistic equal to the oracle over the library's own
read of the table on S3."""
from __future__ import annotations

import uuid
import zipfile
from pathlib import Path

import boto3
import pyarrow as pa
import pytest

from lakestats.metastore.layout import Layout
from tests.test_formats import batch, check_snapshot, compute_snapshot

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def bucket(s3_endpoint) -> str:
    name = f"formats-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def storage_options(endpoint: str) -> dict:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def iceberg_s3(endpoint: str) -> dict:
    """The properties of a pyiceberg catalog whose tables are on the S3 server."""
    return {"s3.endpoint": endpoint, "s3.region": "us-east-1", "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing"}


def test_iceberg_on_s3(bucket, s3_endpoint, invoker, settings, tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"s3://{bucket}/warehouse", **iceberg_s3(s3_endpoint))
    catalog.create_namespace("ns")
    first = batch(1)
    table = catalog.create_table("ns.t", schema=first.schema)
    table.append(first)
    table.append(batch(2))
    table.delete("i32 < 0")            # position deletes or rewritten files, on S3
    table = catalog.load_table("ns.t")
    location = table.location()
    assert location.startswith("s3://")
    report = compute_snapshot(location, invoker, settings)
    assert report.version
    check_snapshot(Layout.of_table(location).uri, str(table.current_snapshot().snapshot_id),
                   table.scan().to_arrow(), tmp_path)


def test_delta_on_s3(bucket, s3_endpoint, invoker, settings, tmp_path):
    from deltalake import DeltaTable, QueryBuilder, write_deltalake
    uri, options = f"s3://{bucket}/delta", storage_options(s3_endpoint)
    write_deltalake(uri, batch(1), partition_by=["part"], storage_options=options)
    write_deltalake(uri, batch(2), partition_by=["part"], mode="append",
                    storage_options=options)
    DeltaTable(uri, storage_options=options).delete("i32 < 0")
    delta = DeltaTable(uri, storage_options=options)
    compute_snapshot(uri, invoker, settings)
    rows = pa.table(QueryBuilder().register("t", delta).execute("select * from t"))
    check_snapshot(Layout.of_table(uri).uri, str(delta.version()), rows, tmp_path)


@pytest.mark.parametrize("sample", ["mor_parquet_v6_complexkeygen_hivestyle",
                                    "cow_v9_timebasedkeygen_epochmillis"])
def test_hudi_on_s3(sample, bucket, s3_endpoint, invoker, settings, tmp_path):
    import hudi
    s3 = boto3.client("s3")
    with zipfile.ZipFile(DATA / "hudi" / f"{sample}.zip") as z:
        z.extractall(tmp_path / "unzipped")
    [local] = [p.parent.parent for p in (tmp_path / "unzipped").glob("*/.hoodie/hoodie.properties")]
    for f in local.rglob("*"):
        if f.is_file():
            s3.upload_file(str(f), bucket, f"hudi/{f.relative_to(local).as_posix()}")
    uri = f"s3://{bucket}/hudi"
    report = compute_snapshot(uri, invoker, settings)
    builder = hudi.HudiTableBuilder.from_base_uri(uri)
    for key, value in storage_options(s3_endpoint).items():
        builder = builder.with_storage_option(key.lower(), value)
    rows = pa.Table.from_batches(builder.build().read())
    assert report.row_count == rows.num_rows > 0
    check_snapshot(Layout.of_table(uri).uri, report.as_json()["snapshot"], rows, tmp_path)
