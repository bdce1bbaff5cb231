"""The coordinator side of exact frequencies: plan each column, run the steps through the
fan-out, pass low-duplicate hashes through the Bloom filter, and collect the result."""
from __future__ import annotations

import itertools
from typing import Callable

import numpy as np
import pyarrow as pa

from lakestats.algorithms.frequencies import BINNED, LOW_DISTINCT, LOW_DUPLICATE, channel
from lakestats.algorithms.frequencies.choice import (ColumnFrequencies, PlannedColumn, distinct_sum,
                                                     plan)
from lakestats.algorithms.frequencies.collect import streams, write
from lakestats.core.batching import packs, runs
from lakestats.core.bloom import BloomFilter
from lakestats.core.hashing import distinct_sorted
from lakestats.core.settings import OPEN_COST_BYTES, Settings
from lakestats.fleet.fanout import Progress, fan_out, results
from lakestats.fleet.invokers import Invoker
from lakestats.fleet.jobs import JobScope
from lakestats.fleet.protocol import (FREQUENCY_CONFIRM, FREQUENCY_REDUCE, FREQUENCY_SEND,
                                      FrequencyColumn, FrequencyResult, FrequencyTask,
                                      PartitionCounts, StepEvent)
from lakestats.metastore import index
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store

BLOOM_ERROR_RATE = 0.01
# a value's bytes, for packing partitions' counts by the partition step's byte budget (2M
# values, a few hundred MB at most in a worker, for the default 128 MiB)
VALUE_BYTES = 64
# a pack's event at most, beyond its columns' specs (Lambda takes 6 MB a request): partitions
# that type thousands of columns otherwise than the table go fewer to a call
EVENT_BYTES = 1 << 20


def compute(table_schema: pa.Schema, table_rows: list[dict], partitions: pa.Table,
            stats_dir: Callable[[str], str], invoker: Invoker, settings: Settings, layout: Layout,
            out: Store, progress: Progress | None = None, only: list[str] | None = None,
            merged: dict[str, tuple[ColumnFrequencies, pa.Table]] | None = None,
            digest: Callable[[str], str] = lambda path: ""
            ) -> dict[str, ColumnFrequencies]:
    """Write `out`/frequencies.parquet: the columns `only` (all, if None) reduced over every
    partition, and the `merged` ones as given; returns each written column's outcome.
    `partitions` is the partition index, `stats_dir` names a partition's directory, `digest`
    its pack's frequency digest ("": none)."""
    merged = merged or {}
    columns = plan(table_schema, table_rows, partitions, settings.frequencies, invoker.workers,
                   only)
    sources = [(table_schema.get_field_index(name), name, iter([table]))
               for name, (_, table) in merged.items()]
    if not columns:
        write(out, sources)
    else:
        with JobScope(settings.redis_url, layout) as scope:
            sources += _reduce(columns, partitions, stats_dir, digest, invoker, settings,
                               scope, progress)
            write(out, sources)
    return {**{c.field.name: c.result for c in columns},
            **{name: result for name, (result, _) in merged.items()}}


def _reduce(columns: list[PlannedColumn], partitions: pa.Table, stats_dir: Callable[[str], str],
            digest: Callable[[str], str], invoker: Invoker, settings: Settings, scope: JobScope,
            progress: Progress | None):
    """The steps over every partition; the columns' streams for the file."""
    paths = partitions["path"].to_pylist()
    schemas = dict(index.schemas(partitions))

    def per_partition(step: str, algorithms: tuple[str, ...]) -> list[StepEvent]:
        """The step's calls: packs of the partitions holding its columns."""
        used = [c for c in columns if c.result.algorithm in algorithms]
        held = [(i, p, [c for c in used if p in c.stats]) for i, p in enumerate(paths)]
        held = [h for h in held if h[2]]
        values = [sum(c.stats[p]["distinct_count"] or 0 for c in cs) for _, p, cs in held]
        events = []
        for pack in packs(values, settings.pack_bytes // VALUE_BYTES,
                          OPEN_COST_BYTES // VALUE_BYTES, invoker.workers):
            members = [(i, p, PartitionCounts(stats_dir(p), [c.k for c in cs],
                                              _retyped(cs, schemas[p]), digest(p)))
                       for i, p, cs in (held[j] for j in pack)]
            for call in runs(((m, _event_bytes(m[2])) for m in members), EVENT_BYTES):
                first, name, _ = call[0]
                ks = {k for _, _, counts in call for k in counts.held}
                events.append(StepEvent(
                    step, name + (f" +{len(call) - 1}" if len(call) > 1 else ""),
                    FrequencyTask(first, [c.spec for c in used if c.k in ks],
                                  [counts for _, _, counts in call])))
        return events

    def run(events: list[StepEvent], step: str) -> list[FrequencyResult]:
        done = results(fan_out(invoker, scope, events, max_attempts=settings.max_attempts,
                               timeout=settings.timeout, progress=progress,
                               label=f"table frequencies: {step}"))
        _add_bytes(columns, done)
        return done

    binned = [c for c in columns if c.result.algorithm == BINNED]
    batched = [c for c in columns if c.result.algorithm == LOW_DISTINCT]
    reducers = max([c.spec.bins for c in binned] + [c.spec.batch + 1 for c in batched] + [0])
    per_bin = [StepEvent(FREQUENCY_REDUCE, f"bin {b}", FrequencyTask(
        b, [c.spec for c in binned if b < c.spec.bins]
        + [c.spec for c in batched if c.spec.batch == b])) for b in range(reducers)]
    run(per_partition(FREQUENCY_SEND, (LOW_DISTINCT, LOW_DUPLICATE, BINNED)), "send")
    for c in columns:
        if c.result.algorithm == LOW_DUPLICATE:
            _candidates(c, scope)
    confirm = per_partition(FREQUENCY_CONFIRM, (LOW_DUPLICATE,))
    done = run(confirm + per_bin, "reduce")
    if progress:
        progress(0, 1, "table frequencies: write")
    return streams(columns, scope, len(paths), done[:len(confirm)], done[len(confirm):])


def _event_bytes(counts: PartitionCounts) -> int:
    """About what a partition adds to a pack's event, as JSON."""
    return 100 + len(counts.stats_dir) + len(counts.digest) + 8 * len(counts.held) + sum(
        200 + sum(map(len, c.retype)) for c in counts.retyped)


def _retyped(columns: list[PlannedColumn], partition: pa.Schema) -> list[FrequencyColumn]:
    """The specs of the columns a partition types otherwise than the table."""
    specs = [c.for_partition(partition.field(c.field.name)) for c in columns]
    return [s for s in specs if s.retype]


def _add_bytes(columns: list[PlannedColumn], done: list[FrequencyResult]) -> None:
    by_k = {c.k: c for c in columns}
    for result in done:
        for outcome in result.columns:
            by_k[outcome.k].result.bytes += outcome.bytes


def _candidates(c: PlannedColumn, scope: JobScope) -> None:
    """Low-duplicate step 2: every partition's hashes through one Bloom filter; the hashes it
    has (probably) seen before, and those repeated within a partition, are the candidates,
    broadcast through Redis. A partition's values are distinct, so a batch is probed whole
    before it is added; one batch is in memory at a time."""
    bloom = BloomFilter.sized(distinct_sum(c), BLOOM_ERROR_RATE)
    candidates = []
    for batch in itertools.chain.from_iterable(scope.objects.stream(channel(c.k, "hashes"), 0)):
        hashes = batch["hash"].to_numpy()
        seen = bloom.contains(hashes) | batch["repeated"].to_numpy(zero_copy_only=False)
        candidates.append(hashes[seen])
        bloom.add(hashes)
    unique = distinct_sorted(np.concatenate(candidates)) if candidates else \
        np.empty(0, np.uint64)
    c.result.bytes += scope.small.put(channel(c.k, "candidates"), 0, 0, pa.table({"hash": unique}))


def recompute(stats_root: str, invoker: Invoker, settings: Settings, out: Store,
              columns: list[str] | None = None, progress: Progress | None = None
              ) -> dict[str, ColumnFrequencies]:
    """Reduce the published version's partition frequencies again (all columns, or
    `columns`) into `out`/frequencies.parquet, e.g. with another algorithm: no data is read."""
    stats = StatisticsReader(stats_root)
    partitions = stats.partition_index()
    entries = index.entries(partitions)
    return compute(stats.schema(), stats.statistics().to_pylist(), partitions,
                   lambda p: stats.layout.partition(p, entries[p]["fingerprint"]).uri, invoker,
                   settings, stats.layout, out, progress, columns)
