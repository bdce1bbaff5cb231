"""A pack's digest: what the table level reads of the files a pack task computed, written by
the task beside their own statistics, from the same tables, in up to three files:

- rows: each file's statistics without the sketches a reduction merges (as
  algorithms.partitions.reduce.statistics reads them), with the values of its columns with
  few (as metastore.membership reads them): what the coordinator indexes;
- frequencies: each file's lists (column, value, frequency), while the pack's add up to
  FREQUENCY_ROWS: what the frequency steps' workers read;
- fold: the files' sketches and histograms folded into one partial, when they share one
  schema: what the coordinator folds instead of each file's.

At 10,000 small files these reads were 20,000 to 30,000 small Parquet files a step (~0.5 ms
each, whatever their rows). A digest only saves reads: a file it does not hold (computed
alone, reused, or left out) is read from its own directory, and each part names the files it
holds. Digests live in the compute's scratch space and go with it."""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.algorithms.partitions.fold import Folds
from lakestats.core import schema
from lakestats.core.histogram import Histogram
from lakestats.fleet.exchange import from_ipc, to_ipc
from lakestats.metastore import files
from lakestats.metastore.membership import few_valued
from lakestats.metastore.store import DataFile, Store

PATH, FINGERPRINT, VALUES = "_path", "_fingerprint", "_values"
_VALUE_FIELDS = ("value", "frequency")
_VALUES_TYPE = pa.list_(pa.struct([schema.FREQUENCIES_SCHEMA.field(n) for n in _VALUE_FIELDS]))
SPANS = "lakestats.spans"      # where each file's rows are, in a digest's schema metadata
CACHED = 4          # digests a reader holds: a batch of files meets a pack twice at most
# a pack's frequency lists go to its digest up to this many rows (a worker holds CACHED such)
FREQUENCY_ROWS = 500_000


class Builder:
    """A pack task's digest, file by file, built once when written: the files' rows, and
    their sketches and histograms folded into one partial while the files share one schema
    (the common case; else the coordinator folds them one by one)."""

    def __init__(self, uri: str, bloom_min_distinct: int, max_bins: int):
        self.uri, self.bloom_min_distinct, self.max_bins = uri, bloom_min_distinct, max_bins
        self.statistics: list[pa.Table] = []
        self.few: list[pa.Table] = []            # the few-valued columns' lists, for `_rows`
        self.frequencies: list[pa.Table] | None = []     # None: more than FREQUENCY_ROWS
        self.lengths: list[int] = []
        self.members: list[tuple[str, str, str, str]] = []  # path, fingerprint, metadata, dir
        self.folds: Folds | None = None
        self.schema: str | None = None

    def add(self, rel_path: str, fingerprint: str, stats_dir: str, statistics: pa.Table,
            frequencies: pa.Table, binned: dict[str, Histogram]) -> None:
        """A file's statistics as written in `stats_dir` (with their metadata), frequencies
        and histograms (column -> core.histogram.Histogram)."""
        metadata = {k.decode(): v.decode() for k, v in statistics.schema.metadata.items()}
        data_schema = statistics.schema.metadata[files.DATA_SCHEMA_KEY].decode()
        if not self.members:
            self.schema = data_schema
            self.folds = Folds(files.decode_schema(data_schema), self.max_bins)
        elif data_schema != self.schema:
            self.folds = None
        if self.folds is not None:
            self.folds.add_binned(statistics, binned)
        table = statistics.drop_columns(
            [n for n in schema.MERGED_SKETCHES if n in statistics.column_names]
        ).replace_schema_metadata(None)
        few = table["column"].filter(pa.array(few_valued(table, self.bloom_min_distinct)))
        counts = frequencies.select(["column", *_VALUE_FIELDS])
        self.statistics.append(table)
        self.few.append(counts.filter(pc.is_in(counts["column"], value_set=few)))
        self.lengths.append(counts.num_rows)
        if self.frequencies is not None and sum(self.lengths) <= FREQUENCY_ROWS:
            self.frequencies.append(counts)
        else:
            self.frequencies = None
        self.members.append((rel_path, fingerprint, metadata, stats_dir))

    def write(self) -> None:
        """Its files at the pack's digest name (Digests.name): rows, the frequency lists
        (unless too many), then the fold."""
        if not self.members:
            return
        try:
            _write(self.uri, self._rows())
        except pa.ArrowInvalid:     # a plugin's values typed otherwise in another file
            pass                    # its files' statistics are read one by one
        if self.frequencies is not None:
            ends = np.cumsum(self.lengths).tolist()
            spans = {m[3]: (end - n, end) for m, n, end in zip(self.members, self.lengths, ends)}
            _write(part(self.uri, "frequencies"), pa.concat_tables(self.frequencies)
                   .combine_chunks().replace_schema_metadata({SPANS: json.dumps(spans)}))
        if self.folds is not None:
            sketches, histograms = self.folds.partial()
            paths, fingerprints, *_ = zip(*self.members)
            _write(part(self.uri, "fold"), pa.table({
                "schema": [self.schema], "sketches": [to_ipc(sketches)],
                "histograms": [to_ipc(histograms)], PATH: [list(paths)],
                FINGERPRINT: [list(fingerprints)]}))

    def _rows(self) -> pa.Table:
        """Every file's statistics rows, and on the row of each column with at most
        bloom_min_distinct values its (value, frequency) list; the files' path, fingerprint,
        statistics metadata and rows in the schema's metadata."""
        table = pa.concat_tables(self.statistics).combine_chunks()
        at = np.repeat(np.arange(len(self.members)), [t.num_rows for t in self.statistics])
        counts = pa.concat_tables(self.few).combine_chunks()
        owner = np.repeat(np.arange(len(self.members)), [t.num_rows for t in self.few])
        # each frequency row's statistics row: same file, same column
        names = pa.concat_arrays([table["column"].combine_chunks(),
                                  counts["column"].combine_chunks()])
        codes = pc.dictionary_encode(names).indices.to_numpy().astype(np.int64)
        width = int(codes.max()) + 1 if len(codes) else 1
        row_of = np.full(len(self.members) * width, -1, np.int64)
        row_of[at * width + codes[:table.num_rows]] = np.arange(table.num_rows)
        rows = row_of[owner * width + codes[table.num_rows:]]
        few = few_valued(table, self.bloom_min_distinct)
        kept = np.flatnonzero((rows >= 0) & few[np.maximum(rows, 0)])
        kept = kept[np.argsort(rows[kept], kind="stable")]
        flat = counts.select(list(_VALUE_FIELDS)).take(kept).to_struct_array()
        offsets = np.concatenate([[0], np.cumsum(np.bincount(rows[kept],
                                                             minlength=table.num_rows))])
        values = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                          flat.combine_chunks().cast(_VALUES_TYPE.value_type),
                                          _VALUES_TYPE, mask=pa.array(~few))
        ends = np.cumsum([t.num_rows for t in self.statistics]).tolist()
        members = [(path, fingerprint, metadata, end - t.num_rows, end) for (
            path, fingerprint, metadata, _), t, end in zip(self.members, self.statistics, ends)]
        return table.append_column(VALUES, values).replace_schema_metadata(
            {SPANS: json.dumps(members)})


class Digests:
    """The coordinator's side: the digest each pack task is asked to write, which files the
    written ones hold, and those files' statistics read from them."""

    def __init__(self, directory: Store):
        self.directory = directory
        self.held: dict[str, tuple[str, str]] = {}     # path -> (digest name, fingerprint)
        self.asked = False
        self._cache: OrderedDict[str, pa.Table] = OrderedDict()

    def name(self, pack: int) -> str:
        """Where pack `pack` writes its digest."""
        self.asked = True
        return f"{self.directory.uri}/pack-{pack:06d}.arrow"

    def record(self, pack: int, done: list[DataFile]) -> None:
        """Pack `pack` ended and wrote its digest, holding the `done` files."""
        for f in done:
            self.held[f.rel_path] = (self.name(pack), f.fingerprint)

    def read(self, wanted: list[DataFile]) -> dict[str, tuple[pa.Table, dict[str, pa.Table]]]:
        """The statistics (without merged sketches) and few-valued columns' (value,
        frequency) tables of the `wanted` files that digests hold, by path."""
        out = {}
        by_digest: dict[str, list[DataFile]] = {}
        for f in wanted:
            if name := self._holder(f.rel_path, f.fingerprint):
                by_digest.setdefault(name, []).append(f)
        for name, held in by_digest.items():
            out.update(_split(_cached(self._cache, name, _read),
                              {f.rel_path: f.fingerprint for f in held}))
        return out

    def frequencies(self, path: str, fingerprint: str) -> str:
        """The frequency digest that may hold the partition's lists ("": none does)."""
        name = self._holder(path, fingerprint)
        return part(name, "frequencies") if name else ""

    def _holder(self, path: str, fingerprint: str) -> str | None:
        """The digest of the pack that computed this version of the file, if any."""
        name, held = self.held.get(path, (None, None))
        return name if held == fingerprint else None

    def partials(self, wanted: list[DataFile], table: pa.Schema
                 ) -> Iterator[tuple[list[str], tuple[pa.Table, pa.Table]]]:
        """The fold partials (sketches, histograms) of packs whose files are all `wanted`
        and were folded under the table's types, one at a time, each with the files it
        folded: those, and only those, it stands for."""
        fingerprints = {f.rel_path: f.fingerprint for f in wanted}
        for name in sorted({name for name, _ in self.held.values()}):
            try:
                fold = _read(part(name, "fold"))
            except FileNotFoundError:            # its files had several schemas
                continue
            members = list(zip(fold[PATH][0].as_py(), fold[FINGERPRINT][0].as_py()))
            folded = files.decode_schema(fold["schema"][0].as_py())
            if all(fingerprints.get(p) == fp for p, fp in members) and all(
                    f.type == table.field(f.name).type for f in folded
                    if f.name in table.names):      # the partial decoded in place, not copied
                yield [p for p, _ in members], (from_ipc(fold["sketches"][0].as_buffer()),
                                                from_ipc(fold["histograms"][0].as_buffer()))

    def clear(self) -> None:
        """Every digest gone (written or not: a call may have failed after writing one)."""
        self._cache.clear()
        if self.asked:
            self.directory.delete_dir()


def part(name: str, kind: str) -> str:
    """The name of a digest's other part ("frequencies", "fold")."""
    return name.replace(".arrow", f".{kind}.arrow")


def _read(uri: str) -> pa.Table:
    directory, _, name = uri.rpartition("/")
    return from_ipc(Store(directory).read_bytes(name))


def _write(uri: str, table: pa.Table) -> None:
    directory, _, name = uri.rpartition("/")
    Store(directory).write_bytes(to_ipc(table), name)


def _cached(cache: OrderedDict, uri: str, load: Callable):
    """load(uri), kept among the CACHED last used."""
    if uri not in cache:
        cache[uri] = load(uri)
        if len(cache) > CACHED:
            cache.popitem(last=False)
    cache.move_to_end(uri)
    return cache[uri]


_FREQUENCIES: OrderedDict[str, tuple[pa.Table, dict] | None] = OrderedDict()


def frequencies(uri: str, stats_dir: str) -> pa.Table | None:
    """A partition's (column, value, frequency) rows, from the frequency digest `uri` of its
    pack (a worker keeps the last CACHED it read); None when that does not hold them (too
    many rows, or written by an attempt that had not computed it)."""
    held = _cached(_FREQUENCIES, uri, _spans)
    if held is None or stats_dir not in held[1]:
        return None
    start, end = held[1][stats_dir]
    return held[0].slice(start, end - start).replace_schema_metadata(None)


def _spans(uri: str) -> tuple[pa.Table, dict] | None:
    try:
        table = _read(uri)
    except FileNotFoundError:
        return None
    return table, json.loads(table.schema.metadata[SPANS.encode()])


def _split(digest: pa.Table, wanted: dict[str, str]
           ) -> dict[str, tuple[pa.Table, dict[str, pa.Table]]]:
    """The wanted files' (path -> fingerprint) parts of a digest, each as `read` gives it."""
    statistics = digest.drop_columns([VALUES]).replace_schema_metadata(None)
    values = digest[VALUES].combine_chunks()
    out = {}
    for path, fingerprint, metadata, start, end in json.loads(
            digest.schema.metadata[SPANS.encode()]):
        if wanted.get(path) != fingerprint:
            continue
        table = statistics.slice(start, end - start).replace_schema_metadata(metadata)
        lists = values.slice(start, end - start)
        few = {}
        for i in np.flatnonzero(lists.is_valid().to_numpy(zero_copy_only=False)).tolist():
            few[table["column"][i].as_py()] = pa.Table.from_struct_array(lists[i].values)
        out[path] = (table, few)
    return out
