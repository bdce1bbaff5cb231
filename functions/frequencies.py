"""Worker steps of the exact table-level frequency algorithms (monostore/frequencies.py drives
them). Every step starts from the partition's stored frequencies.parquet, so an incremental
update never redoes a partition's scan.

One event per partition (or per bin) covers every column the step applies to. A column spec is
{"k": its index in the job, "name", "algorithm", plus "bins", "low", "high" for binned ones and
"retype" when the partition's type differs from the table's}.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from functions.column_stats import sum_by_value
from metastore import files, hashing
from metastore import types as ty
from metastore.store import Store
from monostore.exchange import make_exchange
from monostore.jobs import JOB_TTL_SECONDS, client

LOW_DISTINCT, LOW_DUPLICATE, BINNED = "low-distinct", "low-duplicate", "binned"
REDIS_BATCH = 10_000


def zset_key(job: str, k: int, sender: int | None = None) -> str:
    """Redis sorted sets of column k: member = value text, score = -frequency, so that
    ascending order is decreasing frequency, ties by value bytes. Each sender fills its own
    set (a retried step replaces it: no double counting); the coordinator sums them with one
    ZUNIONSTORE."""
    key = f"lakestats:job:{job}:frequencies:{k}"
    return key if sender is None else f"{key}:from:{sender}"


def channel(k: int, name: str) -> str:
    return f"frequencies-{k}-{name}"


def _columns(event: dict, algorithm: str) -> list[dict]:
    return [c for c in event["columns"] if c["algorithm"] == algorithm]


def _read(event: dict, columns: list[dict]) -> dict[int, pa.Table]:
    """(value, frequency) of each column in this partition, values as the table's type spells
    them (a column that is int32 here and float64 in the table is re-rendered)."""
    names = [c["name"] for c in columns]
    table = files.read_frequencies(Store(event["stats_dir"]), names)
    out = {}
    for c in columns:
        counts = table.filter(pc.equal(table["column"], c["name"])).select(["value", "frequency"])
        if c.get("retype") and counts.num_rows:   # an empty file may type a column null
            source, target = (files.decode_schema(s).field(0).type for s in c["retype"])
            typed = ty.from_text(counts["value"], source).cast(target)
            counts = counts.set_column(0, "value", ty.to_text(typed))
        out[c["k"]] = counts
    return out


def _stage(event: dict, k: int, counts: pa.Table) -> int:
    """This sender's counts of column k into its own sorted set; returns the bytes sent."""
    r = client(event["redis_url"], raw=True)
    key = zset_key(event["job"], k, event["index"])
    values = counts["value"].to_pylist()
    negated = (-counts["frequency"].to_numpy()).tolist()
    pipe = r.pipeline(transaction=False)
    pipe.delete(key)
    for start in range(0, len(values), REDIS_BATCH):
        end = start + REDIS_BATCH
        pipe.zadd(key, dict(zip(values[start:end], negated[start:end])))
    pipe.expire(key, JOB_TTL_SECONDS)
    pipe.execute()
    return int(pc.sum(pc.binary_length(counts["value"])).as_py() or 0) + 8 * counts.num_rows


def bin_of(counts: pa.Table, column: dict) -> np.ndarray:
    """The bin of each value. Integers and temporal values split the column's [low, high] range
    evenly (the broadcast table min/max); other values, unordered or unevenly spread, bin on
    their hash."""
    bins = column["bins"]
    if column.get("low") is not None:
        arrow_type = files.decode_schema(column["type"]).field(0).type
        typed = ty.from_text(counts["value"], arrow_type)
        storage = typed if pa.types.is_integer(typed.type) else typed.view(
            pa.int32() if typed.type.bit_width == 32 else pa.int64())
        x = storage.to_numpy(zero_copy_only=False).astype(np.float64)
        low, high = float(column["low"]), float(column["high"])
        position = (x - low) / (high - low + 1.0) * bins
        return np.clip(position, 0, bins - 1).astype(np.int64)
    return (hashing.hash_text(counts["value"]) % np.uint64(bins)).astype(np.int64)


def freq_send(event: dict) -> dict:
    """Step 1, per partition. low-distinct: add the counts to Redis. binned: cut the counts
    into bins and send bin b to worker b. low-duplicate: send the coordinator the values'
    hashes for its Bloom filter, flagging those repeated within this partition."""
    exchange = make_exchange(event["exchange"])
    me = event["index"]
    columns = event["columns"]
    counts = _read(event, columns)
    moved = {}
    for c in columns:
        k, table = c["k"], counts[c["k"]]
        if c["algorithm"] == LOW_DISTINCT:
            moved[k] = _stage(event, k, table)
        elif c["algorithm"] == BINNED:
            bins = bin_of(table, c)
            order = np.argsort(bins, kind="stable")
            ends = np.cumsum(np.bincount(bins, minlength=c["bins"]))
            table = table.take(order)
            moved[k] = 0
            for b in range(c["bins"]):
                start = ends[b - 1] if b else 0
                if ends[b] > start:
                    moved[k] += exchange.put(channel(k, "bin"), me, b,
                                             table.slice(start, ends[b] - start))
        else:
            hashes = pa.table({"hash": hashing.hash_text(table["value"]),
                               "repeated": pc.greater(table["frequency"], 1)})
            moved[k] = exchange.put(channel(k, "hashes"), me, 0, hashes)
    return {"bytes": _text_keys(moved)}


def _text_keys(d: dict) -> dict:
    return {str(k): v for k, v in d.items()}


def freq_confirm(event: dict) -> dict:
    """Step 3 of low-duplicate, per partition: the broadcast candidates that this partition
    holds go to Redis with their counts. With all_values, the other values (each seen once in
    the whole table) go to the coordinator sorted, to be merged into the exhaustive list.
    Results are keyed by the column's index as text, as JSON would have them."""
    columns = _columns(event, LOW_DUPLICATE)
    small, exchange = make_exchange(event["small"]), make_exchange(event["exchange"])
    counts = _read(event, columns)
    reports, moved = {}, {}
    for c in columns:
        k, table = c["k"], counts[c["k"]]
        candidates = small.get_all(channel(k, "candidates"), 0)
        candidates = candidates[0]["hash"] if candidates else pa.array([], pa.uint64())
        held = pc.is_in(pa.array(hashing.hash_text(table["value"])), value_set=candidates)
        confirmed = table.filter(held)
        reports[k] = confirmed.num_rows
        moved[k] = _stage(event, k, confirmed)
        if c.get("keep_once"):
            once = table.filter(pc.invert(held))
            once = once.take(pc.sort_indices(once["value"]))
            moved[k] += exchange.put(channel(k, "once"), event["index"], 0, once)
    return {"reports": _text_keys(reports), "bytes": _text_keys(moved)}


def freq_reduce(event: dict) -> dict:
    """Step 2 of binned, per bin: sum the bin's slices from every partition and send the
    coordinator the bin's frequencies in file order (decreasing frequency, then value)."""
    exchange = make_exchange(event["exchange"])
    me = event["index"]
    distinct, singletons, moved = {}, {}, {}
    for c in _columns(event, BINNED):
        k = c["k"]
        slices = exchange.get_all(channel(k, "bin"), me)
        if not slices:
            distinct[k] = singletons[k] = moved[k] = 0
            continue
        table = pa.concat_tables(slices)
        values, counts = sum_by_value(table["value"], table["frequency"].to_numpy())
        summed = pa.table({"value": values, "frequency": counts}).sort_by(
            [("frequency", "descending"), ("value", "ascending")])
        distinct[k] = summed.num_rows
        singletons[k] = int(pc.sum(pc.equal(summed["frequency"], 1)).as_py() or 0)
        moved[k] = exchange.put(channel(k, "reduced"), me, 0, summed)
    return {"distinct": _text_keys(distinct), "singletons": _text_keys(singletons),
            "bytes": _text_keys(moved)}
