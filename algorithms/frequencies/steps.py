"""The worker steps of exact table-level frequencies. Every step starts from the partition's
stored frequencies.parquet, so an incremental update never redoes a partition's scan. One call
per partition (or per bin) covers every column the step applies to."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from algorithms.frequencies import BINNED, LOW_DISTINCT, LOW_DUPLICATE, channel
from core import hashing
from core import types as ty
from core.counting import sum_by_value
from fleet import protocol
from fleet.connections import client
from fleet.exchange import for_event
from fleet.protocol import ColumnOutcome, FrequencyColumn, FrequencyResult, StepEvent
from metastore import files
from metastore.store import Store

REDIS_BATCH = 10_000         # members per ZADD


def _read(stats_dir: str, columns: list[FrequencyColumn]) -> dict[int, pa.Table]:
    """(value, frequency) of each column in this partition, values as the table's type spells
    them (a column that is int32 here and float64 in the table is re-rendered)."""
    table = files.read_frequencies(Store(stats_dir), [c.name for c in columns])
    out = {}
    for c in columns:
        counts = table.filter(pc.equal(table["column"], c.name)).select(["value", "frequency"])
        if c.retype and counts.num_rows:   # an empty file may type a column null
            source, target = (files.decode_schema(s).field(0).type for s in c.retype)
            counts = counts.set_column(0, "value", ty.retext(counts["value"], source, target))
        out[c.k] = counts
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
    """Step 1, per partition. low-distinct: add the counts to Redis. binned: cut the counts
    into bins and send bin b to reducer b. low-duplicate: send the coordinator the values'
    hashes for its Bloom filter, flagging those repeated within this partition."""
    task = event.task
    exchange, _ = for_event(event)
    counts = _read(task.stats_dir, task.columns)
    outcomes = []
    for c in task.columns:
        table = counts[c.k]
        if c.algorithm == LOW_DISTINCT:
            moved = _stage(event, c.k, table)
        elif c.algorithm == BINNED:
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


def confirm(event: StepEvent) -> FrequencyResult:
    """Step 3 of low-duplicate, per partition: the broadcast candidates that this partition
    holds go to Redis with their counts. With keep_once, the other values (each seen once in
    the whole table) go to the coordinator sorted, to be merged into the exhaustive list."""
    task = event.task
    columns = [c for c in task.columns if c.algorithm == LOW_DUPLICATE]
    exchange, small = for_event(event)
    counts = _read(task.stats_dir, columns)
    outcomes = []
    for c in columns:
        table = counts[c.k]
        candidates = small.get_all(channel(c.k, "candidates"), 0)
        candidates = candidates[0]["hash"] if candidates else pa.array([], pa.uint64())
        held = pc.is_in(pa.array(hashing.hash_text(table["value"])), value_set=candidates)
        confirmed = table.filter(held)
        moved = _stage(event, c.k, confirmed)
        if c.keep_once:
            once = table.filter(pc.invert(held))
            once = once.take(pc.sort_indices(once["value"]))
            moved += exchange.put(channel(c.k, "once"), task.index, 0, once)
        outcomes.append(ColumnOutcome(c.k, bytes=moved, reports=confirmed.num_rows))
    return FrequencyResult(outcomes)


def reduce(event: StepEvent) -> FrequencyResult:
    """Step 2 of binned, per bin: sum the bin's slices from every partition and send the
    coordinator the bin's frequencies in file order (decreasing frequency, then value)."""
    task = event.task
    exchange, _ = for_event(event)
    outcomes = []
    for c in task.columns:
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
