"""The lookup API: a published version's statistics, or one partition's, reading only the files
(and rows) asked for. Quantile arithmetic is core.quantiles'; this module only reads."""
from __future__ import annotations

import bisect
import functools
import itertools

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.core import quantiles, schema
from lakestats.core import types as ty
from lakestats.core.errors import StatisticsMissing
from lakestats.metastore import files, histograms, index, ranks, value_index
from lakestats.metastore.layout import FREQUENCIES, HISTOGRAMS, INDEX, STATISTICS, Layout
from lakestats.metastore.manifest import (Manifest, published_manifest, read_manifest,
                                          snapshot_version)
from lakestats.metastore.store import DataFile, Store


class StatisticsNotFound(StatisticsMissing):
    """Statistics asked for do not exist; the message says what is missing."""


class NotPublished(StatisticsNotFound):
    """No published version holds the partition asked for (none is published, or the
    partition came after the published one)."""


class StatisticsReader:
    """Statistics of one table: its published version, or one of its partitions."""

    def __init__(self, stats_root: str, version: str | None = None):
        self.layout = Layout(stats_root)
        # LATEST alone says which version is published: LatestLost when it cannot tell
        manifest = published_manifest(self.layout) if version is None \
            else read_manifest(self.layout, version)
        if manifest is None:
            raise NotPublished(f"{stats_root}: no statistics published yet (run lakestats compute)")
        self.manifest: Manifest = manifest
        self.version = manifest.version
        self._opened: dict[tuple[str, str], pq.ParquetFile | files.FrequencyFile] = {}
        self._names: dict[str, list[str]] = {}
        self._group: tuple[int, pa.Table] | None = None
        if self.manifest.partition_count is None:
            raise StatisticsNotFound(f"{stats_root}: version {self.version} was written by an "
                                     "older lakestats (run lakestats compute to publish anew)")

    @classmethod
    def of_snapshot(cls, stats_root: str, snapshot: str) -> StatisticsReader:
        """The version that describes a table format's snapshot."""
        version = snapshot_version(Layout(stats_root), snapshot)
        if version is None:
            raise NotPublished(f"{stats_root}: no statistics of snapshot {snapshot} (run "
                               f"lakestats compute TABLE --snapshot {snapshot})")
        return cls(stats_root, version)

    def partition_index(self, columns: list[str] | None = None,
                        base: list[str] | None = None, leave_out: tuple[str, ...] = ()
                        ) -> pa.Table:
        """The version's partition index (metastore.index): base fields (all, or `base`) and
        the statistics of `columns` (all, or none with an empty list), but those named in
        `leave_out` (a column's `values` lists are most of the index)."""
        parquet = self._open(self.version_dir(), INDEX)
        names = index.names(self.schema(), columns, base)
        if leave_out:           # Arrow remakes the schema at each ask: only when needed
            names = index.fields(parquet.schema_arrow, names, leave_out)
        return parquet.read(columns=names)

    def index_statistic(self, column: str, statistic: str) -> pa.Array:
        """One statistic of `column` over the index's partitions (null where a partition
        lacks the column)."""
        name = schema.index_column_name(self.schema().get_field_index(column))
        read = self._open(self.version_dir(), INDEX).read(columns=[f"{name}.{statistic}"])
        return index.statistic(read[name].combine_chunks(), statistic)

    def partition_dir(self, partition: str | None = None) -> Store:
        """Where a partition's statistics files live; the version's own without a partition."""
        if partition is None:
            return self.layout.version(self.version)
        path = partition.strip("/")
        found = index.read(self.version_dir(), self.schema(), [], ["path", "fingerprint"],
                           filters=pc.field("path") == path)
        if found.num_rows == 0:
            raise NotPublished(f"{partition}: not a partition of version {self.version} "
                               "(see lakestats partitions)")
        return self.layout.partition(path, found["fingerprint"][0].as_py())

    def version_dir(self) -> Store:
        return self.layout.version(self.version)

    def _open(self, directory: Store, name: str, partition: str | None = None):
        """A statistics file: a version's (never rewritten) opened once, a partition's anew."""
        opener = files.FrequencyFile if name == FREQUENCIES else lambda d: d.open_parquet(name)
        if partition is not None:
            return opener(directory)
        key = (directory.uri, name)
        if key not in self._opened:
            self._opened[key] = opener(directory)
        return self._opened[key]

    def _columns_of(self, parquet: pq.ParquetFile, name: str, partition: str | None) -> list[str]:
        """A statistics file's column names, a version's read once (Arrow remakes them)."""
        if partition is None and name not in self._names:
            self._names[name] = parquet.schema_arrow.names
        return self._names[name] if partition is None else parquet.schema_arrow.names

    @functools.cached_property
    def _schema(self) -> pa.Schema:
        return files.decode_schema(self.manifest.schema)

    def schema(self) -> pa.Schema:
        return self._schema

    def statistics(self, partition: str | None = None, columns: list[str] | None = None,
                   sketches: bool = True) -> pa.Table:
        """statistics.parquet rows (of `columns` only, if given); sketches=False skips reading
        the sketch and plugin state columns, the bulk of the file."""
        table_schema = self.schema()
        parquet = self._open(self.partition_dir(partition), STATISTICS, partition)
        names = self._columns_of(parquet, STATISTICS, partition)
        names = names if sketches else files.light_columns(names)
        if partition is None and columns and set(columns) <= set(table_schema.names):
            # the table's rows are in schema order, in small row groups: read only the
            # groups that hold the asked columns, whatever the table's width
            rows = {table_schema.get_field_index(c) for c in columns}
            groups = sorted({bisect.bisect_right(self._row_group_ends, r) for r in rows})
            return files.filter_columns(parquet.read_row_groups(groups, columns=names), columns)
        return _rows_of(parquet.read(columns=names), columns)

    @functools.cached_property
    def _row_group_ends(self) -> list[int]:
        """Where each row group of the version's statistics.parquet ends, in rows."""
        meta = self._open(self.version_dir(), STATISTICS).metadata
        return list(itertools.accumulate(meta.row_group(g).num_rows
                                         for g in range(meta.num_row_groups)))

    def _row(self, column: str, partition: str | None = None, sketches: bool = False) -> dict:
        """A column's statistics row; the version's last row group read is kept for the next."""
        k = self.schema().get_field_index(column)
        if partition is not None or k < 0:
            return self.statistics(partition, [column], sketches).to_pylist()[0]
        group = bisect.bisect_right(self._row_group_ends, k)
        held = self._group                   # read once: another thread may replace it
        if held is None or held[0] != group:
            statistics = self._open(self.version_dir(), STATISTICS)
            held = self._group = (group, statistics.read_row_group(group))
        rows = files.filter_columns(held[1], [column])
        return (rows if sketches else rows.select(files.light_columns(rows.column_names))
                ).to_pylist()[0]

    def frequencies(self, column: str, partition: str | None = None,
                    top: int | None = None) -> pa.Table:
        """(value, frequency) of a column (its `top` most frequent values); at table level,
        from the version whose frequencies.parquet holds the column's list (a version rewrites
        only the lists that changed)."""
        frequencies = self._open(self._frequencies_dir(column, partition), FREQUENCIES,
                                 partition)
        if top is not None:
            return frequencies.top(column, top)
        return frequencies.read([column]).select(["value", "frequency"])

    def _frequencies_dir(self, column: str, partition: str | None) -> Store:
        if partition is not None:
            return self.partition_dir(partition)
        where = self.manifest.frequency_lists.get(column, {})
        return self.layout.version(where.get("version", self.version))

    def histogram_table(self, column: str, partition: str | None = None) -> pa.Table:
        parquet = self._open(self.partition_dir(partition), HISTOGRAMS, partition)
        if column not in self._columns_of(parquet, HISTOGRAMS, partition):
            raise StatisticsNotFound(f"column {column!r} has no histogram (only numeric and "
                                     "temporal columns with values do, and at the table level "
                                     "not one its files type in different units, such as "
                                     "timestamp[ms] beside timestamp[us]: see --partition)")
        return parquet.read(columns=[column])

    def histogram(self, column: str, partition: str | None = None,
                  low=None, high=None) -> list[dict]:
        """Bins as {lower, upper, count}; with `low` or `high` (canonical text, or a value
        of the column's type), only the bins that overlap [low, high], read from the row groups
        that hold them."""
        if low is None and high is None:
            return histograms.histogram_bins(self.histogram_table(column, partition), column)
        arrow_type = self.column_type(column)
        bounds = [None if v is None else self.typed(v, arrow_type) for v in (low, high)]
        bins = histograms.bins_between(self.partition_dir(partition), column, arrow_type,
                                       *bounds)
        if bins is None:
            self.histogram_table(column, partition)          # raises: says why there is none
        return bins

    def column_type(self, column: str) -> pa.DataType:
        if column not in self.schema().names:
            raise StatisticsNotFound(f"no column {column!r} in the statistics")
        return self.schema().field(column).type

    @staticmethod
    def typed(value, arrow_type: pa.DataType) -> pa.Scalar:
        """A value of the column's type from its canonical text, or from a Python value."""
        try:
            if isinstance(value, str):
                return ty.from_text([value], arrow_type)[0]
            return pa.scalar(value, ty.value_type(arrow_type))
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as e:
            raise StatisticsNotFound(f"{value!r} is not a {arrow_type} value ({e})") from None

    def summary(self, partition: str | None = None, columns: list[str] | None = None) -> dict:
        """The object `lakestats show --json` prints."""
        table = self.statistics(partition, columns, sketches=False)
        out = {"version": self.version, "format": self.manifest.format,
               "snapshot": self.manifest.snapshot}
        if partition is None:
            out.update(row_count=self.manifest.row_count,
                       partitions=self.manifest.partition_count,
                       missing=self.manifest.missing)
        else:
            out.update(_partition_summary(table, partition))
        out["columns"] = files.column_statistics(table)
        return out

    @staticmethod
    def computed_partition(table_uri: str, stats_root: str | None, data_file: DataFile,
                           columns: list[str] | None = None) -> dict:
        """The summary of a data file's statistics that a compute wrote but no published
        version holds yet (it failed, or runs still): `"published": false`."""
        partition = data_file.rel_path
        directory = Layout.of_table(table_uri, stats_root).partition(partition,
                                                                     data_file.fingerprint)
        if not directory.exists(STATISTICS):
            raise NotPublished(f"{partition}: no statistics of its current content yet "
                               "(run lakestats compute)")
        parquet = directory.open_parquet(STATISTICS)
        table = _rows_of(parquet.read(columns=files.light_columns(parquet.schema_arrow.names)),
                         columns)
        return {"version": None, "published": False, **_partition_summary(table, partition),
                "columns": files.column_statistics(table)}

    def frequency_list(self, column: str, partition: str | None = None,
                       top: int | None = None) -> dict:
        """The object `lakestats frequencies --json` prints."""
        row = self._row(column, partition)
        if row["distinct_count"] is None:
            raise StatisticsNotFound(f"column {column!r} ({row['type']}) has no frequencies "
                                     "(nested columns get row and null counts only)")
        freq = self.frequencies(column, partition, None if top is None else max(0, top))
        out = {"column": column, "exact": not row.get("exact_as_of"),
               "algorithm": "partition" if partition else row["frequency_algorithm"],
               "distinct_count": row["distinct_count"], "null_count": row["null_count"],
               "values": [{"value": v, "frequency": f} for v, f in
                          zip(freq["value"].to_pylist(), freq["frequency"].to_pylist())]}
        if not row["frequencies_complete"]:
            out["omitted_singletons"] = row["singleton_count"]
        if row.get("exact_as_of"):
            out["exact_as_of"] = row["exact_as_of"]
        return out

    def partitions_with(self, column: str, value) -> dict:
        """The partitions holding `value` (canonical text, or a value of the column's type) in
        `column`, with its frequency in each, from the version's value index alone: the object
        `lakestats where --json` prints."""
        text = ty.scalar_text(self.typed(value, self.column_type(column)))
        found = self.holders(column, [text])
        return {"column": column, "value": text, "partitions": sorted(found.get(text, {})),
                "frequency_by_partition": dict(sorted(found.get(text, {}).items()))}

    def holders(self, column: str, texts: list[str]) -> dict[str, dict[str, int]]:
        """value text -> partition path -> frequency, for the values (canonical texts) that
        some partition holds."""
        if column not in self.manifest.value_index:
            self.column_type(column)
            raise StatisticsNotFound(
                f"column {column!r} has no value index in version {self.version} (compute "
                f"--value-index {column}; 'auto' indexes only low-distinct columns)")
        found = value_index.lookup(value_index.layers(self.layout, self.manifest), column, texts)
        out: dict[str, dict[str, int]] = {}
        for value, path, frequency in zip(*(found[n].to_pylist() for n in found.column_names)):
            out.setdefault(value, {})[path] = frequency
        return out

    def partitions(self) -> list[dict]:
        """Every partition of the version: path, size, etag, fingerprint, partition values,
        row count, and bounds_exact: false where the format deletes rows that lakestats did
        not apply (Iceberg equality deletes): the counts include them, the bounds still hold
        every row but may be loose."""
        entries = index.entries(self.partition_index([], index.ENTRY))
        inexact = self.manifest.inexact
        return [{"path": path, **entry, "bounds_exact": path not in inexact}
                for path, entry in sorted(entries.items())]

    # -- quantiles and ranks

    def quantiles(self, column: str, qs: list[float], longest_list: int | None = None) -> dict:
        """Exact from the column's frequencies when the table keeps them all (and, with
        `longest_list`, they are at most that many values, or the column has no sketch);
        otherwise approximate, from the merged KLL sketch, with its normalized rank error."""
        row = self._row(column, sketches=True)
        listed = longest_list is None or row["quantile_sketch"] is None or \
            (row["distinct_count"] or 0) <= longest_list
        exact = self.frequency_quantiles(column, qs) if listed else None
        if exact is not None:
            return {"exact": True, "quantiles": exact}
        arrow_type = self.schema().field(column).type
        if row["quantile_sketch"] is None:
            raise StatisticsNotFound(f"column {column!r} ({arrow_type}) keeps only its repeated "
                                     "values and has no quantile sketch: use --exact")
        values, error = quantiles.from_sketch(row["quantile_sketch"], arrow_type, qs)
        ends = {0.0: row["min"], 1.0: row["max"]}        # exact: percentile_disc(0) and (1)
        return {"exact": False, "rank_error": error,
                "quantiles": [ends.get(q, v) for q, v in zip(qs, values)]}

    def frequency_quantiles(self, column: str, qs: list[float]) -> list[str | None] | None:
        """percentile_disc from the column's frequency list, when the table keeps every value
        in it and its counts are current; None otherwise."""
        row = self._row(column)
        if not row["frequencies_complete"] or row["exact_as_of"]:
            return None
        rows, batches = self._open(self._frequencies_dir(column, None), FREQUENCIES).batches(
            column)
        return quantiles.from_count_batches(
            lambda only=None: ((t["value"].combine_chunks(), t["frequency"].to_numpy())
                               for t in batches(only)), rows, self.schema().field(column).type,
            qs)

    def _ranks(self) -> pq.ParquetFile | None:
        return ranks.open_ranks(self.version_dir(), self.manifest,
                                lambda: read_manifest(self.layout, self.version))

    def ranked_columns(self) -> list[str]:
        """Columns of the version's ranks.parquet (none if it has no ranks)."""
        return ranks.ranked_columns(self._ranks())

    def _require_ranks(self, column: str) -> pq.ParquetFile:
        found = self._ranks()
        if column not in ranks.ranked_columns(found):
            raise StatisticsNotFound(f"column {column!r} has no ranks in version {self.version} "
                                     "(lakestats compute --ranks, or quantiles --exact)")
        return found

    def exact_quantiles(self, column: str, qs: list[float]) -> list[str | None]:
        """percentile_disc over the non-null values (NaN after +inf) from ranks.parquet."""
        row = self._row(column)
        return ranks.exact_quantiles(self._require_ranks(column), column,
                                     row["row_count"] - row["null_count"], qs)

    def rank(self, column: str, value: str) -> dict:
        """How many non-null values are smaller than `value` (canonical text), and its count."""
        self._require_ranks(column)
        arrow_type = self.schema().field(column).type
        return ranks.rank(self.version_dir(), column, arrow_type, self.typed(value, arrow_type))


def _rows_of(table: pa.Table, columns: list[str] | None) -> pa.Table:
    """The statistics rows of `columns` (all without)."""
    if columns:
        unknown = sorted(set(columns) - set(table["column"].to_pylist()))
        if unknown:
            raise StatisticsNotFound(f"no column {', '.join(map(repr, unknown))} in the statistics")
    return files.filter_columns(table, columns)


def _partition_summary(table: pa.Table, partition: str) -> dict:
    return {"partition": partition, "row_count": files.row_count_of(table), "partitions": 1}
