"""Partitions' sketches and histograms folded into one: KMV and theta sketches merged (the
union's smallest hashes), KLL sketches merged, histograms re-binned exactly (core.histogram).
A fold of folds is the fold of all (KLL sketches aside, whose merges are equally good in any
order but not the same bytes), so the coordinator folds every partition itself, or workers
fold packs of them (the fold step) and it folds their partials."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Iterator

import datasketches as ds
import numpy as np
import pyarrow as pa

from lakestats.core import hashing, schema, theta
from lakestats.core import histogram as hist
from lakestats.core import types as ty
from lakestats.metastore.histograms import histograms_table, read_histograms
from lakestats.metastore.layout import HISTOGRAMS, STATISTICS
from lakestats.metastore.store import Store

# column sketches or histograms held at once while folding: a bound on the memory of who folds
# (a KMV sketch is up to 32 KB, a histogram up to 24 KB) that a wide table does not multiply
HELD = 4_096
SKETCHES_SCHEMA = pa.schema([schema.STATISTICS_SCHEMA.field(n)
                             for n in ("column", *schema.MERGED_SKETCHES)])


def sources(stats_dirs: list[Store], columns: int) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Each partition's sketches and histograms, read side by side a window at a time: the
    fold takes them as they come, holding none for long."""
    window = _window(columns)
    with ThreadPoolExecutor(min(16, window)) as pool:
        for start in range(0, len(stats_dirs), window):
            yield from pool.map(_sketches_and_histograms, stats_dirs[start:start + window])


def _window(columns: int) -> int:
    """Partitions whose sketches or histograms are held at once: 64, fewer when the table is
    wide (HELD columns' worth)."""
    return max(1, min(64, HELD // max(1, columns)))


def _sketches_and_histograms(stats_dir: Store) -> tuple[pa.Table, pa.Table]:
    parquet = stats_dir.open_parquet(STATISTICS)
    return (parquet.read(columns=_sketch_columns(parquet.schema_arrow)),
            stats_dir.read_parquet(HISTOGRAMS))


def _sketch_columns(stats: pa.Schema) -> list[str]:
    """The merged sketches statistics hold (those written before a sketch existed lack it)."""
    return ["column", *(n for n in schema.MERGED_SKETCHES if n in stats.names)]


class Folds:
    """The table's columns' sketches and histograms, folded one source at a time: a source is
    (sketches, histograms), as a partition's files or a partial fold hold them."""

    def __init__(self, table: pa.Schema, max_bins: int, sources: Iterable = ()):
        self.table, self.max_bins = table, max_bins
        self.columns = {f.name: _Fold(max(2, _window(len(table)))) for f in table}
        for stats, histograms in sources:
            self.add(stats, histograms)

    def add(self, stats: pa.Table, histograms: pa.Table) -> None:
        self.add_binned(stats, read_histograms(histograms))

    def add_binned(self, stats: pa.Table, binned: dict[str, hist.Histogram]) -> None:
        """A source whose histograms are read already (or were never written)."""
        rows = {r["column"]: r for r in stats.select(_sketch_columns(stats.schema)).to_pylist()}
        for f in self.table:
            fold = self.columns[f.name]
            if f.name in rows:
                fold.sketches(rows[f.name])
            if ty.kind_of(f.type) in ty.BINNED_KINDS:
                fold.histogram(binned.get(f.name), self.max_bins)

    def sketches(self, name: str) -> dict:
        """The column's merged sketches (ndv_sketch, quantile_sketch, theta_sketch)."""
        return self.columns[name].row()

    def histogram(self, name: str) -> hist.Histogram | None:
        return hist.merge(self.columns[name].hists, self.max_bins)

    def partial(self) -> tuple[pa.Table, pa.Table]:
        """What was folded, as a source of another fold."""
        sketches = pa.Table.from_pylist([{"column": f.name, **self.sketches(f.name)}
                                         for f in self.table], schema=SKETCHES_SCHEMA)
        return sketches, histograms_table([(f.name, f.type, self.histogram(f.name))
                                           for f in self.table
                                           if ty.kind_of(f.type) in ty.BINNED_KINDS])


class _Fold:
    """A column's sketches and histogram, merged one source at a time."""

    def __init__(self, held: int):
        self.kmvs: list[np.ndarray] = []       # merged `held` at a time: one sort, not `held`
        self.thetas: list[bytes] | None = []   # None: a source with values had none
        self.hists: list[hist.Histogram | None] = []     # merged `held` at a time, as kmvs
        self.held = held
        self.kll = None

    def sketches(self, row: dict) -> None:
        if row["ndv_sketch"]:
            self.kmvs.append(hashing.kmv_from_bytes(row["ndv_sketch"]))
            if len(self.kmvs) == self.held:
                self.kmvs = [hashing.kmv_merge(self.kmvs)]
            if self.thetas is not None and row.get("theta_sketch"):
                self.thetas.append(row["theta_sketch"])
                if len(self.thetas) == self.held:
                    self.thetas = [theta.union(self.thetas)]
            else:
                self.thetas = None
        if row["quantile_sketch"]:
            kll = ds.kll_doubles_sketch.deserialize(row["quantile_sketch"])
            if self.kll is None:
                self.kll = kll
            else:
                self.kll.merge(kll)

    def histogram(self, h: hist.Histogram | None, max_bins: int) -> None:
        self.hists.append(h)
        if len(self.hists) == self.held:
            self.hists = [hist.merge(self.hists, max_bins)]

    def row(self) -> dict:
        out = {}
        if self.kmvs:
            out["ndv_sketch"] = hashing.kmv_to_bytes(hashing.kmv_merge(self.kmvs))
        if self.kll is not None:
            out["quantile_sketch"] = self.kll.serialize()
        if self.thetas:
            out["theta_sketch"] = theta.union(self.thetas)
        return out
