"""The worker side of partition statistics: a data file's statistics into its directory."""
from __future__ import annotations

import pyarrow as pa

from lakestats.algorithms.partitions import digest, kernel
from lakestats.algorithms.partitions.fold import Folds, sources
from lakestats.core.settings import PartitionSettings
from lakestats.fleet.exchange import for_event
from lakestats.fleet.protocol import (FOLD_HISTOGRAMS, FOLD_SKETCHES, PARTITION_STATISTICS,
                                      FoldResult, FoldTask, PackResult, PackTask,
                                      PartitionResult, PartitionTask, StepEvent)
from lakestats.formats import hive
from lakestats.metastore import files
from lakestats.metastore.layout import STATISTICS, Layout
from lakestats.metastore.reader import StatisticsNotFound, StatisticsReader
from lakestats.metastore.store import Store


def partition_statistics(event: StepEvent) -> PartitionResult:
    """Bad data fails the partition for good (status failed, not retried); other errors
    raise, and the fan-out retries them."""
    return _statistics(event.task)[0]


def _statistics(task: PartitionTask) -> tuple[PartitionResult, tuple | None]:
    """The result, and the file's statistics as written, its frequencies and histograms
    (what its pack's digest is made of; None when it failed)."""
    settings = PartitionSettings(task.max_bins, task.bloom_min_distinct, task.statistics,
                                 task.range_set_size)
    try:
        stats = kernel.compute(Store(task.table), task.rel_path, settings, task.reading)
    except kernel.PartitionError as e:
        return PartitionResult(task.rel_path, task.fingerprint, "failed", error=str(e)), None
    written = kernel.write(stats, Store(task.stats_dir))
    return PartitionResult(task.rel_path, task.fingerprint, "ok", row_count=stats.row_count), \
        (written, stats.frequencies, stats.binned)


def partition_pack(event: StepEvent) -> PackResult:
    """The statistics of several small files, one after another, each as partition_statistics
    computes it alone, and then their digest. A file whose error is not bad data is handed
    back (status "retry"), for the coordinator to run alone, with its own retries: one file's
    trouble never fails the others of its pack."""
    task: PackTask = event.task
    results = []
    digested = digest.Builder(task.digest, task.files[0].bloom_min_distinct,
                              task.files[0].max_bins) if task.digest else None
    for one in task.files:
        try:
            result, tables = _statistics(one)
        except Exception as e:  # noqa: BLE001 - retried alone, where it fails alone
            result, tables = PartitionResult(one.rel_path, one.fingerprint, "retry",
                                             error=f"{type(e).__name__}: {e}"), None
        results.append(result)
        if digested and tables is not None:
            digested.add(one.rel_path, one.fingerprint, one.stats_dir, *tables)
    if digested:
        digested.write()
    return PackResult(results)


def fold(event: StepEvent) -> FoldResult:
    """A pack of partitions' sketches and histograms folded here, for the coordinator to
    fold the packs' partials: the reads of a table's many small statistics files spread over
    the workers."""
    task: FoldTask = event.task
    table = files.decode_schema(task.table)
    folded = Folds(table, task.max_bins, sources([Store(d) for d in task.stats_dirs],
                                                 len(table)))
    sketches, histograms = folded.partial()
    exchange, _ = for_event(event)
    return FoldResult(exchange.put(FOLD_SKETCHES, task.index, 0, sketches)
                      + exchange.put(FOLD_HISTOGRAMS, task.index, 0, histograms))


def statistics_of_object(table: str, rel_path: str, layout: Layout,
                         settings: PartitionSettings) -> PartitionResult:
    """Statistics of an S3 object as it is now, for an event that says it changed. The event
    is only a hint (events come late, twice, out of order): the object is looked at (HEAD)
    and its content's statistics go to the directory of its fingerprint, which makes a
    duplicate event cost one HEAD."""
    data_file = Store(table).data_file(rel_path)
    if data_file is None:
        return PartitionResult(rel_path, "", "gone")
    if data_file.partition_values:      # Hive directories: typed as a compute would type them
        [data_file] = hive.with_columns([data_file], published_schema(layout))
    out = layout.partition(rel_path, data_file.fingerprint)
    if out.exists(STATISTICS):
        return PartitionResult(rel_path, data_file.fingerprint, "ok", reused=True)
    return partition_statistics(StepEvent(PARTITION_STATISTICS, rel_path, PartitionTask(
        table, rel_path, data_file.fingerprint, out.uri, settings.max_bins,
        settings.bloom_min_distinct, settings.statistics, data_file.reading,
        settings.range_set_size)))


def published_schema(layout: Layout) -> pa.Schema | None:
    """The table schema of the published statistics (None before the first version)."""
    try:
        return StatisticsReader(layout.uri).schema()
    except StatisticsNotFound:
        return None
