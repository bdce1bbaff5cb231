"""The coordinator side of partition statistics: one call of the step per data file to
compute, through the fan-out."""
from __future__ import annotations

from typing import Callable

from lakestats.core.settings import Settings
from lakestats.fleet.fanout import Progress, fan_out, retries
from lakestats.fleet.invokers import Invoker
from lakestats.fleet.jobs import JobScope
from lakestats.fleet.protocol import PARTITION_STATISTICS, PartitionTask, StepEvent
from lakestats.metastore.layout import Layout
from lakestats.metastore.store import DataFile


def compute_partitions(invoker: Invoker, table: str, layout: Layout, todo: list[DataFile],
                       settings: Settings, progress: Progress | None = None,
                       on_done: Callable[[DataFile], None] | None = None
                       ) -> tuple[dict[str, str], int]:
    """Statistics of the `todo` files into their directories; returns the files that failed
    (path -> reason: bad data, or the last error after every attempt) and the retries made.
    `on_done` sees each file whose statistics are written, as soon as they are."""
    events = [StepEvent(PARTITION_STATISTICS, f.rel_path, PartitionTask(
        table, f.rel_path, f.fingerprint, layout.partition(f.rel_path, f.fingerprint).uri,
        settings.partition.max_bins, settings.partition.bloom_min_distinct,
        settings.partition.statistics, f.reading, settings.partition.range_set_size))
        for f in todo]

    def arrived(i: int, result) -> None:
        if result.status == "ok" and on_done:
            on_done(todo[i])
    with JobScope(settings.redis_url, stateful=False) as scope:    # files, not Redis, hold results
        outcomes = fan_out(invoker, scope, events, max_attempts=settings.max_attempts,
                           timeout=settings.timeout, fail_fast=False, progress=progress,
                           on_result=arrived)
    failed = {}
    for f, outcome in zip(todo, outcomes):
        if outcome.error is not None:
            failed[f.rel_path] = f"{f.rel_path}: {outcome.error}"
        elif outcome.result.status != "ok":            # bad data: retrying will not help
            failed[f.rel_path] = outcome.result.error
    return failed, retries(outcomes)
