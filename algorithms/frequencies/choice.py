"""Which algorithm suits a column, from the partitions' counts alone, and the plan of each
column for the steps."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakestats.algorithms.frequencies import BINNED, LOW_DISTINCT, LOW_DUPLICATE
from lakestats.core import hashing, schema
from lakestats.core import types as ty
from lakestats.core.settings import FrequencySettings
from lakestats.fleet.protocol import FrequencyColumn
from lakestats.metastore import files

BINS_PER_WORKER = 2
LOW_DISTINCT_BATCH = 4_000_000      # values a low-distinct reducer sums, beyond its last column
LOW_DISTINCT_SPLIT = 500_000        # values worth a low-distinct reducer of their own
COUNTS = ("row_count", "null_count", "distinct_count")     # what the choice reads


@dataclass
class ColumnFrequencies:
    """What the reduction of one column found (compute --json reports it)."""
    name: str
    algorithm: str
    distinct_count: int = 0
    singleton_count: int = 0
    complete: bool = True
    bytes: int = 0

    def as_json(self) -> dict:
        return {"algorithm": self.algorithm, "distinct_count": self.distinct_count,
                "bytes_exchanged": self.bytes}


@dataclass
class PlannedColumn:
    k: int
    field: pa.Field
    stats: dict[str, dict]               # partition -> its counts of the column (COUNTS)
    result: ColumnFrequencies
    spec: FrequencyColumn
    omit_singletons: bool

    def for_partition(self, partition_field: pa.Field) -> FrequencyColumn:
        """The spec as a partition holding the column as `partition_field` needs it."""
        if partition_field.type == self.field.type:
            return self.spec
        return dataclasses.replace(self.spec, retype=(
            files.encode_schema(pa.schema([partition_field])),
            files.encode_schema(pa.schema([self.field]))))


def choose(partition_rows: list[dict], table_row: dict, settings: FrequencySettings) -> str:
    """S = the sum of the partitions' distinct counts. At most low_distinct_max: low-distinct.
    Else the repeated values are estimated: a value repeated across partitions is counted once
    per partition in S and once in the table's distinct count (estimated from the merged KMV
    sketch); values repeated within a partition account for at most its rows beyond its
    distinct values. At most low_duplicate_max: low-duplicate; else binned."""
    distinct_sum = sum(r["distinct_count"] or 0 for r in partition_rows)
    if distinct_sum <= settings.low_distinct_max:
        return LOW_DISTINCT
    table_distinct = hashing.kmv_estimate(hashing.kmv_from_bytes(table_row["ndv_sketch"] or b""))
    within = sum(r["row_count"] - r["null_count"] - (r["distinct_count"] or 0)
                 for r in partition_rows)
    repeated = max(0.0, distinct_sum - table_distinct) + within
    return LOW_DUPLICATE if repeated <= settings.low_duplicate_max else BINNED


def counts(index: pa.Table, k: int, paths: list[str]) -> dict[str, dict]:
    """partition -> its COUNTS of column k, for the partitions holding the column."""
    struct = index[schema.index_column_name(k)]
    rows = pa.table({n: pc.struct_field(struct, n) for n in COUNTS}).to_pylist()
    return {p: c for p, c, held in zip(paths, rows, struct.is_valid().to_pylist()) if held}


def plan(table_schema: pa.Schema, table_rows: list[dict], index: pa.Table,
         settings: FrequencySettings, workers: int,
         columns: list[str] | None = None) -> list[PlannedColumn]:
    """Every column with values (of `columns`, if given), with its algorithm (chosen, or
    forced by the settings); the partitions' counts come from the partition index."""
    paths = index["path"].to_pylist()
    planned = []
    for k, (f, row) in enumerate(zip(table_schema, table_rows)):
        if ty.kind_of(f.type) == ty.OTHER or columns is not None and f.name not in columns:
            continue
        present = counts(index, k, paths)
        if not any(r["distinct_count"] for r in present.values()):
            continue
        auto = choose(list(present.values()), row, settings)
        algorithm = auto if settings.algorithm == "auto" else settings.algorithm
        omit = auto == LOW_DUPLICATE and not settings.all_values
        spec = FrequencyColumn(k, f.name, algorithm, keep_once=not omit)
        if algorithm == BINNED:
            spec = dataclasses.replace(
                spec, bins=max(1, min(len(paths), BINS_PER_WORKER * workers)),
                type=files.encode_schema(pa.schema([f])), **_range(f, row))
        planned.append(PlannedColumn(k, f, present, ColumnFrequencies(f.name, algorithm), spec,
                                     omit))
    return _batched(planned, workers)


def distinct_sum(c: PlannedColumn) -> int:
    return sum(r["distinct_count"] or 0 for r in c.stats.values())


def _batched(planned: list[PlannedColumn], workers: int) -> list[PlannedColumn]:
    """The low-distinct columns cut into contiguous batches of about equal S, a reducer per
    batch: one per LOW_DISTINCT_SPLIT values up to BINS_PER_WORKER per worker (a payload per
    batch from every partition: small tables send one), and as many as keep a batch within
    LOW_DISTINCT_BATCH."""
    low = [c for c in planned if c.result.algorithm == LOW_DISTINCT]
    sums = [distinct_sum(c) for c in low]
    total = sum(sums)
    wanted = min(BINS_PER_WORKER * workers, -(-total // LOW_DISTINCT_SPLIT))
    batches = min(len(low), max(1, wanted, -(-total // LOW_DISTINCT_BATCH)))
    before = 0
    for c, s in zip(low, sums):
        c.spec = dataclasses.replace(c.spec, batch=min(batches - 1, before * batches // total))
        before += s
    return planned


def _range(f: pa.Field, row: dict) -> dict:
    """Binned integers and temporal values split [min, max] of their integer storage."""
    if ty.kind_of(f.type) not in (ty.INTEGER, ty.TEMPORAL) or row.get("min") is None:
        return {}
    low, high = ty.integers(ty.from_text([row["min"], row["max"]], f.type)).to_pylist()
    return {"low": low, "high": high}
