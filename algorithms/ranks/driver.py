"""The coordinator side of the distributed sort (the steps are listed in algorithms.ranks):
samples to splitters, the three steps through the fan-out, and ranks.parquet."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.algorithms.ranks import channel
from lakestats.core import schema
from lakestats.core.settings import Settings
from lakestats.fleet.fanout import Progress, fan_out, results
from lakestats.fleet.invokers import Invoker
from lakestats.fleet.jobs import JobScope
from lakestats.fleet.protocol import RANK_MERGE, RANK_SAMPLE, RANK_SCATTER, RankTask, StepEvent
from lakestats.formats import FormatError, Selection, open_snapshot
from lakestats.metastore import files
from lakestats.metastore.layout import RANKS
from lakestats.metastore.manifest import record_file
from lakestats.metastore.reader import StatisticsNotFound, StatisticsReader

SAMPLES_PER_RANGE = 16
RANGES_PER_WORKER = 4


@dataclass
class RanksReport:
    version: str
    columns: dict[str, dict] = field(default_factory=dict)   # column -> values, bytes, seconds


def compute_ranks(stats_root: str, invoker: Invoker, settings: Settings, columns: list[str],
                  progress: Progress | None = None) -> RanksReport:
    """Ranks of `columns` for the published version, added to the version's ranks.parquet."""
    stats = StatisticsReader(stats_root)
    table_schema = stats.schema()
    unknown = [c for c in columns if c not in table_schema.names]
    if unknown:
        raise StatisticsNotFound(f"no column {', '.join(map(repr, unknown))} in the table")
    partitions = stats.partitions()
    paths = [p["path"] for p in partitions]
    readings = _readings(stats, partitions)
    report = RanksReport(stats.version)
    totals: dict[str, list[int]] = {}
    steps, completed = 3 * len(paths) * len(columns), 0

    def run(scope: JobScope, events: list[StepEvent]) -> list:
        """One step of the sort; progress counts the calls of every step of every column."""
        nonlocal completed
        done = results(fan_out(invoker, scope, events, max_attempts=settings.max_attempts,
                               timeout=settings.timeout, progress=progress and (
                                   lambda n, *_: progress(min(completed + n, steps), steps))))
        completed += len(events)
        return done

    # runs travel through the object store; samples and splitters, small, through Redis
    with JobScope(settings.redis_url, stats.layout) as scope:
        for k, column in enumerate(columns):
            totals[column] = _sort(scope, run, invoker.workers, paths, readings,
                                   stats.manifest.table, k, table_schema.field(column), report)
        _write(stats, scope, columns, totals, table_schema)
    # readers take ranks.parquet once the manifest records it, whole
    record_file(stats.layout, stats.version, RANKS)
    return report


def _readings(stats: StatisticsReader, partitions: list[dict]) -> dict[str, tuple[str, ...]]:
    """How each data file is read (formats.rows), from the table format's snapshot that the
    version describes (a plain directory: its listing): ranks count the rows its statistics
    count. Not one file's rows may be off: a file whose deletes lakestats cannot apply (Iceberg
    equality deletes) has no exact ranks, nor a file that no longer reads as the statistics
    read it (rewritten or removed since)."""
    form, table_uri = stats.manifest.format, stats.manifest.table
    inexact = stats.manifest.inexact
    for p in partitions:
        if p["path"] in inexact:
            raise FormatError(f"{table_uri}: {p['path']}: {inexact[p['path']]}: exact ranks "
                              "and quantiles need every deleted row left out")
    if not partitions:
        return {}
    snapshot = open_snapshot(table_uri, Selection(form, stats.manifest.snapshot))
    files = {f.rel_path: f for f in snapshot.files}
    for p in partitions:
        if p["path"] not in files or files[p["path"]].fingerprint != p["fingerprint"]:
            raise FormatError(f"{table_uri}: {p['path']}: "
                              f"{'gone' if p['path'] not in files else 'changed'} since "
                              f"statistics version {stats.version} (run lakestats compute)")
    return {path: f.reading for path, f in files.items()}


def _sort(scope: JobScope, run, workers: int, paths: list[str],
          readings: dict[str, tuple[str, ...]], table_uri: str, k: int, field_: pa.Field,
          report: RanksReport) -> list[int]:
    """Steps 1-6 for column k; returns each range's count of values."""
    # as many ranges as workers can merge at once, at most one per partition, so that each
    # merge holds about its share of the column
    ranges = max(1, min(len(paths), RANGES_PER_WORKER * workers))
    started = time.monotonic()
    encoded = files.encode_schema(pa.schema([field_]))
    sampled = run(scope, [StepEvent(RANK_SAMPLE, f"{field_.name} {p}", RankTask(
        i, k, encoded, table_uri, p, SAMPLES_PER_RANGE * ranges, readings.get(p, ())))
        for i, p in enumerate(paths)])
    sorted_at = time.monotonic()
    splitters = _splitters(scope.small.get_all(channel(k, "samples"), 0), ranges)
    scope.small.put(channel(k, "splitters"), 0, 0, pa.table({"value": splitters}))
    scattered = run(scope, [StepEvent(RANK_SCATTER, f"{field_.name} {p}", RankTask(i, k, encoded))
                            for i, p in enumerate(paths)])
    scattered_at = time.monotonic()
    merged = run(scope, [StepEvent(RANK_MERGE, f"{field_.name} range {r}", RankTask(r, k, encoded))
                         for r in range(len(splitters) + 1)])
    report.columns[field_.name] = {
        "values": sum(s.values for s in sampled), "ranges": len(merged),
        "bytes_exchanged": sum(x.bytes for x in sampled + scattered + merged),
        "seconds": {"sort_and_sample": round(sorted_at - started, 3),
                    "scatter": round(scattered_at - sorted_at, 3),
                    "merge": round(time.monotonic() - scattered_at, 3)}}
    return [m.values for m in merged]


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


def _write(stats: StatisticsReader, scope: JobScope, columns: list[str],
           totals: dict[str, list[int]], table_schema: pa.Schema) -> None:
    """Stream ranks.parquet, columns in table order, range after range (step 7 adds each
    range's offset). Columns ranked before and not now are copied from the old file. Small
    row groups: rank is sorted, so a lookup's row-group statistics skip all but one."""
    kept = [c for c in stats.ranked_columns() if c not in totals]
    order = [c for c in table_schema.names if c in totals or c in kept]
    old = stats.version_dir().open_parquet(RANKS) if kept else None
    metadata = {schema.RANKED_COLUMNS_KEY: json.dumps(order)}
    with stats.version_dir().parquet_writer(
            RANKS, schema.RANKS_SCHEMA.with_metadata(metadata), compression="lz4",
            use_dictionary=["column"]) as writer:
        for column in order:
            if column in totals:
                offsets = np.cumsum([0] + totals[column][:-1])
                for r, offset in enumerate(offsets):
                    for part in scope.objects.get_all(channel(columns.index(column), "ranked"),
                                                      r):
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
