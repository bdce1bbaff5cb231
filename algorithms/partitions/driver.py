"""The coordinator side of partition statistics: the data files to compute, small ones packed
several to a call (Spark's rule for splits: up to settings.pack_bytes, each file counted with
an open cost, and no more than an even share of the work per worker), through the fan-out.
Statistics stay per file. And the partitions' sketches and histograms for the table's: read
here, or, for many partitions, folded by the workers in packs (`fold_sources`)."""
from __future__ import annotations

import math
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from lakestats.algorithms.partitions import fold
from lakestats.algorithms.partitions.digest import Digests
from lakestats.core import batching
from lakestats.core.settings import OPEN_COST_BYTES, Settings
from lakestats.fleet.fanout import Progress, fan_out, retries
from lakestats.fleet.invokers import Invoker
from lakestats.fleet.jobs import JobScope
from lakestats.fleet.protocol import (FOLD_HISTOGRAMS, FOLD_SKETCHES, PARTITION_FOLD,
                                      PARTITION_PACK, PARTITION_STATISTICS, FoldTask, PackTask,
                                      PartitionTask, StepEvent)
from lakestats.metastore import files
from lakestats.metastore.layout import Layout
from lakestats.metastore.store import DataFile

PACKS_PER_WORKER = 4        # packs no larger than an even share of a quarter of a worker's work
# From this many (partition, column) pairs, workers fold packs of at most FOLD_PARTITIONS
# partitions, and the coordinator their partials: each partition's two statistics files are
# read by a worker, not all by the coordinator
FOLD_PAIRS = 20_000
FOLD_PARTITIONS = 2_000


def compute_partitions(invoker: Invoker, table: str, layout: Layout, todo: list[DataFile],
                       settings: Settings, progress: Progress | None = None,
                       on_done: Callable[[DataFile], None] | None = None,
                       digests: Digests | None = None) -> tuple[dict[str, str], int]:
    """Statistics of the `todo` files into their directories; returns the files that failed
    (path -> reason: bad data, or the last error after every attempt) and the retries made.
    `on_done` sees each file whose statistics are written, as soon as they are. A pack whose
    call fails, and a file a pack hands back, are computed alone, with their own retries.
    `digests`: where packs write their digests; it learns which files each holds."""
    tasks = [PartitionTask(
        table, f.rel_path, f.fingerprint, layout.partition(f.rel_path, f.fingerprint).uri,
        settings.partition.max_bins, settings.partition.bloom_min_distinct,
        settings.partition.statistics, f.reading, settings.partition.range_set_size)
        for f in todo]
    failed: dict[str, str] = {}
    finished = 0

    def settled(i: int, result) -> None:
        nonlocal finished
        finished += 1
        if progress:
            progress(finished, len(todo))
        if result is None:
            return
        if result.status == "ok":
            if on_done:
                on_done(todo[i])
        else:                                       # bad data: retrying will not help
            failed[todo[i].rel_path] = result.error

    groups = packs([f.size for f in todo], settings.pack_bytes, invoker.workers)
    alone = [g[0] for g in groups if len(g) == 1]
    packed = [g for g in groups if len(g) > 1]
    made = 0
    with JobScope(settings.redis_url, stateful=False) as scope:    # files, not Redis, hold results
        def arrived(k: int, result) -> None:
            for i, one in zip(packed[k], result.results):
                if one.status == "retry":
                    alone.append(i)
                else:
                    settled(i, one)
            if digests:
                digests.record(k, [todo[i] for i, one in zip(packed[k], result.results)
                                   if one.status == "ok"])
        outcomes = fan_out(invoker, scope, [StepEvent(
            PARTITION_PACK, f"{todo[g[0]].rel_path} +{len(g) - 1}", PackTask(
                [tasks[i] for i in g], digests.name(k) if digests else ""))
            for k, g in enumerate(packed)], max_attempts=settings.max_attempts,
            timeout=settings.timeout, fail_fast=False, on_result=arrived) if packed else []
        alone += [i for g, outcome in zip(packed, outcomes) if outcome.error is not None
                  for i in g]
        made += retries(outcomes)
        outcomes = fan_out(invoker, scope, [StepEvent(PARTITION_STATISTICS, todo[i].rel_path,
                                                      tasks[i]) for i in alone],
                           max_attempts=settings.max_attempts, timeout=settings.timeout,
                           fail_fast=False, on_result=lambda k, result: settled(alone[k],
                                                                                result)) \
            if alone else []
    for i, outcome in zip(alone, outcomes):
        if outcome.error is not None:
            failed[todo[i].rel_path] = f"{todo[i].rel_path}: {outcome.error}"
            settled(i, None)
    return failed, made + retries(outcomes)


def packs(sizes: list[int], budget: int, workers: int) -> list[list[int]]:
    """The files (by index, in order) in packs of at most `budget` bytes, each file counting
    its bytes and OPEN_COST_BYTES (core.batching.packs). `budget` 0: one a pack."""
    return batching.packs(sizes, budget, OPEN_COST_BYTES, workers, PACKS_PER_WORKER)


def fold_sources(data_files: list[DataFile], table: pa.Schema, invoker: Invoker,
                 layout: Layout, settings: Settings, progress: Progress | None = None,
                 digests: Digests | None = None) -> Iterator[tuple[pa.Table, pa.Table]]:
    """What the table's sketches and histograms fold (algorithms.partitions.fold) for these
    files' partitions: the partials their packs folded as they computed them (`digests`),
    and, for the others, each partition's, read here, or the partials of packs of them that
    the workers fold, read one at a time."""
    folded = set()
    for members, partial in digests.partials(data_files, table) if digests else ():
        folded.update(members)
        yield partial
    stats_dirs = [layout.partition(f.rel_path, f.fingerprint) for f in data_files
                  if f.rel_path not in folded]
    if len(stats_dirs) * max(1, len(table)) < FOLD_PAIRS or len(stats_dirs) < 2:
        yield from fold.sources(stats_dirs, len(table))
        return
    # equal packs, a whole number of rounds of the workers (batching.packs' runs of at most
    # FOLD_PARTITIONS would leave a last, short round to one worker)
    calls = invoker.workers * math.ceil(len(stats_dirs) / (invoker.workers * FOLD_PARTITIONS))
    encoded = files.encode_schema(table)
    events = [StepEvent(PARTITION_FOLD, f"partitions {pack[0]}-{pack[-1]}", FoldTask(
        k, [stats_dirs[i].uri for i in pack], encoded, settings.partition.max_bins))
        for k, pack in enumerate(np.array_split(np.arange(len(stats_dirs)),
                                                min(calls, len(stats_dirs))))]
    with JobScope(settings.redis_url, layout, stateful=False) as scope:
        fan_out(invoker, scope, events, max_attempts=settings.max_attempts,
                timeout=settings.timeout, progress=progress, label="table statistics: fold")
        yield from zip(scope.objects.each(FOLD_SKETCHES, 0), scope.objects.each(FOLD_HISTOGRAMS, 0))
