"""compute: lakestats statistics with Spark executors as the workers."""
from __future__ import annotations

from infra.redis_server import redis_url
from monostore import coordinator
from monostore.invokers.spark import SparkInvoker


def compute(spark, table_uri: str, *, stats_root: str | None = None, redis: str | None = None,
            options: coordinator.Options | None = None) -> coordinator.Report:
    """The same partition events as any invoker, run as Spark tasks; the coordinator reduces
    through Redis (REDIS_URL, or an embedded server for the duration)."""
    with redis_url(redis) as url, SparkInvoker(spark) as invoker:
        return coordinator.compute(table_uri, invoker, url, stats_root=stats_root,
                                   options=options)
