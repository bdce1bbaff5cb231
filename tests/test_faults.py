"""Faults as AWS delivers them, on the local stack (infra.faults): a worker killed at each step
of each algorithm, S3 errors, a Redis restart, a Lambda out of time, SQS redelivery, a second
compute of a running table's. Each run ends with statistics equal to a fault-free run's, or
fails naming the step, publishing nothing and leaving no job records behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.algorithms.ranks.driver import compute_ranks
from lakestats.core.settings import FrequencySettings, Settings
from lakestats.fleet.invokers.local import LocalInvoker
from lakestats.fleet.protocol import JobLost, StepFailed
from lakestats.functions.lambda_handlers import partition_batch
from lakestats.functions.notifications import changes
from lakestats.infra.faults import FaultPlan, S3FaultProxy, S3Faults
from lakestats.infra.local_stack import wire_bucket
from lakestats.infra.redis_server import EmbeddedRedis
from lakestats.local_lambda import LocalContext
from lakestats.watch import lambda_event
from lakestats.metastore.layout import RANKS, Layout
from lakestats.metastore.manifest import latest_version
from lakestats.metastore.store import Store, s3_client
from lakestats.monostore.compute import compute
from lakestats.monostore.publish import OutOfTime
from lakestats.monostore.reductions import reduce_table
from tests.tables import mixed, published_files, write

pytestmark = pytest.mark.slow

ALGORITHMS = {"send": "low-duplicate", "confirm": "low-duplicate", "reduce": "binned"}


@pytest.fixture(scope="module")
def stack(s3_endpoint, tmp_path_factory):
    """A fault plan and an S3 proxy (no faults until a test sets some) that this module's
    worker processes see; the test process goes through the proxy too."""
    plan = FaultPlan(tmp_path_factory.mktemp("faults"))
    with S3FaultProxy(s3_endpoint) as proxy, pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ENDPOINT_URL", proxy.url)
        for k, v in plan.env.items():
            env.setenv(k, v)
        s3_client.cache_clear()
        with LocalInvoker(2) as invoker:
            yield plan, proxy, invoker
    s3_client.cache_clear()


@pytest.fixture
def faults(stack):
    plan, proxy, invoker = stack
    plan.reset()
    proxy.faults = S3Faults(every=0)
    yield stack
    plan.reset()
    proxy.faults = S3Faults(every=0)


def day_table(root, files: int = 4, rows: int = 3000):
    for i in range(files):
        write(root / f"day={i}" / "part.parquet", mixed(rows, seed=i))
    return str(root)


def job_keys(redis_url: str) -> list[str]:
    import redis
    return [k.decode() for k in redis.Redis.from_url(redis_url).scan_iter("lakestats:job:*")]


def assert_same(got_root: str, want_root: str) -> None:
    got, want = published_files(got_root), published_files(want_root)
    assert got == want


@pytest.mark.parametrize("step,moment", [
    ("partitions.partition_statistics", "before"), ("partitions.partition_statistics", "during"),
    ("partitions.partition_statistics", "after"),
    ("frequencies.send", "before"), ("frequencies.send", "after"),
    ("frequencies.confirm", "during"), ("frequencies.reduce", "after")])
def test_a_killed_worker_is_retried_and_nothing_counts_twice(tmp_path, faults, redis_url, run,
                                                            step, moment):
    plan, _, invoker = faults
    table = day_table(tmp_path / "t")
    algorithm = ALGORITHMS.get(step.split(".")[1], "auto")
    settings = Settings(redis_url=redis_url, frequencies=FrequencySettings(algorithm=algorithm))
    run(table, stats_root=str(tmp_path / "clean"), frequencies=settings.frequencies)
    plan.add(step, moment, seconds=0.01)
    report = compute(table, invoker, settings)
    assert plan.fired() == 1 and report.published and not report.failed
    assert_same(f"{table}/_lakestats", str(tmp_path / "clean"))
    assert job_keys(redis_url) == []


@pytest.mark.parametrize("times", [1, 100])
def test_a_killed_pack_is_retried_then_its_files_go_alone(tmp_path, faults, redis_url, run,
                                                          times):
    """Small files travel in packs (algorithms.partitions.driver): a pack whose worker dies
    is called again, and one that dies every time has its files computed one a call."""
    plan, _, invoker = faults
    table = day_table(tmp_path / "t", files=40, rows=100)
    run(table, stats_root=str(tmp_path / "clean"))
    plan.add("partitions.partition_pack", "during", seconds=0.01, times=times)
    report = compute(table, invoker, Settings(redis_url=redis_url))
    assert plan.fired() >= 1 and report.published and not report.failed and report.retries
    assert_same(f"{table}/_lakestats", str(tmp_path / "clean"))
    assert job_keys(redis_url) == []


@pytest.mark.parametrize("step", ["ranks.sample", "ranks.scatter", "ranks.merge"])
def test_a_killed_sort_worker_is_retried(tmp_path, faults, redis_url, run, invoker, step):
    plan, _, fault_invoker = faults
    table = day_table(tmp_path / "t")
    settings = Settings(redis_url=redis_url)
    run(table)
    clean = compute_ranks(f"{table}/_lakestats", invoker, settings, ["price", "city"])
    want = Layout(f"{table}/_lakestats").version(clean.version).read_parquet(RANKS)
    plan.add(step, "before")
    got = compute_ranks(f"{table}/_lakestats", fault_invoker, settings, ["price", "city"])
    assert plan.fired() == 1
    assert Layout(f"{table}/_lakestats").version(got.version).read_parquet(RANKS) == want


def test_a_step_out_of_attempts_fails_naming_it_and_publishes_nothing(tmp_path, faults,
                                                                     redis_url):
    plan, _, invoker = faults
    table = day_table(tmp_path / "t")
    settings = Settings(redis_url=redis_url, max_attempts=2,
                        frequencies=FrequencySettings(algorithm="low-duplicate"))
    plan.add("frequencies.confirm", "before", times=100)
    with pytest.raises(StepFailed, match="frequencies.confirm .*worker process died"):
        compute(table, invoker, settings)
    layout = Layout(f"{table}/_lakestats")
    assert latest_version(layout) is None
    assert not os.path.exists(f"{table}/_lakestats/versions/v000001")     # cleaned up
    assert job_keys(redis_url) == []
    plan.reset()                       # the partitions' statistics were kept: only reused
    assert compute(table, invoker, settings).reused == 4


@pytest.mark.parametrize("kind", [503, 500, "drop"])
def test_s3_errors_are_retried(faults, s3_endpoint, run, redis_url, kind):
    _, proxy, invoker = faults
    bucket = f"faults-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    for i in range(3):
        sink = pa.BufferOutputStream()
        pq.write_table(mixed(2000, seed=i), sink)
        boto3.client("s3").put_object(Bucket=bucket, Key=f"t/part-{i}.parquet",
                                      Body=sink.getvalue().to_pybytes())
    table = f"s3://{bucket}/t"
    run(table, stats_root=f"s3://{bucket}/clean")
    proxy.faults = S3Faults(kind=kind, every=7)
    report = compute(table, invoker, Settings(redis_url=redis_url))
    injected, proxy.faults = proxy.faults.injected, S3Faults(every=0)
    assert injected >= 5 and report.published and not report.failed
    assert_same(f"{table}/_lakestats", f"s3://{bucket}/clean")


@pytest.fixture
def own_redis():
    server = EmbeddedRedis().start()
    yield server
    server.stop()


def compute_in_background(table: str, invoker, settings: Settings) -> dict:
    outcome: dict = {}

    def target():
        try:
            outcome["report"] = compute(table, invoker, settings)
        except Exception as e:  # noqa: BLE001 - the test looks at it
            outcome["error"] = e
    thread = threading.Thread(target=target)
    thread.start()
    outcome["thread"] = thread
    return outcome


def restart_when_fired(plan: FaultPlan, server: EmbeddedRedis) -> None:
    plan.wait_fired()
    server.restart()


def test_a_redis_restart_while_partitions_compute_is_survived(tmp_path, faults, own_redis, run):
    plan, _, invoker = faults
    table = day_table(tmp_path / "t")
    run(table, stats_root=str(tmp_path / "clean"))
    plan.add("partitions.partition_statistics", "before", action="sleep", seconds=2)
    outcome = compute_in_background(table, invoker, Settings(redis_url=own_redis.url))
    restart_when_fired(plan, own_redis)
    outcome["thread"].join(120)
    assert "error" not in outcome, outcome.get("error")
    assert_same(f"{table}/_lakestats", str(tmp_path / "clean"))


def test_a_redis_restart_between_frequency_steps_fails_naming_the_step(tmp_path, faults,
                                                                       own_redis, run):
    plan, _, invoker = faults
    table = day_table(tmp_path / "t")
    settings = Settings(redis_url=own_redis.url,
                        frequencies=FrequencySettings(algorithm="low-duplicate"))
    run(table, stats_root=str(tmp_path / "clean"), frequencies=settings.frequencies)
    plan.add("frequencies.confirm", "before", action="sleep", seconds=2)
    outcome = compute_in_background(table, invoker, settings)
    restart_when_fired(plan, own_redis)
    outcome["thread"].join(120)
    assert isinstance(outcome.get("error"), JobLost), outcome
    assert "frequencies.confirm" in str(outcome["error"])
    assert latest_version(Layout(f"{table}/_lakestats")) is None
    plan.reset()
    compute(table, invoker, settings)
    assert_same(f"{table}/_lakestats", str(tmp_path / "clean"))


def sqs_event(messages: list[dict]) -> dict:
    return lambda_event(messages, "arn:aws:sqs:us-east-1:000000000000:events", "us-east-1")


def lake(files: int) -> tuple[str, str, str]:
    """A bucket with `files` files, whose creation events wait in a queue."""
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    queue = wire_bucket(os.environ["AWS_ENDPOINT_URL"], bucket, f"events-{bucket}")
    for i in range(files):
        sink = pa.BufferOutputStream()
        pq.write_table(mixed(1000, seed=i), sink)
        boto3.client("s3").put_object(Bucket=bucket, Key=f"t/part-{i}.parquet",
                                      Body=sink.getvalue().to_pybytes())
    return bucket, queue, f"s3://{bucket}/t"


def receive(queue: str, visibility: int, n: int = 3) -> list[dict]:
    """n messages of object events (test events are deleted)."""
    sqs, out = boto3.client("sqs"), {}
    deadline = time.monotonic() + 20
    while len(out) < n and time.monotonic() < deadline:
        for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                     VisibilityTimeout=visibility,
                                     AttributeNames=["All"]).get("Messages", []):
            if changes(json.loads(m["Body"])):
                out[m["MessageId"]] = m
            else:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
    return list(out.values())


def test_a_lambda_out_of_time_hands_records_back_and_resumes(faults, redis_url, run):
    _, _, invoker = faults
    bucket, queue, table = lake(3)
    settings = Settings(redis_url=redis_url, tables=(table,))
    event = sqs_event(receive(queue, visibility=60))
    assert len(event["Records"]) == 3
    partitions = Store(f"{table}/_lakestats/partitions")

    def computed() -> int:
        return sum(f.rel_path.endswith("/statistics.parquet") for f in partitions.list_files())
    # plenty of time until the first record is done, then half a second: the others go back
    response, _ = partition_batch(event, LocalContext(
        remaining=lambda: 0.5 if computed() else 60), settings)
    back = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert back == {r["messageId"] for r in event["Records"][1:]} and computed() == 1
    rest = {"Records": [r for r in event["Records"] if r["messageId"] in back]}
    response, _ = partition_batch(rest, LocalContext(), settings)
    assert response["batchItemFailures"] == []
    # a reduction out of time publishes nothing and keeps what the partitions computed
    with pytest.raises(OutOfTime, match="out of time before the table-level statistics"):
        reduce_table(table, invoker, settings, deadline=time.monotonic() - 1)
    assert latest_version(Layout.of_table(table)) is None
    report = reduce_table(table, invoker, settings)
    assert report.computed == 0 and report.reused == 3
    run(table, stats_root=f"s3://{bucket}/clean")
    assert_same(f"{table}/_lakestats", f"s3://{bucket}/clean")


def test_sqs_redelivery_after_the_visibility_timeout_counts_once(faults, redis_url, run):
    _, _, invoker = faults
    bucket, queue, table = lake(3)
    settings = Settings(redis_url=redis_url, tables=(table,))
    first = receive(queue, visibility=1)        # handled, but never deleted: it comes back
    partition_batch(sqs_event(first), LocalContext(), settings)
    time.sleep(1.5)
    again = receive(queue, visibility=60)
    assert {m["MessageId"] for m in again} == {m["MessageId"] for m in first}
    assert all(int(m["Attributes"]["ApproximateReceiveCount"]) == 2 for m in again)
    event = sqs_event(again)
    for _ in range(2):                          # and delivered twice more
        response, _ = partition_batch(event, LocalContext(), settings)
        assert response["batchItemFailures"] == []
    report = reduce_table(table, invoker, settings)
    assert report.row_count == 3000
    run(table, stats_root=f"s3://{bucket}/clean")
    assert_same(f"{table}/_lakestats", f"s3://{bucket}/clean")


def cli(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lakestats.cli", *args],
                            env={**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def test_a_second_compute_waits_for_the_first_or_fails_clearly(tmp_path, faults):
    plan, _, _ = faults
    table = day_table(tmp_path / "t", files=2, rows=500)
    plan.add("partitions.partition_statistics", "before", action="sleep", seconds=4)
    first = cli("compute", table, "--quiet", "--workers", "1")
    plan.wait_fired()
    refused = cli("compute", table, "--quiet", "--wait", "0")
    waiting = cli("compute", table, "--json", "--quiet")
    out, err = refused.communicate(timeout=120)
    assert refused.returncode == 1
    assert "another compute of the table is running" in err and "pid" in err
    out, err = waiting.communicate(timeout=120)
    assert first.wait(120) == 0
    assert waiting.returncode == 0, err
    assert "waiting for another compute of the table" in err
    second = json.loads(out)
    assert second["computed"] == 0 and second["version"] == "v000001"   # nothing interleaved


def test_the_keys_of_a_killed_coordinator_expire(tmp_path, faults, redis_url):
    import redis
    plan, _, _ = faults
    table = day_table(tmp_path / "t", files=2, rows=500)
    plan.add("partitions.partition_statistics", "before", action="sleep", seconds=30)
    coordinator = cli("compute", table, "--quiet", env={"REDIS_URL": redis_url})
    plan.wait_fired()
    os.killpg(coordinator.pid, 9)              # the coordinator and its workers
    coordinator.wait()
    r = redis.Redis.from_url(redis_url)
    keys = [k for k in r.scan_iter("lakestats:*") if b":idempotency:" not in k]
    assert any(b"lakestats:computing:" in k for k in keys)
    assert keys and all(r.ttl(k) > 0 for k in keys), {k: r.ttl(k) for k in keys}
    r.delete(*keys)                            # as their TTLs would


def test_a_call_that_ends_after_its_job_records_nothing(redis_url):
    """A call still running when its job ends (withdrawn after another failed, or past its
    timeout) used to recreate the job's results, left in Redis until their TTL."""
    import redis

    from lakestats.fleet.jobs import JobScope
    from lakestats.fleet.protocol import PARTITION_STATISTICS, StepEvent
    with JobScope(redis_url, stateful=False) as scope:
        event = scope.stamp(StepEvent(PARTITION_STATISTICS, "a.parquet", None))
        scope.job.record(event, {"status": "ok"})
        assert scope.job.result(event) == {"status": "ok"}
    scope.job.record(event, {"status": "ok"})            # the late call
    assert list(redis.Redis.from_url(redis_url).scan_iter(f"lakestats:job:{scope.job.id}:*")) \
        == []
