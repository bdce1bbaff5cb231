"""The coordinator (the Monostore): the compute job, which plans the partitions to
(re)compute, runs the algorithms and reduces to table level, and the atomic publication of a
table version."""
