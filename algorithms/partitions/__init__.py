"""Partition statistics: the kernel that turns one data file into its three statistics files
(column_stats, kernel), the worker step that runs it (step), the coordinator's fan-out of one
step per changed file (driver), and the table-level reduction of the partitions' statistics
(reduce)."""
