"""The 22 TPC-H queries as Spark SQL text (tpch/q01.sql ... q22.sql), for the join-pruning
benchmark: the specification's queries with its validation substitution parameters, as DuckDB's
tpch extension ships them (extension/tpch/dbgen/queries), adapted to Spark SQL (DATE literals,
Q15's view as CTE revenue0).
"""
from __future__ import annotations

from pathlib import Path

import sqlglot
from sqlglot import exp

QUERIES: dict[int, str] = {n: (Path(__file__).parent / "tpch" / f"q{n:02d}.sql").read_text()
                           for n in range(1, 23)}


def tables_of(query: int) -> list[str]:
    """The TPC-H tables query `query` reads, sorted (CTE names such as Q15's revenue0 excluded)."""
    tree = sqlglot.parse_one(QUERIES[query], read="spark")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    return sorted({table.name for table in tree.find_all(exp.Table)} - ctes)
