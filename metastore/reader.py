"""The lookup API: read a published version's statistics, or one partition's, reading only the
files (and rows) asked for."""
from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from metastore import types as ty

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

    def partition_dir(self, partition: str) -> Store:
        """Where a partition's statistics files live."""
        return self._dir(partition)

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
        return files.read_frequencies(self._dir(partition), [column]).select(["value", "frequency"])

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

    def version_dir(self) -> Store:
        return self._dir(None)

    def ranked_columns(self) -> list[str]:
        """Columns of the version's ranks.parquet (none if it has no ranks)."""
        if not self.version_dir().exists(files.RANKS):
            return []
        meta = self.version_dir().open_parquet(files.RANKS).schema_arrow.metadata or {}
        return json.loads(meta.get(schema.RANKED_COLUMNS_KEY, b"[]"))

    def _values_count(self, column: str) -> int:
        row = self.statistics(columns=[column], sketches=False).to_pylist()[0]
        return row["row_count"] - row["null_count"]

    def exact_quantiles(self, column: str, qs: list[float]) -> list[str | None]:
        """percentile_disc over the non-null values (NaN after +inf): the value at 1-based
        position ceil(q * n), the minimum for q = 0; from ranks.parquet, one row group each."""
        if column not in self.ranked_columns():
            raise StatisticsNotFound(f"column {column!r} has no ranks in version {self.version} "
                                     "(lakestats compute --ranks, or quantiles --exact)")
        n = self._values_count(column)
        parquet = self.version_dir().open_parquet(files.RANKS)
        names = parquet.schema_arrow.names
        groups = []                               # (first rank, last position) per row group
        for i in range(parquet.metadata.num_row_groups):
            group = parquet.metadata.row_group(i)
            stats = {k: group.column(names.index(k)).statistics for k in ("column", "rank", "last")}
            if stats["column"].min == column == stats["column"].max:
                groups.append((i, stats["rank"].min, stats["last"].max))
        out = []
        for q in qs:
            position = max(1, math.ceil(Fraction(str(q)) * n))
            hit = next((i for i, first, last in groups if first <= position <= last), None)
            if n == 0 or hit is None:
                out.append(None)
                continue
            rows = parquet.read_row_group(hit, columns=["value", "rank", "last"])
            row = pc.and_(pc.less_equal(rows["rank"], position),
                          pc.greater_equal(rows["last"], position))
            out.append(rows.filter(row)["value"][0].as_py())
        return out

    def rank(self, column: str, value: str) -> dict:
        """How many non-null values are smaller than `value` (canonical text), and its count."""
        if column not in self.ranked_columns():
            raise StatisticsNotFound(f"column {column!r} has no ranks in version {self.version}")
        arrow_type = files.decode_schema(self.manifest["schema"]).field(column).type
        rows = self.version_dir().read_parquet(files.RANKS, columns=["value", "rank", "count"],
                                               filters=pc.field("column") == column)
        typed = ty.from_text(rows["value"].to_pylist(), arrow_type)
        try:
            probe = ty.from_text([value], arrow_type)[0]
        except (pa.ArrowInvalid, ValueError) as e:
            raise StatisticsNotFound(f"{value!r} is not a {arrow_type} value ({e})") from None
        texts = rows["value"].to_pylist()
        canonical = ty.scalar_text(probe)
        if canonical in texts:
            i = texts.index(canonical)
            return {"column": column, "value": canonical, "smaller": rows["rank"][i].as_py() - 1,
                    "count": rows["count"][i].as_py()}
        less = pc.fill_null(pc.less(typed, probe), False).to_numpy(zero_copy_only=False)
        smaller = int(rows["count"].to_numpy()[less].sum())
        return {"column": column, "value": canonical, "smaller": smaller, "count": 0}

    def approximate_quantiles(self, column: str, qs: list[float]) -> dict:
        """Exact from the column's frequencies when they are complete; otherwise from the
        merged KLL sketch, with its normalized rank error."""
        import datasketches as ds
        row = self.statistics(columns=[column]).to_pylist()[0]
        arrow_type = files.decode_schema(self.manifest["schema"]).field(column).type
        if row["frequencies_complete"]:
            return {"exact": True, "quantiles": _quantiles_from_frequencies(
                self.frequencies(column), arrow_type, qs)}
        if row["quantile_sketch"] is None:
            raise StatisticsNotFound(f"column {column!r} ({arrow_type}) keeps only its repeated "
                                     "values and has no quantile sketch: use --exact")
        kll = ds.kll_doubles_sketch.deserialize(row["quantile_sketch"])
        values = [kll.get_quantile(q) for q in qs]
        return {"exact": False, "rank_error": kll.normalized_rank_error(False),
                "quantiles": [_from_binning(v, arrow_type) for v in values]}

    def frequency_list(self, column: str, partition: str | None = None,
                       top: int | None = None) -> dict:
        """The object `lakestats frequencies --json` prints."""
        row = self.statistics(partition, [column], sketches=False).to_pylist()[0]
        if row["distinct_count"] is None:
            raise StatisticsNotFound(f"column {column!r} ({row['type']}) has no frequencies "
                                     "(nested columns get row and null counts only)")
        freq = self.frequencies(column, partition)
        if top is not None:
            freq = freq.slice(0, max(0, top))
        out = {"column": column, "exact": True,
               "algorithm": "partition" if partition else row["frequency_algorithm"],
               "distinct_count": row["distinct_count"], "null_count": row["null_count"],
               "values": [{"value": v, "frequency": f} for v, f in
                          zip(freq["value"].to_pylist(), freq["frequency"].to_pylist())]}
        if not row["frequencies_complete"]:
            out["omitted_singletons"] = row["singleton_count"]
        return out

    def partitions(self) -> list[dict]:
        return [{"path": path, **entry} for path, entry in sorted(self.manifest["partitions"].items())]


def _quantiles_from_frequencies(freq: pa.Table, arrow_type: pa.DataType, qs: list[float]) -> list:
    typed = ty.from_text(freq["value"].to_pylist(), arrow_type)
    order = pc.sort_indices(typed)
    texts = freq["value"].take(order)
    cumulative = np.cumsum(freq["frequency"].take(order).to_numpy())
    n = int(cumulative[-1]) if cumulative.size else 0
    out = []
    for q in qs:
        position = max(1, math.ceil(Fraction(str(q)) * n))
        out.append(texts[int(np.searchsorted(cumulative, position))].as_py() if n else None)
    return out


def _from_binning(value: float, arrow_type: pa.DataType) -> str:
    """A KLL quantile (binning domain) as canonical text of the column's type."""
    kind = ty.kind_of(arrow_type)
    if kind in (ty.INTEGER, ty.TEMPORAL):
        storage = arrow_type if kind == ty.INTEGER else (
            pa.int32() if arrow_type.bit_width == 32 else pa.int64())
        typed = pa.array([round(value)], storage)
        return ty.to_text(typed if storage == arrow_type else typed.view(arrow_type))[0].as_py()
    return ty.scalar_text(pa.scalar(value, pa.float64()))
