"""The worker steps of exact table-level frequencies. Every step starts from the partitions'
stored frequencies.parquet, so an incremental update never redoes a partition's scan. One call
per pack of partitions (or per bin) covers every column the step applies to; a pack sends as
one sender, its partitions' counts summed."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.algorithms.frequencies import BINNED, LOW_DISTINCT, LOW_DUPLICATE, channel
from lakestats.algorithms.partitions import digest
from lakestats.core import hashing
from lakestats.core import types as ty
from lakestats.core.counting import sum_by_value
from lakestats.fleet import protocol
from lakestats.fleet.connections import client
from lakestats.fleet.exchange import for_event
from lakestats.fleet.protocol import (ColumnOutcome, FrequencyColumn, FrequencyResult,
                                      FrequencyTask, PartitionCounts, StepEvent)
from lakestats.metastore import files
from lakestats.metastore.store import Store

REDIS_BATCH = 10_000         # members per ZADD


def _read(partition: PartitionCounts, columns: list[FrequencyColumn]) -> dict[int, pa.Table]:
    """(value, frequency) of each column in this partition (from its pack's digest, where
    that holds them), values as the table's type spells them (a column that is int32 here
    and float64 in the table is re-rendered)."""
    names = [c.name for c in columns]
    table = digest.frequencies(partition.digest, partition.stats_dir) \
        if partition.digest else None
    table = files.read_frequencies(Store(partition.stats_dir), names) if table is None else \
        table.filter(pc.is_in(table["column"], pa.array(names, pa.string())))
    runs = dict(files.column_runs(table, ("value", "frequency")))
    out = {}
    for c in columns:
        counts = runs.get(c.name, table.select(["value", "frequency"]).slice(0, 0))
        if c.retype:
            counts = files.retexted(counts, *(files.decode_schema(s).field(0).type
                                              for s in c.retype))
        out[c.k] = counts
    return out


def _summed(tables: list[pa.Table]) -> pa.Table:
    """A pack's counts of a column: each value once, its frequencies summed."""
    return tables[0] if len(tables) == 1 else _sum(pa.concat_tables(tables))


def _sum(counts: pa.Table) -> pa.Table:
    values, frequencies = sum_by_value(counts["value"], counts["frequency"].to_numpy())
    return pa.table({"value": values, "frequency": frequencies})


_EMPTY = pa.table({"value": pa.array([], pa.string()), "frequency": pa.array([], pa.int64())})


def _by_column(task: FrequencyTask, columns: list[FrequencyColumn]) -> dict[int, list[pa.Table]]:
    """Each column's counts in the pack's partitions that hold it (each read as it types the
    column)."""
    wanted = {c.k: c for c in columns}
    out: dict[int, list[pa.Table]] = {k: [] for k in wanted}
    for p in task.partitions:
        specs = {**wanted, **{c.k: c for c in p.retyped if c.k in wanted}}
        for k, table in _read(p, [specs[k] for k in p.held if k in wanted]).items():
            out[k].append(table)
    return out


def _stage(event: StepEvent, k: int, counts: pa.Table) -> int:
    """This sender's counts of column k into its own sorted set (a retried step replaces it:
    no double counting); returns the bytes sent."""
    r = client(event.redis_url, raw=True)
    key = protocol.frequency_set(event.job, k, event.task.index)
    values = counts["value"].to_pylist()
    negated = (-counts["frequency"].to_numpy()).tolist()
    pipe = r.pipeline(transaction=False)
    pipe.delete(key)
    for start in range(0, len(values), REDIS_BATCH):
        end = start + REDIS_BATCH
        pipe.zadd(key, dict(zip(values[start:end], negated[start:end])))
    pipe.expire(key, protocol.JOB_TTL_SECONDS)
    pipe.execute()
    return int(pc.sum(pc.binary_length(counts["value"])).as_py() or 0) + 8 * counts.num_rows


def bin_of(counts: pa.Table, column: FrequencyColumn) -> np.ndarray:
    """The bin of each value. Integers and temporal values split the column's [low, high] range
    evenly (the broadcast table min/max); other values, unordered or unevenly spread, bin on
    their hash."""
    bins = column.bins
    if column.low is not None:
        arrow_type = files.decode_schema(column.type).field(0).type
        typed = ty.from_text(counts["value"], arrow_type)
        x = ty.integers(typed).to_numpy(zero_copy_only=False).astype(np.float64)
        low, high = float(column.low), float(column.high)
        position = (x - low) / (high - low + 1.0) * bins
        return np.clip(position, 0, bins - 1).astype(np.int64)
    return (hashing.hash_text(counts["value"]) % np.uint64(bins)).astype(np.int64)


def send(event: StepEvent) -> FrequencyResult:
    """Step 1, per pack of partitions. low-distinct: send each batch's reducer the pack's
    summed counts of its columns, in one payload. binned: cut the counts into bins and send
    bin b to reducer b. low-duplicate: send the coordinator the hashes of the pack's values
    for its Bloom filter, flagging those repeated within the pack."""
    task = event.task
    exchange, _ = for_event(event)
    binned = {c.k for c in task.columns if c.algorithm == BINNED}
    # binned counts are summed by their reducers: summing a pack's here too was a second
    # hash pass over millions of values (lineitem: 2.6 s of the steps' 18.5 s, one worker)
    counts = {k: pa.concat_tables(tables) if k in binned else _summed(tables)
              for k, tables in _by_column(task, task.columns).items()}
    outcomes = _send_batches(exchange, task.index, [c for c in task.columns
                                                    if c.algorithm == LOW_DISTINCT], counts)
    for c in task.columns:
        table = counts[c.k]
        if c.algorithm == LOW_DISTINCT:
            continue
        if c.algorithm == BINNED:
            bins = bin_of(table, c)
            order = np.argsort(bins, kind="stable")
            ends = np.cumsum(np.bincount(bins, minlength=c.bins))
            table = table.take(order)
            moved = 0
            for b in range(c.bins):
                start = ends[b - 1] if b else 0
                if ends[b] > start:
                    moved += exchange.put(channel(c.k, "bin"), task.index, b,
                                          table.slice(start, ends[b] - start))
        else:
            hashes = pa.table({"hash": hashing.hash_text(table["value"]),
                               "repeated": pc.greater(table["frequency"], 1)})
            moved = exchange.put(channel(c.k, "hashes"), task.index, 0, hashes)
        outcomes.append(ColumnOutcome(c.k, bytes=moved))
    return FrequencyResult(outcomes)


def _send_batches(exchange, sender: int, columns: list[FrequencyColumn],
                  counts: dict[int, pa.Table]) -> list[ColumnOutcome]:
    """The low-distinct columns' counts, (k, value, frequency), one payload per batch; a
    column's bytes are its share of the payload's rows."""
    outcomes = []
    for batch in sorted({c.batch for c in columns}):
        held = [c for c in columns if c.batch == batch]
        table = pa.concat_tables(_keyed(c.k, counts[c.k]) for c in held)
        moved = exchange.put(channel(LOW_DISTINCT, "counts"), sender, batch, table)
        outcomes += [ColumnOutcome(c.k, bytes=moved * counts[c.k].num_rows
                                   // max(1, table.num_rows)) for c in held]
    return outcomes


def _keyed(k: int, counts: pa.Table) -> pa.Table:
    return pa.table({"k": pa.repeat(pa.scalar(k, pa.int32()), counts.num_rows),
                     "value": counts["value"].cast(pa.string()),
                     "frequency": counts["frequency"].cast(pa.int64())})


def confirm(event: StepEvent) -> FrequencyResult:
    """Step 3 of low-duplicate, per pack of partitions: the broadcast candidates that its
    partitions hold go to Redis with their counts (summed over the pack; `reports` counts
    each partition's). With keep_once, the other values (each seen once in the whole table)
    go to the coordinator sorted, to be merged into the exhaustive list."""
    task = event.task
    columns = [c for c in task.columns if c.algorithm == LOW_DUPLICATE]
    exchange, small = for_event(event)
    outcomes = []
    for c, tables in zip(columns, _by_column(task, columns).values()):
        candidates = small.get_all(channel(c.k, "candidates"), 0)
        candidates = candidates[0]["hash"] if candidates else pa.array([], pa.uint64())
        both = pa.concat_tables(tables) if tables else _EMPTY       # one pass, not one a file
        held = pc.is_in(pa.array(hashing.hash_text(both["value"])), value_set=candidates)
        confirmed = both.filter(held)
        moved = _stage(event, c.k, confirmed if len(tables) == 1 else _sum(confirmed))
        if c.keep_once:
            once = both.filter(pc.invert(held))
            once = once.take(pc.sort_indices(once["value"]))
            moved += exchange.put(channel(c.k, "once"), task.index, 0, once)
        outcomes.append(ColumnOutcome(c.k, bytes=moved, reports=confirmed.num_rows))
    return FrequencyResult(outcomes)


def reduce(event: StepEvent) -> FrequencyResult:
    """Step 2 of binned, per bin, and of low-distinct, per batch: sum the bin's slices (the
    batch's payloads) from every partition and send the coordinator the frequencies in file
    order (by column, then decreasing frequency, then value)."""
    task = event.task
    exchange, _ = for_event(event)
    outcomes = _reduce_batch(exchange, task.index, [c for c in task.columns
                                                    if c.algorithm == LOW_DISTINCT])
    for c in task.columns:
        if c.algorithm == LOW_DISTINCT:
            continue
        slices = exchange.get_all(channel(c.k, "bin"), task.index)
        if not slices:
            outcomes.append(ColumnOutcome(c.k))
            continue
        table = pa.concat_tables(slices)
        values, counts = sum_by_value(table["value"], table["frequency"].to_numpy())
        summed = pa.table({"value": values, "frequency": counts}).sort_by(
            [("frequency", "descending"), ("value", "ascending")])
        singletons = int(pc.sum(pc.equal(summed["frequency"], 1)).as_py() or 0)
        outcomes.append(ColumnOutcome(c.k, distinct=summed.num_rows, singletons=singletons,
                                      bytes=exchange.put(channel(c.k, "reduced"), task.index,
                                                         0, summed)))
    return FrequencyResult(outcomes)


def _reduce_batch(exchange, batch: int, columns: list[FrequencyColumn]) -> list[ColumnOutcome]:
    """Sum the batch's payloads in one hash aggregation; every reducer replies, even empty,
    so that the coordinator finds the batches' results in sender order."""
    if not columns:
        return []
    payloads = exchange.get_all(channel(LOW_DISTINCT, "counts"), batch)
    table = pa.concat_tables(payloads) if payloads else _keyed(0, pa.table({
        "value": pa.array([], pa.string()), "frequency": pa.array([], pa.int64())}))
    summed = table.group_by(["k", "value"]).aggregate([("frequency", "sum")])
    summed = pa.table({"k": summed["k"], "value": summed["value"],
                       "frequency": summed["frequency_sum"]}).sort_by(
        [("k", "ascending"), ("frequency", "descending"), ("value", "ascending")])
    moved = exchange.put(channel(LOW_DISTINCT, "reduced"), batch, 0, summed)
    ks = summed["k"].to_numpy()
    size = max(c.k for c in columns) + 1
    distinct = np.bincount(ks, minlength=size)
    singletons = np.bincount(ks, weights=summed["frequency"].to_numpy() == 1, minlength=size)
    return [ColumnOutcome(c.k, distinct=int(distinct[c.k]), singletons=int(singletons[c.k]),
                          bytes=moved * int(distinct[c.k]) // max(1, summed.num_rows))
            for c in columns]
