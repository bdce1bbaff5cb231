"""compute: lakestats statistics with Spark executors as the workers."""
from __future__ import annotations

import dataclasses

from lakestats.core.settings import Settings
from lakestats.infra.redis_server import redis_url
from lakestats.monostore.report import Report
from lakestats.monostore.compute import compute as compute_job
from lakestats.spark_bridge.invoker import SparkInvoker


def compute(spark, table_uri: str, *, stats_root: str | None = None,
            settings: Settings | None = None) -> Report:
    """The same steps as any invoker's, run as Spark tasks; the coordinator reduces through
    Redis (settings.redis_url, or an embedded server for the duration)."""
    settings = settings or Settings()
    # executors AUTH with the password in their own environment ($REDIS_PASSWORD, or the one
    # in $REDIS_URL): the events they get carry the URL without it
    with redis_url(settings.redis_url, settings.redis_password) as url, \
            SparkInvoker(spark) as invoker:
        return compute_job(table_uri, invoker, dataclasses.replace(settings, redis_url=url),
                           stats_root=stats_root)
