"""Table-level statistics reduced from partition statistics.

Counts, min/max and sums are exact; mean and stddev merge with Chan et al.'s pairwise formula;
histograms re-bin exactly (core.histogram); KMV and KLL sketches merge. Frequencies and the
exact distinct count are not reduced here, in the coordinator's memory, but by the
distributed algorithms of algorithms.frequencies.
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

from core import hashing, schema
from core import histogram as hist
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
    names = [n for n in schema.STATISTIC_NAMES if n != "bloom_filter"]
    return PartitionStatistics(rel_path, stats_dir.read_parquet(STATISTICS, columns=names),
                               stats_dir.read_parquet(HISTOGRAMS))


def table_schema(parts: list[PartitionStatistics]) -> pa.Schema:
    """Union of the partitions' schemas in order of first appearance; int32 next to int64
    widens to int64 (Arrow's permissive promotion). Irreconcilable types name the column."""
    schemas = [p.schema for p in parts]
    try:
        return pa.unify_schemas(schemas, promote_options="permissive") if schemas else pa.schema([])
    except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    seen: dict[str, tuple[pa.DataType, str]] = {}
    for p in parts:
        for field in p.schema:
            if field.name in seen:
                first_type, first_path = seen[field.name]
                try:
                    pa.unify_schemas([pa.schema([pa.field(field.name, first_type)]),
                                      pa.schema([field])], promote_options="permissive")
                except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise SchemaDriftError(
                        f"column {field.name!r} is {first_type} in {first_path} but {field.type} "
                        f"in {p.rel_path}") from None
            else:
                seen[field.name] = (field.type, p.rel_path)
    raise SchemaDriftError("partitions' schemas cannot be reconciled")


@dataclass
class TableStats:
    schema: pa.Schema
    row_count: int
    statistics: pa.Table      # distinct counts and frequency fields are filled in later
    histograms: pa.Table


def reduce(parts: list[PartitionStatistics], row_counts: dict[str, int],
           max_bins: int) -> TableStats:
    table = table_schema(parts)
    total_rows = sum(row_counts.values())
    rows, histograms = [], []
    by_column = [{n: i for i, n in enumerate(p.statistics["column"].to_pylist())} for p in parts]
    for field in table:
        present = [(p, idx[field.name]) for p, idx in zip(parts, by_column) if field.name in idx]
        stats = [p.statistics.slice(i, 1).to_pylist()[0] for p, i in present]
        row = _reduce_row(field, stats, total_rows)
        sketches = [hashing.kmv_from_bytes(s["ndv_sketch"]) for s in stats if s["ndv_sketch"]]
        if sketches:
            row["ndv_sketch"] = hashing.kmv_to_bytes(hashing.kmv_merge(sketches))
        klls = [ds.kll_doubles_sketch.deserialize(s["quantile_sketch"]) for s in stats
                if s["quantile_sketch"]]
        for kll in klls[1:]:
            klls[0].merge(kll)
        if klls:
            row["quantile_sketch"] = klls[0].serialize()
        if ty.kind_of(field.type) in ty.BINNED_KINDS:
            merged = hist.merge([files.read_histogram(p.histograms, field.name)
                                 for p, _ in present], max_bins)
            row["histogram_exponent"] = merged.exponent if merged else None
            if merged:
                histograms.append((field.name, field.type, merged))
        rows.append(row)
    return TableStats(table, total_rows, files.statistics_table(rows, table, total_rows),
                      files.histograms_table(histograms))


def _reduce_row(field: pa.Field, stats: list[dict], total_rows: int) -> dict:
    kind = ty.kind_of(field.type)
    present_rows = sum(s["row_count"] for s in stats)
    # rows of partitions that lack the column (added later) are nulls of the table column
    row = {"column": field.name, "type": str(field.type), "row_count": total_rows,
           "null_count": total_rows - present_rows + sum(s["null_count"] for s in stats)}
    if kind == ty.OTHER:
        return row
    if kind == ty.FLOAT:
        row["nan_count"] = sum(s["nan_count"] or 0 for s in stats)
    mins = [s["min"] for s in stats if s["min"] is not None]
    if mins:
        row["min"] = ty.scalar_text(pc.min(ty.from_text(mins, field.type)))
        row["max"] = ty.scalar_text(pc.max(ty.from_text(
            [s["max"] for s in stats if s["max"] is not None], field.type)))
    if kind in ty.NUMERIC_KINDS:
        _reduce_moments(row, stats, kind)
    if kind in ty.LENGTH_KINDS:
        sized = [s for s in stats if s["min_length"] is not None]
        if sized:
            n = [s["row_count"] - s["null_count"] for s in sized]
            row["min_length"] = min(s["min_length"] for s in sized)
            row["max_length"] = max(s["max_length"] for s in sized)
            row["avg_length"] = sum(s["avg_length"] * k for s, k in zip(sized, n)) / sum(n)
    if kind == ty.BOOLEAN:
        row["true_count"] = sum(s["true_count"] or 0 for s in stats)
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
