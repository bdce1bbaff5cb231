"""Statistics for a cost-based optimizer from Iceberg manifest-level statistics: partition
filters prune manifests, then the kept manifests' totals are summed, in O(manifests x
columns asked) instead of O(files x columns).

A filter on columns that every manifest's partition spec partitions by (a partition filter)
prunes manifests, with the manifests' exact bounds, and is then applied: the counts returned
are those of the kept manifests, and the optimizer estimates the selectivity of the residual
filter only. Applying the partition filter's selectivity to them again would count it twice
("double filtering")."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as E

from lakestats.core import schema
from lakestats.core.types import to_text
from lakestats.formats.manifest_statistics import Stored
from lakestats.pruning.evaluator import evaluate
from lakestats.pruning.predicate import StatsView, columns_of, parse
from lakestats.pruning.columns import bounds

FIELDS = ("total_column_size", "total_null_value_count", "total_nan_value_count")


def split(where: str | None, partition_columns: list[str]
          ) -> tuple[E.Expression | None, E.Expression | None]:
    """The predicate's conjuncts on partition columns only, and the rest."""
    if not where:
        return None, None
    node = parse(where)
    conjuncts = list(node.flatten()) if isinstance(node, E.And) else [node]
    on_partitions = [c for c in conjuncts
                     if columns_of(c) and columns_of(c) <= set(partition_columns)]
    rest = [c for c in conjuncts if c not in on_partitions]
    return (E.and_(*on_partitions) if on_partitions else None,
            E.and_(*rest) if rest else None)


def lookup(stored: Stored, columns: list[str] | None = None, where: str | None = None
           ) -> dict:
    """The table's row count, size and per-column totals and bounds over the manifests the
    partition filter keeps; `partition_filter` was applied, `residual_filter` is left to the
    optimizer's selectivity estimate."""
    wanted = stored.table_schema.names if columns is None else columns
    partition_filter, residual = split(where, stored.partition_columns)
    filtered = sorted(columns_of(partition_filter)) if partition_filter is not None else []
    table = stored.read(sorted(set(wanted) | set(filtered)))
    keep = np.ones(table.num_rows, bool)
    if partition_filter is not None:
        views = _views(table, stored.table_schema, filtered)
        keep = evaluate(partition_filter, views).true
    kept = table.filter(pa.array(keep))
    out = {"manifests": table.num_rows, "manifests_kept": kept.num_rows,
           "partition_filter": partition_filter and partition_filter.sql("spark"),
           "residual_filter": residual and residual.sql("spark"),
           "record_count": _sum(kept["total_record_count"]),
           "file_count": _sum(kept["file_count"]),
           "missing_file_count": _sum(kept["missing_file_count"]),
           "file_size_in_bytes": _sum(kept["total_file_size_in_bytes"]), "columns": {}}
    for c in wanted:
        struct = kept[_struct_name(stored.table_schema, c)].combine_chunks()
        sizes = pc.struct_field(struct, FIELDS[0])
        column = {"total_column_size": None if sizes.null_count else _sum(sizes),
                  **{f: _sum(pc.struct_field(struct, f)) for f in FIELDS[1:]}}
        if struct.type.get_field_index("lower_bound") >= 0:
            low = pc.min(pc.struct_field(struct, "lower_bound"))
            high = pc.max(pc.struct_field(struct, "upper_bound"))
            column["lower_bound"] = to_text(pa.array([low.as_py()], low.type))[0].as_py()
            column["upper_bound"] = to_text(pa.array([high.as_py()], high.type))[0].as_py()
        out["columns"][c] = column
    return out


def _views(table: pa.Table, table_schema: pa.Schema, columns: list[str]) -> list[StatsView]:
    """Each manifest as the predicate evaluator sees a partition."""
    rows = table["total_record_count"].to_pylist()
    per_column = {}
    for c in columns:
        struct = table[_struct_name(table_schema, c)].combine_chunks()
        nulls = pc.struct_field(struct, "total_null_value_count").to_pylist()
        nans = pc.struct_field(struct, "total_nan_value_count").to_pylist()
        low, high = [None] * len(rows), [None] * len(rows)
        if struct.type.get_field_index("lower_bound") >= 0:
            low, high = bounds(pc.struct_field(struct, "lower_bound"),
                               pc.struct_field(struct, "upper_bound"))
        per_column[c] = [{"row_count": r, "null_count": n, "nan_count": x, "low": lo,
                          "high": hi} for r, n, x, lo, hi in zip(rows, nulls, nans, low, high)]
    names = set(table_schema.names)
    return [StatsView({c: per_column[c][i] for c in columns}, rows[i], names, table_schema)
            for i in range(len(rows))]


def _struct_name(table_schema: pa.Schema, column: str) -> str:
    return schema.index_column_name(table_schema.get_field_index(column))


def _sum(values: pa.Array | pa.ChunkedArray) -> int:
    return pc.sum(values).as_py() or 0
