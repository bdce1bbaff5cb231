"""Shared fixtures: one embedded redis-server, one moto S3 server over HTTP, one worker pool,
one localstack when a test asks for it."""
from __future__ import annotations

import os
import sys

import pytest

from lakestats.core.settings import PartitionSettings, Settings
from lakestats.fleet.invokers.local import LocalInvoker
from lakestats.infra.local_stack import LOCAL_ACCOUNT, moto_in_process
from lakestats.infra.localstack import VENV, Localstack, localstack_python
from lakestats.infra.redis_server import EmbeddedRedis
from lakestats.metastore.store import s3_client
from lakestats.monostore.compute import compute
from tests.layout import FormerNamesRefused

sys.meta_path.insert(0, FormerNamesRefused())

# the fixtures that start a service (Redis, moto's S3 server, localstack) or use one
SERVICES = frozenset({"redis_url", "s3_endpoint", "localstack_endpoint", "invoker", "run",
                      "settings"})
KINDS = ("unit", "services", "spark")


def pytest_collection_modifyitems(config, items):
    """Every test gets one kind: `spark` if it uses the SparkSession, else `services` if it uses
    a service fixture (directly or through a fixture that depends on one), else `unit`; a test
    marked with a kind by hand keeps it. `slow` is marked by hand in the test files."""
    for item in items:
        marked = [kind for kind in KINDS if item.get_closest_marker(kind)]
        if len(marked) > 1:
            raise pytest.UsageError(f"{item.nodeid} is marked {' and '.join(marked)}: "
                                    "a test has one kind")
        if not marked:
            used = set(getattr(item, "fixturenames", ()))
            marked = ["spark" if "spark" in used else "services" if used & SERVICES
                      else "unit"]
            item.add_marker(marked[0])
        if marked[0] == "spark":
            # under `pytest -n` (pytest-xdist, --dist loadgroup) the Spark tests share one
            # worker and so one SparkSession
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def redis_url():
    server = EmbeddedRedis().start()
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def s3_endpoint():
    """moto's S3 server on loopback; set in the environment before any worker process spawns."""
    server, endpoint = moto_in_process()
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", *LOCAL_ACCOUNT)}
    os.environ.update(AWS_ENDPOINT_URL=endpoint, **LOCAL_ACCOUNT)
    s3_client.cache_clear()
    yield endpoint
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    s3_client.cache_clear()


@pytest.fixture(scope="session")
def localstack_endpoint():
    """localstack's S3+SQS: LAKESTATS_LOCALSTACK_URL if set, else a localstack started here
    from .localstack-venv on a free loopback port and stopped at the end of the session."""
    if os.environ.get("LAKESTATS_LOCALSTACK_URL"):
        yield os.environ["LAKESTATS_LOCALSTACK_URL"]
        return
    python = localstack_python()
    if python is None:
        pytest.fail(f"{VENV} is missing: run `make test`, which installs localstack there "
                    "(or set LAKESTATS_LOCALSTACK_URL to a running localstack)", pytrace=False)
    with Localstack(python) as stack:
        yield stack.endpoint


@pytest.fixture(scope="session")
def invoker(s3_endpoint):
    # depends on s3_endpoint so that spawned workers inherit the endpoint variables
    with LocalInvoker(workers=2) as inv:
        yield inv


def settings_with(redis_url: str, max_bins: int | None = None, statistics: tuple = (),
                  range_set_size: int | None = None, **changes) -> Settings:
    """Settings on the shared Redis; max_bins, statistics (plugins) and range_set_size go to
    the partition settings, the rest (e.g. frequencies=FrequencySettings(...), allow_partial,
    timeout) to Settings."""
    partition = PartitionSettings(statistics=tuple(statistics),
                                  **({"max_bins": max_bins} if max_bins else {}),
                                  **({"range_set_size": range_set_size} if range_set_size else {}))
    return Settings(redis_url=redis_url, partition=partition, **changes)


@pytest.fixture(scope="session")
def settings(redis_url):
    return settings_with(redis_url)


@pytest.fixture(scope="session")
def run(invoker, redis_url):
    """compute(table) with the shared pool and Redis; keyword arguments: settings_with's."""
    def _run(table: str, stats_root: str | None = None, **changes):
        return compute(str(table), invoker, settings_with(redis_url, **changes),
                       stats_root=stats_root)
    return _run


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession for every Spark test: cost-based optimizer and histograms on,
    adaptive execution off so that plans are decided before they run; the `lakestats` data
    source installed."""
    from pyspark.sql import SparkSession

    from lakestats import spark_bridge
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers import lakestats
    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (spark_bridge.configure(SparkSession.builder).master("local[2]")
               .appName("lakestats-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.sql.cbo.enabled", "true")
               .config("spark.sql.cbo.joinReorder.enabled", "true")
               .config("spark.sql.statistics.histogram.enabled", "true")
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.driver.memory", "2g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    spark_bridge.install(session)
    yield session
    session.stop()


@pytest.fixture
def proxied_bucket(s3_endpoint, monkeypatch):
    """A fresh bucket's name and the fault proxy every S3 request goes through (no faults
    until the test sets them)."""
    import uuid

    import boto3

    from lakestats.infra.faults import S3FaultProxy
    with S3FaultProxy(s3_endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        s3_client.cache_clear()
        name = f"bucket-{uuid.uuid4().hex[:8]}"
        boto3.client("s3").create_bucket(Bucket=name)
        yield name, proxy
    s3_client.cache_clear()
