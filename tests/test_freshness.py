"""Pruning follows the table as it is now: files landed, rewritten or removed after the last
compute (no recompute) are read whole or not at all, so every pruned answer equals a plain read
of every current file. Random changes and random predicates (hypothesis), checked with DuckDB
and Spark; Iceberg and Delta tables with a commit made after the compute."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from lakestats import spark_bridge
from lakestats.pruning import prune
from lakestats.pruning.joins import prune_query
from tests.tables import run_cli, scan, write
from tests.test_pruning_property import predicates

PARTS = 8


def part(rng: np.random.Generator, low: int, n: int) -> pa.Table:
    """Rows of the property table's schema, `i` clustered near `low`."""
    f = rng.normal(low / 50, 3, n)
    f[rng.random(n) < 0.05] = np.nan
    return pa.table({
        "i": pa.array(np.sort(rng.integers(low, low + 80, n)), pa.int64(),
                      mask=rng.random(n) < 0.1),
        "f": pa.array(f, mask=rng.random(n) < 0.1),
        "s": pa.array([f"{'ab'[low % 2]}{chr(97 + low // 50 % 26)}{k % 7}" for k in range(n)],
                      mask=rng.random(n) < 0.05),
        "id": pa.array(rng.permutation(n) + low * 20, pa.int64())})


@pytest.fixture(scope="module")
def computed(tmp_path_factory, run):
    root = tmp_path_factory.mktemp("fresh") / "t"
    rng = np.random.default_rng(5)
    for p in range(PARTS):
        write(root / f"part-{p:02d}.parquet", part(rng, p * 50, int(rng.integers(50, 300))))
    report = run(root)
    assert report.version and not report.failed
    return root


LOW = st.integers(-20, 600)
changes = st.lists(st.one_of(
    st.tuples(st.just("land"), LOW, st.integers(0, 200)),
    st.tuples(st.just("rewrite"), st.integers(0, PARTS - 1), LOW, st.integers(0, 200)),
    st.tuples(st.just("remove"), st.integers(0, PARTS - 1))), min_size=1, max_size=4)
queries = st.tuples(predicates, st.sampled_from([None, 0, 1, 7, 100]),
                    st.sampled_from([None, "i DESC", "i ASC", "f DESC"]))


def changed_copy(computed: Path, ops: list[tuple]) -> Path:
    """A copy of the computed table (its statistics too: mtimes kept) with `ops` applied."""
    root = Path(tempfile.mkdtemp(prefix="fresh-")) / "t"
    shutil.copytree(computed, root)
    rng = np.random.default_rng(len(ops))
    for k, op in enumerate(ops):
        if op[0] == "land":
            write(root / f"new-{k}.parquet", part(rng, op[1], op[2]))
        elif op[0] == "rewrite":
            write(root / f"part-{op[1]:02d}.parquet", part(rng, op[2], op[3]))
        else:
            (root / f"part-{op[1]:02d}.parquet").unlink(missing_ok=True)
    return root


def current(root: Path) -> list[str]:
    return sorted(str(p) for p in root.glob("*.parquet"))


def answer(paths: list[str], where: str, limit: int | None, order: str | None) -> list:
    """The query's rows over `paths` as Spark orders them (nulls first ascending, last
    descending): the order column's values with ORDER BY, else the number of rows."""
    if not paths:
        return [] if order else [0]
    db = scan(paths)
    sql = f"select * from rows where {where}"
    if order:
        column, direction = order.split()
        nulls = "FIRST" if direction == "ASC" else "LAST"
        sql = f"select {column} from ({sql}) order by {column} {direction} NULLS {nulls}"
        if limit is not None:
            sql += f" limit {limit}"
        return [repr(r[0]) for r in db.sql(sql).fetchall()]
    n = db.sql(f"select count(*) from ({sql})").fetchall()[0][0]
    return [n if limit is None else min(n, limit)]


SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@seed(29)
@SETTINGS
@given(ops=changes, query=queries)
def test_prune_and_prune_query_equal_a_read_of_every_current_file(computed, ops, query):
    where, limit, order = query
    root = changed_copy(computed, ops)
    try:
        every = current(root)
        result = prune(str(root / "_lakestats"), where, limit, order, table_uri=str(root))
        kept = [str(root / p) for p in result.kept]
        assert set(result.unknown) <= set(result.kept)
        assert set(kept) <= set(every), "a file gone since the compute is read"
        assert answer(kept, where, limit, order) == answer(every, where, limit, order), \
            (ops, result.as_json())
        if limit is None and order is None:
            tables = prune_query(f"SELECT * FROM t WHERE {where}", {"t": str(root)})
            plan = tables.as_json()["tables"]["t"]
            assert set(plan["unknown"]) <= set(plan["kept"])
            assert answer([str(root / p) for p in plan["kept"]], where, None, None) == \
                answer(every, where, None, None), (ops, plan)
    finally:
        shutil.rmtree(root.parent)


@pytest.mark.slow
@seed(30)
@settings(SETTINGS, max_examples=12)
@given(ops=changes, query=queries)
def test_spark_read_equals_a_plain_read_of_every_current_file(computed, spark, ops, query):
    where, limit, order = query
    root = changed_copy(computed, ops)
    try:
        df = spark_bridge.read(spark, str(root), where=where, order_by=order, limit=limit)
        plain = spark.read.parquet(*current(root)).where(where) if current(root) else None
        if order:
            column = order.split()[0]
            got = [repr(r[0]) for r in df.select(column).collect()]
            assert got == answer(current(root), where, limit, order), ops
        else:
            expected = plain.count() if plain is not None else 0
            assert df.count() == (expected if limit is None else min(limit, expected)), ops
        if limit is None and order is None and plain is not None:
            got = spark_bridge.sql(spark, f"SELECT count(*) FROM t WHERE {where}",
                                   {"t": str(root)}).collect()[0][0]
            assert got == plain.count(), ops
    finally:
        shutil.rmtree(root.parent)


def test_cli_reports_unknown_files_and_assume_current(tmp_path, run):
    """The issue's example: two files computed, a third landed with a matching row."""
    root = tmp_path / "t"
    write(root / "f1.parquet", pa.table({"k": pa.array(range(0, 1000), pa.int64())}))
    write(root / "f2.parquet", pa.table({"k": pa.array(range(1000, 2000), pa.int64())}))
    run(root)
    write(root / "f3.parquet", pa.table({"k": pa.array(range(500, 600), pa.int64())}))
    out = run_cli("prune", str(root), "--where", "k = 550", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["kept"] == ["f1.parquet", "f3.parquet"] and got["unknown"] == ["f3.parquet"]
    assert got["assume_current"] is False and got["version"] == "v000001"
    text = run_cli("prune", str(root), "--where", "k = 550")
    assert text.stderr.strip() == \
        "lakestats: note: 1 file newer than statistics version v000001: read whole"
    assert "f3.parquet  (newer than the statistics)" in text.stdout
    # a rewrite in place is unknown too; a removed file is neither kept nor skipped
    write(root / "f2.parquet", pa.table({"k": pa.array([550, 5000], pa.int64())}))
    (root / "f1.parquet").unlink()
    got = json.loads(run_cli("prune", str(root), "--where", "k = 550", "--json").stdout)
    assert got == {"kept": ["f2.parquet", "f3.parquet"], "skipped": [], "fully_matching": [],
                   "unknown": ["f2.parquet", "f3.parquet"], "version": "v000001",
                   "assume_current": False}
    trusted = run_cli("prune", str(root), "--where", "k = 550", "--assume-current", "--json")
    got = json.loads(trusted.stdout)
    assert got["assume_current"] is True and got["unknown"] == [] and \
        got["kept"] == ["f1.parquet"]
    assert "assumed current" in run_cli("prune", str(root), "--where", "k = 550",
                                        "--assume-current").stderr
    query = run_cli("prune-query", "--sql", "SELECT * FROM t WHERE k = 550",
                    "--table", f"t={root}", "--json")
    assert json.loads(query.stdout)["tables"]["t"]["unknown"] == ["f2.parquet", "f3.parquet"]


def test_a_listing_compared_as_arrays_equals_fingerprints_compared_file_by_file(tmp_path, run):
    """A plain directory's files are compared with the index by size, ETag and reading digest
    (pruning.freshness): the same files unknown and gone as comparing each listed file's
    fingerprint, where only the size changed (the mtime put back), where only how the files
    are read changed (a directory value that makes the column a string), and over an index
    written before the reading digest (its files hashed one by one)."""
    import os

    import pyarrow.parquet as pq

    from lakestats.formats.hive import listed
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.metastore.store import Store
    from lakestats.pruning.freshness import PUBLISHED, freshness

    root = tmp_path / "t"
    for k in (1, 2):
        for j in range(3):
            write(root / f"k={k}" / f"f{j}.parquet", pa.table({"x": [k * 10 + j]}))
    run(root)
    reader = StatisticsReader(str(root / "_lakestats"))
    index = reader.partition_index([], PUBLISHED)
    assert index["reading"].null_count == 0 and index["reading"][0].as_py() != ""
    legacy = index.drop_columns(["reading"])

    def check(expected_unknown: list[str], expected_gone: set[str]) -> None:
        fingerprints = dict(zip(index["path"].to_pylist(), index["fingerprint"].to_pylist()))
        files = {f.rel_path: f for f in listed(Store(str(root)).list_entries())}
        unknown = sorted(p for p, f in files.items() if fingerprints.get(p) != f.fingerprint)
        gone = {p for p in fingerprints if p not in files}
        assert (unknown, gone) == (expected_unknown, expected_gone)
        for published in (index, legacy):
            now = freshness(str(root), reader.manifest, published)
            assert (now.unknown, now.gone) == (unknown, gone)
            assert all(now.now[p].fingerprint == f.fingerprint for p, f in files.items())

    check([], set())
    rewritten = root / "k=1" / "f0.parquet"
    stamp = rewritten.stat().st_mtime_ns
    pq.write_table(pa.table({"x": [1, 2, 3]}), rewritten)
    os.utime(rewritten, ns=(stamp, stamp))
    (root / "k=2" / "f2.parquet").unlink()
    write(root / "k=2" / "f9.parquet", pa.table({"x": [5]}))
    check(["k=1/f0.parquet", "k=2/f9.parquet"], {"k=2/f2.parquet"})
    write(root / "k=a" / "f0.parquet", pa.table({"x": [7]}))      # k: int -> string
    check(["k=1/f0.parquet", "k=1/f1.parquet", "k=1/f2.parquet", "k=2/f0.parquet",
           "k=2/f1.parquet", "k=2/f9.parquet", "k=a/f0.parquet"], {"k=2/f2.parquet"})


# -- table formats: a commit made after the compute ----------------------------------------------

def batch(low: int, n: int = 100) -> pa.Table:
    return pa.table({"k": pa.array(range(low, low + n), pa.int64()),
                     "part": pa.array([low // 1000] * n, pa.int32())})


def check_format(spark, root: str, rows: pa.Table) -> None:
    """Every pruned read of the table equals the format library's own read of its rows."""
    for where, limit, order in [("k = 2050", None, None), ("k >= 1990", None, None),
                                ("k < 50 OR k > 2095", None, None), ("k >= 0", 3, None),
                                ("k >= 0", 5, "k DESC"), ("part = 2", None, None)]:
        expected = duckdb.sql(f"select k from rows where {where}").fetchall()
        df = spark_bridge.read(spark, root, where=where, order_by=order, limit=limit)
        got = [r[0] for r in df.select("k").collect()]
        if order:
            assert got == sorted((r[0] for r in expected), reverse=True)[:limit], where
        elif limit is not None:
            assert len(got) == min(limit, len(expected)), where
        else:
            assert sorted(got) == sorted(r[0] for r in expected), where
            counted = spark_bridge.sql(spark, f"SELECT count(*) FROM t WHERE {where}",
                                       {"t": root}).collect()[0][0]
            assert counted == len(expected), where


def test_iceberg_commit_after_compute(spark, run, tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo
    catalog = SqlCatalog("fresh", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"file://{tmp_path}")
    catalog.create_namespace("lake")
    table = catalog.create_table("lake.t", schema=batch(0).schema)
    table.append(batch(0))
    table.append(batch(1000))
    root = table.location().removeprefix("file://")
    assert run(root).version
    table.append(batch(2000))                            # landed since: unknown
    table.delete(EqualTo("k", 1050))                     # a file rewritten since
    table = catalog.load_table("lake.t")
    result = spark_bridge.prune(root, where="k = 2050")
    assert result.unknown and set(result.unknown) <= set(result.kept)
    check_format(spark, root, table.scan().to_arrow())


def test_delta_commit_after_compute(spark, run, tmp_path):
    from deltalake import DeltaTable, QueryBuilder, write_deltalake
    root = tmp_path / "delta"
    write_deltalake(root, batch(0))
    write_deltalake(root, batch(1000), mode="append")
    assert run(root).version
    write_deltalake(root, batch(2000), mode="append")
    DeltaTable(root).delete("k = 1050")
    result = spark_bridge.prune(str(root), where="k = 2050")
    assert result.unknown and set(result.unknown) <= set(result.kept)
    rows = pa.table(QueryBuilder().register("t", DeltaTable(root))
                    .execute("SELECT * FROM t").read_all())
    check_format(spark, str(root), rows)
