"""The coordinator's last step of exact frequencies: each column's result, from Redis (the
sorted sets of low-duplicate) or from the reducers (binned, low-distinct), streamed in file
order into frequencies.parquet."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.algorithms.frequencies import BINNED, LOW_DISTINCT, channel
from lakestats.algorithms.frequencies.choice import PlannedColumn, distinct_sum
from lakestats.core import schema
from lakestats.fleet import protocol
from lakestats.fleet.connections import client
from lakestats.fleet.jobs import JobScope
from lakestats.fleet.protocol import ColumnOutcome, FrequencyResult
from lakestats.metastore.layout import FREQUENCIES
from lakestats.metastore.store import Store

PAGE = schema.FREQUENCIES_ROW_GROUP     # rows a row group holds, and a Redis page


def streams(columns: list[PlannedColumn], scope: JobScope, senders: int,
            confirmed: list[FrequencyResult], reduced: list[FrequencyResult]
            ) -> list[tuple[int, str, Iterator[pa.Table]]]:
    """(k, name, the column's frequencies in file order) of each reduced column."""
    r = client(scope.job.redis_url, raw=True)
    used = sorted({c.spec.batch for c in columns if c.result.algorithm == LOW_DISTINCT})
    batches = _Batches(dict(zip(used, scope.objects.stream(channel(LOW_DISTINCT, "reduced"), 0)
                                if used else [])))
    confirmed_of, reduced_of = _by_column(confirmed), _by_column(reduced)
    return [(c.k, c.field.name, _column_stream(c, scope, r, senders, confirmed_of.get(c.k, []),
                                               reduced_of.get(c.k, []), batches))
            for c in columns]


def write(out: Store, sources: list[tuple[int, str, Iterator[pa.Table]]]) -> None:
    """Stream frequencies.parquet, column after column in table order, in row groups of
    PAGE rows of one column, whatever batches the sources deliver: equal frequencies give
    equal files, and a column's lookup reads only its row groups. A row group is encoded and
    compressed in a thread while the next is merged (both release the GIL): one more row
    group in memory."""
    pending: list[pa.Table] = []
    with out.parquet_writer(FREQUENCIES, schema.FREQUENCIES_SCHEMA) as writer, \
            ThreadPoolExecutor(1) as encoder:
        writing = None

        def flush(final: bool) -> None:
            nonlocal writing
            rows = pa.concat_tables(pending) if pending else None
            pending.clear()
            while rows is not None and (rows.num_rows >= PAGE or final and rows.num_rows):
                if writing is not None:
                    writing.result()
                writing = encoder.submit(writer.write_table, rows.slice(0, PAGE),
                                         row_group_size=PAGE)
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
        if writing is not None:
            writing.result()


def _column_stream(c: PlannedColumn, scope: JobScope, r, senders: int,
                   confirmed: list[ColumnOutcome], reduced: list[ColumnOutcome],
                   batches: _Batches) -> Iterator[pa.Table]:
    """`confirmed`, `reduced`: the column's outcomes of the confirm and reduce steps."""
    res, k, job, exchange = c.result, c.k, scope.job.id, scope.objects
    if res.algorithm in (BINNED, LOW_DISTINCT):
        res.distinct_count = sum(o.distinct for o in reduced)
        res.singleton_count = sum(o.singletons for o in reduced)
        stream = merge_sorted(exchange.stream(channel(k, "reduced"), 0)) \
            if res.algorithm == BINNED else batches.column(c.spec.batch, k)
        yield from (_at_least_twice(t) for t in stream) if c.omit_singletons else stream
        res.complete = not (c.omit_singletons and res.singleton_count)
        return
    key = protocol.frequency_set(job, k)
    staged = [protocol.frequency_set(job, k, i) for i in range(senders)]
    r.zunionstore(key, staged, aggregate="SUM")    # missing keys count as empty
    r.expire(key, protocol.JOB_TTL_SECONDS)
    r.delete(*staged)
    in_redis, repeated = r.zcard(key), r.zcount(key, "-inf", -2)
    # each candidate reported by m partitions was counted m times in the distinct sum
    reports = sum(o.reports for o in confirmed)
    res.distinct_count = distinct_sum(c) - (reports - in_redis)
    res.singleton_count = res.distinct_count - repeated
    yield from _zset_pages(r, key, 0, repeated)
    if not c.omit_singletons:       # the rest live with the workers that sent them
        yield from merge_sorted([_zset_pages(r, key, repeated, in_redis, batches=True),
                                 *exchange.stream(channel(k, "once"), 0)])
    res.complete = not (c.omit_singletons and res.singleton_count)
    r.delete(key)


class _Batches:
    """The low-distinct reducers' results, each sorted by column: column k's rows are read
    from its batch's stream when its turn comes (columns are written in order), one record
    batch at a time."""

    def __init__(self, streams: dict[int, Iterator[pa.RecordBatch]]):
        self.streams = streams          # every reducer replies: senders in order are batches
        self.held: dict[int, pa.Table] = {}

    def column(self, batch: int, k: int) -> Iterator[pa.Table]:
        while True:
            rows = self.held.pop(batch, None)
            if rows is None or not rows.num_rows:
                record_batch = next(self.streams[batch], None)
                if record_batch is None:
                    return
                rows = pa.Table.from_batches([record_batch])
            start, end = np.searchsorted(rows["k"].to_numpy(), [k, k + 1]).tolist()
            if end > start:
                yield rows.slice(start, end - start).select(["value", "frequency"])
            rest = rows.slice(end)
            if rest.num_rows:                        # the next column begins here
                self.held[batch] = rest
                return


def _by_column(results: list[FrequencyResult]) -> dict[int, list[ColumnOutcome]]:
    """The results' outcomes by column, gathered once (not scanned per column: a wide
    table's columns times its outcomes)."""
    outcomes: dict[int, list[ColumnOutcome]] = {}
    for result in results:
        for o in result.columns:
            outcomes.setdefault(o.k, []).append(o)
    return outcomes


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
