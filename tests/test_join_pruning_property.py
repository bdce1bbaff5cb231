"""Property: join pruning changes no query's answer and never skips a file holding a row that
joins. Random star and chain schemas, laid out at random (sorted on some column or shuffled,
cut into a random number of files), with nulls and keys missing from the other side; random
queries (hypothesis) of inner, outer, semi and anti joins, parenthesized joins, derived tables
(GROUP BY with HAVING, UNION ALL) and local predicates. Spark over the kept files is held to
Spark over every file; DuckDB, reading every file with its name, says which files hold a row
of the result."""
from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakestats import spark_bridge
from lakestats.pruning.joins import prune_query
from tests.tables import write

pytestmark = pytest.mark.slow

DAY0 = np.datetime64("2024-01-01")


def _layout(rng, root: Path, name: str, table: pa.Table) -> None:
    """Sorted on a random column (nulls last) or shuffled, cut into 2-6 files."""
    column = rng.choice(table.column_names + ["(shuffled)"])
    order = rng.permutation(table.num_rows) if column == "(shuffled)" else \
        pa.compute.sort_indices(table, [(column, "ascending")])
    table = table.take(order)
    cuts = np.sort(rng.choice(np.arange(1, table.num_rows), int(rng.integers(1, 6)),
                              replace=False))
    for i, (lo, hi) in enumerate(zip([0, *cuts], [*cuts, table.num_rows])):
        write(root / name / f"part-{i}.parquet", table.slice(lo, hi - lo))


def _keys(rng, n: int, low: int, high: int, nulls: float = 0.05) -> pa.Array:
    return pa.array(rng.integers(low, high, n), pa.int64(), mask=rng.random(n) < nulls)


def _tables(rng) -> dict[str, pa.Table]:
    n = 400
    day = DAY0 + rng.integers(0, 120, n)
    return {
        # a star: fact and three dimensions (integer, string and date keys)
        "fact": pa.table({"d1": _keys(rng, n, 0, 60), "d2": pa.array(
            [f"s{v:02d}" for v in rng.integers(0, 30, n)], mask=rng.random(n) < 0.05),
            "d3": pa.array(day, pa.date32()), "m": pa.array(rng.integers(-50, 50, n))}),
        "dim1": pa.table({"k": pa.array(rng.permutation(80)[:50], pa.int64()),
                          "a": pa.array(rng.integers(0, 10, 50))}),
        "dim2": pa.table({"k": pa.array([f"s{v:02d}" for v in rng.permutation(40)[:25]]),
                          "b": pa.array(rng.integers(0, 10, 25))}),
        "dim3": pa.table({"k": pa.array(DAY0 + rng.permutation(150)[:60], pa.date32()),
                          "c": pa.array(rng.integers(0, 10, 60))}),
        # a chain: c1 - c2 - c3 - c4
        "c1": pa.table({"k1": _keys(rng, 120, 0, 100), "x": pa.array(rng.integers(0, 10, 120))}),
        "c2": pa.table({"k1": _keys(rng, 150, 0, 120), "k2": _keys(rng, 150, 0, 300),
                        "y": pa.array(rng.integers(0, 10, 150))}),
        "c3": pa.table({"k2": _keys(rng, 150, 100, 400), "k3": _keys(rng, 150, 0, 50),
                        "z": pa.array(rng.integers(0, 10, 150))}),
        "c4": pa.table({"k3": _keys(rng, 60, 20, 80), "w": pa.array(rng.integers(0, 10, 60))}),
    }


TABLES = ["fact", "dim1", "dim2", "dim3", "c1", "c2", "c3", "c4"]


@pytest.fixture(scope="module", params=[3, 17])
def lake(request, tmp_path_factory, run):
    root = tmp_path_factory.mktemp(f"joins{request.param}")
    rng = np.random.default_rng(request.param)
    for name, table in _tables(rng).items():
        _layout(rng, root, name, table)
        run(root / name)
    return {name: str(root / name) for name in TABLES}


def _value_predicate(column: str, kind: str):
    if kind == "int":
        return st.builds(lambda op, v: f"{column} {op} {v}",
                         st.sampled_from(["<", "<=", ">", ">=", "=", "!="]), st.integers(-5, 12))
    if kind == "day":
        return st.builds(lambda a, w: f"{column} BETWEEN DATE '{DAY0 + a}' AND DATE "
                                      f"'{DAY0 + a + w}'", st.integers(0, 140), st.integers(0, 30))
    return st.builds(lambda v: f"{column} IN ({', '.join(repr(f's{x:02d}') for x in v)})",
                     st.lists(st.integers(0, 40), min_size=1, max_size=4))


DIMS = {"dim1": ("d1", "a", "int"), "dim2": ("d2", "b", "int"), "dim3": ("d3", "c", "int")}
FORMS = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "IN", "EXISTS", "NOT EXISTS", "NOT IN"]
# a dimension joined directly, or through a derived table: grouped (the local predicate in
# HAVING on a grouping column, or on an aggregate: no pruning) or a UNION ALL of two branches
DERIVED = ["{dim}",
           "(SELECT k, {value} FROM {dim} GROUP BY k, {value} HAVING {local})",
           "(SELECT k, max({value}) AS {value} FROM {dim} GROUP BY k HAVING {local})",
           "(SELECT k, {value} FROM {dim} WHERE {local} UNION ALL "
           "SELECT k, {value} FROM {dim} WHERE {other})"]


@st.composite
def star_queries(draw) -> tuple[str, bool]:
    """(query, whether it is joins in FROM only: DuckDB then names the files of its rows)."""
    dims = draw(st.lists(st.sampled_from(sorted(DIMS)), min_size=1, max_size=3, unique=True))
    joins, where, subqueries = [], [], False
    if draw(st.booleans()):
        where.append(draw(_value_predicate("f.m", "int")))
    for i, dim in enumerate(dims):
        key, value, kind = DIMS[dim]
        form = draw(st.sampled_from(FORMS))
        local = draw(_value_predicate(f"x{i}.{value}", kind))
        derived = draw(st.sampled_from(DERIVED))
        subqueries |= not form.endswith("JOIN") or derived != "{dim}"
        if form.endswith("JOIN"):
            source = derived.format(dim=dim, value=value, local=local.replace(f"x{i}.", ""),
                                    other=draw(_value_predicate(value, kind)))
            joins.append(f"{form} {source} x{i} ON f.{key} = x{i}.k AND {local}")
        elif form in ("IN", "NOT IN"):
            where.append(f"f.{key} {form} (SELECT x{i}.k FROM {dim} x{i} WHERE {local})")
        else:
            where.append(f"{form} (SELECT 1 FROM {dim} x{i} WHERE x{i}.k = f.{key} AND {local})")
    if draw(st.booleans()):
        where.append(draw(_value_predicate("f.d3", "day")))
    query = f"SELECT * FROM fact f {' '.join(joins)}"
    if where:
        query += " WHERE " + " AND ".join(where)
    return query, not subqueries


CHAIN = [("c1", "k1", "x"), ("c2", "k2", "y"), ("c3", "k3", "z"), ("c4", None, "w")]


@st.composite
def chain_queries(draw) -> tuple[str, bool]:
    length = draw(st.integers(2, 4))
    forms = st.sampled_from(["JOIN", "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
    query = "SELECT * FROM c1 t0"
    i = 1
    while i < length:
        form, key = draw(forms), CHAIN[i - 1][1]
        if i + 1 < length and draw(st.booleans()):    # a parenthesized join of the next two
            inner, next_key = draw(forms), CHAIN[i][1]
            query += (f" {form} ({CHAIN[i][0]} t{i} {inner} {CHAIN[i + 1][0]} t{i + 1} ON "
                      f"t{i}.{next_key} = t{i + 1}.{next_key}) ON t{i - 1}.{key} = t{i}.{key}")
            i += 2
            continue
        query += f" {form} {CHAIN[i][0]} t{i} ON t{i - 1}.{key} = t{i}.{key}"
        i += 1
    where = [draw(_value_predicate(f"t{i}.{CHAIN[i][2]}", "int"))
             for i in draw(st.lists(st.integers(0, length - 1), max_size=2, unique=True))]
    if where:
        query += " WHERE " + " AND ".join(where)
    return query, True


def _rows(df) -> list[tuple]:
    def norm(v):
        return "NaN" if isinstance(v, float) and math.isnan(v) else v
    return sorted((tuple(norm(v) for v in row) for row in df.collect()), key=repr)


def _all_files(spark, lake: dict[str, str], query: str):
    """The query in Spark over every file of every table."""
    for name, root in lake.items():
        spark.read.parquet(root).createOrReplaceTempView(name)
    return spark.sql(query)


def _files_with_result_rows(lake: dict[str, str], query: str, aliases: dict[str, str]
                            ) -> dict[str, set[str]]:
    """alias -> the files holding a row of the query's result (DuckDB, over every file)."""
    con = duckdb.connect()
    for name, root in lake.items():
        con.execute(f"CREATE VIEW {name} AS SELECT *, filename AS __file FROM "
                    f"read_parquet('{root}/*.parquet', filename = true)")
    select = ", ".join(f"{a}.__file" for a in aliases)
    rows = con.execute(query.replace("SELECT *", f"SELECT {select}", 1)).fetchall()
    return {a: {Path(r[i]).name for r in rows if r[i] is not None}
            for i, a in enumerate(aliases)}


def _check(spark, lake, query: str, joins_only: bool) -> None:
    plan = prune_query(query, lake)
    assert _rows(spark_bridge.sql(spark, query, lake)) == _rows(_all_files(spark, lake, query))
    if joins_only:
        aliases = {s.alias: s for s in plan.graph.scans}
        held = _files_with_result_rows(lake, query, aliases)
        for alias, scan in aliases.items():
            assert held[alias] <= set(plan.reads[scan.reference]), (alias, query)


# 8 queries a lake and a shape each run (random each run: CI explores new ones every time)
SETTINGS = settings(max_examples=8, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@SETTINGS
@given(query=star_queries())
def test_star_queries(spark, lake, query):
    _check(spark, lake, *query)


@SETTINGS
@given(query=chain_queries())
def test_chain_queries(spark, lake, query):
    _check(spark, lake, *query)
