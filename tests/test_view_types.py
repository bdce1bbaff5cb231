"""Arrow's view and large types (DuckDB, Polars and delta-rs write string_view and
binary_view) get exactly the statistics, frequencies, ranks and pruning of their plain forms,
nulls, empty strings and unicode included."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from lakestats.cli import main
from lakestats.metastore.reader import StatisticsReader
from lakestats.pruning import prune
from tests.tables import write

TEXTS = ["a", "", "日本", "🦆 duck", "é", "a\x00b", "z" * 40]
FORMS = {"s": pa.string(), "s_view": pa.string_view(), "s_large": pa.large_string(),
         "b": pa.binary(), "b_view": pa.binary_view(), "b_large": pa.large_binary()}


def part(seed: int, rows: int = 300) -> pa.Table:
    rng = np.random.default_rng(seed)
    texts = [TEXTS[i] if keep else None for i, keep in zip(rng.integers(0, len(TEXTS), rows),
                                                           rng.random(rows) > 0.2)]
    return pa.table({name: pa.array([None if t is None else t if name.startswith("s")
                                     else t.encode() for t in texts], type_)
                     for name, type_ in FORMS.items()})


@pytest.fixture(scope="module")
def table(tmp_path_factory, run):
    root = tmp_path_factory.mktemp("views")
    for i in range(3):
        write(root / f"part-{i}.parquet", part(i))
    assert not run(root).failed
    return root


@pytest.mark.parametrize("plain, other", [("s", "s_view"), ("s", "s_large"), ("b", "b_view"),
                                          ("b", "b_large")])
def test_view_and_large_forms_match_the_plain_form(table, plain, other):
    stats = StatisticsReader(f"{table}/_lakestats")
    drop = ("column", "type", "ndv_sketch", "quantile_sketch", "bloom_filter")
    for partition in (None, "part-1.parquet"):
        rows = {r["column"]: r for r in stats.statistics(partition).to_pylist()}
        assert {k: v for k, v in rows[other].items() if k not in drop} == \
            {k: v for k, v in rows[plain].items() if k not in drop}
        assert rows[other]["null_count"] > 0 and rows[other]["distinct_count"] == len(TEXTS)
        assert stats.frequencies(other, partition).equals(stats.frequencies(plain, partition))
    literal = "'日本'" if plain == "s" else "X'e697a5e69cac'"
    assert prune(f"{table}/_lakestats", f"{other} = {literal}").as_json() == \
        prune(f"{table}/_lakestats", f"{plain} = {literal}").as_json()


def test_exact_quantiles_of_a_view_column(table, capsys):
    answers = {}
    for column in ("s", "s_view"):
        assert main(["quantiles", str(table), column, "0", "0.5", "1", "--exact", "--json"]) == 0
        answers[column] = json.loads(capsys.readouterr().out)["quantiles"]
    assert answers["s"] == answers["s_view"]


def test_one_column_stored_in_several_forms_merges_exactly(tmp_path, run):
    """Files that store one column as string, string_view and large_string (and binary's
    forms): one table column, its statistics those of the rows read as plain strings (delta-rs
    writes string_view beside string after a delete)."""
    from tests.oracle import check_everything
    parts = [part(seed) for seed in range(3)]
    plain = pa.schema([("s", pa.string()), ("b", pa.binary())])
    for k, (s, b) in enumerate([("s_view", "b_view"), ("s", "b"), ("s_large", "b_large")]):
        write(tmp_path / "t" / f"part-{k}.parquet",
              pa.table({"s": parts[k][s], "b": parts[k][b]}))
    run(tmp_path / "t")
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    write(oracle / "rows.parquet", pa.concat_tables(
        pa.table({"s": p["s"], "b": p["b"]}).cast(plain) for p in parts))
    stats = StatisticsReader(f"{tmp_path / 't'}/_lakestats")
    assert stats.schema().names == ["s", "b"]
    assert check_everything(oracle, stats, ["rows.parquet"], None, plain) == 2
