"""The lookup API: read a published version's statistics, or one partition's, reading only the
files (and rows) asked for."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from metastore import files, schema
from metastore.store import Store


class StatisticsNotFound(Exception):
    """Statistics asked for do not exist; the message says what is missing."""


def read_manifest(stats: Store, version: str | None = None) -> dict | None:
    if version is None:
        try:
            version = json.loads(stats.read_bytes(files.LATEST))["version"]
        except (FileNotFoundError, OSError):
            return None
    return json.loads(stats.read_bytes(*files.version_dir(version), files.MANIFEST))


class TableStatistics:
    """Statistics of one table: its published version, or one of its partitions."""

    def __init__(self, stats_root: str, version: str | None = None):
        self.stats = Store(stats_root)
        self.manifest = read_manifest(self.stats, version)
        if self.manifest is None:
            raise StatisticsNotFound(f"{stats_root}: no statistics published yet (run lakestats compute)")
        self.version = self.manifest["version"]

    def _dir(self, partition: str | None) -> Store:
        if partition is None:
            return self.stats.child(*files.version_dir(self.version))
        entry = self.manifest["partitions"].get(partition.strip("/"))
        if entry is None:
            raise StatisticsNotFound(f"{partition}: not a partition of version {self.version} "
                               "(see lakestats partitions)")
        return self.stats.child(*files.partition_dir(partition.strip("/"), entry["fingerprint"]))

    def statistics(self, partition: str | None = None, columns: list[str] | None = None,
                   sketches: bool = True) -> pa.Table:
        """statistics.parquet rows (of `columns` only, if given); sketches=False skips reading
        the sketch columns, the bulk of the file."""
        names = None if sketches else [n for n in schema.STATISTIC_NAMES
                                       if n not in schema.SKETCH_NAMES]
        table = self._dir(partition).read_parquet(files.STATISTICS, columns=names)
        if columns:
            unknown = sorted(set(columns) - set(table["column"].to_pylist()))
            if unknown:
                raise StatisticsNotFound(f"no column {', '.join(map(repr, unknown))} in the statistics")
        return files.filter_columns(table, columns)

    def frequencies(self, column: str, partition: str | None = None) -> pa.Table:
        return self._dir(partition).read_parquet(
            files.FREQUENCIES, columns=["value", "frequency"], filters=pc.field("column") == column)

    def histogram_table(self, column: str, partition: str | None = None) -> pa.Table:
        d = self._dir(partition)
        parquet = d.open_parquet(files.HISTOGRAMS)
        if column not in parquet.schema_arrow.names:
            raise StatisticsNotFound(f"column {column!r} has no histogram (only numeric and temporal "
                               "columns with values do)")
        return parquet.read(columns=[column])

    def histogram(self, column: str, partition: str | None = None) -> list[dict]:
        return files.histogram_bins(self.histogram_table(column, partition), column)

    def summary(self, partition: str | None = None, columns: list[str] | None = None) -> dict:
        """The object `lakestats show --json` prints."""
        table = self.statistics(partition, columns, sketches=False)
        out = {"version": self.version}
        if partition is None:
            out.update(row_count=self.manifest["row_count"],
                       partitions=len(self.manifest["partitions"]),
                       missing=self.manifest.get("missing", {}))
        else:
            out.update(partition=partition, row_count=files.row_count_of(table), partitions=1)
        out["columns"] = files.column_statistics(table)
        return out

    def partitions(self) -> list[dict]:
        return [{"path": path, **entry} for path, entry in sorted(self.manifest["partitions"].items())]
