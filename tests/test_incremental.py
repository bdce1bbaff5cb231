"""Incremental versions: random sequences of added, removed and rewritten files. After every
step the published statistics, frequencies and histograms equal a from-scratch compute when
--exact asks for it, and both equal DuckDB over the files; without --exact, every statistic
marked exact is exact, and every one that is not says since which version."""
from __future__ import annotations

from collections import Counter
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from lakestats.algorithms.frequencies import delta
from lakestats.core import types as ty
from lakestats.metastore.layout import FREQUENCIES, HISTOGRAMS, STATISTICS
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
from tests.tables import write

COLUMNS = ["k", "x", "s", "d", "m"]


def part(seed_: int, rows: int, fresh: bool) -> pa.Table:
    """Keys that overlap other files' (or, `fresh`, that no other file holds), floats with
    NaN, -0.0 and nulls, unicode text, dates and decimals."""
    rng = np.random.default_rng(seed_)
    keys = rng.integers(0, 60, rows) + (1_000 * (seed_ + 1) if fresh else 0)
    x = rng.choice([np.nan, -0.0, 0.0, 1.5, -2.25, 1e300], rows)
    return pa.table({
        "k": pa.array(keys, pa.int64()),
        "x": pa.array(x, mask=rng.random(rows) < 0.2),
        "s": pa.array(rng.choice(["a", "é", "日本", "", "🦆", f"u{seed_}"], rows)),
        "d": pa.array(np.datetime64("2024-01-01") + rng.integers(0, 40, rows), pa.date32()),
        "m": pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(-500, 500, rows)],
                      pa.decimal128(9, 2)),
    })


steps = st.lists(st.tuples(st.sampled_from(["add", "add", "remove", "rewrite"]),
                           st.integers(0, 10_000), st.booleans()), min_size=3, max_size=6)


def oracle(root) -> dict[str, dict]:
    """DuckDB over the data files: rows, nulls, distinct (NaN once, -0.0 = 0.0), min, max."""
    paths = [f"{root}/{f.rel_path}" for f in Store(str(root)).list_files()]
    out = {}
    for c in COLUMNS:
        value = f"(CASE WHEN isnan({c}) THEN 'NaN'::DOUBLE ELSE {c} + 0.0 END)" if c == "x" else c
        n, nulls, distinct = duckdb.sql(f"SELECT count(*), count(*) - count({c}), count(DISTINCT "
                                        f"{value}) FROM read_parquet({paths!r})").fetchall()[0]
        out[c] = {"row_count": n, "null_count": nulls, "distinct_count": distinct}
    return out


def counts(root, column: str) -> Counter:
    found = Counter()
    for f in Store(str(root)).list_files():
        values = pq.read_table(root / f.rel_path, columns=[column])[column].combine_chunks()
        found.update(ty.to_text(ty.normalize(values.drop_null())).to_pylist())
    return found


def published(stats_root: str) -> dict:
    """The published files' contents, sketches of random compaction aside."""
    stats = StatisticsReader(stats_root)
    table = stats.statistics().drop_columns(["quantile_sketch"]).replace_schema_metadata(None)
    out = {STATISTICS: table.to_pylist(),
           HISTOGRAMS: stats.version_dir().read_parquet(HISTOGRAMS).to_pylist()}
    for c in COLUMNS:
        freq = stats.frequencies(c)
        out[f"{FREQUENCIES}:{c}"] = list(zip(freq["value"].to_pylist(),
                                              freq["frequency"].to_pylist()))
    return out


COMPACTION = 0.5


@pytest.fixture
def small_lists(monkeypatch):
    """Lists of more than 5 values count as large: the stale path runs on small files too
(and compaction waits for half the rows: COMPACTION)."""
    monkeypatch.setattr(delta, "MERGE_MAX", 5)
    monkeypatch.setattr(delta, "MERGE_PER_ROW", 0)


@pytest.mark.slow
@seed(20261123)
@settings(max_examples=10, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=steps, exact=st.booleans())
def test_incremental_versions_equal_a_clean_compute(tmp_path_factory, run, small_lists,
                                                    steps, exact):
    root = tmp_path_factory.mktemp("incremental")
    write(root / "f-start.parquet", part(0, 80, False))
    run(root, exact=exact, compact_fraction=COMPACTION)
    for i, (kind, s, fresh) in enumerate(steps):
        present = sorted(p.name for p in root.glob("f-*.parquet"))
        if kind == "remove" and len(present) > 1:
            (root / present[s % len(present)]).unlink()
        elif kind == "rewrite":
            write(root / present[s % len(present)], part(s, 30 + s % 90, fresh))
        else:
            write(root / f"f-{i}.parquet", part(s, 30 + s % 90, fresh))
        run(root, exact=exact, compact_fraction=COMPACTION)
        stats = StatisticsReader(f"{root}/_lakestats")
        rows = {r["column"]: r for r in stats.statistics(sketches=False).to_pylist()}
        for column, want in oracle(root).items():
            row = rows[column]
            assert (row["row_count"], row["null_count"]) == (want["row_count"],
                                                             want["null_count"])
            found = counts(root, column)
            listed = dict(zip(*(stats.frequencies(column)[n].to_pylist()
                                for n in ("value", "frequency"))))
            if row["distinct_count_exact"]:
                assert row["distinct_count"] == want["distinct_count"], (column, kind)
                assert row["exact_as_of"] is None
            else:
                assert not exact and row["exact_as_of"] < stats.version, column
            if row["exact_as_of"] is None:
                complete = found if row["frequencies_complete"] else {
                    v: n for v, n in found.items() if n > 1}
                assert listed == complete, column
        if exact:
            clean = str(tmp_path_factory.mktemp("clean"))
            run(root, stats_root=clean)
            assert published(f"{root}/_lakestats") == published(clean)


def test_large_lists_wait_stale_until_compaction_or_exact(tmp_path, run, small_lists):
    """A new file leaves large lists where they were, stale since the version before; a
    change past the compaction share, or --exact, makes them exact again."""
    for i in range(3):
        write(tmp_path / f"f-{i}.parquet", part(i, 100, False))
    first = run(tmp_path)
    write(tmp_path / "f-3.parquet", part(3, 10, True))
    second = run(tmp_path)
    rows = {r["column"]: r for r in StatisticsReader(f"{tmp_path}/_lakestats").statistics(
        sketches=False).to_pylist()}
    assert rows["k"]["exact_as_of"] == first.version and not rows["k"]["distinct_count_exact"]
    assert set(second.frequencies) < set(COLUMNS)          # not every list was recomputed
    assert run(tmp_path, exact=True).published             # nothing changed but staleness
    rows = {r["column"]: r for r in StatisticsReader(f"{tmp_path}/_lakestats").statistics(
        sketches=False).to_pylist()}
    assert rows["k"]["exact_as_of"] is None
    assert rows["k"]["distinct_count"] == oracle(tmp_path)["k"]["distinct_count"]
    (tmp_path / "f-0.parquet").unlink()
    (tmp_path / "f-1.parquet").unlink()                    # two thirds of the rows: compaction
    run(tmp_path)
    rows = {r["column"]: r for r in StatisticsReader(f"{tmp_path}/_lakestats").statistics(
        sketches=False).to_pylist()}
    assert all(rows[c]["exact_as_of"] is None for c in COLUMNS)
