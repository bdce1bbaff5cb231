"""Worker steps of the distributed sort that gives exact ranks (monostore/ranks.py drives them).

Values travel as (value, count) runs sorted by value, so a value repeated a billion times is one
row: heavy duplicates cost nothing. Order is Arrow's: numbers numerically with NaN after +inf,
temporal values by instant, decimals numerically, strings and binary bytewise.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from functions.column_stats import sum_by_value, unscaled_int64, value_counts
from metastore import files
from metastore import types as ty
from metastore.store import Store
from monostore.exchange import make_exchange


def channel(event: dict, name: str) -> str:
    """Exchange channels are per column: a job ranks several columns."""
    return f"{event['column_index']}-{name}"


def _field(event: dict) -> pa.Field:
    return files.decode_schema(event["field"]).field(0)


def sorted_runs(values: pa.Array) -> pa.Table:
    """(value, count) of the non-null values, by increasing value."""
    counted = value_counts(ty.normalize(values.drop_null()))
    table = pa.table({"value": counted.field(0), "count": counted.field(1)})
    return table.take(pc.sort_indices(table["value"]))


def _merge_runs(runs: list[pa.Table]) -> pa.Table:
    """Runs from several senders: equal values summed, result sorted by value."""
    if not runs:
        return None
    table = pa.concat_tables(runs)
    values, counts = sum_by_value(table["value"], table["count"].to_numpy())
    merged = pa.table({"value": values, "count": counts})
    return merged.take(pc.sort_indices(merged["value"]))


def rank_sample(event: dict) -> dict:
    """Step 1: sort this partition's column; keep the runs for step 3 and send the coordinator
    an equi-depth sample (value, weight) from which it cuts equal-count ranges."""
    field = _field(event)
    exchange = make_exchange(event["exchange"])
    parquet = Store(event["table"]).open_parquet(event["rel_path"])
    column = parquet.read(columns=[field.name]).column(0).combine_chunks()
    runs = sorted_runs(column.cast(ty.value_type(field.type)))
    me = event["index"]
    moved = exchange.put(channel(event, "sorted"), me, me, runs)
    cumulative = np.cumsum(runs["count"].to_numpy())
    n = int(cumulative[-1]) if cumulative.size else 0
    if n:
        marks = np.unique(np.searchsorted(cumulative, np.linspace(0, n, event["samples"] + 1)[1:]))
        weights = np.diff(np.r_[0, cumulative[marks]])
        samples = pa.table({"value": runs["value"].take(marks), "weight": weights})
        moved += make_exchange(event["small"]).put(channel(event, "samples"), me, 0, samples)
    return {"values": n, "distinct": runs.num_rows, "bytes": moved}


def rank_scatter(event: dict) -> dict:
    """Step 5: cut this partition's runs at the broadcast splitters and send range r its slice
    (range r holds splitter[r-1] < value <= splitter[r])."""
    exchange = make_exchange(event["exchange"])
    me = event["index"]
    runs = exchange.get_all(channel(event, "sorted"), me)[0]
    splitters = make_exchange(event["small"]).get_all(channel(event, "splitters"), 0)[0]["value"]
    cuts = [0] + _at_most(runs["value"].combine_chunks(), splitters.combine_chunks()) \
        + [runs.num_rows]
    moved = 0
    for r in range(len(cuts) - 1):
        if cuts[r + 1] > cuts[r]:
            moved += exchange.put(channel(event, "range"), me, r, runs.slice(cuts[r], cuts[r + 1] - cuts[r]))
    return {"bytes": moved}


def _at_most(values: pa.Array, splitters: pa.Array) -> list[int]:
    """For each splitter, how many of the sorted values are <= it (NaN being the largest)."""
    keys, bounds = _order_keys(values), _order_keys(splitters)
    if keys is not None:                  # numbers: one binary search per splitter
        return np.searchsorted(keys, bounds, side="right").tolist()
    return [int(pc.sum(pc.less_equal(values, s)).as_py() or 0) for s in splitters]


def _order_keys(values: pa.Array) -> np.ndarray | None:
    """Numbers that sort like the values (NumPy sorts NaN last, as Arrow does), or None."""
    t = values.type
    if values.null_count:
        return None
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return values.to_numpy(zero_copy_only=False)
    if pa.types.is_temporal(t):
        return values.view(pa.int32() if t.bit_width == 32 else pa.int64()).to_numpy()
    if pa.types.is_decimal128(t) and t.precision <= 18:
        return unscaled_int64(values)
    return None


def rank_merge(event: dict) -> dict:
    """Step 6: merge and sort this range's slices; local ranks count the smaller values within
    the range (the coordinator adds the ranges' offsets, step 7)."""
    exchange = make_exchange(event["exchange"])
    me = event["index"]
    runs = _merge_runs(exchange.get_all(channel(event, "range"), me))
    if runs is None:
        return {"values": 0, "bytes": 0}
    counts = runs["count"].to_numpy()
    smaller = np.cumsum(counts) - counts
    ranked = pa.table({"value": ty.to_text(runs["value"].combine_chunks()),
                       "smaller": smaller, "count": counts})
    return {"values": int(counts.sum()), "bytes": exchange.put(channel(event, "ranked"), me, me, ranked)}
