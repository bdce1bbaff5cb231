"""Join pruning by data-induced predicates: the worked examples of the paper's digest (the
date_dim zone-map and range-set cases, the chain r - s - t, the outer- and anti-join direction
rules), each on tables computed by lakestats, and the command's contract."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import boto3
import numpy as np
import pyarrow as pa
import pytest

from lakestats import spark_bridge
from lakestats.metastore.reader import StatisticsReader
from lakestats.pruning.joins import prune_query
from lakestats.pruning.predicate import PredicateError
from tests.tables import write

# date_dim: three partitions of (date_sk, year); the zone maps are those of the digest, and
# range-sets of two ranges come out as the digest's for date_sk and P2's year
DATE_DIM = {
    "P1": ([3000, 3200, 3500, 4000, 4300, 4600, 5000], [1995, 1995, 1996, 1997, 1998, 1999, 2000]),
    "P2": ([1000, 1500, 2000, 5000, 5500, 6000], [1990, 1991, 1992, 1993, 1998, 2002]),
    "P3": ([7000, 7500, 8000, 8500, 9000, 9500, 10000, 11000, 11500, 12000],
           [2005, 2006, 2008, 2010, 2011, 2012, 2014, 2015, 2016, 2018]),
}
# fact partitions: date_sk dense over these zones
FACT = {"F1": (2100, 2900), "F2": (3600, 3900), "F3": (5500, 7500), "F4": (6500, 6900),
        "F5": (12500, 13000)}
JOIN = "SELECT f.v, d.year FROM fact f JOIN date_dim d ON f.date_sk = d.date_sk WHERE {}"


@pytest.fixture(scope="module")
def lake(tmp_path_factory, run):
    root = tmp_path_factory.mktemp("dips")
    for copy, size in (("ranges", 2), ("zones", 1)):      # range-sets of 1: zone maps
        for name, (sk, year) in DATE_DIM.items():
            write(root / copy / f"{name}.parquet", pa.table({
                "date_sk": pa.array(sk, pa.int64()), "year": pa.array(year, pa.int32())}))
        run(root / copy, range_set_size=size)
    for name, (low, high) in FACT.items():
        sk = np.arange(low, high + 1, 100)
        write(root / "fact" / f"{name}.parquet", pa.table({
            "date_sk": pa.array(sk, pa.int64()), "v": pa.array(sk * 10)}))
    run(root / "fact")
    return root


def _plan(lake, where: str, dim: str = "ranges") -> dict:
    return prune_query(JOIN.format(where), {"fact": str(lake / "fact"),
                                            "date_dim": str(lake / dim)}).as_json()["tables"]


def _kept(tables: dict, name: str) -> set[str]:
    return {p.split(".")[0] for p in tables[name]["kept"]}


def _after_local(lake, where: str, dim: str = "ranges") -> set[str]:
    """The date_dim partitions its local predicate keeps (before fact's diP prunes it too)."""
    tables = prune_query(f"SELECT * FROM date_dim d WHERE {where}",
                         {"date_dim": str(lake / dim)}).as_json()["tables"]
    return _kept(tables, "date_dim")


def test_range_sets_are_lemma_1s(lake):
    index = StatisticsReader(str(lake / "ranges" / "_lakestats")).partition_index(
        ["date_sk", "year"]).to_pylist()
    ranges = {r["path"].split(".")[0]: [(x["low"], x["high"]) for x in r["c0"]["range_set"]]
              for r in index}
    assert ranges == {"P1": [(3000, 3500), (4000, 5000)], "P2": [(1000, 2000), (5000, 6000)],
                      "P3": [(7000, 10000), (11000, 12000)]}
    assert [(x["low"], x["high"]) for x in index[1]["c1"]["range_set"]] == \
        [(1990, 1993), (1998, 2002)]


def test_zone_maps_year_le_1995(lake):
    tables = _plan(lake, "d.year <= 1995", "zones")
    assert _after_local(lake, "d.year <= 1995", "zones") == {"P1", "P2"}
    # the diP is date_sk in [1000, 6000]: fact zones that meet it are kept
    assert _kept(tables, "fact") == {"F1", "F2", "F3"}
    assert tables["fact"]["dips"] == [{"from": "date_dim", "column": "date_sk", "files_after": 3}]


def test_range_set_dip_skips_what_zone_maps_keep(lake):
    tables = _plan(lake, "d.year <= 1995")
    assert _after_local(lake, "d.year <= 1995") == {"P1", "P2"}
    # diP {[1000,2000], [3000,3500], [4000,6000]}: [2100,2900] and [3600,3900] fall in its gaps
    assert _kept(tables, "fact") == {"F3"}
    assert tables["fact"]["files_after_local"] == 5 and tables["fact"]["files_after_dips"] == 1
    assert tables["fact"]["bytes_after"] < tables["fact"]["bytes_before"]
    # fact's diP back to date_dim: no fact value lies in P1's ranges
    assert _kept(tables, "date_dim") == {"P2"}


def test_empty_dip_skips_every_fact_partition(lake):
    for dim in ("ranges", "zones"):
        tables = _plan(lake, "d.year BETWEEN 2003 AND 2004", dim)
        assert tables["date_dim"]["kept"] == [] and tables["fact"]["kept"] == []


def test_year_above_2010(lake):
    for dim in ("ranges", "zones"):
        tables = _plan(lake, "d.year > 2010", dim)
        assert _after_local(lake, "d.year > 2010", dim) == {"P3"}
        assert _kept(tables, "fact") == {"F3"}


def test_range_sets_prune_local_predicates_in_their_gaps(lake):
    where = "d.year BETWEEN 1994 AND 1997"
    assert _after_local(lake, where) == {"P1"}         # P2's years leave a gap 1993..1998
    assert _kept(_plan(lake, where), "fact") == set()  # F2 sits in P1's gap 3500..4000
    tables = _plan(lake, where, "zones")
    assert _after_local(lake, where, "zones") == {"P1", "P2"}
    assert _kept(tables, "fact") == {"F1", "F2", "F3"}


def test_not_is_pushed_to_the_atoms(lake):
    for dim in ("ranges", "zones"):
        assert _after_local(lake, "NOT (d.year > 1995)", dim) == {"P1", "P2"}


# -- the chain r - s - t, outer and anti joins


@pytest.fixture(scope="module")
def chain(tmp_path_factory, run):
    """r(a, x), s(a, b), t(b, y): four partitions each; partition i of each holds a in
    [100i, 100i+49] and b in [1000i, 1000i+49], so a predicate on x selects one of each."""
    root = tmp_path_factory.mktemp("chain")
    for i in range(4):
        a, b = np.arange(i * 100, i * 100 + 50), np.arange(i * 1000, i * 1000 + 50)
        write(root / "r" / f"p{i}.parquet", pa.table({"a": a, "x": np.full(50, i)}))
        write(root / "s" / f"p{i}.parquet", pa.table({"a": a, "b": b}))
        write(root / "t" / f"p{i}.parquet", pa.table({"b": b, "y": np.full(50, i)}))
    for name in "rst":
        run(root / name)
    return {name: str(root / name) for name in "rst"}


def test_chain_needs_exactly_four_dips(chain):
    plan = prune_query("SELECT * FROM r JOIN s ON r.a = s.a JOIN t ON s.b = t.b WHERE r.x = 2",
                       chain)
    tables = plan.as_json()["tables"]
    assert sum(len(t["dips"]) for t in tables.values()) == 4
    assert [t["kept"] for t in tables.values()] == [["p2.parquet"]] * 3
    # t was pruned through s; another round prunes nothing more
    assert tables["t"]["files_after_local"] == 4 and tables["t"]["dips"][-1]["from"] == "s"
    assert plan.schedule.round() is False
    assert [t["kept"] for t in plan.as_json()["tables"].values()] == [["p2.parquet"]] * 3


def test_left_outer_join_passes_from_the_preserved_side_only(chain):
    tables = prune_query("SELECT * FROM r LEFT JOIN s ON r.a = s.a WHERE r.x = 1",
                         chain).as_json()["tables"]
    assert tables["s"]["kept"] == ["p1.parquet"]                 # a predicate on L prunes R
    tables = prune_query("SELECT * FROM r LEFT JOIN s ON r.a = s.a AND s.b < 1000",
                         chain).as_json()["tables"]
    assert tables["s"]["kept"] == ["p0.parquet"]                 # ON filters R
    assert tables["r"]["files_after_dips"] == 4                  # and never prunes L
    tables = prune_query("SELECT * FROM s RIGHT JOIN r ON r.a = s.a WHERE r.x = 3",
                         chain).as_json()["tables"]
    assert tables["s"]["kept"] == ["p3.parquet"]


def test_full_outer_join_prunes_nothing(chain):
    tables = prune_query("SELECT * FROM r FULL JOIN s ON r.a = s.a AND r.x = 1 AND s.b < 1000",
                         chain).as_json()["tables"]
    assert all(t["files_after_dips"] == 4 and not t["dips"] for t in tables.values())


def test_anti_joins_pass_from_left_to_right_only(chain):
    for query in ("SELECT * FROM r LEFT ANTI JOIN s ON r.a = s.a WHERE r.x = 2",
                  "SELECT * FROM r WHERE r.x = 2 AND NOT EXISTS "
                  "(SELECT 1 FROM s WHERE s.a = r.a)",
                  "SELECT * FROM r WHERE r.x = 2 AND r.a NOT IN (SELECT a FROM s)"):
        tables = prune_query(query, chain).as_json()["tables"]
        assert tables["s"]["kept"] == ["p2.parquet"], query
    tables = prune_query("SELECT * FROM r WHERE NOT EXISTS "
                         "(SELECT 1 FROM s WHERE s.a = r.a AND s.b < 1000)",
                         chain).as_json()["tables"]
    assert tables["s"]["kept"] == ["p0.parquet"] and tables["r"]["files_after_dips"] == 4


def test_not_in_takes_nothing_from_an_outer_joins_null_side(chain):
    """r's rows without an s match have s.b NULL: NULL NOT IN t's y = 3 rows is null (they go),
    but NOT IN an emptied t would be true. s.b's values (0-49) must not empty t's scan."""
    tables = prune_query("SELECT * FROM r LEFT JOIN s ON r.a = s.a AND s.b < 1000 "
                         "WHERE s.b NOT IN (SELECT b FROM t WHERE t.y = 3)",
                         chain).as_json()["tables"]
    assert tables["t"]["kept"] == ["p3.parquet"]


def test_semi_joins_and_subqueries_pass_both_ways(chain):
    for query in ("SELECT * FROM r WHERE r.a IN (SELECT a FROM s WHERE s.b >= 3000)",
                  "SELECT * FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.a = r.a AND "
                  "s.b >= 3000)",
                  "SELECT * FROM r LEFT SEMI JOIN s ON r.a = s.a AND s.b >= 3000",
                  "SELECT r.* FROM r JOIN (SELECT a, count(*) AS n FROM s WHERE b >= 3000 "
                  "GROUP BY a) g ON g.a = r.a",
                  # HAVING on grouping columns filters as WHERE; GROUP BY ALL groups by a
                  "SELECT r.* FROM r JOIN (SELECT a, count(*) AS n FROM s GROUP BY ALL "
                  "HAVING a >= 300 AND count(*) > 0) g ON g.a = r.a"):
        tables = prune_query(query, chain).as_json()["tables"]
        assert tables["r"]["kept"] == ["p3.parquet"], query


def test_a_union_sends_the_or_of_its_branches_and_receives_in_each(chain):
    union = ("SELECT * FROM r JOIN (SELECT a FROM s WHERE b < 1000 UNION ALL "
             "SELECT a FROM s WHERE b >= 3000) u ON u.a = r.a")
    plan = prune_query(union, chain)
    assert plan.as_json()["tables"]["r"]["kept"] == ["p0.parquet", "p3.parquet"]
    plan = prune_query(union + " WHERE r.x = 3", chain)
    assert sorted(plan.reads.values()) == [[], ["p3.parquet"], ["p3.parquet"]]


def test_a_parenthesized_join_is_joined_as_one_side(spark, chain):
    """`r LEFT JOIN (s JOIN t ...)`: s and t join each other both ways and receive from r;
    Spark reads the kept files with the nesting intact."""
    for query, kept in (
            ("SELECT * FROM r LEFT JOIN (s JOIN t ON s.b = t.b) ON r.a = s.a WHERE r.x = 1",
             {"r": ["p1"], "s": ["p1"], "t": ["p1"]}),
            ("SELECT * FROM r LEFT JOIN (s JOIN t ON s.b = t.b AND t.y = 2) ON r.a = s.a",
             {"r": ["p0", "p1", "p2", "p3"], "s": ["p2"], "t": ["p2"]})):
        tables = prune_query(query, chain).as_json()["tables"]
        assert {n: [p.split(".")[0] for p in t["kept"]] for n, t in tables.items()} == kept
        for name, root in chain.items():
            spark.read.parquet(root).createOrReplaceTempView(name)
        every = sorted(spark.sql(query).collect())
        for name in chain:
            spark.catalog.dropTempView(name)
        assert sorted(spark_bridge.sql(spark, query, chain).collect()) == every


def test_a_table_of_sparks_catalog_is_read_as_it_is(spark, chain):
    """A view the query names beside the given tables: Spark reads it, it prunes nothing."""
    spark.read.parquet(chain["t"]).where("y = 2").createOrReplaceTempView("t_view")
    query = "SELECT * FROM s JOIN t_view v ON s.b = v.b WHERE s.a < 300"
    try:
        tables = spark_bridge.explain_pruning(spark, query, {"s": chain["s"]})["tables"]
        assert list(tables) == ["s"] and tables["s"]["files_after_dips"] == 3
        rows = spark_bridge.sql(spark, query, {"s": chain["s"]}).collect()
        assert sorted(r.b for r in rows) == list(range(2000, 2050))
    finally:
        spark.catalog.dropTempView("t_view")


def test_tables_on_s3(spark, chain, run, s3_endpoint):
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="joins")
    tables = {}
    for name in "rs":
        for path in sorted(Path(chain[name]).glob("*.parquet")):
            s3.upload_file(str(path), "joins", f"{name}/{path.name}")
        tables[name] = f"s3://joins/{name}"
        run(tables[name])
    query = "SELECT r.a, r.x, s.b FROM r JOIN s ON r.a = s.a WHERE r.x = 2"
    pruned = prune_query(query, tables).as_json()["tables"]
    assert pruned["s"]["kept"] == ["p2.parquet"] and pruned["s"]["files_after_local"] == 4
    rows = spark_bridge.sql(spark, query, tables).collect()
    assert sorted(rows) == [(a, 2, b) for a, b in zip(range(200, 250), range(2000, 2050))]


def test_a_float_key_meets_integers_and_decimals_as_spark_rounds_them(spark, tmp_path, run):
    """Spark casts a bigint or decimal compared with a float: 2**53 + 1 equals the double
    2**53, so the file holding it is read; a file far from every float is skipped."""
    big = 2 ** 53
    write(tmp_path / "ints" / "near.parquet", pa.table({
        "k": pa.array([big + 1], pa.int64()),
        "dec": pa.array([Decimal("0.1000000000000000001")], pa.decimal128(38, 19))}))
    write(tmp_path / "ints" / "far.parquet", pa.table({
        "k": pa.array([5], pa.int64()), "dec": pa.array([Decimal(5)], pa.decimal128(38, 19))}))
    write(tmp_path / "floats" / "p0.parquet", pa.table({
        "d": pa.array([float(big)]), "e": pa.array([0.1]), "x": [1]}))
    write(tmp_path / "floats" / "p1.parquet", pa.table({
        "d": pa.array([1e300]), "e": pa.array([1e300]), "x": [2]}))
    tables = {n: str(tmp_path / n) for n in ("ints", "floats")}
    for root in tables.values():
        run(root)
    for key in ("i.k = f.d", "i.dec = f.e"):
        query = f"SELECT i.k, f.x FROM ints i JOIN floats f ON {key} WHERE f.x = 1"
        assert prune_query(query, tables).reads[0] == ["near.parquet"], key
        assert [tuple(r) for r in spark_bridge.sql(spark, query, tables).collect()] == \
            [(big + 1, 1)], key


def test_a_table_without_statistics_is_read_whole(spark, chain, tmp_path):
    shutil.copytree(chain["r"], tmp_path / "r", ignore=shutil.ignore_patterns("_lakestats"))
    tables = {"r": str(tmp_path / "r"), "s": chain["s"]}
    query = "SELECT r.a, s.b FROM r JOIN s ON r.a = s.a WHERE s.b < 1000 AND r.x = 0"
    with pytest.warns(UserWarning, match="no statistics published yet.*every file"):
        pruned = prune_query(query, tables).as_json()["tables"]
    assert pruned["r"]["files_after_dips"] == 4 and pruned["s"]["kept"] == ["p0.parquet"]
    with pytest.warns(UserWarning, match="every file"):
        rows = spark_bridge.sql(spark, query, tables).collect()
    assert sorted(rows) == [(a, a) for a in range(50)]
    done = subprocess.run([sys.executable, "-m", "lakestats.cli", "prune-query", "--sql", query,
                           "--table", f"r={tables['r']}", "--table", f"s={tables['s']}",
                           "--json"], capture_output=True, text=True)
    assert done.returncode == 0 and "note:" in done.stderr and "every file" in done.stderr
    assert json.loads(done.stdout)["tables"]["r"]["kept"] == [f"p{i}.parquet" for i in range(4)]


def test_a_join_condition_in_every_branch_of_an_or_is_a_join(chain):
    # TPC-H q19's shape: the join repeated in each branch, each table's conditions per branch
    tables = prune_query("SELECT * FROM r, s WHERE (r.a = s.a AND r.x = 1 AND s.b > 0) OR "
                         "(s.a = r.a AND r.x = 2) OR (r.a = s.a AND r.x = 1 AND s.b < 0)",
                         chain).as_json()["tables"]
    assert tables["r"]["kept"] == ["p1.parquet", "p2.parquet"]
    assert tables["s"]["kept"] == ["p1.parquet", "p2.parquet"]


def test_an_aggregate_without_group_by_exists_for_every_outer_row(chain):
    for query in ("SELECT * FROM r WHERE EXISTS (SELECT count(*) FROM s WHERE s.a = r.a "
                  "AND s.b < 1000)",
                  "SELECT * FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.a = r.a AND s.b < 1000 "
                  "HAVING count(*) = 0)"):
        assert prune_query(query, chain).as_json()["tables"]["r"]["files_after_dips"] == 4


def test_nothing_passes_what_it_cannot_reason_about(chain):
    # a computed key, a LIMIT inside a derived table, a non-grouping aggregate
    for query in ("SELECT * FROM r JOIN s ON r.a + 1 = s.a WHERE r.x = 2",
                  "SELECT * FROM r JOIN (SELECT a FROM s LIMIT 10) q ON q.a = r.a "
                  "WHERE r.x = 2",
                  "SELECT * FROM r JOIN (SELECT max(a) AS a FROM s) q ON q.a = r.a "
                  "WHERE r.x = 2",
                  "SELECT * FROM r JOIN (SELECT a, sum(b) FROM s GROUP BY a WITH ROLLUP) q "
                  "ON q.a = r.a WHERE r.x = 2"):
        tables = prune_query(query, chain).as_json()["tables"]
        assert tables["s"]["files_after_dips"] == 4, query
        assert tables["r"]["files_after_dips"] == 1, query


def test_a_predicate_spark_refuses_is_refused_as_prune_refuses_it(lake):
    # a literal the column's type cannot hold, and a string column against a number: `prune`
    # refuses both up front; the join plan used to keep every file instead
    for where, names in (("d.year = 'nineteen'", "'nineteen'"), ("f.v > DATE'2020-01-01'",
                                                                 "DATE")):
        with pytest.raises(PredicateError, match=f"table (date_dim|fact): .*{names}"):
            _plan(lake, where)
    # a string that is a number passes (Spark casts it); it keeps at least what 1995 keeps
    assert _kept(_plan(lake, "d.year = '1995'"), "date_dim") >= \
        _kept(_plan(lake, "d.year = 1995"), "date_dim")


def test_prune_query_command(chain, tmp_path):
    query = tmp_path / "q.sql"
    query.write_text("SELECT * FROM r\nJOIN s ON r.a = s.a WHERE r.x = 0")
    args = [sys.executable, "-m", "lakestats.cli", "prune-query", "--sql", str(query),
            "--table", f"r={chain['r']}", "--table", f"s={chain['s']}", "--json"]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert set(out) == {"tables", "planning_ms"} and set(out["tables"]) == {"r", "s"}
    assert set(out["tables"]["s"]) == {"kept", "skipped", "files_before", "files_after_local",
                                       "files_after_dips", "bytes_before", "bytes_after", "dips",
                                       "unknown"}
    assert out["tables"]["s"]["kept"] == ["p0.parquet"]
    assert out["tables"]["s"]["skipped"] == ["p1.parquet", "p2.parquet", "p3.parquet"]
    bad = subprocess.run(args[:5] + ["SELECT FROM WHERE r ((", *args[6:]], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "does not parse" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    missing = subprocess.run(args[:5] + ["SELECT * FROM r JOIN u ON r.a = u.a", *args[6:]],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "'u'" in missing.stderr
    twice = subprocess.run(args + ["--table", f"R={chain['r']}"], capture_output=True, text=True)
    assert twice.returncode == 2 and "'R' is given twice" in twice.stderr
    no_file = subprocess.run(args[:5] + [str(tmp_path / "gone.sql"), *args[6:]],
                             capture_output=True, text=True)
    assert no_file.returncode == 2 and "no such file" in no_file.stderr


def test_files_the_statistics_do_not_describe_are_read(chain, tmp_path):
    """A file landed after the version is tainted: always read, and its table sends no diP;
    a file gone since is not read."""
    tables = {}
    for name in "rs":
        shutil.copytree(chain[name], tmp_path / name)
        tables[name] = str(tmp_path / name)
    write(tmp_path / "s" / "p9.parquet", pa.table({"a": np.arange(200, 210),
                                                    "b": np.arange(9000, 9010)}))
    (tmp_path / "s" / "p3.parquet").unlink()
    tables_json = prune_query("SELECT * FROM r JOIN s ON r.a = s.a WHERE r.x = 0",
                              tables).as_json()["tables"]
    assert tables_json["s"]["kept"] == ["p0.parquet", "p9.parquet"]
    assert "p3.parquet" not in tables_json["s"]["skipped"] and tables_json["s"]["files_before"] == 4
    # s, tainted, sends r nothing: without p9 it would have pruned nothing either way, so ask
    # with a predicate on s alone
    tables_json = prune_query("SELECT * FROM r JOIN s ON r.a = s.a WHERE s.b < 1000",
                              tables).as_json()["tables"]
    assert tables_json["r"]["files_after_dips"] == 4 and tables_json["r"]["dips"] == []
