"""Pruning rules on tables of known layout: every rule, worked LIMIT and top-k examples (the
certain-row count and the top-k boundary computed by hand), and the CLI's JSON."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import shutil

import numpy as np
import pyarrow as pa
import pytest

from lakestats.cli import main
from lakestats.pruning import PredicateError, parse_order, prune
from tests.tables import write


@pytest.fixture
def table(tmp_path, run):
    """make(name -> columns dict): one file per name, computed; returns a prune function."""
    def make(parts: dict[str, dict]):
        for name, columns in parts.items():
            write(tmp_path / f"{name}.parquet", pa.table(columns))
        run(tmp_path)

        def pruned(where=None, limit=None, order_by=None):
            r = prune(f"{tmp_path}/_lakestats", where, limit, order_by)
            return ([p.removesuffix(".parquet") for p in r.kept],
                    sorted(p.removesuffix(".parquet") for p in r.fully_matching))
        return pruned
    return make


def kept(result) -> list[str]:
    return result[0]


def test_ranges_prune_and_fully_match(table):
    pruned = table({"f1": {"x": list(range(0, 10))}, "f2": {"x": list(range(10, 20))}})
    assert pruned("x >= 15") == (["f2"], [])
    assert pruned("x >= 10") == (["f2"], ["f2"])
    assert pruned("x BETWEEN 3 AND 12") == (["f1", "f2"], [])
    assert pruned("NOT (x < 10)") == (["f2"], ["f2"])            # NOT pushed to the atom
    assert pruned("x < 0 OR x > 18") == (["f2"], [])
    assert pruned("x = 7") == (["f1"], [])
    assert pruned("x IN (3, 30)") == (["f1"], [])
    assert pruned("x NOT IN (3, 30)") == (["f1", "f2"], ["f2"])
    assert pruned("x + 10 > 25") == (["f2"], [])                  # arithmetic normalized
    assert pruned("2 * x - 1 >= 19") == (["f2"], ["f2"])
    assert pruned("-x > -5") == (["f1"], [])
    assert pruned("x = NULL") == ([], [])                         # null, never true
    assert pruned("x > 100 OR x IS NULL") == ([], [])
    assert pruned("rand() > x") == (["f1", "f2"], [])           # unknown: never prunes
    with pytest.raises(PredicateError, match="no_such_column"):     # Spark refuses it too
        pruned("no_such_column = 1")


def test_nulls_nan_and_infinities(table):
    pruned = table({
        "nulls": {"x": pa.array([1.0, None, 3.0]), "n": pa.array([None, None, None], pa.int64())},
        "nan": {"x": pa.array([5.0, float("nan"), 1000.0]), "n": pa.array([1, 2, 3])},
        "inf": {"x": pa.array([-np.inf, 0.0, 2.0]), "n": pa.array([4, 5, 6])},
    })
    assert kept(pruned("x > 1500")) == ["nan"]          # NaN is above every number (Spark)
    assert kept(pruned("x < -1e300")) == ["inf"]
    assert pruned("x IS NULL") == (["nulls"], [])
    assert pruned("x IS NOT NULL") == (["inf", "nan", "nulls"], ["inf", "nan"])
    assert pruned("n IS NULL") == (["nulls"], ["nulls"])
    assert pruned("n > 0") == (["inf", "nan"], ["inf", "nan"])
    assert pruned("x <= 1000") == (["inf", "nan", "nulls"], ["inf"])   # NaN rows: false


def test_membership_from_bloom_filters_and_frequencies(table):
    """id is spread over every file (min/max cannot prune), but each file holds other ids:
    the Bloom filter (more than 1,000 distinct values) or exact frequencies decide."""
    rng = np.random.default_rng(0)
    ids = rng.permutation(20_000)
    small = rng.permutation(400)
    pruned = table({f"p{i}": {"id": ids[i::4], "code": np.resize(small[i::4], 5000)}
                    for i in range(4)})
    target = int(ids[2])
    assert kept(pruned(f"id = {target}")) == ["p2"]
    assert kept(pruned(f"id IN ({int(ids[1])}, {int(ids[3])}, 99999999)")) == ["p1", "p3"]
    assert kept(pruned(f"code = {int(small[0])}")) == ["p0"]
    assert kept(pruned(f"id = {target} OR code = {int(small[1])}")) == ["p1", "p2"]


def test_like_prefix_uses_the_successor_not_the_printed_formula(table):
    pruned = table({"basecamp": {"name": ["Basecamp", "Lake"]},
                    "nord": {"name": ["Nord", "Zeta"]},
                    "marked": {"name": ["Marked-A", "Marked-Z"]},
                    "all": {"name": ["Marked-Ridge", "Marked-X-Ridge"]}})
    assert kept(pruned("name LIKE 'Marked-%-Ridge'")) == ["all", "marked"]
    assert pruned("name LIKE 'Marked-%'") == (["all", "marked"], ["all", "marked"])
    assert kept(pruned("name LIKE '%Ridge'")) == ["all", "basecamp", "marked", "nord"]
    assert kept(pruned("name LIKE 'Lake'")) == ["basecamp"]


def test_not_like_is_the_negation_of_like(table):
    """sqlglot marks `NOT LIKE` on the Like node itself: it once pruned as LIKE."""
    pruned = table({"others": {"s": ["b", "c"]}, "prefixed": {"s": ["a1", "a2"]}})
    for where in ("s NOT LIKE 'a%'", "NOT (s LIKE 'a%')", "s NOT LIKE 'a%' AND s IS NOT NULL"):
        assert pruned(where) == (["others"], ["others"]), where
    assert kept(pruned("s NOT ILIKE 'A%'")) == ["others", "prefixed"]       # ILIKE: no rule
    assert kept(pruned("NOT s NOT LIKE 'a%'")) == ["prefixed"]


def test_between_symmetric_is_refused(table):
    """sqlglot reads it, Spark does not, and the rules once read it as an ordered BETWEEN:
    every file skipped."""
    pruned = table({"one": {"s": ["b", "c"]}})
    with pytest.raises(PredicateError, match="no BETWEEN SYMMETRIC"):
        pruned("s BETWEEN SYMMETRIC 'c' AND 'a'")


def test_not_like_in_a_query_is_the_negation_of_like(tmp_path, run):
    from lakestats.pruning.joins import prune_query
    write(tmp_path / "others.parquet", pa.table({"s": ["b", "c"]}))
    write(tmp_path / "prefixed.parquet", pa.table({"s": ["a1", "a2"]}))
    run(tmp_path)
    plan = prune_query("SELECT * FROM t WHERE t.s NOT LIKE 'a%'", {"t": str(tmp_path)})
    assert plan.as_json()["tables"]["t"]["kept"] == ["others.parquet"]


def test_nanosecond_bounds_at_the_end_of_int64_round_outwards(table):
    """A nanosecond timestamp within a microsecond of int64's end (2262-04-11T23:47:16.854775807)
    once failed every plan of its table with Arrow's cast error. Its start, in 1677, is a time
    Spark may read in the Julian calendar: a column holding it is left to Spark."""
    end, start = 2**63 - 1, -2**63
    mid = pa.array([1_700_000_000_123_456_789], pa.timestamp("ns"))
    for zone in (None, "Asia/Kolkata"):
        ns = pa.timestamp("ns", zone)
        z = "" if zone is None else "+00:00"
        pruned = table({"ends": {"t": pa.array([end - 190], ns)},
                        "middle": {"t": mid.cast(ns)}})
        assert kept(pruned(f"t > TIMESTAMP '2262-04-11 23:47:16.854774{z}'")) == ["ends"]
        assert kept(pruned(f"t >= TIMESTAMP '2023-11-14 22:13:20.123458{z}'")) == ["ends"]
        pruned = table({"ends": {"t": pa.array([start, end - 190], ns)},
                        "middle": {"t": mid.cast(ns)}})
        assert kept(pruned(f"t < TIMESTAMP '1677-09-21 00:12:43.145225{z}'")) \
            == ["ends", "middle"]


def test_membership_of_a_file_typing_the_column_otherwise(tmp_path, run):
    """Value sets, Bloom filters and the value index hold text, which a timestamp[ms] file
    spells "...05.000" and a timestamp[us] table "...05.000000" (a decimal(10,1) file "1.5",
    a decimal(12,2) table "1.50"): once, `t = v` skipped the coarser file that holds v and
    `where` did not find it; the same after a file that widens the type lands on a computed
    table (its partitions' text is the narrower type's)."""
    import lakestats
    ms, us = pa.timestamp("ms"), pa.timestamp("us")
    few = pa.array([0, 5_000], ms)                                     # a value set
    many = pa.array(np.arange(100, dtype=np.int64) * 1_000 + 10_000_000, ms)   # a Bloom filter
    decimals = pa.array([decimal.Decimal("1.5"), decimal.Decimal("2.5")], pa.decimal128(10, 1))
    write(tmp_path / "few.parquet", pa.table({"t": few, "d": decimals}))
    write(tmp_path / "many.parquet", pa.table({"t": many, "d": pa.nulls(100, decimals.type)}))
    run(tmp_path)                                           # every file typed as the table
    for landed in ("", "incremental", "from scratch"):
        if landed == "incremental":     # widens t to timestamp[us] and d to decimal(12, 2)
            write(tmp_path / "wide.parquet", pa.table({
                "t": pa.array([1], us), "d": pa.array([decimal.Decimal("9.25")],
                                                      pa.decimal128(12, 2))}))
            run(tmp_path)
        elif landed:
            shutil.rmtree(tmp_path / "_lakestats")
            run(tmp_path)
        for where, holder in (("t = TIMESTAMP '1970-01-01 00:00:05'", "few.parquet"),
                              ("t IN (TIMESTAMP '1970-01-01 02:48:19')", "many.parquet"),
                              ("d = 1.5", "few.parquet")):
            assert holder in prune(f"{tmp_path}/_lakestats", where).kept, (landed, where)
        table = lakestats.open(str(tmp_path))
        assert "few.parquet" in table.where("t", "1970-01-01T00:00:05")["partitions"], landed


def test_membership_of_timestamps_follows_the_session_time_zone(tmp_path, run):
    """`t = TIMESTAMP '...'` asks the value sets and Bloom filters for the column's value equal
    to the literal: once rendered as if the session were in UTC, it skipped the file that
    holds it where ranges (`BETWEEN`) kept it."""
    at = dt.datetime(2024, 11, 3, 12, 40, 30, tzinfo=dt.timezone.utc)        # 07:40:30 EST
    for zone, value, literal in (("UTC", at, "TIMESTAMP '2024-11-03 07:40:30'"),
                                 (None, at.replace(hour=7, tzinfo=None),
                                  "TIMESTAMP '2024-11-03 12:40:30+00:00'")):
        root = tmp_path / ("zoned" if zone else "naive")
        for name, v in (("holds", value), ("other", value.replace(year=2020))):
            write(root / f"{name}.parquet", pa.table({"t": pa.array([v], pa.timestamp("us", zone))}))
        run(root)
        for where in (f"t = {literal}", f"t IN ({literal})", f"t BETWEEN {literal} AND {literal}"):
            kept = prune(f"{root}/_lakestats", where, time_zone="America/New_York").kept
            assert kept == ["holds.parquet"], (zone, where)


def test_if_branches_and_monotone_functions(table):
    day = dt.date(1995, 3, 1)
    pruned = table({
        "mixed": {"unit": ["feet", "meters"], "altit": [934, 7674],
                  "d": [day, day], "ts": pa.array([dt.datetime(2024, 1, 31, 23)] * 2)},
        "feet": {"unit": ["feet", "feet"], "altit": [934, 4000],
                 "d": [dt.date(1997, 1, 1)] * 2, "ts": pa.array([dt.datetime(2024, 2, 1, 1)] * 2)},
        "feet_null": {"unit": ["feet", None], "altit": [934, 4000],
                      "d": [dt.date(1998, 12, 15)] * 2, "ts": pa.array([dt.datetime(2024, 3, 1)] * 2)},
    })
    assert kept(pruned("if(unit = 'feet', altit * 0.3048, altit) > 1500")) == ["feet_null", "mixed"]
    assert kept(pruned("year(d) = 1995")) == ["mixed"]
    assert kept(pruned("d + INTERVAL 30 DAY < DATE '1995-04-01'")) == ["mixed"]
    assert kept(pruned("date_add(d, 20) >= DATE '1999-01-01'")) == ["feet_null"]
    assert kept(pruned("d - INTERVAL 1 MONTH > DATE '1998-11-01'")) == ["feet_null"]
    assert kept(pruned("to_date(ts) = DATE '2024-02-01'")) == ["feet"]
    assert kept(pruned("date_trunc('MONTH', ts) = TIMESTAMP '2024-01-01 00:00:00'")) == ["mixed"]
    assert kept(pruned("d < '1996-01-01'")) == ["mixed"]           # a string cast to date


def test_products_of_non_negative_columns(table):
    pruned = table({"small": {"price": [1.0, 2.0], "qty": [1, 3]},
                    "large": {"price": [10.0, 20.0], "qty": [5, 9]}})
    assert kept(pruned("price * qty > 40")) == ["large"]
    assert pruned("price * qty >= 50") == (["large"], ["large"])


def test_limit_keeps_the_fewest_fully_matching_partitions(table):
    """p3 matches in every row and holds 4 of them: LIMIT 3 reads it alone; LIMIT 10 reads it
    first, then the partially matching ones."""
    pruned = table({
        "p1": {"species": ["Brown Bear", "Wolf"], "s": [60, 70]},
        "p2": {"species": ["Alpine Chough", "Red Fox"], "s": [20, 120]},
        "p3": {"species": ["Alpine Ibex", "Alpine Ibex", "Alpine Marmot", "Alpine Marmot"],
               "s": [50, 60, 70, 110]},
        "p4": {"species": ["Alpine Ibex", "Golden Eagle"], "s": [30, 90]},
    })
    where = "species LIKE 'Alpine%' AND s >= 50"
    assert pruned(where, limit=3) == (["p3"], ["p3"])
    assert kept(pruned(where, limit=10)) == ["p3", "p2", "p4"]
    assert kept(pruned(where, limit=0)) == []


def test_limit_without_predicate(table):
    pruned = table({"a": {"v": list(range(100))}, "b": {"v": list(range(60))},
                    "c": {"v": list(range(50))}})
    assert kept(pruned(limit=110)) == ["a", "b"]
    assert kept(pruned(limit=100)) == ["a"]
    assert kept(pruned(limit=500)) == ["a", "b", "c"]


def test_top_k_initial_boundary(table):
    """Top-k: fully matching F1 [10,50] 2 rows, F2 [40,80] 3 rows, F3 [70,90] 1
    row; k=3 gives boundary 50: a partial [0,45] is pruned, [0,60] kept; scan by max."""
    pruned = table({
        "f1": {"v": [10, 50], "flag": [1, 1]},
        "f2": {"v": [40, 60, 80], "flag": [1, 1, 1]},
        "f3": {"v": [90], "flag": [1]},
        "partial45": {"v": [0, 45], "flag": [0, 1]},
        "partial60": {"v": [0, 60], "flag": [0, 1]},
    })
    assert kept(pruned("flag = 1", limit=3, order_by="v DESC")) == ["f3", "f2", "partial60", "f1"]
    assert kept(pruned("flag = 1", limit=3, order_by="v ASC")) == [
        "partial45", "partial60", "f1", "f2"]


def test_top_k_without_predicate(table):
    """Top-k before any scan: A and D are fully matching; the boundary is 95."""
    pruned = table({"A": {"v": [100, 98, 96, 92, 90]}, "D": {"v": [99, 85]},
                    "B": {"v": [50, 95]}, "C": {"v": [10, 40]}})
    assert kept(pruned(limit=3, order_by="v DESC")) == ["A", "D", "B"]
    assert kept(pruned(limit=1, order_by="v")) == ["C"]


def test_top_k_with_nan_and_nulls(table):
    pruned = table({"nan": {"x": pa.array([1.0, float("nan")])},
                    "big": {"x": pa.array([500.0, 600.0])},
                    "nulls": {"x": pa.array([None, 2.0])}})
    assert kept(pruned(limit=1, order_by="x DESC")) == ["nan"]      # NaN sorts first in DESC
    # ASC puts nulls first in Spark: no value boundary can be trusted
    assert sorted(kept(pruned(limit=1, order_by="x ASC"))) == ["big", "nan", "nulls"]


def test_certain_rows_from_histograms(table):
    """ORDER BY d ASC LIMIT k under q > 45: no partition is fully matching, but the earliest
    provably holds k matching rows (histogram bins wholly above 45), so it alone is read."""
    parts = {}
    for i in range(4):
        q = np.r_[np.arange(46, 96), np.arange(0, 40)]
        parts[f"m{i}"] = {"d": pa.array(np.datetime64("2024-01-01") + i * 100 + np.arange(90) % 30,
                                        pa.date32()), "q": q}
    pruned = table(parts)
    result = pruned("q > 45", limit=10, order_by="d ASC")
    assert result == (["m0"], [])
    assert kept(pruned("q > 45", limit=10)) == ["m0"]
    assert kept(pruned("q > 45", limit=1000)) == ["m0", "m1", "m2", "m3"]


def test_cli_prune_json(tmp_path, run, capsys):
    for i in range(3):
        write(tmp_path / f"region=r{i}" / "f.parquet", pa.table({"x": [i * 10, i * 10 + 5]}))
    run(tmp_path)
    assert main(["prune", str(tmp_path), "--where", "x > 12", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"kept": ["region=r1/f.parquet", "region=r2/f.parquet"],
                   "skipped": ["region=r0/f.parquet"], "fully_matching": ["region=r2/f.parquet"],
                   "unknown": [], "version": "v000001", "assume_current": False}
    assert main(["prune", str(tmp_path), "--where", "region = 'r1'", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kept"] == ["region=r1/f.parquet"]
    assert main(["prune", str(tmp_path), "--order-by", "x DESC", "--limit", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kept"] == ["region=r2/f.parquet"]
    assert main(["prune", str(tmp_path), "--where", "x >>> 1"]) == 2
    assert "cannot parse" in capsys.readouterr().err
    for order, refused in [("x SIDEWAYS", "expected"), ("a.b DESC", "quoted: `a.b`")]:
        with pytest.raises(PredicateError, match=refused):     # a.b: Spark's struct field
            prune(f"{tmp_path}/_lakestats", order_by=order)
    assert parse_order(" `a.b`  desc ") == ("a.b", True) and parse_order("`a``b`") == ("a`b", False)


def test_a_long_in_list_uses_its_envelope_and_membership(table):
    pruned = table({"low": {"x": list(range(0, 50))}, "high": {"x": list(range(1000, 1050))},
                    "gap": {"x": list(range(500, 550))}})
    evens = ", ".join(str(v) for v in range(1000, 1200, 2))          # 100 values
    assert kept(pruned(f"x IN ({evens})")) == ["high"]
    spread = ", ".join(str(v) for v in [5, *range(551, 750)])      # the envelope covers gap
    assert kept(pruned(f"x IN ({spread})")) == ["low"]              # its value set does not


def test_in_a_list_of_expressions_is_not_membership_of_their_bounds(table):
    """`x IN (y + 1)`: y + 1 ranges over [2, 5] in `f`, and its low bound 2 is not one of
    x's values, yet the row y = 4, x = 5 matches. Membership is asked only for constants."""
    pruned = table({"f": {"x": [5, 5], "y": [1, 4]}, "g": {"x": [50, 50], "y": [1, 2]}})
    assert kept(pruned("x IN (y + 1)")) == ["f"]
    assert kept(pruned("x IN (y + 1, 7)")) == ["f"]
    assert kept(pruned("x = y + 1")) == ["f"]


def test_hive_directory_values_as_arrays(tmp_path, run):
    """A Hive column's ranges over every partition, as arrays, equal each partition's view
    (where the index holds its statistics, and, with those dropped, from the directory
    values alone), and prune as the values say."""
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.pruning.predicate import Views
    from lakestats.pruning.views import Partitions
    for k, day in enumerate(["2024-01-01", "2024-01-02", "2024-01-03", "7", "x"]):
        write(tmp_path / f"day={day}" / "f.parquet", pa.table({"v": list(range(k + 1))}))
    run(tmp_path)
    stats = StatisticsReader(f"{tmp_path}/_lakestats")
    for drop in (False, True):
        partitions = Partitions.of(stats, {"day", "v"}, None)
        if drop:
            del partitions.per_column["day"]
        arrays, views = partitions.columns("day"), Views(partitions.views).columns("day")
        for field in ("low", "high", "values", "nulls", "nan", "known"):
            assert getattr(arrays, field).tolist() == getattr(views, field).tolist(), field
    result = prune(f"{tmp_path}/_lakestats", "day > '2024-01-01'")
    assert sorted(result.kept) == ["day=2024-01-02/f.parquet", "day=2024-01-03/f.parquet",
                                   "day=7/f.parquet", "day=x/f.parquet"]


def test_directories_spark_types_as_timestamps_never_prune(tmp_path, run):
    """Spark reads `ts=2024-01-05 10:00:00` as a timestamp, the statistics as text: neither a
    plan nor a join plan compares them (test_spark_read checks the rows); a text column
    beside it still prunes."""
    from lakestats.pruning.joins import prune_query
    for i, (ts, s) in enumerate((("2024-01-05 10:00:00", "b"), ("2024-01-05 08:00:00", "a"))):
        write(tmp_path / f"ts={ts.replace(':', '%3A')}" / f"s={s}" / "f.parquet",
              pa.table({"a": [i]}))
    run(tmp_path)
    every = ["ts=2024-01-05 08%3A00%3A00/s=a/f.parquet", "ts=2024-01-05 10%3A00%3A00/s=b/f.parquet"]
    for where in ("ts > '2024-01-05 9:00:00'", "ts = '2024-01-05 10:00:00.0'"):
        assert sorted(prune(f"{tmp_path}/_lakestats", where).kept) == every, where
        assert sorted(prune_query(f"SELECT * FROM t WHERE {where}", {"t": str(tmp_path)})
                      .as_json()["tables"]["t"]["kept"]) == every, where
    assert sorted(prune(f"{tmp_path}/_lakestats", "ts < '2024-01-05 9:00:00'", 1,
                        "ts DESC").kept) == every
    assert prune(f"{tmp_path}/_lakestats", "s = 'b'").kept == every[1:]


def test_a_column_only_in_files_landed_since_is_refused_saying_so(tmp_path, run):
    """A column the statistics lack is refused; when files landed since, the refusal says they
    may hold it and what describes them (not only that it does not exist)."""
    write(tmp_path / "a.parquet", pa.table({"k": [1, 2]}))
    run(tmp_path)
    for where, order in (("extra = 1", None), ("k > 0", "extra DESC")):
        with pytest.raises(PredicateError, match=r"does not exist; columns: k$"):
            prune(f"{tmp_path}/_lakestats", where, limit=1, order_by=order)
    write(tmp_path / "b.parquet", pa.table({"k": [3], "extra": [1]}))
    for where, order in (("extra = 1", None), ("k > 0", "extra DESC")):
        with pytest.raises(PredicateError, match="a file landed or changed since version "
                                                 "v000001, which may hold it"):
            prune(f"{tmp_path}/_lakestats", where, limit=1, order_by=order)


def test_a_struct_field_is_not_the_column_of_its_name(tmp_path, run):
    """`st.a` reads field a of struct st, which column a's statistics say nothing of: once,
    `st.a > 150` was pruned with a's bounds (1..2) and skipped the file holding st.a = 200."""
    st = pa.struct([("a", pa.int32())])
    write(tmp_path / "p0.parquet", pa.table({"a": pa.array([1, 2], pa.int32()),
                                             "st": pa.array([{"a": 100}, {"a": 200}], st)}))
    write(tmp_path / "p1.parquet", pa.table({"a": pa.array([10], pa.int32()),
                                             "st": pa.array([{"a": 300}], st)}))
    run(tmp_path)
    root = f"{tmp_path}/_lakestats"
    for where in ("st.a > 150", "st.a = 100", "ST.a IN (200, 300)", "st.a > 0"):
        result = prune(root, where)
        assert result.kept == ["p0.parquet", "p1.parquet"] and not result.fully_matching, where
    assert prune(root, "st.a > 150 AND a < 5").kept == ["p0.parquet"]      # a still prunes
