"""Statistics without I/O: value kinds and canonical text, the statistics files' schemas,
histogram grids, exact arithmetic and moments, value counting, binning views, hashing, KMV
sketches, Bloom filters, quantile arithmetic and the settings of a run. The lowest layer:
it imports nothing of the project's."""
