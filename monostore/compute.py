"""The compute job: plan the partitions to (re)compute, run them through the fan-out, reduce
to table level and publish a new version.

Incremental by fingerprint (size and ETag, or mtime): a data file whose statistics exist is
never read again. A new version starts from the previous one: its partition index minus the
partitions that left plus those that came, its histograms plus the new partitions' minus the
removed ones', its sketches merged with the new partitions', its frequency lists merged,
recomputed or carried (algorithms.frequencies.delta), its value index a layer over the previous
one (algorithms.frequencies.value_index). A version's files are written into its
own directory and published by one swap of LATEST; a failure on the way publishes nothing.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from lakestats.algorithms.frequencies import delta, value_index
from lakestats.algorithms.frequencies import driver as frequencies
from lakestats.algorithms.partitions import reduce, user_statistics
from lakestats.algorithms.partitions.digest import Digests
from lakestats.algorithms.partitions.driver import compute_partitions, fold_sources
from lakestats.core import histogram as hist
from lakestats.core import types as ty
from lakestats.core import udf
from lakestats.core.settings import Settings
from lakestats.fleet.fanout import Progress
from lakestats.fleet.invokers import Invoker
from lakestats.formats import Selection, Snapshot, manifest_statistics, open_snapshot
from lakestats.metastore import files, histograms, index, membership
from lakestats.metastore.layout import HISTOGRAMS, STATISTICS, Layout
from lakestats.metastore.manifest import Manifest, point_snapshot, read_manifest, write_manifest
from lakestats.metastore.store import DataFile, Store
from lakestats.monostore import publish
from lakestats.monostore.report import ComputeFailed, NoSuchTable, Report

# added partitions indexed at once: memory holds one batch's statistics, value sets and dicts
INDEX_BATCH = 1_000


def table_exists(table_uri: str, create: bool = False, selection: Selection = Selection()
                 ) -> bool:
    """Whether anything is at the table's path (a catalog's table is where the catalog says).
    Nothing there is an error unless `create`: a compute would publish an empty table at a
    mistyped path, and write its statistics there."""
    if selection.catalog or Store(table_uri).root_exists():
        return True
    if not create:
        raise NoSuchTable(f"{table_uri}: no such table directory (a mistyped path?); nothing "
                          "written (--create publishes an empty version for a table yet to come)")
    return False


@dataclass
class _Previous:
    """What a new version starts from: the published one, when its partition index and
    settings let it."""
    layout: Layout
    manifest: Manifest
    schema: pa.Schema
    index: pa.Table
    entries: dict[str, dict]

    @functools.cached_property
    def statistics(self) -> pa.Table:
        """The version's statistics.parquet (sketches included), read once."""
        return self.directory.read_parquet(STATISTICS)

    @property
    def directory(self) -> Store:
        return self.layout.version(self.manifest.version)

    @classmethod
    def of(cls, layout: Layout, manifest: Manifest | None) -> _Previous | None:
        if manifest is None or manifest.partition_count is None:
            return None                  # none, or written before the partition index
        directory = layout.version(manifest.version)
        if any(directory.size(name) != size for name, size in manifest.files.items()):
            return None                  # a file of it was truncated or lost: from scratch
        schema = files.decode_schema(manifest.schema)
        table = index.read(directory, schema)
        return cls(layout, manifest, schema, table, index.entries(table))


def compute(table_uri: str, invoker: Invoker, settings: Settings, *,
            stats_root: str | None = None, progress: Progress | None = None,
            notice: Callable[[str], None] | None = None,
            deadline: float | None = None, selection: Selection = Selection(),
            create: bool = False, checkpoint: Callable[[str], None] | None = None) -> Report:
    """A new version of the statistics of the table's `selection` (its format and snapshot;
    by default the current snapshot of the format found), computing only what changed. Needs
    settings.redis_url. Holds the table's compute lock (`notice` hears why it waits, and that
    the table holds no data file); gives up before the table-level work, or before
    publication, once past `deadline` (time.monotonic). A path with nothing there raises
    NoSuchTable before anything is written, unless `create`. `checkpoint` hears its moments:
    "listing" (the lock held, before the table is listed), "table-level", "publish" (the
    version written, before the LATEST swap) and "published"."""
    started = time.monotonic()
    exists = table_exists(table_uri, create, selection)
    udf.load(settings.partition.statistics)      # a plugin that does not load fails here
    layout = Layout.of_table(table_uri, stats_root)
    at = checkpoint or (lambda moment: None)
    with publish.computing(layout, settings.redis_url, settings.lock_wait, notice,
                           deadline) as lease:
        at("listing")
        snapshot = open_snapshot(table_uri, selection) if exists else \
            Snapshot("parquet", None, [])
        if not snapshot.files and notice:
            notice(f"warning: {table_uri} holds no data file: its statistics describe an "
                   "empty table")
        digests = Digests(layout.scratch(f"digests-{uuid.uuid4().hex[:12]}"))
        try:
            return _compute(table_uri, layout, invoker, settings, progress, lease, started,
                            snapshot, at, digests)
        finally:
            digests.clear()


def _compute(table_uri: str, layout: Layout, invoker: Invoker, settings: Settings,
             progress: Progress | None, lease: publish.Lease, started: float,
             snapshot: Snapshot, at: Callable[[str], None], digests: Digests) -> Report:
    report = Report(table_uri, snapshot=snapshot.describe())
    data_files = {f.rel_path: f for f in snapshot.files}
    manifest = read_manifest(layout)
    # other partition settings: every partition is computed again
    resettled = manifest is not None and manifest.settings.get("partition") \
        != settings.recorded()["partition"]
    previous = None if resettled else _Previous.of(layout, manifest)
    published = {p: e["fingerprint"] for p, e in (previous.entries if previous else {}).items()}
    changed = [f for f in data_files.values()
               if resettled or published.get(f.rel_path) != f.fingerprint]
    kept = [] if resettled else files.reusable(layout, changed, len(published))
    todo = [f for f, ok in itertools.zip_longest(changed, kept) if not ok]
    report.computed, report.reused = len(todo), len(data_files) - len(todo)
    report.removed = len(set(published) - set(data_files))
    report.added = len(set(data_files) - set(published))
    report.changed = sum(published.get(p, f.fingerprint) != f.fingerprint
                         for p, f in data_files.items())
    stale = previous and previous.manifest.stale
    if previous and published == {p: f.fingerprint for p, f in data_files.items()} \
            and not previous.manifest.missing and not (settings.exact and stale) \
            and previous.manifest.settings == settings.recorded():
        report.version = previous.manifest.version
        report.row_count, report.exact = previous.manifest.row_count, not stale
        report.seconds = time.monotonic() - started
        if snapshot.id not in (None, previous.manifest.snapshot):
            _describe_snapshot(layout, snapshot, report.version)   # same files, new snapshot
        return report                            # the published version is current

    report.failed, report.retries = compute_partitions(   # neighbours share packs
        invoker, Store(table_uri).uri, layout, sorted(todo, key=lambda f: f.rel_path),
        settings, progress, digests=digests)
    if report.failed and not settings.allow_partial:
        report.seconds = time.monotonic() - started
        first = next(iter(report.failed.values()))
        raise ComputeFailed(report, f"{len(report.failed)} of {len(data_files)} files failed "
                                    f"(first: {first}); no table version published "
                                    "(--allow-partial publishes the others)")
    at("table-level")
    lease.check("the table-level statistics")
    good = {p: f for p, f in data_files.items() if p not in report.failed}
    while True:
        report.statistic_failures, report.frequencies = [], {}
        try:
            _table_version(layout, good, previous, report, settings, invoker, progress, lease,
                           snapshot.schema, at, digests)
            break
        except (OSError, pa.ArrowException) as e:   # what the version wrote is gone
            if previous is None:
                raise ComputeFailed(report, f"the table-level statistics failed ({e}); "
                                            "no table version published") from e
            previous = None         # the version it started from does not read: from scratch
            report.retries += 1
    if report.published:
        _describe_snapshot(layout, snapshot, report.version)
    report.seconds = time.monotonic() - started
    return report


def _describe_snapshot(layout: Layout, snapshot: Snapshot, version: str) -> None:
    """Point the format's snapshot at the version; an Iceberg snapshot's manifest statistics
    come first, so that a snapshot found has them."""
    if snapshot.id is None:
        return
    if snapshot.manifests is not None:
        manifest_statistics.refresh(layout, version, snapshot.manifests)
    point_snapshot(layout, snapshot.id, version)


def _frequencies(layout: Layout, previous: _Previous | None, new_index: pa.Table,
                 table_schema: pa.Schema, rows: list[dict],
                 added: list[tuple[DataFile, pa.Schema]], removed: set[str],
                 good: dict[str, DataFile], version: str, report: Report, settings: Settings,
                 invoker: Invoker, progress: Progress | None, digests: Digests
                 ) -> dict[str, dict]:
    """The version's frequencies.parquet, and its columns' distinct counts in `rows`: merged
    with the change, recomputed, or carried from the previous version (algorithms.frequencies
    .delta). Returns where each column's list lives."""
    before = {}
    if previous:
        before = {r["column"]: r for r in previous.statistics.drop_columns(
            ["bloom_filter"]).to_pylist()}
    plan = delta.plan(previous.manifest if previous else None, before, new_index, table_schema,
                      rows, added, delta.removed_partitions(previous.index, previous.schema,
                                                           removed) if previous else {},
                      layout, version, settings)
    exact = frequencies.compute(
        table_schema, rows, new_index,
        lambda p: layout.partition(p, good[p].fingerprint).uri,
        invoker, settings, layout, layout.version(version), progress, plan.recompute,
        plan.merged, lambda p: digests.frequencies(p, good[p].fingerprint))
    for row in rows:
        name = row["column"]
        if name in exact:
            c = exact[name]
            row.update(distinct_count=c.distinct_count, distinct_count_exact=True,
                       singleton_count=c.singleton_count, frequencies_complete=c.complete,
                       frequency_algorithm=c.algorithm)
            report.frequencies[c.name] = c.as_json()
        elif name in plan.lists and name not in plan.recompute:      # carried
            row.update({k: before[name][k] for k in (
                "distinct_count", "distinct_count_exact", "singleton_count",
                "frequencies_complete", "frequency_algorithm")})
            if name in plan.stale:
                row.update(distinct_count=delta.estimated_distinct(row),
                           distinct_count_exact=False, exact_as_of=plan.stale[name])
        elif ty.kind_of(table_schema.field(name).type) != ty.OTHER:
            row.update(distinct_count=0, distinct_count_exact=True, singleton_count=0,
                       frequencies_complete=True)            # no values at all
    return plan.lists


def _statistics(layout: Layout, data_files: list[DataFile], digests: Digests
                ) -> tuple[list[pa.Table], dict[str, dict[str, pa.Table]]]:
    """Partitions' statistics without sketches, and the few-valued columns' frequencies that
    came with them: from their packs' digests, else from their own small files, read side by
    side."""
    held = digests.read(data_files)
    with ThreadPoolExecutor(16) as pool:
        read = dict(pool.map(lambda f: (f.rel_path, reduce.statistics(
            layout.partition(f.rel_path, f.fingerprint))),
            [f for f in data_files if f.rel_path not in held]))
    return [held[f.rel_path][0] if f.rel_path in held else read[f.rel_path]
            for f in data_files], {path: few for path, (_, few) in held.items()}


def _summarize(layout: Layout, new_index: pa.Table, table_schema: pa.Schema,
               good: dict[str, DataFile], added: list[DataFile], removed: set[str],
               previous: _Previous | None, settings: Settings, invoker: Invoker,
               progress: Progress | None, digests: Digests) -> tuple[reduce.TableStats, bool]:
    """The table-level statistics, and whether its sketches still hold removed partitions'
    values. With a previous version, its sketches and histograms take the added partitions'
    and give back the removed ones' (histograms exactly, sketches not: they cannot be taken
    apart); without one, under --exact, or when a histogram's grid must change, every
    partition's are folded anew; so are they when a column's time unit changed (the previous
    version's histogram counts another unit's steps, or it kept none)."""
    max_bins = settings.partition.max_bins
    stale = bool(previous and (removed or previous.manifest.sketches_stale))
    if previous and not (settings.exact and stale) and not reduce.units_differ(
            previous.index, previous.schema, table_schema):
        base = (previous.statistics, previous.directory.read_parquet(HISTOGRAMS))
        gone = [layout.partition(p, previous.entries[p]["fingerprint"]).read_parquet(HISTOGRAMS)
                for p in sorted(removed)]
        try:
            return reduce.reduce(new_index, table_schema, max_bins, fold_sources(
                added, table_schema, invoker, layout, settings, progress, digests),
                base, gone), stale
        except hist.GridChanged:
            pass
    every = [f for _, f in sorted(good.items())]
    return reduce.reduce(new_index, table_schema, max_bins,
                         fold_sources(every, table_schema, invoker, layout, settings,
                                      progress, digests)), False


def _index(layout: Layout, version: str, previous: _Previous | None, removed: set[str],
           added: list[DataFile], settings: Settings, report: Report,
           format_schema: pa.Schema | None, digests: Digests
           ) -> tuple[pa.Table, pa.Schema, list[tuple[DataFile, pa.Schema]]]:
    """The version's partition index and table schema, and the added partitions' schemas;
    the user-defined statistics that failed on them go to the report. Added partitions are
    read INDEX_BATCH at a time, so that memory holds one batch's statistics whatever the
    number of partitions."""
    plugins = {s.name: s.plugin for s in udf.load(settings.partition.statistics)}
    new_index = index.without(previous.index, removed) if previous else None
    index_schema = previous.schema if previous else None
    known = index.schemas(new_index) if previous else []
    added_schemas, pack = [], membership.BloomPack(version)
    for start in range(0, max(len(added), 1), INDEX_BATCH):
        batch = added[start:start + INDEX_BATCH]
        read, few = _statistics(layout, batch, digests)
        stats = list(zip(batch, read))
        report.statistic_failures += [
            f"statistic {name} (plugin {plugins.get(name, '?')}) failed on {f.rel_path}, "
            f"column {column!r}: {error}"
            for f, s in stats for name, failed in files.statistic_errors(s).items()
            for column, error in failed.items()]
        schemas = [(f, files.data_schema_of(s)) for f, s in stats]
        added_schemas += schemas
        known += [(f.rel_path, s) for f, s in schemas]
        table_schema = reduce.table_schema(known)
        if format_schema is not None:
            # the format's columns, in its order: files may hold more (dropped) or fewer (a
            # column no file holds yet, or an empty table's: its rows are nulls)
            reconciled = dict(zip(table_schema.names, table_schema))
            table_schema = pa.schema([reconciled.get(f.name, f) for f in format_schema])
        if not batch and index_schema is not None and table_schema.equals(index_schema):
            break                       # nothing came and no column left: the rows as they are
        retyped = index.retyped_types([(f.rel_path, s) for f, s in schemas], table_schema)
        members = membership.collect(layout, stats, settings.partition.bloom_min_distinct, pack,
                                     retyped, few)
        try:            # a file's values the table's type of the column cannot hold
            built = index.build(stats, table_schema, members)
            new_index = index.combine(new_index, index_schema, built, table_schema)
        except ValueError as e:         # Arrow's ArrowInvalid among them
            raise reduce.unfitting(known, table_schema, e) from e
        index_schema = table_schema
    pack.write(layout)
    return new_index, index_schema, added_schemas


def _table_version(layout: Layout, good: dict[str, DataFile], previous: _Previous | None,
                   report: Report, settings: Settings, invoker: Invoker,
                   progress: Progress | None, lease: publish.Lease,
                   format_schema: pa.Schema | None, at: Callable[[str], None],
                   digests: Digests) -> None:
    kept = previous.entries if previous else {}
    added = [f for p, f in sorted(good.items()) if kept.get(p, {}).get("fingerprint")
             != f.fingerprint]
    removed = {p for p, e in kept.items()
               if p not in good or good[p].fingerprint != e["fingerprint"]}
    version = publish.allocate(layout, settings.redis_url)
    out = layout.version(version)
    try:
        new_index, table_schema, added_schemas = _index(layout, version, previous, removed,
                                                        added, settings, report, format_schema,
                                                        digests)
        table_stats, sketches_stale = _summarize(layout, new_index, table_schema, good, added,
                                                 removed, previous, settings, invoker, progress,
                                                 digests)
        rows = table_stats.statistics.to_pylist()
        lists = _frequencies(layout, previous, new_index, table_stats.schema, rows,
                             added_schemas, removed, good, version, report, settings, invoker,
                             progress, digests)
        plugins = udf.load(settings.partition.statistics)
        plugin_rows, plugin_errors = user_statistics.reduce(
            plugins, table_stats.schema, new_index, previous and user_statistics.Previous(
                previous.statistics, previous.index, previous.schema,
                {f.rel_path for f in added}, removed))
        for row, extra in zip(rows, plugin_rows):
            row.update(extra)
        indexed = value_index.columns(settings.value_index, rows)
        layers = value_index.build(
            out, version, indexed, new_index, table_stats.schema,
            lambda p: layout.partition(p, good[p].fingerprint),
            # a column whose type widened: the previous layers' text is the narrower type's
            previous and not index.retyped([("", previous.schema)], table_stats.schema)
            and (layout, previous.manifest), {f.rel_path for f in added}, removed,
            whole=settings.exact) if indexed else []
        statistics = files.statistics_table(rows, table_stats.schema, table_stats.row_count,
                                            plugins, plugin_errors)
        with ThreadPoolExecutor(3) as pool:      # side by side: Parquet writes release the GIL
            for job in [pool.submit(index.write, out, new_index),
                        pool.submit(histograms.write, out, table_stats.histograms),
                        pool.submit(files.write_statistics, out, statistics,
                                    files.STATISTICS_ROW_GROUP)]:
                job.result()
        written = write_manifest(layout, Manifest(   # which records every file's size itself
            version=version, created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            table=report.table, row_count=table_stats.row_count,
            partition_count=new_index.num_rows, schema=files.encode_schema(table_stats.schema),
            missing=dict(report.failed), settings=settings.recorded(), **report.snapshot,
            frequency_lists=lists, sketches_stale=sketches_stale, value_index=indexed,
            value_index_layers=layers))
        at("publish")
        published, other = publish.swap(layout, settings.redis_url, version, lease)
    except BaseException:
        out.delete_dir()                         # never published: nothing refers to it
        with contextlib.suppress(Exception):     # the first failure is the one to report
            publish.release(layout, settings.redis_url, version)
        raise
    if not published:                            # a newer version won meanwhile
        out.delete_dir()
        report.version = other
        return
    at("published")
    report.version, report.published, report.row_count = version, True, table_stats.row_count
    report.exact = not written.stale
    # partition statistics of files since changed or removed are no longer referenced
    for path in removed:
        layout.partition(path, kept[path]["fingerprint"]).delete_dir()
