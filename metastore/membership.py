"""What the partition index keeps to answer "may this partition hold value v?" without
opening the partition's files:

- the exact values and counts of a column with at most bloom_min_distinct of them in the
  partition (they also give a LIMIT's certain rows); the kernel writes a Bloom filter for
  every column with more, so every column has one or the other;
- where the partition's Bloom filter of the column lies: Bloom filters of the partitions a
  version adds are written one after the other into one pack (versions/<version>/blooms.bin),
  column by column within each batch of partitions the coordinator indexes at once, so a plan
  reads a column's filters in one ranged read per batch, and a new version writes only the
  new partitions'.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from lakestats.core import schema
from lakestats.core.bloom import BloomFilter
from lakestats.metastore import files
from lakestats.metastore.index import Retyped
from lakestats.metastore.layout import BLOOMS, Layout
from lakestats.metastore.store import DataFile


class BloomPack:
    """The Bloom filters a version adds, appended batch by batch (column by column within a
    batch) and written once as versions/<version>/blooms.bin."""

    def __init__(self, version: str):
        self.version, self.parts, self.size = version, [], 0

    def add(self, data: bytes) -> int:
        """Appends a filter; returns its offset."""
        self.parts.append(data)
        self.size += len(data)
        return self.size - len(data)

    def write(self, layout: Layout) -> None:
        if self.parts:
            layout.version(self.version).write_bytes(b"".join(self.parts), BLOOMS)


def few_valued(stats: pa.Table, bloom_min_distinct: int) -> np.ndarray:
    """Which columns (rows) of a partition's statistics the index keeps the values of: those
    with 1 to bloom_min_distinct of them (the others have Bloom filters). NumPy: a tenth of
    Arrow's calls' time on a partition's few rows."""
    distinct = stats["distinct_count"].to_numpy()           # nulls: NaN, neither
    return (distinct > 0) & (distinct <= bloom_min_distinct)


def collect(layout: Layout, added: list[tuple[DataFile, pa.Table]], bloom_min_distinct: int,
            pack: BloomPack, retyped: Retyped,
            known: dict[str, dict[str, pa.Table]] | None = None
            ) -> dict[str, dict[str, dict]]:
    """path -> column -> the index's membership fields, for the added partitions (whose
    statistics tables are given, with their Bloom filters): a column's values as a table of
    (value, frequency), its filter's place in `pack`. Values are text as the table's type
    spells them, which a partition typing the column otherwise spells differently (a
    timestamp[ms] file's "...05.000" in a timestamp[us] table): its values are re-rendered,
    and its Bloom filter made anew from its re-rendered frequencies. `known`: the (value,
    frequency) tables of a partition's few-valued columns, where already read (path ->
    column -> table): its frequencies are not read again for them."""
    def read(item: tuple[DataFile, pa.Table]) -> tuple[str, dict, dict]:
        f, stats = item
        directory = layout.partition(f.rel_path, f.fingerprint)
        small = [name for name, few in zip(stats["column"].to_pylist(),
                                           few_valued(stats, bloom_min_distinct)) if few]
        blooms = {c: b for c, b in zip(stats["column"].to_pylist(),
                                       stats["bloom_filter"].to_pylist()) if b is not None}
        again = [c for c in blooms if (f.rel_path, c) in retyped]
        if not (small or again):
            return f.rel_path, {}, blooms
        runs = dict((known or {}).get(f.rel_path) or {})
        if again or not set(small) <= set(runs):
            freq = files.read_frequencies(directory, small + again)
            runs = dict(files.column_runs(freq, ("value", "frequency")))
        unfit = set()   # values the table's type cannot hold: nor can their bounds, and
        for name in [n for n in runs if (f.rel_path, n) in retyped]:    # index.build names them
            try:
                runs[name] = files.retexted(runs[name], *retyped[f.rel_path, name])
            except ValueError:
                unfit.add(name)
        empty = schema.FREQUENCIES_SCHEMA.empty_table().select(["value", "frequency"])
        values = {name: runs.get(name, empty) for name in small if name not in unfit}
        for name in again:          # the file's filter hashes its own type's text
            del blooms[name]
            if name in runs and name not in unfit:
                bloom = BloomFilter.sized(runs[name].num_rows)
                bloom.add_text(runs[name]["value"])
                blooms[name] = bloom.to_bytes()
        return f.rel_path, values, blooms

    with ThreadPoolExecutor(16) as pool:
        found = list(pool.map(read, added))
    out = {path: {c: {"values": v} for c, v in values.items()} for path, values, _ in found}
    for column in sorted({c for _, _, blooms in found for c in blooms}):
        for path, _, blooms in found:
            if column in blooms:
                data = blooms[column]
                out[path].setdefault(column, {}).update(
                    bloom_pack=pack.version, bloom_offset=pack.add(data), bloom_length=len(data))
    return out


# ranges closer than this are read as one: a GET's latency costs about as much as a MiB
COALESCE_GAP = 1 << 20


def read_blooms(layout: Layout, pointers: list[tuple[str, int, int] | None]
                ) -> list[bytes | None]:
    """The Bloom filters the (pack, offset, length) pointers name: one ranged read per pack,
    or per run of wanted filters where long stretches between them are not wanted."""
    out: list[bytes | None] = [None] * len(pointers)
    by_pack: dict[str, list[int]] = {}
    for i, pointer in enumerate(pointers):
        if pointer is not None:
            by_pack.setdefault(pointer[0], []).append(i)
    for pack, held in by_pack.items():
        held.sort(key=lambda i: pointers[i][1])
        runs, run = [], [held[0]]
        for i in held[1:]:
            _, last_offset, last_length = pointers[run[-1]]
            if pointers[i][1] - (last_offset + last_length) > COALESCE_GAP:
                runs.append(run)
                run = []
            run.append(i)
        runs.append(run)
        for run in runs:
            start = pointers[run[0]][1]
            end = max(pointers[i][1] + pointers[i][2] for i in run)
            data = layout.version(pack).read_range(start, end - start, BLOOMS)
            for i in run:
                _, offset, length = pointers[i]
                out[i] = data[offset - start: offset - start + length]
    return out
