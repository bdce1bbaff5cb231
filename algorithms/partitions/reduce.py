"""Table-level statistics reduced from partition statistics.

Counts, min/max, sums and moments come from the partition index (one row per partition, every
column's statistics typed), so a reduction reads no partition's files. Counts, min/max and
integer and decimal sums are exact; mean and stddev merge with Chan et al.'s pairwise formula;
histograms re-bin exactly and KMV, theta and KLL sketches merge (algorithms.partitions.fold),
from the partitions' files or from partial folds of them. Frequencies and the exact distinct
count are not reduced here, in the coordinator's memory, but by the distributed algorithms of
algorithms.frequencies.
"""
from __future__ import annotations

import decimal
import itertools
import math
from dataclasses import dataclass
from typing import Iterable
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.algorithms.partitions.fold import Folds
from lakestats.core import histogram as hist
from lakestats.core import schema
from lakestats.core import types as ty
from lakestats.core.binning import binning_unit, binning_values
from lakestats.core.errors import DataCorrupt
from lakestats.metastore import files
from lakestats.metastore.histograms import histograms_table, read_histograms
from lakestats.metastore.index import retyped, schemas
from lakestats.metastore.layout import STATISTICS
from lakestats.metastore.store import Store


class SchemaDriftError(DataCorrupt):
    """Partitions disagree on a column's type in a way no widening reconciles."""


def statistics(stats_dir: Store) -> pa.Table:
    """A partition's statistics without the sketches a reduction merges: what its index row
    holds, and its Bloom filters (metastore.membership packs them). (Files written before a
    statistic existed lack its column.)"""
    parquet = stats_dir.open_parquet(STATISTICS)
    return parquet.read(columns=[n for n in parquet.schema_arrow.names
                                 if n not in schema.MERGED_SKETCHES])


def table_schema(parts: list[tuple[str, pa.Schema]]) -> pa.Schema:
    """Union of the partitions' schemas (path, schema), in path order, fields in order of first
    appearance; int32 next to int64 widens to int64 (Arrow's permissive promotion).
    Irreconcilable types name the column and both files."""
    by_id = {id(s): s for _, s in sorted(parts, key=lambda p: p[0])}  # shared objects: cheap
    schemas = list(dict.fromkeys(by_id.values()))
    if not schemas:
        return pa.schema([])
    # one logical type stored as several physical ones (delta-rs writes string_view beside
    # string after a delete): the views are their large forms, which every form widens to
    for attempt in (schemas, [_without_views(s) for s in schemas]):
        try:
            unified = pa.unify_schemas(attempt, promote_options="permissive")
        except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        _no_narrow_floats(parts, unified)
        return unified
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


def _no_narrow_floats(parts: list[tuple[str, pa.Schema]], table: pa.Schema) -> None:
    """A float32 file's statistics keep its values as float32's shortest text ("0.1"), which a
    double column reads as another number (0.1, not 0.10000000149011612): its bounds would
    prune files that hold matching rows. Refused until the files share one float type (table
    formats' float -> double promotion reads the file as double, and is not affected)."""
    for path, f, wider in retyped(parts, table):
        if pa.types.is_floating(f.type):
            raise SchemaDriftError(
                f"column {f.name!r} is {f.type} in {path} but {wider} in other files: "
                "statistics keep a float as its own type's shortest text, which the wider type "
                "reads as another number; write the files in one float type")


def unfitting(parts: list[tuple[str, pa.Schema]], table: pa.Schema,
              error: Exception) -> SchemaDriftError:
    """The error for a file's values that the table's type of their column cannot hold (a
    timestamp[ms] past 2262 in a table that another file makes timestamp[ns]; a uint64 past
    int64's range beside an int64 file): the files that type a column otherwise."""
    other = [f"{f.name!r} is {f.type} in {path}, {wider} in the table"
             for path, f, wider in retyped(parts, table)]
    return SchemaDriftError(f"{error}; the type reconciled from every file's cannot hold a "
                            "file's values: " + "; ".join(other[:3] + ["..."] * (len(other) > 3)))


def _without_views(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(ty.value_type(f.type)) if pa.types.is_string_view(f.type)
                      or pa.types.is_binary_view(f.type) else f for f in schema])


@dataclass
class TableStats:
    schema: pa.Schema
    row_count: int
    statistics: pa.Table      # distinct counts and frequency fields are filled in later
    histograms: pa.Table


def reduce(index: pa.Table, table: pa.Schema, max_bins: int,
           added: Iterable[tuple[pa.Table, pa.Table]],
           base: tuple[pa.Table, pa.Table] | None = None,
           removed: Iterable[pa.Table] = ()) -> TableStats:
    """Counts, min/max and moments from `index` (every partition). Sketches and histograms
    are folded one source at a time: the `base` version's (statistics, histograms), if any,
    merged with each `added` source's; the `removed` partitions' histograms are subtracted
    (core.histogram.GridChanged when that is not exact). Sketches cannot be taken apart: with
    `removed`, they still hold the removed partitions' values."""
    total_rows = int(pc.sum(index["row_count"]).as_py() or 0)
    folded = Folds(table, max_bins, itertools.chain([base] if base else [], added))
    removed = [read_histograms(h) for h in removed]
    unbinned = _other_units(index, table)
    out, histograms = [], []
    for k, field in enumerate(table):
        struct = index[schema.index_column_name(k)].combine_chunks()
        row = _reduce_row(field, struct.filter(struct.is_valid()), total_rows)
        row.update(folded.sketches(field.name))
        if field.name in unbinned:
            row["quantile_sketch"] = None
        elif ty.kind_of(field.type) in ty.BINNED_KINDS:
            merged = hist.subtract(folded.histogram(field.name),
                                   [h.get(field.name) for h in removed],
                                   _binned_range(struct) if removed else None)
            row["histogram_exponent"] = merged.exponent if merged else None
            if merged:
                histograms.append((field.name, field.type, merged))
        out.append(row)
    return TableStats(table, total_rows, files.statistics_table(out, table, total_rows),
                      histograms_table(histograms))


def units_differ(previous_index: pa.Table, previous: pa.Schema, table: pa.Schema) -> bool:
    """Whether a version's histograms and quantile sketches cannot be carried into the next
    one: a column it binned in another unit than the next table types it in, or one it kept
    none of (_other_units) that the next may bin."""
    names = set(table.names)           # once: a wide table's names, not once a column
    return bool(_other_units(previous_index, previous)) or any(
        binning_unit(f.type) != binning_unit(table.field(f.name).type)
        for f in previous if f.name in names)


def _other_units(index: pa.Table, table: pa.Schema) -> set[str]:
    """The columns a partition types in another unit than the table (timestamp[ms] beside
    timestamp[us]): its histogram and quantile sketch count that unit's steps, which no
    power-of-two grid converts exactly, so the table keeps neither for such a column (its
    frequencies, bounds and exact quantiles are the table type's)."""
    return {f.name for _, f, wider in retyped(schemas(index), table)
            if binning_unit(f.type) != binning_unit(wider)}


def _binned_range(struct: pa.StructArray) -> tuple | None:
    """The smallest and largest finite value in the binning domain, from the index's min and
    max of every partition ((None, None) if there is none); None when an infinity hides the
    finite ones."""
    lows = binning_values(pc.struct_field(struct, "min").drop_null())
    highs = binning_values(pc.struct_field(struct, "max").drop_null())
    if not lows.size:
        return None, None
    low, high = lows.min(), highs.max()
    if lows.dtype.kind == "f":
        return (float(low), float(high)) if np.isfinite([low, high]).all() else None
    return int(low), int(high)


def _reduce_row(field: pa.Field, present: pa.StructArray, total_rows: int) -> dict:
    """The column's row from the index rows of the partitions holding it."""
    kind = ty.kind_of(field.type)

    def child(name: str) -> pa.Array:      # `present` has no null: its fields as they are
        return present.field(name)

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
            n = pc.subtract(sized.field("row_count"), sized.field("null_count")).to_pylist()
            row["min_length"] = pc.min(sized.field("min_length")).as_py()
            row["max_length"] = pc.max(sized.field("max_length")).as_py()
            avg = sized.field("avg_length").to_pylist()
            row["avg_length"] = sum(a * k for a, k in zip(avg, n)) / sum(n)
    if kind == ty.BOOLEAN:
        row["true_count"] = total("true_count")
    return row


def _reduce_moments(row: dict, stats: list[dict], kind: str) -> None:
    """Sum, mean and sample stddev of every partition's values, in one pass over the
    partitions (a table has thousands): M2 = sum of M2_i + sum of n_i (mean_i - mean)^2.
    Integer and decimal means are taken from exact totals, centred on a pivot before going
    to float64, so values far from zero but close together keep their spread; everything is
    scaled by a power of two so that squares neither overflow nor underflow."""
    with_values = [s for s in stats if s["sum"] is not None]
    if not with_values:
        return
    parse = {ty.INTEGER: int, ty.DECIMAL: Decimal, ty.FLOAT: float}[kind]
    counts = [s["row_count"] - s["null_count"] - (s["nan_count"] or 0) for s in with_values]
    n, count = np.array(counts, np.float64), sum(counts)
    sd = np.array([s["stddev"] if s["stddev"] is not None else 0.0 for s in with_values])
    with decimal.localcontext(ty.EXACT_DECIMALS):
        totals = [parse(s["sum"]) for s in with_values]
        total = sum(totals)
        if kind == ty.FLOAT:
            means = np.array([s["mean"] for s in with_values])
            if not (np.isfinite(means).all() and np.isfinite(sd).all()):
                with np.errstate(invalid="ignore", over="ignore"):   # inf - inf is NaN
                    mean = float((means * n).sum() / count)
                row["sum"], row["mean"] = ty.scalar_text(pa.scalar(total, pa.float64())), mean
                row["stddev"] = math.nan if count > 1 else None
                return
            mean = float(sum(Fraction(m) * k for m, k in zip(means.tolist(), counts)) / count)
            deltas = means - mean
            row["sum"], row["mean"] = ty.scalar_text(pa.scalar(total, pa.float64())), mean
        else:   # exact: int / int and Decimal / int round once
            pivot = total // count
            offset = (total - count * pivot) / count
            deltas = np.array([float((t - k * pivot) / k - offset)
                               for t, k in zip(totals, counts)])
            row["sum"], row["mean"] = str(total), float(total / count)
    if count < 2:
        row["stddev"] = None
        return
    top = max(float(np.abs(deltas).max()), float(sd.max()))
    e = math.frexp(top)[1] if top else 0
    scaled_sd, scaled_d = np.ldexp(sd, -e), np.ldexp(deltas, -e)
    m2 = float((scaled_sd * scaled_sd * (n - 1)).sum() + (n * scaled_d * scaled_d).sum())
    try:
        row["stddev"] = math.ldexp(math.sqrt(m2 / (count - 1)), e)
    except OverflowError:
        row["stddev"] = math.inf
