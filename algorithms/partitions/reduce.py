"""Table-level statistics reduced from partition statistics.

Counts, min/max, sums and moments come from the partition index (one row per partition, every
column's statistics typed), so a reduction reads no partition's files. Counts, min/max and
integer and decimal sums are exact; mean and stddev merge with Chan et al.'s pairwise formula;
histograms re-bin exactly (core.histogram) and KMV and KLL sketches merge, from whichever files
hold them. Frequencies and the exact distinct count are not reduced here, in the coordinator's
memory, but by the distributed algorithms of algorithms.frequencies.
"""
from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import datasketches as ds
import pyarrow as pa
import pyarrow.compute as pc

from core import hashing
from core import histogram as hist
from core import schema
from core import types as ty
from core.exact import Moments
from metastore import files
from metastore.layout import HISTOGRAMS, STATISTICS
from metastore.store import Store


class SchemaDriftError(Exception):
    """Partitions disagree on a column's type in a way no widening reconciles."""


@dataclass
class PartitionStatistics:
    """A partition's statistics as the table-level reduction reads them."""
    rel_path: str
    statistics: pa.Table      # without Bloom filters
    histograms: pa.Table

    @property
    def schema(self) -> pa.Schema:
        return files.data_schema_of(self.statistics)


def load(rel_path: str, stats_dir: Store) -> PartitionStatistics:
    """A partition's statistics without their Bloom filters (files written before a
    statistic existed lack its column), and its histograms."""
    parquet = stats_dir.open_parquet(STATISTICS)
    names = [n for n in parquet.schema_arrow.names if n != "bloom_filter"]
    return PartitionStatistics(rel_path, parquet.read(columns=names),
                               stats_dir.read_parquet(HISTOGRAMS))


def table_schema(parts: list[tuple[str, pa.Schema]]) -> pa.Schema:
    """Union of the partitions' schemas (path, schema), in path order, fields in order of first
    appearance; int32 next to int64 widens to int64 (Arrow's permissive promotion).
    Irreconcilable types name the column and both files."""
    schemas = list(dict.fromkeys(s for _, s in sorted(parts, key=lambda p: p[0])))
    try:
        return pa.unify_schemas(schemas, promote_options="permissive") if schemas else pa.schema([])
    except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    seen: dict[str, tuple[pa.DataType, str]] = {}
    for path, part_schema in sorted(parts, key=lambda p: p[0]):
        for field in part_schema:
            if field.name in seen:
                first_type, first_path = seen[field.name]
                try:
                    pa.unify_schemas([pa.schema([pa.field(field.name, first_type)]),
                                      pa.schema([field])], promote_options="permissive")
                except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise SchemaDriftError(
                        f"column {field.name!r} is {first_type} in {first_path} but {field.type} "
                        f"in {path}") from None
            else:
                seen[field.name] = (field.type, path)
    raise SchemaDriftError("partitions' schemas cannot be reconciled")


@dataclass
class TableStats:
    schema: pa.Schema
    row_count: int
    statistics: pa.Table      # distinct counts and frequency fields are filled in later
    histograms: pa.Table


def reduce(index: pa.Table, table: pa.Schema, sources: list[tuple[pa.Table, pa.Table]],
           max_bins: int) -> TableStats:
    """`index` holds every partition; `sources` are (statistics, histograms) tables whose
    sketches and histograms cover every partition once: every partition's own, or the previous
    version's together with the added partitions'."""
    total_rows = int(pc.sum(index["row_count"]).as_py() or 0)
    sketched = [{r["column"]: r for r in stats.select(
        ["column", *schema.SKETCH_NAMES[:2]]).to_pylist()} for stats, _ in sources]
    rows, histograms = [], []
    for k, field in enumerate(table):
        struct = index[schema.index_column_name(k)].combine_chunks()
        row = _reduce_row(field, struct.filter(struct.is_valid()), total_rows)
        _merge_sketches(row, [by[field.name] for by in sketched if field.name in by])
        if ty.kind_of(field.type) in ty.BINNED_KINDS:
            merged = hist.merge([files.read_histogram(h, field.name) for _, h in sources],
                                max_bins)
            row["histogram_exponent"] = merged.exponent if merged else None
            if merged:
                histograms.append((field.name, field.type, merged))
        rows.append(row)
    return TableStats(table, total_rows, files.statistics_table(rows, table, total_rows),
                      files.histograms_table(histograms))


def _merge_sketches(row: dict, sketched: list[dict]) -> None:
    sketches = [hashing.kmv_from_bytes(s["ndv_sketch"]) for s in sketched if s["ndv_sketch"]]
    if sketches:
        row["ndv_sketch"] = hashing.kmv_to_bytes(hashing.kmv_merge(sketches))
    klls = [ds.kll_doubles_sketch.deserialize(s["quantile_sketch"]) for s in sketched
            if s["quantile_sketch"]]
    for kll in klls[1:]:
        klls[0].merge(kll)
    if klls:
        row["quantile_sketch"] = klls[0].serialize()


def _reduce_row(field: pa.Field, present: pa.StructArray, total_rows: int) -> dict:
    """The column's row from the index rows of the partitions holding it."""
    kind = ty.kind_of(field.type)

    def child(name: str) -> pa.Array:
        return pc.struct_field(present, name)

    def total(name: str) -> int:
        return int(pc.sum(child(name)).as_py() or 0)
    # rows of partitions that lack the column (added later) are nulls of the table column
    row = {"column": field.name, "type": str(field.type), "row_count": total_rows,
           "null_count": total_rows - total("row_count") + total("null_count")}
    if kind == ty.OTHER:
        return row
    if kind == ty.FLOAT:
        row["nan_count"] = total("nan_count")
    lows, highs = child("min").drop_null(), child("max").drop_null()
    if len(lows):
        row["min"] = ty.scalar_text(ty.min_max(lows)[0])
        row["max"] = ty.scalar_text(ty.min_max(highs)[1])
    if kind in ty.NUMERIC_KINDS:
        _reduce_moments(row, pa.table({n: child(n) for n in (
            "row_count", "null_count", "nan_count", "sum", "mean", "stddev")}).to_pylist(), kind)
    if kind in ty.LENGTH_KINDS:
        sized = present.filter(pc.is_valid(child("min_length")))
        if len(sized):
            n = pc.subtract(pc.struct_field(sized, "row_count"),
                            pc.struct_field(sized, "null_count")).to_pylist()
            row["min_length"] = pc.min(pc.struct_field(sized, "min_length")).as_py()
            row["max_length"] = pc.max(pc.struct_field(sized, "max_length")).as_py()
            avg = pc.struct_field(sized, "avg_length").to_pylist()
            row["avg_length"] = sum(a * k for a, k in zip(avg, n)) / sum(n)
    if kind == ty.BOOLEAN:
        row["true_count"] = total("true_count")
    return row


def _reduce_moments(row: dict, stats: list[dict], kind: str) -> None:
    with_values = [s for s in stats if s["sum"] is not None]
    if not with_values:
        return
    parse = {ty.INTEGER: int, ty.DECIMAL: Decimal, ty.FLOAT: float}[kind]
    with decimal.localcontext(ty.EXACT_DECIMALS):
        total = sum(parse(s["sum"]) for s in with_values)
    moments = Moments()
    for s in with_values:
        n = s["row_count"] - s["null_count"] - (s["nan_count"] or 0)
        sd = s["stddev"]
        m2 = 0 if sd is None else Fraction(sd) ** 2 * (n - 1) if math.isfinite(sd) else math.nan
        # exact totals make the merge take exact differences of means (integers, decimals)
        moments.merge(Moments(n, s["mean"], m2, None if kind == ty.FLOAT else parse(s["sum"])))
    if kind == ty.FLOAT:
        row["sum"], row["mean"] = ty.scalar_text(pa.scalar(total, pa.float64())), moments.mean
    else:   # exact: int / int and Decimal / int round once
        row["sum"], row["mean"] = str(total), float(total / moments.n)
    row["stddev"] = moments.stddev
