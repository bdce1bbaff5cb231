"""Pruning: files and bytes skipped for TPC-H's single-table filters and a production-like suite,
the planning time pruning adds, and DuckDB scanning all files vs the kept ones.

TPC-H SF1 lineitem clustered by ship month (one file per month, ~80 files) and orders clustered
by order date (50 files), as the Snowflake paper's replication recipe asks:

    .venv/bin/python benchmarks/bench_pruning.py [--scale 1]

Anchors from the paper (TPC-H SF100, same clustering): 28.7% average pruning ratio; on
production workloads 70% of eligible LIMIT queries and 77% of top-k queries prune.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compute import parse_args  # noqa: E402

# (query, table, predicate): the single-table filters of the 22 TPC-H queries on lineitem and
# orders (None: the query scans the table unfiltered; queries not listed do not scan either)
TPCH = [
    ("Q1", "lineitem", "l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY"),
    ("Q3", "orders", "o_orderdate < DATE '1995-03-15'"),
    ("Q3", "lineitem", "l_shipdate > DATE '1995-03-15'"),
    ("Q4", "orders", "o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-10-01'"),
    ("Q4", "lineitem", "l_commitdate < l_receiptdate"),
    ("Q5", "orders", "o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-01-01'"),
    ("Q5", "lineitem", None),
    ("Q6", "lineitem", "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
                       "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"),
    ("Q7", "lineitem", "l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'"),
    ("Q7", "orders", None),
    ("Q8", "orders", "o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'"),
    ("Q8", "lineitem", None),
    ("Q9", "lineitem", None),
    ("Q9", "orders", None),
    ("Q10", "orders", "o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1994-01-01'"),
    ("Q10", "lineitem", "l_returnflag = 'R'"),
    ("Q12", "lineitem", "l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate AND "
                        "l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01' AND "
                        "l_receiptdate < DATE '1995-01-01'"),
    ("Q12", "orders", None),
    ("Q13", "orders", "o_comment NOT LIKE '%special%requests%'"),
    ("Q14", "lineitem", "l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'"),
    ("Q15", "lineitem", "l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-04-01'"),
    ("Q17", "lineitem", None),
    ("Q18", "lineitem", None),
    ("Q18", "orders", None),
    ("Q19", "lineitem", "l_shipmode IN ('AIR', 'AIR REG') AND "
                        "l_shipinstruct = 'DELIVER IN PERSON'"),
    ("Q20", "lineitem", "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'"),
    ("Q21", "lineitem", "l_receiptdate > l_commitdate"),
    ("Q21", "orders", "o_orderstatus = 'F'"),
    ("Q22", "orders", None),
]

# (name, table, predicate, limit, order by)
PRODUCTION = [
    ("point lookup by key", "lineitem", "l_orderkey = 4000000", None, None),
    ("customer's orders", "orders", "o_custkey = 77777", None, None),
    ("one ship day", "lineitem", "l_shipdate = DATE '1996-03-15'", None, None),
    ("IN list of parts", "lineitem", "l_partkey IN (1, 777, 155555)", None, None),
    ("recent, expensive", "orders", "o_orderdate >= DATE '1998-06-01' AND o_totalprice > 400000",
     None, None),
    ("LIMIT 100", "lineitem", None, 100, None),
    ("LIMIT 100 with a filter", "lineitem", "l_shipmode = 'AIR'", 100, None),
    ("LIMIT 10000, recent", "orders", "o_orderdate >= DATE '1998-01-01'", 10_000, None),
    ("LIMIT 10, selective", "lineitem", "l_quantity > 49", 10, None),
    ("latest 10 shipments", "lineitem", None, 10, "l_shipdate DESC"),
    ("first 100 orders", "orders", None, 100, "o_orderdate ASC"),
    ("latest 10 big shipments", "lineitem", "l_quantity > 45", 10, "l_shipdate DESC"),
    ("latest 50 open orders", "orders", "o_orderstatus = 'O'", 50, "o_orderdate DESC"),
]


def clustered(data: Path, scale: float) -> dict[str, Path]:
    """lineitem one file per ship month, orders 50 files by order date."""
    out = {"lineitem": data / "pruning" / "lineitem", "orders": data / "pruning" / "orders"}
    if all(any(p.glob("*.parquet")) for p in out.values()):
        return out
    raw = data / "pruning" / "raw"
    tool = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    subprocess.run([tool, "parquet", "-s", str(scale), "--tables=lineitem,orders",
                    f"--output-dir={raw}"], check=True)
    for name, column in (("lineitem", "l_shipdate"), ("orders", "o_orderdate")):
        shutil.rmtree(out[name], ignore_errors=True)
        out[name].mkdir(parents=True)
        table = pq.read_table(next(raw.glob(f"{name}*")))
        table = table.cast(pa.schema([pa.field(f.name, pa.string()) if pa.types.is_string_view(
            f.type) else f for f in table.schema])).sort_by(column)
        if name == "lineitem":
            month = pc.strftime(table[column], format="%Y-%m")
            keys = np.unique(month.to_numpy(zero_copy_only=False), return_index=True)[1]
            bounds = list(np.sort(keys)) + [table.num_rows]
        else:
            bounds = list(np.linspace(0, table.num_rows, 51).astype(int))
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            pq.write_table(table.slice(a, b - a), out[name] / f"part-{i:03d}.parquet")
    shutil.rmtree(raw)
    return out


def main() -> None:
    args = parse_args(__doc__)
    tables = clustered(args.data_dir, args.scale)

    import duckdb

    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.metastore.store import Store
    from lakestats.monostore.compute import compute
    from lakestats.pruning import prune

    sizes = {}
    with redis_url() as url, make_invoker("local", args.workers) as invoker:
        for name, path in tables.items():
            compute(str(path), invoker, Settings(redis_url=url))
            sizes[name] = {f.rel_path: f.size for f in Store(str(path)).list_files()}
    con = duckdb.connect()
    con.execute(f"SET threads = {args.workers}")

    def run(table, where, limit=None, order_by=None):
        start = time.perf_counter()
        result = prune(f"{tables[table]}/_lakestats", where, limit, order_by)
        planning = time.perf_counter() - start
        files = sizes[table]
        skipped_bytes = sum(files[p] for p in result.skipped) / sum(files.values())
        sql = _query(where, limit, order_by)
        all_s = _timed(con, sql, [str(tables[table] / p) for p in files])
        kept_s = _timed(con, sql, [str(tables[table] / p) for p in result.kept])
        return (len(result.skipped) / len(files), skipped_bytes, planning, all_s, kept_s,
                len(result.kept), len(files))

    print(f"{'TPC-H':<6} {'table':<9} {'files':>9} {'skipped':>8} {'bytes':>7} "
          f"{'plan ms':>8} {'DuckDB all':>11} {'pruned':>8}")
    ratios = []
    for query, table, where in TPCH:
        r = run(table, where)
        ratios.append(r[0])
        print(f"{query:<6} {table:<9} {r[5]:>4}/{r[6]:<4} {r[0]:8.1%} {r[1]:7.1%} "
              f"{r[2] * 1e3:8.1f} {r[3]:10.3f}s {r[4]:7.3f}s")
    print(f"average pruning ratio over {len(TPCH)} scans: {np.mean(ratios):.1%} "
          f"(Snowflake, TPC-H SF100: 28.7%)\n")

    print(f"{'production-like':<26} {'files':>9} {'skipped':>8} {'bytes':>7} {'plan ms':>8} "
          f"{'DuckDB all':>11} {'pruned':>8}")
    by_kind = {"LIMIT": [], "top-k": []}
    for name, table, where, limit, order_by in PRODUCTION:
        r = run(table, where, limit, order_by)
        if limit is not None:
            by_kind["top-k" if order_by else "LIMIT"].append(r[0] > 0)
        print(f"{name:<26} {r[5]:>4}/{r[6]:<4} {r[0]:8.1%} {r[1]:7.1%} {r[2] * 1e3:8.1f} "
              f"{r[3]:10.3f}s {r[4]:7.3f}s")
    for kind, pruned in by_kind.items():
        anchor = {"LIMIT": "70%", "top-k": "77%"}[kind]
        print(f"{kind} queries that prune: {np.mean(pruned):.0%} (Snowflake production: {anchor})")


def _query(where, limit, order_by) -> str:
    sql = "select * from read_parquet(?)"    # placeholder replaced in _timed
    if where:
        sql += f" where {where}"
    if order_by:
        sql += f" order by {order_by}"
    if limit is not None:
        sql += f" limit {limit}"
    return f"select count(*) from ({sql})"


def _timed(con, sql: str, paths: list[str]) -> float:
    if not paths:
        return 0.0
    start = time.perf_counter()
    con.execute(sql.replace("?", repr(paths))).fetchall()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
