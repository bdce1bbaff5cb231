"""Numbers of different types meet in a predicate as Spark makes them meet. A comparison of a
double with an integer or a decimal compares doubles (`f = 0.1` holds where f is the double
nearest 0.1; `k = 9.007199254740992E15` where k is 2^53 + 1), by ranges and by membership; a
float (32-bit) with an integer compares floats (`g = 16777217` holds where g is 16777216).
CAST of a number's bounds to another numeric type bounds the cast values (toward zero to an
integer, rounded half up to a decimal, to the nearest double), and a partition where a cast
may overflow or meets NaN is not pruned (overflow wraps around or saturates under legacy
casts, NaN becomes 0). Random predicates, checked with Spark itself over each file: DuckDB
casts differently (1.5 to an integer is 2 there)."""
from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from lakestats.pruning import prune
from tests.tables import write

pytestmark = pytest.mark.slow

D = decimal.Decimal
W = D("12345678901234567890.123456789012345678")      # 38 digits
FILES = {      # f double, g float, k bigint, i int, d decimal(5, 2), w decimal(38, 18)
    "p0": {"f": [1.5, 2.5], "g": [0.5, 1.25], "k": [3_000_000_000, 3_000_000_001],
           "i": [1, 2], "d": [D("1.25"), D("1.35")],
           "w": [D("0.49999999995"), D("0.49999999995")]},
    "p1": {"f": [10.5, 20.5], "g": [100.0, 200.5], "k": [1, 2], "i": [100, 200],
           "d": [D("9.99"), D("10.01")],
           "w": [W, W]},
    "p2": {"f": [-1.5, -0.5], "g": [-0.75, -0.25], "k": [2**53 + 1, 2**53 + 1],
           "i": [-5, -3], "d": [D("-0.05"), D("0.04")],
           "w": [D("3e-18"), D("3e-18")]},
    "p3": {"f": [float("nan"), 7.0], "g": [16_777_216.0, 16_777_216.0],
           "k": [-2**63, -2**63 + 1], "i": [2**31 - 1, 2**31 - 2], "d": [D("99.99"), D("999.99")],
           "w": [None, D(1)]},
    "p4": {"f": [float("inf"), 1e300], "g": [None, 3.5], "k": [2**63 - 1, 2**63 - 2],
           "i": [None, 7], "d": [None, D("-999.99")],
           "w": [D(-1), D(1)]},
    "p5": {"f": [0.1, 0.3], "g": [0.1, 0.1], "k": [2**53, 2**53 + 1], "i": [0, 0],
           "d": [D("99.99"), D("99.99")],
           "w": [D(0), D(0)]},
}
TYPES = {"f": pa.float64(), "g": pa.float32(), "k": pa.int64(), "i": pa.int32(),
         "d": pa.decimal128(5, 2), "w": pa.decimal128(38, 18)}


@pytest.fixture(scope="module")
def table(tmp_path_factory, run, spark):
    root = tmp_path_factory.mktemp("casts") / "t"
    for name, columns in FILES.items():
        write(root / f"{name}.parquet", pa.table({c: pa.array(v, TYPES[c])
                                                  for c, v in columns.items()}))
    run(root)
    spark.read.parquet(str(root)).createOrReplaceTempView("casts")
    return root


def matching(spark, where: str) -> dict[str, tuple[int, int]]:
    """Per file: rows where the predicate is true, rows where it is not (false or null), with
    legacy casts (ANSI off: overflow wraps around or saturates where ANSI would fail)."""
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        rows = spark.sql(f"SELECT input_file_name(), ({where}) IS TRUE FROM casts").collect()
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    counts: dict[str, tuple[int, int]] = {}
    for file, true in rows:      # ten rows: counted here, not by a shuffle
        yes, no = counts.get(file.rsplit("/", 1)[1], (0, 0))
        counts[file.rsplit("/", 1)[1]] = (yes + true, no + (not true))
    return counts


TARGETS = ["TINYINT", "SMALLINT", "INT", "BIGINT", "DOUBLE", "FLOAT", "DECIMAL(3, 1)", "DECIMAL(4)",
           "DECIMAL(4, 0)", "DECIMAL"]
CONSTANTS = ["-1", "0", "1", "2", "1.3", "1.4", "-0.5", "10", "127", "-128", "2147483647",
             "3000000000", "9007199254740992", "9007199254740993", "16777217", "1e300", "99.99",
             "0.1", "0.3", "1.25", "1e-1", "0.1D", "9.007199254740992E15", "3.5"]
casts = st.one_of(
    st.builds(lambda c, t: f"CAST({c} AS {t})", st.sampled_from("fgkid"), st.sampled_from(TARGETS)),
    st.builds(lambda c, fn: f"{fn}({c})", st.sampled_from("fgkid"),
              st.sampled_from(["int", "bigint", "double", "float", "smallint", "tinyint"])),
    st.builds(lambda c, t: f"{c}::{t}", st.sampled_from("fgkid"), st.sampled_from(TARGETS[:6])))
# integer arithmetic overflows its type (int + int is an int): wraps under legacy arithmetic
arithmetic = st.builds(lambda c, op, n: f"{c} {op} {n}", st.sampled_from(["k", "i", "-k", "-i",
                                                                        "f", "d", "int(k)", "g", "w",
                                                                        "d * d", "w * i"]),
                       st.sampled_from(["+", "-", "*"]),
                       st.sampled_from(["1", "2", "-1", "2147483647", "3000000000", "0.5"]))
predicates = st.builds(lambda e, op, v: f"{e} {op} {v}",
                       st.one_of(casts, st.sampled_from("fgkid"), arithmetic),
                       st.sampled_from(["<", "<=", ">", ">=", "=", "!="]),
                       st.sampled_from(CONSTANTS))


@seed(20261128)
@settings(max_examples=80, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=predicates)
def test_no_file_pruned_by_a_cast_holds_a_matching_row(table, spark, where):
    result = prune(f"{table}/_lakestats", where)
    counts = matching(spark, where)
    for rel in result.skipped:
        assert counts.get(rel, (0, 0))[0] == 0, (where, rel)
    for rel in result.fully_matching:
        assert counts[rel][1] == 0, (where, rel)


@pytest.mark.parametrize("where, skipped", [
    ("int(f) = 1", ["p1", "p2", "p5"]),             # p3: NaN casts to 0; p4: infinity
    ("CAST(f AS BIGINT) = 0", ["p0", "p1"]),        # p2: -0.5 casts to 0
    ("CAST(k AS DOUBLE) = 9007199254740992", ["p0", "p1", "p3", "p4"]),  # p2: 2^53 + 1 rounds
    ("CAST(d AS DECIMAL(3, 1)) = 1.3", ["p1", "p2"]),   # p0: 1.25 half up; p3-p5 overflow
    ("CAST(k AS INT) > 0", []),                     # every k but p1's overflows an int
    ("f = 0.1", ["p0", "p1", "p2", "p3", "p4"]),    # the decimal 0.1 as a double
    ("k > 9.007199254740992E15", ["p0", "p1", "p2", "p3", "p5"]),   # 2^53 + 1 as a double
    # membership (each file's value set): 2^53 + 1 equals the double 2^53, 0.1 the double 0.1
    ("k = 9.007199254740992E15", ["p0", "p1", "p3", "p4"]),
    ("k IN (9.007199254740991E15, 1.0)", ["p0", "p2", "p3", "p4", "p5"]),
    ("f IN (0.1, 2)", ["p0", "p1", "p2", "p3", "p4"]),
    ("g = 0.1", ["p0", "p1", "p2", "p3", "p4", "p5"]),   # the float32 0.1 is no double 0.1
    # integer overflow: p3's i + 1 and p4's k + 1 wrap around (or fail, under ANSI)
    ("i + 1 < 0", ["p0", "p1", "p4", "p5"]),
    ("k + 1 < 0", ["p0", "p1", "p2", "p5"]),
    ("i * 2 > 300", ["p0", "p2", "p4", "p5"]),         # p1: 200 * 2; p3: overflows
    # a float meets an integer as a float: 16777217 rounds to p3's 16777216, by ranges, in an
    # IN list, BETWEEN and IF; float arithmetic rounds each step (p3: g + 1 is 16777216)
    ("g = 16777217", ["p0", "p1", "p2", "p4", "p5"]),
    ("g IN (16777217, 16777219)", ["p0", "p1", "p2", "p4", "p5"]),
    ("g BETWEEN 16777217 AND 16777219", ["p0", "p1", "p2", "p4", "p5"]),
    ("IF(i > 0, g, 0) = 16777217", ["p0", "p1", "p2", "p4", "p5"]),
    ("CAST(16777217 AS FLOAT) = g", ["p0", "p1", "p2", "p4", "p5"]),
    ("g + 1 <= 16777216", []),
    ("CAST(g AS DECIMAL(9)) = 16777216", []),   # DECIMAL(9, 0); a float cast: not modelled
    # decimal arithmetic past 38 digits: w * i is a DECIMAL(38, 7), w + 0 a DECIMAL(38, 17),
    # rounded half up (p0: 0.49999999995 * 2 is 1.0000000), computed exactly before that
    ("w * i >= 1", ["p2", "p5"]),
    ("w + 0 = 12345678901234567890.12345678901234568", ["p0", "p2", "p3", "p4", "p5"]),
    ("w + 0 < 0", ["p0", "p1", "p2", "p3", "p5"]),     # p1 in 38 digits; p2 rounds to 0
])
def test_casts_prune_where_their_values_are_certain(table, where, skipped):
    assert prune(f"{table}/_lakestats", where).skipped == [f"{p}.parquet" for p in skipped]
