"""Exact table-level frequencies of every column, by three distributed algorithms (seed 003).

Every partition stores its exact frequencies; the table's are their sum. The coordinator
chooses, per column, from the partitions' counts (S = sum of partition distinct counts, and the
duplicates estimated from the merged KMV sketch):

- low-distinct   S <= low_distinct_max. Every worker puts its counts in a Redis sorted set of
                 its own; one ZUNIONSTORE sums them in Redis; the coordinator pages the result
                 out in file order. Moves S values to Redis.
- low-duplicate  near-unique columns: at most low_duplicate_max values can repeat. Workers send
                 the 64-bit hashes of their values (8 bytes each, flagged when repeated within
                 the partition); the coordinator passes them, partition by partition, through
                 one Bloom filter sized for S values; hashes it has probably seen, and flagged
                 ones, are the candidates, consolidated in Redis and broadcast back; workers
                 send the candidates they hold with their counts to Redis, where they are
                 summed. Values seen once are implied, not stored, unless all_values asks for
                 them; the distinct count stays exact: S minus the repeats the candidates
                 reveal. Moves 9 bytes per value, plus the candidates.
- binned         everything else. Workers cut their counts into one bin per reducer (integer and
                 temporal values by range between the table's min and max, other values by
                 hash) and scatter them through the exchange (object store); each reducer sums
                 its bin and streams it back sorted. Moves every value twice.

The output of all three is identical, byte for byte: frequencies.parquet lists a column's
values by decreasing frequency, then by value bytes; values seen once are left out when the
column is near-unique (its automatic choice is low-duplicate) and all_values is off, whatever
algorithm was forced. The coordinator holds one batch per stream, the Bloom filter (one byte
per bit while it is built) and the candidates, never a whole column.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from functions.frequencies import BINNED, LOW_DISTINCT, LOW_DUPLICATE, channel, zset_key
from metastore import files, hashing, schema
from metastore import types as ty
from metastore.bloom import BloomFilter
from metastore.store import Store
from monostore.exchange import ObjectStoreExchange, RedisExchange
from monostore.invokers import Invoker, invoke_all
from monostore.jobs import JOB_TTL_SECONDS, Job, client

ALGORITHMS = (LOW_DISTINCT, LOW_DUPLICATE, BINNED)
BINS_PER_WORKER = 2
PAGE = 65_536
BLOOM_ERROR_RATE = 0.01
STEPS = ("send", "reduce", "write")


@dataclass
class FrequencyOptions:
    algorithm: str = "auto"              # or one of ALGORITHMS, for every column
    low_distinct_max: int = 1_000_000    # sized to the coordinator's Redis
    low_duplicate_max: int = 1_000_000   # repeated values one function can confirm
    all_values: bool = False             # keep values seen once for near-unique columns too


@dataclass
class ColumnFrequencies:
    name: str
    algorithm: str
    distinct_count: int = 0
    singleton_count: int = 0
    complete: bool = True
    bytes: int = 0

    def as_json(self) -> dict:
        return {"algorithm": self.algorithm, "distinct_count": self.distinct_count,
                "bytes_exchanged": self.bytes}


@dataclass
class _Column:
    k: int
    field: pa.Field
    stats: dict[str, dict]               # partition -> its statistics row
    result: ColumnFrequencies
    spec: dict = field(default_factory=dict)
    omit_singletons: bool = False


def choose(partition_rows: list[dict], table_row: dict, options: FrequencyOptions) -> str:
    """The algorithm suited to the column's data, from partition-level counts alone."""
    distinct_sum = sum(r["distinct_count"] or 0 for r in partition_rows)
    if distinct_sum <= options.low_distinct_max:
        return LOW_DISTINCT
    # a value repeated across partitions is counted once per partition in distinct_sum, once in
    # the table's distinct count (estimated from the KMV sketch); values repeated within a
    # partition account for at most its rows beyond its distinct values
    table_distinct = hashing.kmv_estimate(hashing.kmv_from_bytes(table_row["ndv_sketch"] or b""))
    within = sum(r["row_count"] - r["null_count"] - (r["distinct_count"] or 0)
                 for r in partition_rows)
    repeated = max(0.0, distinct_sum - table_distinct) + within
    return LOW_DUPLICATE if repeated <= options.low_duplicate_max else BINNED


def compute(table_schema: pa.Schema, table_rows: list[dict], partitions: dict[str, pa.Table],
            stats_dirs: dict[str, str], invoker: Invoker, redis_url: str, exchange_root: str,
            out: Store, options: FrequencyOptions,
            progress: Callable[[str, int], None] | None = None) -> dict[str, ColumnFrequencies]:
    """Write `out`/frequencies.parquet for the table; returns each column's outcome.
    `progress(step, index)` is called as each of STEPS starts.
    `partitions` maps a partition to its statistics table, `stats_dirs` to its directory."""
    paths = sorted(partitions)
    by_path = {p: {r["column"]: r for r in partitions[p].to_pylist()} for p in paths}
    schemas = {p: files.data_schema_of(partitions[p]) for p in paths}
    columns = []
    for k, (f, row) in enumerate(zip(table_schema, table_rows)):
        present = {p: by_path[p][f.name] for p in paths if f.name in by_path[p]}
        if ty.kind_of(f.type) == ty.OTHER or not any(r["distinct_count"] for r in present.values()):
            continue
        auto = choose(list(present.values()), row, options)
        algorithm = auto if options.algorithm == "auto" else options.algorithm
        c = _Column(k, f, present, ColumnFrequencies(f.name, algorithm),
                    omit_singletons=auto == LOW_DUPLICATE and not options.all_values)
        c.spec = {"k": k, "name": f.name, "algorithm": algorithm,
                  "keep_once": not c.omit_singletons}
        if algorithm == BINNED:
            c.spec.update(bins=max(1, min(len(paths), BINS_PER_WORKER * invoker.workers)),
                          type=files.encode_schema(pa.schema([f])), **_range(f, row))
        columns.append(c)

    job = Job(redis_url)
    exchange = ObjectStoreExchange(exchange_root, job.id)
    small = RedisExchange(redis_url, job.id)
    base = {"job": job.id, "redis_url": redis_url,
            "exchange": {"kind": "object", "root": exchange_root, "job": job.id},
            "small": {"kind": "redis", "redis_url": redis_url, "job": job.id}}

    def events(action: str, algorithms: tuple[str, ...]) -> list[dict]:
        out_events = []
        for i, p in enumerate(paths):
            specs = [_retyped(c.spec, schemas[p].field(c.field.name), c.field)
                     for c in columns if c.result.algorithm in algorithms and p in c.stats]
            if specs:
                out_events.append({**base, "action": action, "index": i,
                                   "stats_dir": stats_dirs[p], "columns": specs})
        return out_events

    try:
        if progress:
            progress("send", 0)
        sent = invoke_all(invoker, events("freq_send", ALGORITHMS))
        _add_bytes(columns, sent)
        duplicates = [c for c in columns if c.result.algorithm == LOW_DUPLICATE]
        binned = [c for c in columns if c.result.algorithm == BINNED]
        for c in duplicates:
            _candidates(c, exchange, small)
        if progress:
            progress("reduce", 1)
        confirm = events("freq_confirm", (LOW_DUPLICATE,))
        bins = max((c.spec["bins"] for c in binned), default=0)
        reduce_events = [{**base, "action": "freq_reduce", "index": b,
                          "columns": [c.spec for c in binned if b < c.spec["bins"]]}
                         for b in range(bins)]
        results = invoke_all(invoker, confirm + reduce_events)
        confirmed, reduced = results[:len(confirm)], results[len(confirm):]
        _add_bytes(columns, results)
        if progress:
            progress("write", 2)
        _write(out, columns, exchange, client(redis_url, raw=True), job, len(paths),
               confirmed, reduced)
        if progress:
            progress("done", len(STEPS))
    finally:
        exchange.clear()
        small.clear()
        job.finish()
    return {c.field.name: c.result for c in columns}


def _range(f: pa.Field, row: dict) -> dict:
    """Binned integers and temporal values split [min, max] of their integer storage."""
    if ty.kind_of(f.type) not in (ty.INTEGER, ty.TEMPORAL) or row.get("min") is None:
        return {}
    typed = ty.from_text([row["min"], row["max"]], f.type)
    if not pa.types.is_integer(typed.type):
        typed = typed.view(pa.int32() if typed.type.bit_width == 32 else pa.int64())
    low, high = typed.to_pylist()
    return {"low": low, "high": high}


def _retyped(spec: dict, partition_field: pa.Field, table_field: pa.Field) -> dict:
    if partition_field.type == table_field.type:
        return spec
    return {**spec, "retype": [files.encode_schema(pa.schema([partition_field])),
                               files.encode_schema(pa.schema([table_field]))]}


def _add_bytes(columns: list[_Column], results: list[dict]) -> None:
    by_k = {c.k: c for c in columns}
    for r in results:
        for k, n in r["bytes"].items():
            by_k[int(k)].result.bytes += n


def _candidates(c: _Column, exchange: ObjectStoreExchange, small: RedisExchange) -> None:
    """Low-duplicate step 2: every partition's hashes through one Bloom filter; the hashes it
    has (probably) seen before, and those repeated within a partition, are the candidates,
    broadcast through Redis. A partition's values are distinct, so a batch is probed whole
    before it is added; one batch is in memory at a time."""
    bloom = BloomFilter.sized(sum(r["distinct_count"] or 0 for r in c.stats.values()),
                              BLOOM_ERROR_RATE)
    candidates = []
    for batch in itertools.chain.from_iterable(exchange.stream(channel(c.k, "hashes"), 0)):
        hashes = batch["hash"].to_numpy()
        seen = bloom.contains(hashes) | batch["repeated"].to_numpy(zero_copy_only=False)
        candidates.append(hashes[seen])
        bloom.add(hashes)
    unique = np.unique(np.concatenate(candidates)) if candidates else np.empty(0, np.uint64)
    c.result.bytes += small.put(channel(c.k, "candidates"), 0, 0, pa.table({"hash": unique}))


def _write(out: Store, columns: list[_Column], exchange, r, job: Job, senders: int,
           confirmed: list[dict], reduced: list[dict]) -> None:
    """Stream frequencies.parquet, column after column in table order, in row groups of PAGE
    rows of one column, whatever batches the streams deliver: equal frequencies give equal
    files, and a column's lookup reads only its row groups."""
    pending: list[pa.Table] = []
    with out.atomic_output(files.FREQUENCIES) as sink, pq.ParquetWriter(
            sink, schema.FREQUENCIES_SCHEMA, compression="zstd") as writer:
        def flush(final: bool) -> None:
            rows = pa.concat_tables(pending) if pending else None
            pending.clear()
            while rows is not None and (rows.num_rows >= PAGE or final and rows.num_rows):
                writer.write_table(rows.slice(0, PAGE), row_group_size=PAGE)
                rows = rows.slice(PAGE)
            if rows is not None and rows.num_rows:
                pending.append(rows)

        for c in columns:
            for batch in _column_stream(c, exchange, r, job, senders, confirmed, reduced):
                pending.append(pa.table({
                    "column": pa.repeat(pa.scalar(c.field.name), batch.num_rows),
                    "value": batch["value"], "frequency": batch["frequency"]},
                    schema=schema.FREQUENCIES_SCHEMA))
                if sum(t.num_rows for t in pending) >= PAGE:
                    flush(final=False)
            flush(final=True)


def _column_stream(c: _Column, exchange, r, job: Job, senders: int, confirmed: list[dict],
                   reduced: list[dict]) -> Iterator[pa.Table]:
    res, k = c.result, c.k
    if res.algorithm == BINNED:
        res.distinct_count = sum(x["distinct"].get(str(k), 0) for x in reduced)
        res.singleton_count = sum(x["singletons"].get(str(k), 0) for x in reduced)
        stream = merge_sorted(exchange.stream(channel(k, "reduced"), 0))
        yield from (_at_least_twice(t) for t in stream) if c.omit_singletons else stream
        res.complete = not (c.omit_singletons and res.singleton_count)
        return
    key = zset_key(job.id, k)
    staged = [zset_key(job.id, k, i) for i in range(senders)]
    r.zunionstore(key, staged, aggregate="SUM")    # missing keys count as empty
    r.expire(key, JOB_TTL_SECONDS)
    r.delete(*staged)
    in_redis, repeated = r.zcard(key), r.zcount(key, "-inf", -2)
    if res.algorithm == LOW_DISTINCT:
        res.distinct_count, res.singleton_count = in_redis, in_redis - repeated
    else:
        # each candidate reported by m partitions was counted m times in the distinct sum
        reports = sum(x["reports"].get(str(k), 0) for x in confirmed)
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


def recompute(stats_root: str, invoker: Invoker, redis_url: str, out: Store,
              options: FrequencyOptions, columns: list[str] | None = None,
              progress: Callable[[str, int], None] | None = None
              ) -> dict[str, ColumnFrequencies]:
    """Reduce the published version's partition frequencies again (all columns, or
    `columns`) into `out`/frequencies.parquet, e.g. with another algorithm: no data is read."""
    from metastore.reader import TableStatistics
    stats = TableStatistics(stats_root)
    table_schema = files.decode_schema(stats.manifest["schema"])
    wanted = pa.schema([f for f in table_schema if columns is None or f.name in columns])
    rows = {r["column"]: r for r in stats.statistics(columns=wanted.names).to_pylist()}
    partitions = {p: stats.statistics(partition=p) for p in stats.manifest["partitions"]}
    dirs = {p: stats.partition_dir(p).uri for p in partitions}
    return compute(wanted, [rows[n] for n in wanted.names], partitions, dirs, invoker,
                   redis_url, Store(stats_root).uri_of("exchange"), out, options, progress)
