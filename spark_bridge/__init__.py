"""PySpark integration: statistics lookups for pruning and for Spark's cost-based optimizer.

Reads the statistics that metastore/ defines; never imported by functions/ (the Lambda package
stays free of PySpark)."""
