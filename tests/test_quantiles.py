"""Exact quantiles from a frequency list read in batches, within bounded memory: the same
answers as DuckDB's quantile_disc over the values the list counts, on tricky data, whether
the list is sorted in memory or cut into buckets by sampled splitters."""
from __future__ import annotations

from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from lakestats.core import quantiles
from lakestats.core import types as ty

QS = [0.0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999, 1.0]
RNG = np.random.default_rng(3)
N = 5_000


def kolkata(n):
    return pa.array(RNG.integers(-10**15, 10**15, n), pa.int64()).cast(
        pa.timestamp("us", "Asia/Kolkata"))


COLUMNS = {
    "int64": lambda n: pa.array(np.concatenate([RNG.integers(-2**63, 2**63 - 1, n - 2,
                                                             dtype=np.int64),
                                                [-2**63, 2**63 - 1]])),
    "float64": lambda n: pa.array(RNG.choice([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-300,
                                              -1e300], n) * RNG.integers(1, 500, n)),
    "decimal": lambda n: pa.array([Decimal(int(v)).scaleb(-3) for v in
                                   RNG.integers(-10**12, 10**12, n)], pa.decimal128(18, 3)),
    "string": lambda n: pa.array([f"{w}{i % 977}" for i, w in
                                  enumerate(RNG.choice(["", "é", "日本", "a\x00b", "🦆", "Z"],
                                                       n))]),
    "timestamp_tz": kolkata,
}


def frequency_list(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(canonical text, count) of each distinct value, in frequency order as lists are."""
    counted = pa.table({"v": ty.to_text(values)}).group_by("v").aggregate([("v", "count")])
    order = np.argsort(-counted["v_count"].to_numpy(), kind="stable")
    return counted["v"].combine_chunks().take(order), counted["v_count"].to_numpy()[order]


@pytest.mark.parametrize("held", [10**9, 500])       # in memory; three passes over buckets
@pytest.mark.parametrize("kind", list(COLUMNS))
def test_batched_quantiles_equal_duckdb(kind, held, monkeypatch):
    monkeypatch.setattr(quantiles, "HELD", held)
    monkeypatch.setattr(quantiles, "SAMPLE", 64)
    values = COLUMNS[kind](N)
    values = pa.concat_arrays([values, values.slice(0, N // 3)])        # repeats
    texts, counts = frequency_list(values)
    passes = []

    def batches(only=None):
        starts = range(0, len(texts), 100)
        passes.append(len(starts) if only is None else len(only))
        return ((texts.slice(starts[k], 100), counts[starts[k]:starts[k] + 100])
                for k in (range(len(starts)) if only is None else sorted(only)))

    got = quantiles.from_count_batches(batches, len(texts), values.type, QS)
    everything = -(-len(texts) // 100)
    assert passes[:2] == [everything] * min(2, len(passes))
    assert len(passes) == (1 if held > len(texts) else 3)
    data = pa.table({"v": values})  # noqa: F841 (DuckDB reads it by name)
    truth = duckdb.sql(f"SELECT quantile_disc(v, {QS}) FROM data").fetchall()[0][0]
    expected = ty.to_text(pa.array(truth, values.type)).to_pylist()
    assert got == expected


def test_a_long_list_reads_again_only_the_batches_of_a_quantile(monkeypatch):
    """Mostly distinct values (a comment column): a quantile's bucket lies in a batch or two
    of the list, and only those are read a third time."""
    monkeypatch.setattr(quantiles, "HELD", 500)
    monkeypatch.setattr(quantiles, "SAMPLE", 64)
    values = pa.array([f"comment {i * 7919 % 10_000:05d} é" for i in range(10_000)]
                      + ["repeated"] * 40 + ["comment 00042 é"] * 3)
    listed = pa.table({"v": values}).group_by("v").aggregate([("v", "count")]).sort_by(
        [("v_count", "descending"), ("v", "ascending")])      # as lists are written
    texts, counts = listed["v"].combine_chunks(), listed["v_count"].to_numpy()
    read = []

    def batches(only=None):
        starts = range(0, len(texts), 250)
        wanted = range(len(starts)) if only is None else sorted(only)
        read.append(len(wanted))
        return ((texts.slice(starts[k], 250), counts[starts[k]:starts[k] + 250])
                for k in wanted)

    data = pa.table({"v": values})  # noqa: F841 (DuckDB reads it by name)
    for q in (0.0, 0.5, 0.999, 1.0):
        read.clear()
        truth = duckdb.sql(f"SELECT quantile_disc(v, {q}) FROM data").fetchall()[0][0]
        assert quantiles.from_count_batches(batches, len(texts), values.type, [q]) == [truth]
        assert read[:2] == [41, 41] and read[2] <= 3


def test_an_empty_list_has_no_quantiles():
    assert quantiles.from_count_batches(lambda: iter(()), 0, pa.int64(), [0.5]) == [None]
