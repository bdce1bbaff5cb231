"""PySpark integration: statistics into Spark's cost-based optimizer, statistics computed by
Spark tasks, statistics as a DataFrame, reads and queries (join pruning) pruned by the
statistics, and the `lakestats` data source that prunes ordinary DataFrame code and SQL.

Reads the statistics that metastore/ defines; never imported by functions/ (the Lambda package
stays free of PySpark)."""
from lakestats.spark_bridge.catalog import StaleStatistics, apply_statistics
from lakestats.spark_bridge.compute import compute
from lakestats.spark_bridge.frame import statistics_frame
from lakestats.spark_bridge.joins import explain_pruning, sql
from lakestats.spark_bridge.read import prune, read
from lakestats.spark_bridge.source import configure, explain, install, register_table

__all__ = ["StaleStatistics", "apply_statistics", "compute", "configure", "explain",
           "explain_pruning", "install", "prune", "read", "register_table", "sql",
           "statistics_frame"]
