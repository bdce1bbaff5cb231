"""Table frequencies of a new version from the previous version's, in the cost of the change.

A version's frequencies.parquet holds the columns it computed; the manifest points each column
at the version whose file holds its list (`frequency_lists`), so a column no change touched is
not rewritten. For a column a change does touch, one of:

- merge    the previous list is complete and exact, and small (at most MERGE_MAX values, or
           MERGE_PER_ROW per changed row): the coordinator adds the new partitions' counts and
           subtracts the removed ones', and sorts. Exact, in the cost of the list and the change.
- recompute by the distributed algorithms over every partition: a column new to the table, a
           previous list that is incomplete or stale, other frequency settings, `--exact`, or
           a stale list whose changed rows passed settings.compact_fraction of the table
           (compaction).
- carry    the list stays where it is, stale: its statistics say since which version
           (exact_as_of), and distinct_count becomes the sketch's estimate. Large columns (a
           near-unique text, a key) wait so for the next compaction instead of costing the
           whole column on every new file.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.algorithms.frequencies import LOW_DUPLICATE
from lakestats.algorithms.frequencies.choice import ColumnFrequencies, choose, counts
from lakestats.core import hashing
from lakestats.core import schema as statistics_schema
from lakestats.core import types as ty
from lakestats.core.batching import runs
from lakestats.core.counting import sum_by_value
from lakestats.core.settings import Settings
from lakestats.metastore import files, index
from lakestats.metastore.layout import Layout
from lakestats.metastore.manifest import Manifest
from lakestats.metastore.store import DataFile

MERGE_MAX = 100_000          # a list this long merges in well under a second
MERGE_PER_ROW = 8            # or, for a large change, up to 8 values per changed row
# values merged at once: the lists and counts of a run of columns, each file read once a run
# (a wide table's file holds thousands of columns' row groups: opened once a column, a new
# file cost its columns times the table's)
RUN_ENTRIES = 4_000_000


@dataclass
class _Merging:
    """A column whose list merges: its previous list's version, the partitions holding it."""
    k: int
    field: pa.Field
    list_version: str
    held: dict[str, dict]
    entries: int                  # the previous list's values and the changed rows, at most


@dataclass
class Plan:
    recompute: list[str]                             # by the distributed algorithms
    merged: dict[str, tuple[ColumnFrequencies, pa.Table]]
    lists: dict[str, dict]        # column -> {"version": where its list is, "stale_rows": n}
    stale: dict[str, str]         # column -> exact_as_of, for carried stale columns


def plan(previous: Manifest | None, previous_rows: dict[str, dict], new_index: pa.Table,
         table_schema: pa.Schema, table_rows: list[dict],
         added: list[tuple[DataFile, pa.Schema]], removed: dict[str, dict], layout: Layout,
         version: str, settings: Settings) -> Plan:
    """`previous` is the previous manifest (None: compute everything), `previous_rows` its
    table statistics by column, `added` the added partitions with their schemas, `removed`
    what removed_partitions says of the removed ones."""
    names = [f.name for f in table_schema if ty.kind_of(f.type) != ty.OTHER]
    out = Plan([], {}, {}, {})
    if previous is None or previous.settings.get("table") != settings.recorded()["table"]:
        out.recompute = names
        out.lists = {n: {"version": version, "stale_rows": 0} for n in names}
        return out
    total_rows = int(pc.sum(new_index["row_count"]).as_py() or 0)
    paths = new_index["path"].to_pylist()
    added_paths = {f.rel_path for f, _ in added}
    merging: list[_Merging] = []
    for k, field in enumerate(table_schema):
        if field.name not in names:
            continue
        held = counts(new_index, k, paths)
        changed = sum(r["row_count"] - r["null_count"] for p, r in held.items()
                      if p in added_paths) \
            + sum(r["values"].get(field.name, 0) for r in removed.values())
        before = previous_rows.get(field.name)
        where = previous.frequency_lists.get(
            field.name, {"version": previous.version, "stale_rows": 0})
        if before is None or before.get("distinct_count") is None \
                or settings.exact and before.get("exact_as_of"):
            out.recompute.append(field.name)
        elif changed == 0:
            out.lists[field.name] = where
            if before.get("exact_as_of"):
                out.stale[field.name] = before["exact_as_of"]
            continue
        elif not before.get("exact_as_of") and before["frequencies_complete"] \
                and before["distinct_count"] <= max(MERGE_MAX, MERGE_PER_ROW * changed):
            merging.append(_Merging(k, field, where["version"], held,
                                    before["distinct_count"] + changed))
        elif settings.exact or where["stale_rows"] + changed > settings.compact_fraction * total_rows:
            out.recompute.append(field.name)
        else:
            out.lists[field.name] = {"version": where["version"],
                                     "stale_rows": where["stale_rows"] + changed}
            out.stale[field.name] = before.get("exact_as_of") or previous.version
            continue
        out.lists[field.name] = {"version": version, "stale_rows": 0}
    out.merged = _merged(merging, layout, added, removed, table_rows, settings)
    return out


def removed_partitions(previous_index: pa.Table, previous_schema: pa.Schema,
                       removed: set[str]) -> dict[str, dict]:
    """path -> fingerprint, schema and each column's non-null values, of removed partitions."""
    rows = previous_index.filter(pc.is_in(previous_index["path"],
                                          pa.array(sorted(removed), pa.string())))
    out = {path: {"fingerprint": fp, "schema": part_schema, "values": {}}
           for (path, part_schema), fp in zip(index.schemas(rows),
                                              rows["fingerprint"].to_pylist())}
    for k, field in enumerate(previous_schema):
        struct = rows[statistics_schema.index_column_name(k)].combine_chunks()
        values = pc.subtract(pc.struct_field(struct, "row_count"),
                             pc.struct_field(struct, "null_count")).to_pylist()
        for path, n in zip(rows["path"].to_pylist(), values):
            if n is not None:
                out[path]["values"][field.name] = n
    return out


def _merged(merging: list[_Merging], layout: Layout, added: list[tuple[DataFile, pa.Schema]],
            removed: dict[str, dict], table_rows: list[dict], settings: Settings
            ) -> dict[str, tuple[ColumnFrequencies, pa.Table]]:
    """Each merging column's list: the previous one, plus the added partitions' counts, minus
    the removed ones'; a run of columns at a time, each file read once a run."""
    out = {}
    for run in runs(((m, m.entries) for m in merging), RUN_ENTRIES):
        parts = {m.field.name: [(_EMPTY, 1)] for m in run}
        types = {m.field.name: m.field.type for m in run}
        for version in sorted({m.list_version for m in run}):
            names = [m.field.name for m in run if m.list_version == version]
            for name, rows in files.column_runs(
                    files.read_frequencies(layout.version(version), names), _COUNTS):
                parts[name].append((rows, 1))
        for f, part_schema in added:
            _counts(parts, layout.partition(f.rel_path, f.fingerprint), part_schema, types,
                    [m.field.name for m in run if f.rel_path in m.held], 1)
        for path, row in removed.items():
            _counts(parts, layout.partition(path, row["fingerprint"]), row["schema"], types,
                    [m.field.name for m in run if m.field.name in row["values"]], -1)
        for m in run:
            out[m.field.name] = _merge(m, parts[m.field.name], table_rows[m.k], settings)
    return out


_COUNTS = ("value", "frequency")
_EMPTY = pa.table({"value": pa.array([], pa.string()), "frequency": pa.array([], pa.int64())})


def _counts(parts: dict[str, list[tuple[pa.Table, int]]], directory, part_schema: pa.Schema,
            types: dict[str, pa.DataType], names: list[str], sign: int) -> None:
    """A partition's (value, frequency) of `names`, values as the table's types spell them."""
    if names:
        for name, rows in files.column_runs(files.read_frequencies(directory, names),
                                            _COUNTS):
            parts[name].append((files.retexted(rows, part_schema.field(name).type,
                                               types[name]), sign))


def _merge(m: _Merging, parts: list[tuple[pa.Table, int]], table_row: dict,
           settings: Settings) -> tuple[ColumnFrequencies, pa.Table]:
    """A column's list from its signed parts' counts."""
    # chunks, not the columns: pa.chunked_array walks a ChunkedArray value by value in Python
    values = pa.chunked_array([c for p, _ in parts for c in p["value"].chunks], pa.string())
    signed = np.concatenate([p["frequency"].to_numpy() * sign for p, sign in parts])
    values, summed = sum_by_value(values, signed)
    merged = pa.table({"value": values, "frequency": summed})
    merged = merged.filter(pc.greater(merged["frequency"], 0)).sort_by(
        [("frequency", "descending"), ("value", "ascending")])
    result = ColumnFrequencies(m.field.name, "", distinct_count=merged.num_rows,
                               singleton_count=int(pc.sum(pc.equal(
                                   merged["frequency"], 1)).as_py() or 0))
    auto = choose(list(m.held.values()), table_row, settings.frequencies)
    result.algorithm = auto if settings.frequencies.algorithm == "auto" \
        else settings.frequencies.algorithm
    if auto == LOW_DUPLICATE and not settings.frequencies.all_values:   # near-unique
        merged = merged.filter(pc.greater(merged["frequency"], 1))
        result.complete = result.singleton_count == 0
    return result, merged


def estimated_distinct(row: dict) -> int | None:
    """A stale column's distinct count: what its (current) KMV sketch estimates."""
    if not row.get("ndv_sketch"):
        return row.get("distinct_count")
    return round(hashing.kmv_estimate(hashing.kmv_from_bytes(row["ndv_sketch"])))

