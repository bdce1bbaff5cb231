"""Security: Redis AUTH (a password from the environment, Secrets Manager or the given URL,
never in events, task payloads or logs), events validated (keys outside the watched tables
refused and logged), credentials absent from the output of a run. (Least-privilege IAM:
tests/test_template.py.)"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
import uuid
from urllib.parse import urlsplit

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.core.settings import Settings
from lakestats.fleet.connections import use_password
from lakestats.fleet.invokers.local import LocalInvoker
from lakestats.functions.lambda_handlers import partition_batch, redis_password
from lakestats.infra.local_stack import wire_bucket
from lakestats.infra.redis_server import EmbeddedRedis, redis_url
from lakestats.cli import main as cli_main
from lakestats.local_lambda import SQS_BATCH, LocalContext
from lakestats.watch import lambda_event, watch
from tests.tables import mixed, run_cli, write

PASSWORD = f"pw-{uuid.uuid4().hex}"
AWS_SECRET = f"aws-{uuid.uuid4().hex}"


@pytest.fixture
def guarded_redis():
    server = EmbeddedRedis(password=PASSWORD).start()
    yield server
    server.stop()
    use_password(None)


def cli(*args: str, **env: str):
    return run_cli(*args, AWS_SECRET_ACCESS_KEY=AWS_SECRET, **env)


def secrets() -> list[str]:
    credentials = boto3.Session().get_credentials()
    return [PASSWORD, AWS_SECRET] + ([credentials.secret_key] if credentials else [])


@pytest.mark.services         # a Redis of its own, with a password
@pytest.mark.slow
def test_the_coordinator_authenticates_and_no_credential_is_printed(tmp_path, guarded_redis):
    table = tmp_path / "t"
    write(table / "a.parquet", mixed(500, seed=1))
    (table / "bad.parquet").write_bytes(b"not parquet")       # errors are printed too
    refused = cli("compute", str(table), "--json", "--quiet", REDIS_URL=guarded_redis.url)
    assert refused.returncode == 1 and "a password is required" in refused.stderr
    run = cli("compute", str(table), "--json", "--quiet", "--allow-partial",
              REDIS_URL=guarded_redis.url, REDIS_PASSWORD=PASSWORD)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["published"]
    # without REDIS_URL, the embedded Redis requires the password too
    embedded = cli("compute", str(table), "--json", "--quiet", "--allow-partial",
                   "--stats-root", str(tmp_path / "s"), REDIS_PASSWORD=PASSWORD)
    assert embedded.returncode == 0, embedded.stderr
    for output in (refused, run, embedded):
        for secret in secrets():
            assert secret not in output.stdout + output.stderr


def test_the_redis_password_comes_from_the_environment_or_a_secret(s3_endpoint):
    assert redis_password({"REDIS_PASSWORD": PASSWORD}) == PASSWORD
    assert redis_password({}) is None
    sm = boto3.client("secretsmanager")
    as_json = sm.create_secret(Name=f"redis-{uuid.uuid4().hex[:8]}",
                               SecretString=json.dumps({"password": PASSWORD}))["ARN"]
    as_text = sm.create_secret(Name=f"redis-{uuid.uuid4().hex[:8]}",
                               SecretString=PASSWORD + "-text")["ARN"]
    assert redis_password({"LAKESTATS_REDIS_SECRET_ARN": as_json}) == PASSWORD
    assert redis_password({"LAKESTATS_REDIS_SECRET_ARN": as_text}) == PASSWORD + "-text"


def test_events_are_validated_and_foreign_keys_refused_and_logged(s3_endpoint, guarded_redis,
                                                                  caplog):
    use_password(PASSWORD)
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    sink = pa.BufferOutputStream()
    pq.write_table(mixed(100, seed=1), sink)
    body = sink.getvalue().to_pybytes()
    keys = ["t/a.parquet", "elsewhere/x.parquet", "t/../elsewhere/x.parquet",
            "t/_lakestats/versions/v000001/manifest.json"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=body)

    def message(i: int, body) -> dict:
        return {"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "MD5OfBody": "",
                "Body": body if isinstance(body, str) else json.dumps(body)}

    def created(key: str) -> dict:
        return {"Records": [{"eventName": "ObjectCreated:Put", "s3": {
            "bucket": {"name": bucket}, "object": {"key": key, "eTag": "e", "size": 1}}}]}
    bad = [{"Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {}}}]},
           "not json", [1, 2]]
    event = lambda_event([message(i, created(k)) for i, k in enumerate(keys)]
                         + [message(10 + i, b) for i, b in enumerate(bad)],
                         "arn:aws:sqs:us-east-1:000000000000:events", "us-east-1")
    settings = Settings(redis_url=guarded_redis.url, tables=(f"s3://{bucket}/t",))
    with caplog.at_level("INFO"):
        response, touched = partition_batch(event, LocalContext(), settings)
    assert response["batchItemFailures"] == [] and [t.table for t in touched] == [
        f"s3://{bucket}/t"]
    refused = {r.uri for r in caplog.records if r.getMessage().startswith("refused: not a data")}
    assert refused == {f"s3://{bucket}/elsewhere/x.parquet",
                       f"s3://{bucket}/t/../elsewhere/x.parquet"}        # not the statistics
    malformed = [r for r in caplog.records if r.getMessage() == "refused: not an S3 notification"]
    assert len(malformed) == 3 and all(r.levelname == "ERROR" for r in malformed)
    logs = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert not any(s in logs for s in secrets())
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="elsewhere/_lakestats")
    assert listed.get("KeyCount", 0) == 0                    # nothing written outside


@pytest.mark.parametrize("url, stripped, user", [
    (f"redis://:{PASSWORD}@cache.internal", "redis://cache.internal", None),
    (f"redis://app:{PASSWORD}@cache.internal:6380/0", "redis://app@cache.internal:6380/0", "app"),
    (f"rediss://:{PASSWORD}@cache.internal:6379", "rediss://cache.internal:6379", None)],
    ids=["no-user", "user-port-db", "tls"])      # ids without the random password
def test_settings_take_the_password_out_of_the_url(url, stripped, user):
    for settings in (Settings.from_env({"REDIS_URL": url, "REDIS_PASSWORD": "not-this-one"}),
                     Settings(redis_url=url),
                     dataclasses.replace(Settings(), redis_url=url)):     # the --redis-url flag
        assert settings.redis_url == stripped and settings.redis_password == PASSWORD
        assert PASSWORD not in repr(settings) + json.dumps(settings.to_json())
        assert urlsplit(settings.redis_url).username == user           # an ACL user stays
    assert Settings.from_env({"REDIS_URL": stripped}).redis_url == stripped
    assert Settings.from_env({"REDIS_URL": stripped}).redis_password is None
    assert Settings.from_env({"REDIS_PASSWORD": PASSWORD}).redis_password == PASSWORD
    assert redis_password({"REDIS_URL": url}) == PASSWORD        # what a Lambda worker uses


@pytest.fixture
def submitted(monkeypatch) -> list[str]:
    """Every event the local invoker hands a worker, as the JSON it sends."""
    events: list[str] = []
    submit = LocalInvoker.submit

    def recording(self, event: dict):
        events.append(json.dumps(event))
        return submit(self, event)
    monkeypatch.setattr(LocalInvoker, "submit", recording)
    monkeypatch.setenv("REDIS_PASSWORD", "")      # the CLI exports it: undone after the test
    return events


@pytest.mark.services         # a Redis of its own, with a password
def test_a_password_in_the_url_travels_in_no_event_and_no_log(tmp_path, guarded_redis, submitted,
                                                              caplog, capfd):
    table = tmp_path / "t"
    for i in range(3):
        write(table / f"p{i}.parquet", mixed(500, seed=i))
    url = f"unix://:{PASSWORD}@{guarded_redis.socket}"
    with caplog.at_level(logging.DEBUG):
        code = cli_main(["compute", str(table), "--json", "--quiet", "--redis-url", url])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert json.loads(out)["published"]
    assert len(submitted) >= 3 and all(guarded_redis.socket in e for e in submitted)
    logs = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert PASSWORD not in "\n".join(submitted) + logs + out + err


def test_watch_batches_carry_no_password_in_the_url(s3_endpoint, guarded_redis, submitted,
                                                     monkeypatch, caplog, capfd):
    monkeypatch.setenv("REDIS_URL", f"unix://:{PASSWORD}@{guarded_redis.socket}")
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    queue = wire_bucket(s3_endpoint, bucket, f"events-{bucket}")
    sink = pa.BufferOutputStream()
    pq.write_table(mixed(200, seed=1), sink)
    boto3.client("s3").put_object(Bucket=bucket, Key="t/a.parquet",
                                     Body=sink.getvalue().to_pybytes())
    settings = dataclasses.replace(Settings.from_env(os.environ), tables=(f"s3://{bucket}/t",),
                                   reduce_window=1)
    reports: list[dict] = []
    deadline = time.monotonic() + 90
    # as `lakestats watch` sets up: this process AUTHs with the settings' password, its worker
    # processes with the one in the REDIS_URL they inherit
    with caplog.at_level(logging.DEBUG), redis_url(settings.redis_url, settings.redis_password):
        watch(queue, settings, wait_seconds=1, visibility_seconds=10, on_reduced=reports.append,
              stop=lambda: bool(reports) or time.monotonic() > deadline)
    out, err = capfd.readouterr()
    assert reports and reports[0]["published"] and reports[0]["row_count"] == 200, err
    batches = [e for e in submitted if json.loads(e)["step"] == SQS_BATCH]
    assert batches and all(json.loads(e)["task"]["settings"]["redis_url"] for e in batches)
    logs = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert PASSWORD not in "\n".join(submitted) + logs + out + err
