"""Exact ranks by distributed sort, in a fixed number of steps (seed 003), and ranks.parquet.

 1. every worker sorts its partition's column into (value, count) runs     rank_sample
 2-4. the coordinator merges the workers' equi-depth samples and cuts the value range into
    ranges holding about the same number of values, a few per worker. (The
    seed reduces equal-width histograms here; equi-depth samples balance skewed data and work
    for strings, which have no width. A value repeated for most rows is a single run, so heavy
    duplicates cannot unbalance memory.)
 5. every worker scatters its runs by range through the exchange            rank_scatter
 6. every range owner merges and sorts its slices                            rank_merge
 7. range totals give each range's offset; local ranks become global ones as the coordinator
    streams the ranges, in order, into ranks.parquet
 8. quantiles are lookups in ranks.parquet (metastore.reader)

The coordinator holds the samples and one range's ranks at a time, never a whole column.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from functions.ranks import channel
from metastore import files, schema
from metastore.reader import TableStatistics
from metastore.store import Store
from monostore.exchange import ObjectStoreExchange, RedisExchange
from monostore.invokers import Invoker, invoke_all
from monostore.jobs import Job

SAMPLES_PER_RANGE = 16
RANGES_PER_WORKER = 4


@dataclass
class RanksReport:
    version: str
    columns: dict[str, dict] = field(default_factory=dict)   # column -> values, bytes, seconds


def compute_ranks(stats_root: str, invoker: Invoker, redis_url: str, columns: list[str],
                  progress: Callable[[int, int], None] | None = None) -> RanksReport:
    """Ranks of `columns` for the published version, added to the version's ranks.parquet."""
    stats = TableStatistics(stats_root)
    manifest = stats.manifest
    table_schema = files.decode_schema(manifest["schema"])
    unknown = [c for c in columns if c not in table_schema.names]
    if unknown:
        raise KeyError(f"no column {', '.join(map(repr, unknown))} in the table")
    paths = sorted(manifest["partitions"])
    report = RanksReport(stats.version)
    job = Job(redis_url)
    root = Store(stats_root).uri_of("exchange")
    # runs travel through the object store; samples and splitters, small, through Redis
    exchange = ObjectStoreExchange(root, job.id)
    small = RedisExchange(redis_url, job.id)
    specs = {"exchange": {"kind": "object", "root": root, "job": job.id},
             "small": {"kind": "redis", "redis_url": redis_url, "job": job.id}}
    totals: dict[str, list[int]] = {}
    steps, done = 3 * len(paths) * len(columns), 0

    def step_done() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(min(done, steps), steps)
    try:
        for k, column in enumerate(columns):
            totals[column] = _sort(invoker, exchange, small, specs, paths, manifest["table"], k,
                                   table_schema.field(column), report, step_done)
        _write(stats, exchange, columns, totals, table_schema)
    finally:
        exchange.clear()
        small.clear()
        job.finish()
    return report


def _sort(invoker, exchange, small, specs, paths, table_uri, k, field_, report,
          step_done) -> list[int]:
    # as many ranges as workers can merge at once (the seed's one per function), at most one per
    # partition, so that each merge holds about its share of the column
    ranges = max(1, min(len(paths), RANGES_PER_WORKER * invoker.workers))
    started = time.monotonic()
    base = {**specs, "column_index": k, "table": table_uri,
            "field": files.encode_schema(pa.schema([field_]))}
    sampled = invoke_all(invoker, [{**base, "action": "rank_sample", "index": i, "rel_path": p,
                                    "samples": SAMPLES_PER_RANGE * ranges}
                                   for i, p in enumerate(paths)], progress=step_done)
    sorted_at = time.monotonic()
    splitters = _splitters(small.get_all(channel(base, "samples"), 0), ranges)
    small.put(channel(base, "splitters"), 0, 0, pa.table({"value": splitters}))
    scattered = invoke_all(invoker, [{**base, "action": "rank_scatter", "index": i}
                                     for i in range(len(paths))], progress=step_done)
    scattered_at = time.monotonic()
    merged = invoke_all(invoker, [{**base, "action": "rank_merge", "index": r}
                                  for r in range(len(splitters) + 1)], progress=step_done)
    report.columns[field_.name] = {
        "values": sum(s["values"] for s in sampled), "ranges": len(merged),
        "bytes_exchanged": sum(x["bytes"] for x in sampled + scattered + merged),
        "seconds": {"sort_and_sample": round(sorted_at - started, 3),
                    "scatter": round(scattered_at - sorted_at, 3),
                    "merge": round(time.monotonic() - scattered_at, 3)}}
    return [m["values"] for m in merged]


def _splitters(samples: list[pa.Table], ranges: int) -> pa.Array:
    """Values cutting the sampled weight into `ranges` equal parts (fewer when one value spans
    several cuts)."""
    if not samples or ranges < 2:
        return pa.array([], samples[0]["value"].type if samples else pa.null())
    table = pa.concat_tables(samples)
    table = table.take(pc.sort_indices(table["value"]))
    cumulative = np.cumsum(table["weight"].to_numpy())
    cuts = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, ranges) / ranges)
    picked = table["value"].take(np.minimum(cuts, table.num_rows - 1)).combine_chunks()
    return pc.unique(picked)   # sorted input: unique keeps the order


def _write(stats: TableStatistics, exchange, columns: list[str], totals: dict[str, list[int]],
           table_schema: pa.Schema) -> None:
    """Stream ranks.parquet, columns in table order, range after range (step 7 adds each
    range's offset). Columns ranked before and not now are copied from the old file. Small
    row groups: rank is sorted, so a lookup's row-group statistics skip all but one."""
    kept = [c for c in stats.ranked_columns() if c not in totals]
    order = [c for c in table_schema.names if c in totals or c in kept]
    old = stats.version_dir().open_parquet(files.RANKS) if kept else None
    metadata = {schema.RANKED_COLUMNS_KEY: json.dumps(order)}
    with stats.version_dir().atomic_output(files.RANKS) as out, pq.ParquetWriter(
            out, schema.RANKS_SCHEMA.with_metadata(metadata), compression="lz4",
            use_dictionary=["column"]) as writer:
        for column in order:
            if column in totals:
                offsets = np.cumsum([0] + totals[column][:-1])
                for r, offset in enumerate(offsets):
                    for part in exchange.get_all(channel({"column_index": columns.index(column)},
                                                         "ranked"), r):
                        writer.write_table(_ranks(column, part, offset),
                                           row_group_size=schema.RANKS_ROW_GROUP)
            else:
                for batch in old.iter_batches(batch_size=schema.RANKS_ROW_GROUP):
                    rows = pa.Table.from_batches([batch])
                    rows = rows.filter(pc.equal(rows["column"], column))
                    if rows.num_rows:
                        writer.write_table(rows.replace_schema_metadata(None),
                                           row_group_size=schema.RANKS_ROW_GROUP)


def _ranks(column: str, part: pa.Table, offset: int) -> pa.Table:
    rank = part["smaller"].to_numpy() + offset + 1              # SQL RANK(): 1 + smaller values
    count = part["count"].to_numpy()
    return pa.table({"column": pa.repeat(pa.scalar(column, pa.string()), part.num_rows),
                     "value": part["value"], "rank": rank, "count": count,
                     "last": rank + count - 1}, schema=schema.RANKS_SCHEMA)
