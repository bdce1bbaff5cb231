"""The compute job: plan the partitions to (re)compute, run them through the fan-out, reduce
to table level and publish a new version.

Incremental by fingerprint (size and ETag, or mtime): a data file whose statistics exist is
never read again. A version's files are written into its own directory and published by one
swap of LATEST; a failure on the way publishes nothing.
"""
from __future__ import annotations

import contextlib
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from algorithms.frequencies import driver as frequencies
from algorithms.partitions import reduce
from algorithms.partitions.driver import compute_partitions
from core import types as ty
from core.settings import Settings
from fleet.fanout import Progress
from fleet.invokers import Invoker
from fleet.windows import reduction_started
from metastore import files
from metastore.layout import HISTOGRAMS, STATISTICS, Layout
from metastore.manifest import read_manifest, write_manifest
from metastore.store import DataFile, Store
from monostore import publish


@dataclass
class Report:
    table: str
    version: str | None = None
    published: bool = False
    row_count: int = 0
    computed: int = 0
    reused: int = 0
    removed: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    retries: int = 0
    frequencies: dict[str, dict] = field(default_factory=dict)   # column -> algorithm, bytes
    seconds: float = 0.0

    def as_json(self) -> dict:
        return {"table": self.table, "version": self.version, "published": self.published,
                "row_count": self.row_count, "computed": self.computed, "reused": self.reused,
                "removed": self.removed, "failed": len(self.failed),
                "failures": self.failed, "retries": self.retries,
                "frequencies": self.frequencies, "seconds": round(self.seconds, 3)}


class ComputeFailed(Exception):
    def __init__(self, report: Report, reason: str):
        super().__init__(reason)
        self.report = report


def compute(table_uri: str, invoker: Invoker, settings: Settings, *,
            stats_root: str | None = None, progress: Progress | None = None) -> Report:
    """A new version of the table's statistics, computing only what changed. Needs
    settings.redis_url."""
    started = time.monotonic()
    layout = Layout.of_table(table_uri, stats_root)
    report = Report(table_uri)
    data_files = {f.rel_path: f for f in Store(table_uri).list_files()}
    previous = read_manifest(layout)
    published = {p: e["fingerprint"] for p, e in (previous or {}).get("partitions", {}).items()}
    recorded = settings.recorded()
    resettled = previous is not None and previous.get("settings", {}).get("partition") \
        != recorded["partition"]
    todo = [f for f in data_files.values() if resettled or (
        published.get(f.rel_path) != f.fingerprint
        and not layout.partition(f.rel_path, f.fingerprint).exists(STATISTICS))]
    report.computed, report.reused = len(todo), len(data_files) - len(todo)
    report.removed = len(set(published) - set(data_files))
    if previous and not todo and published.keys() == data_files.keys() \
            and not previous.get("missing") and previous.get("settings") == recorded:
        report.version, report.row_count = previous["version"], previous["row_count"]
        report.seconds = time.monotonic() - started
        return report                            # the published version is current

    # partition statistics are read while the workers run: reused ones at once, the others as
    # they finish, so the table-level reduction starts with everything in memory
    loaded: dict[str, Future] = {}
    with ThreadPoolExecutor(8) as loader:
        def load(f: DataFile) -> None:
            loaded[f.rel_path] = loader.submit(
                reduce.load, f.rel_path, layout.partition(f.rel_path, f.fingerprint))

        computing = {f.rel_path for f in todo}
        for f in data_files.values():
            if f.rel_path not in computing:
                load(f)
        report.failed, report.retries = compute_partitions(
            invoker, Store(table_uri).uri, layout, todo, settings, progress, on_done=load)
        if report.failed and not settings.allow_partial:
            report.seconds = time.monotonic() - started
            first = next(iter(report.failed.values()))
            raise ComputeFailed(report, f"{len(report.failed)} of {len(data_files)} files failed "
                                        f"(first: {first}); no table version published "
                                        "(--allow-partial publishes the others)")
        good = {p: f for p, f in data_files.items() if p not in report.failed}
        parts = [loaded[p].result() for p in sorted(good)]
    _table_version(layout, good, parts, report, settings, invoker, progress)
    report.seconds = time.monotonic() - started
    return report


def reduce_table(table_uri: str, invoker: Invoker, settings: Settings) -> Report:
    """A reduction that an event's window asked for: changes arriving from now on open the
    next window, as this compute may not see them."""
    reduction_started(settings.redis_url, table_uri)
    return compute(table_uri, invoker, settings)


def _table_version(layout: Layout, good: dict[str, DataFile],
                   parts: list[reduce.PartitionStatistics], report: Report, settings: Settings,
                   invoker: Invoker, progress: Progress | None) -> None:
    row_counts = {p.rel_path: files.row_count_of(p.statistics) for p in parts}
    table_stats = reduce.reduce(parts, row_counts, settings.partition.max_bins)
    version = publish.allocate(layout, settings.redis_url)
    out = layout.version(version)
    try:
        rows = table_stats.statistics.to_pylist()
        exact = frequencies.compute(
            table_stats.schema, rows, {p.rel_path: p.statistics for p in parts},
            {p: layout.partition(p, f.fingerprint).uri for p, f in good.items()},
            invoker, settings, layout, out, progress)
        for row in rows:
            if row["column"] in exact:
                c = exact[row["column"]]
                row.update(distinct_count=c.distinct_count, distinct_count_exact=True,
                           singleton_count=c.singleton_count, frequencies_complete=c.complete,
                           frequency_algorithm=c.algorithm)
                report.frequencies[c.name] = c.as_json()
            elif ty.kind_of(table_stats.schema.field(row["column"]).type) != ty.OTHER:
                row.update(distinct_count=0, distinct_count_exact=True, singleton_count=0,
                           frequencies_complete=True)            # no values at all
        statistics = files.statistics_table(rows, table_stats.schema, table_stats.row_count)
        out.write_parquet(table_stats.histograms, HISTOGRAMS)
        out.write_parquet(statistics, STATISTICS)
        write_manifest(layout, {
            "version": version, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "table": report.table, "row_count": table_stats.row_count,
            "schema": files.encode_schema(table_stats.schema),
            "partitions": {p: {"size": f.size, "etag": f.etag, "fingerprint": f.fingerprint,
                               "partition_values": f.partition_values,
                               "row_count": row_counts[p]} for p, f in good.items()},
            "missing": dict(report.failed),
            "settings": settings.recorded(),
        })
        published, other = publish.swap(layout, settings.redis_url, version)
    except BaseException:
        out.delete_dir()                         # never published: nothing refers to it
        with contextlib.suppress(Exception):     # the first failure is the one to report
            publish.release(layout, settings.redis_url, version)
        raise
    if not published:                            # a newer version won meanwhile
        out.delete_dir()
        report.version = other
        return
    report.version, report.published, report.row_count = version, True, table_stats.row_count
    # partition statistics of files since changed or removed are no longer referenced
    replaced = read_manifest(layout, other) if other else None
    for path, entry in (replaced or {}).get("partitions", {}).items():
        if path not in good or good[path].fingerprint != entry["fingerprint"]:
            layout.partition(path, entry["fingerprint"]).delete_dir()
