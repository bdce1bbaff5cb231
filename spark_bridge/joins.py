"""Queries over join-pruned scans: every table reference of a query reads only the files that
join pruning (pruning.joins) keeps for it, and Spark runs the query text otherwise unchanged,
so its rows are those of the query over every file."""
from __future__ import annotations

import uuid

from sqlglot import exp

from lakestats.pruning.joins import prune_query
from lakestats.spark_bridge.read import files_frame, infers_hive_types, session_time_zone


def explain_pruning(spark, query: str, tables: dict[str, str], *,
                    stats_roots: dict[str, str] | None = None,
                    assume_current: bool = False) -> dict:
    """Per table: the files and bytes before pruning, after local predicates and after each
    diP, the files kept and skipped; and the planning time (`lakestats prune-query --json`).
    Reads statistics, not data; other tables the query names come from Spark's catalog."""
    return prune_query(query, tables, stats_roots, _catalog(spark), assume_current,
                       session_time_zone(spark) if spark is not None else None,
                       hive_types=spark is None or infers_hive_types(spark)).as_json()


def sql(spark, query: str, tables: dict[str, str], *,
        stats_roots: dict[str, str] | None = None, assume_current: bool = False):
    """spark.sql(query) with each table of `tables` (name -> table URI) read from the files
    its scans must read. Each table reference becomes a temporary view of its own files;
    other tables the query names (Spark's tables and views) are read as they are. Files
    newer than the statistics are read whole unless `assume_current` (pruning.freshness)."""
    plan = prune_query(query, tables, stats_roots, _catalog(spark), assume_current,
                       session_time_zone(spark), check_predicates=False,   # Spark judges them
                       hive_types=infers_hive_types(spark))
    tree = plan.graph.tree.copy()
    names = {s.reference: s.table for s in plan.graph.scans}
    views = []
    for node in list(tree.find_all(exp.Table)):
        reference = node.meta.get("scan")
        if reference not in plan.reads:
            continue                        # a common table expression's name
        view = f"lakestats_{uuid.uuid4().hex[:12]}_{reference}"
        table = plan.tables[names[reference]]
        kept = plan.reads[reference]
        every = table.listed and len(kept) == int(table.exists.sum())
        files_frame(spark, table.uri, kept, every, table.snapshot, table.freshness.files()) \
            .createOrReplaceTempView(view)
        views.append(view)
        scan = exp.alias_(exp.to_table(view), node.alias_or_name, table=True)
        for key, value in node.args.items():   # what the reference carries: nested joins, ...
            if key not in scan.args:
                scan.set(key, value)
        node.replace(scan)
    try:
        return spark.sql(tree.sql(dialect="spark"))
    finally:       # the DataFrame keeps its analyzed plan; the names are no longer needed
        for view in views:
            spark.catalog.dropTempView(view)


def _catalog(spark):
    """Looks up tables and views in Spark's catalog: names -> their columns, for those it
    knows (a name it does not know either is left to prune_query's error)."""
    if spark is None:                       # explain_pruning without a session
        return None
    return lambda names: {n: spark.table(n).columns for n in names
                          if spark.catalog.tableExists(n)}
