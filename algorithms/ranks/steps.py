"""The worker steps of the distributed sort. Values travel as (value, count) runs sorted by
value, so a value repeated a billion times is one row: heavy duplicates cost nothing."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.algorithms.ranks import channel
from lakestats.core import types as ty
from lakestats.core.counting import sum_by_value, value_counts
from lakestats.core.exact import unscaled_int64
from lakestats.fleet.exchange import for_event
from lakestats.fleet.protocol import RankResult, StepEvent
from lakestats.formats.rows import open_rows
from lakestats.metastore import files
from lakestats.metastore.store import Store


def sorted_runs(values: pa.Array) -> pa.Table:
    """(value, count) of the non-null values, by increasing value."""
    counted = value_counts(ty.normalize(values).drop_null())
    table = pa.table({"value": counted.field(0), "count": counted.field(1)})
    return table.take(pc.sort_indices(table["value"]))


def _merge_runs(runs: list[pa.Table]) -> pa.Table | None:
    """Runs from several senders: equal values summed, result sorted by value."""
    if not runs:
        return None
    table = pa.concat_tables(runs)
    values, counts = sum_by_value(table["value"], table["count"].to_numpy())
    merged = pa.table({"value": values, "count": counts})
    return merged.take(pc.sort_indices(merged["value"]))


def sample(event: StepEvent) -> RankResult:
    """Step 1: sort this partition's column (the rows its table format defines); keep the runs
    for step 5 and send the coordinator an equi-depth sample (value, weight) from which it
    cuts equal-count ranges."""
    task = event.task
    field = files.decode_schema(task.field).field(0)
    exchange, small = for_event(event)
    rows = open_rows(Store(task.table), task.rel_path, task.reading, whole=False)
    if field.name in rows.schema.names:
        column = rows.read([field.name]).column(0).combine_chunks()
    else:                                  # a file without the column: its values are null
        column = pa.array([], field.type)
    runs = sorted_runs(column.cast(ty.value_type(field.type)))
    me = task.index
    moved = exchange.put(channel(task.column, "sorted"), me, me, runs)
    cumulative = np.cumsum(runs["count"].to_numpy())
    n = int(cumulative[-1]) if cumulative.size else 0
    if n:
        marks = np.unique(np.searchsorted(cumulative, np.linspace(0, n, task.samples + 1)[1:]))
        weights = np.diff(np.r_[0, cumulative[marks]])
        samples = pa.table({"value": runs["value"].take(marks), "weight": weights})
        moved += small.put(channel(task.column, "samples"), me, 0, samples)
    return RankResult(values=n, distinct=runs.num_rows, bytes=moved)


def scatter(event: StepEvent) -> RankResult:
    """Step 5: cut this partition's runs at the broadcast splitters and send range r its slice
    (range r holds splitter[r-1] < value <= splitter[r])."""
    task = event.task
    exchange, small = for_event(event)
    me = task.index
    runs = exchange.get_all(channel(task.column, "sorted"), me)[0]
    splitters = small.get_all(channel(task.column, "splitters"), 0)[0]["value"]
    cuts = [0] + _at_most(runs["value"].combine_chunks(), splitters.combine_chunks()) \
        + [runs.num_rows]
    moved = 0
    for r in range(len(cuts) - 1):
        if cuts[r + 1] > cuts[r]:
            moved += exchange.put(channel(task.column, "range"), me, r,
                                  runs.slice(cuts[r], cuts[r + 1] - cuts[r]))
    return RankResult(bytes=moved)


def _at_most(values: pa.Array, splitters: pa.Array) -> list[int]:
    """For each splitter, how many of the sorted values are <= it (NaN being the largest)."""
    if not len(splitters):            # no sample anywhere: a column without values
        return []
    keys, bounds = _order_keys(values), _order_keys(splitters)
    if keys is not None:                  # numbers: one binary search per splitter
        return np.searchsorted(keys, bounds, side="right").tolist()
    return [int(pc.sum(pc.less_equal(values, s)).as_py() or 0) for s in splitters]


def _order_keys(values: pa.Array) -> np.ndarray | None:
    """Numbers that sort like the values (NumPy sorts NaN last, as Arrow does), or None."""
    t = values.type
    if values.null_count:
        return None
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        return ty.integers(values).to_numpy(zero_copy_only=False)
    if pa.types.is_floating(t):
        return values.to_numpy(zero_copy_only=False)
    if pa.types.is_decimal128(t) and t.precision <= 18:
        return unscaled_int64(values)
    return None


def merge(event: StepEvent) -> RankResult:
    """Step 6: merge and sort this range's slices; local ranks count the smaller values within
    the range (the coordinator adds the ranges' offsets, step 7)."""
    task = event.task
    exchange, _ = for_event(event)
    runs = _merge_runs(exchange.get_all(channel(task.column, "range"), task.index))
    if runs is None:
        return RankResult()
    counts = runs["count"].to_numpy()
    smaller = np.cumsum(counts) - counts
    ranked = pa.table({"value": ty.to_text(runs["value"].combine_chunks()),
                       "smaller": smaller, "count": counts})
    return RankResult(values=int(counts.sum()),
                      bytes=exchange.put(channel(task.column, "ranked"), task.index, task.index,
                                         ranked))
