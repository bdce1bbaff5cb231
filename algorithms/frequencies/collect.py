"""The coordinator's last step of exact frequencies: each column's result, from Redis (the
sorted sets of low-distinct and low-duplicate) or from the reducers (binned), streamed in file
order into frequencies.parquet."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from algorithms.frequencies import BINNED, LOW_DISTINCT, LOW_DUPLICATE, channel
from algorithms.frequencies.choice import PlannedColumn
from core import schema
from fleet import protocol
from fleet.connections import client
from fleet.jobs import JobScope
from fleet.protocol import ColumnOutcome, FrequencyResult
from metastore.layout import FREQUENCIES
from metastore.store import Store

PAGE = schema.FREQUENCIES_ROW_GROUP     # rows a row group holds, and a Redis page


def streams(columns: list[PlannedColumn], scope: JobScope, senders: int,
            confirmed: list[FrequencyResult], reduced: list[FrequencyResult]
            ) -> list[tuple[int, str, Iterator[pa.Table]]]:
    """(k, name, the column's frequencies in file order) of each reduced column."""
    r = client(scope.job.redis_url, raw=True)
    return [(c.k, c.field.name, _column_stream(c, scope, r, senders, confirmed, reduced))
            for c in columns]


def write(out: Store, sources: list[tuple[int, str, Iterator[pa.Table]]]) -> None:
    """Stream frequencies.parquet, column after column in table order, in row groups of
    PAGE rows of one column, whatever batches the sources deliver: equal frequencies give
    equal files, and a column's lookup reads only its row groups."""
    pending: list[pa.Table] = []
    with out.atomic_output(FREQUENCIES) as sink, pq.ParquetWriter(
            sink, schema.FREQUENCIES_SCHEMA, compression="zstd") as writer:
        def flush(final: bool) -> None:
            rows = pa.concat_tables(pending) if pending else None
            pending.clear()
            while rows is not None and (rows.num_rows >= PAGE or final and rows.num_rows):
                writer.write_table(rows.slice(0, PAGE), row_group_size=PAGE)
                rows = rows.slice(PAGE)
            if rows is not None and rows.num_rows:
                pending.append(rows)

        for _, name, batches in sorted(sources, key=lambda s: s[0]):
            for batch in batches:
                pending.append(pa.table({
                    "column": pa.repeat(pa.scalar(name), batch.num_rows),
                    "value": batch["value"], "frequency": batch["frequency"]},
                    schema=schema.FREQUENCIES_SCHEMA))
                if sum(t.num_rows for t in pending) >= PAGE:
                    flush(final=False)
            flush(final=True)


def _column_stream(c: PlannedColumn, scope: JobScope, r, senders: int,
                   confirmed: list[FrequencyResult], reduced: list[FrequencyResult]
                   ) -> Iterator[pa.Table]:
    res, k, job, exchange = c.result, c.k, scope.job.id, scope.objects
    if res.algorithm == BINNED:
        res.distinct_count = sum(o.distinct for o in _outcomes(reduced, k))
        res.singleton_count = sum(o.singletons for o in _outcomes(reduced, k))
        stream = merge_sorted(exchange.stream(channel(k, "reduced"), 0))
        yield from (_at_least_twice(t) for t in stream) if c.omit_singletons else stream
        res.complete = not (c.omit_singletons and res.singleton_count)
        return
    key = protocol.frequency_set(job, k)
    staged = [protocol.frequency_set(job, k, i) for i in range(senders)]
    r.zunionstore(key, staged, aggregate="SUM")    # missing keys count as empty
    r.expire(key, protocol.JOB_TTL_SECONDS)
    r.delete(*staged)
    in_redis, repeated = r.zcard(key), r.zcount(key, "-inf", -2)
    if res.algorithm == LOW_DISTINCT:
        res.distinct_count, res.singleton_count = in_redis, in_redis - repeated
    else:
        # each candidate reported by m partitions was counted m times in the distinct sum
        reports = sum(o.reports for o in _outcomes(confirmed, k))
        res.distinct_count = sum(s["distinct_count"] or 0 for s in c.stats.values()) \
            - (reports - in_redis)
        res.singleton_count = res.distinct_count - repeated
    yield from _zset_pages(r, key, 0, repeated)
    if not c.omit_singletons:
        once = [_zset_pages(r, key, repeated, in_redis, batches=True)]
        if res.algorithm == LOW_DUPLICATE:       # the rest live with the workers that sent them
            once += exchange.stream(channel(k, "once"), 0)
        yield from merge_sorted(once)
    res.complete = not (c.omit_singletons and res.singleton_count)
    r.delete(key)


def _outcomes(results: list[FrequencyResult], k: int) -> list[ColumnOutcome]:
    return [o for r in results for o in r.columns if o.k == k]


def _at_least_twice(t: pa.Table) -> pa.Table:
    return t.filter(pc.greater(t["frequency"], 1))


def _zset_pages(r, key: str, start: int, stop: int, batches: bool = False) -> Iterator:
    """The sorted set's members of ranks [start, stop) with their frequencies, in order, a
    page at a time (by rank: a page costs O(log n + page), at any depth)."""
    for first in range(start, stop, PAGE):
        page = r.zrange(key, first, min(first + PAGE, stop) - 1, withscores=True)
        members, scores = zip(*page)
        table = pa.table({"value": pa.array(members, pa.binary()).cast(pa.string()),
                          "frequency": (-np.array(scores)).astype(np.int64)})
        yield from (table.to_batches() if batches else [table])


def merge_sorted(runs: list[Iterator[pa.RecordBatch]]) -> Iterator[pa.Table]:
    """Merge runs each sorted by (frequency descending, value ascending), holding one batch per
    run: rows up to the smallest last key among the runs' batches are safe to emit."""
    buffers: list[pa.Table | None] = [None] * len(runs)
    live = list(range(len(runs)))
    while True:
        for i in list(live):
            while buffers[i] is None or buffers[i].num_rows == 0:
                batch = next(runs[i], None)
                if batch is None:
                    live.remove(i)
                    buffers[i] = None
                    break
                buffers[i] = pa.Table.from_batches([batch])
        held = [i for i, b in enumerate(buffers) if b is not None and b.num_rows]
        if not held:
            return
        # the smallest last key among live runs bounds what no unread row can precede
        bound = min(((-b["frequency"][-1].as_py(), b["value"][-1].as_py())
                     for i, b in enumerate(buffers) if i in live and b is not None),
                    default=None)
        ready = []
        for i in held:
            b = buffers[i]
            if bound is None:
                n = b.num_rows
            else:
                f, v = b["frequency"], b["value"]
                before = pc.or_(pc.greater(f, -bound[0]),
                                pc.and_(pc.equal(f, -bound[0]), pc.less_equal(v, bound[1])))
                n = int(pc.sum(before).as_py() or 0)      # a prefix: the run is sorted
            ready.append(b.slice(0, n))
            buffers[i] = b.slice(n)
        merged = pa.concat_tables(ready)
        yield merged.sort_by([("frequency", "descending"), ("value", "ascending")])
