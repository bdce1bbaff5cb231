"""A version's ranks.parquet as lookups read it: exact quantiles and a value's rank, one row
group at a time (the file is written by algorithms.ranks, the distributed sort)."""
from __future__ import annotations

import json
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakestats.core import quantiles, schema
from lakestats.core import types as ty
from lakestats.metastore.layout import RANKS
from lakestats.metastore.manifest import Manifest
from lakestats.metastore.store import Store


def open_ranks(version_dir: Store, manifest: Manifest, reread: Callable[[], Manifest]
               ) -> pq.ParquetFile | None:
    """The version's ranks.parquet, None if it has none. Ranks come after their version's
    publication: a file counts only once the manifest records it, and only at the size
    recorded (one being written, or truncated, does not); `reread` reads the manifest again."""
    recorded = manifest.files.get(RANKS)
    if recorded is None:
        return None
    try:
        f = version_dir.open_input(RANKS)
    except FileNotFoundError:
        return None
    if f.size() != recorded:     # written again since this manifest was read?
        recorded = reread().files.get(RANKS)
    return pq.ParquetFile(f, page_checksum_verification=True) if f.size() == recorded else None


def ranked_columns(ranks: pq.ParquetFile | None) -> list[str]:
    meta = (ranks.schema_arrow.metadata or {}) if ranks else {}
    return json.loads(meta.get(schema.RANKED_COLUMNS_KEY, b"[]"))


def exact_quantiles(parquet: pq.ParquetFile, column: str, n: int, qs: list[float]
                    ) -> list[str | None]:
    """percentile_disc over the column's `n` non-null values, one row group each, chosen from
    the row groups' statistics."""
    names = parquet.schema_arrow.names
    groups = []                               # (row group, first rank, last position)
    for i in range(parquet.metadata.num_row_groups):
        group = parquet.metadata.row_group(i)
        stats = {k: group.column(names.index(k)).statistics for k in ("column", "rank", "last")}
        if stats["column"].min == column == stats["column"].max:
            groups.append((i, stats["rank"].min, stats["last"].max))
    out = []
    for q in qs:
        at = quantiles.position(q, n)
        hit = next((i for i, first, last in groups if first <= at <= last), None)
        if n == 0 or hit is None:
            out.append(None)
            continue
        rows = parquet.read_row_group(hit, columns=["value", "rank", "last"])
        holds = pc.and_(pc.less_equal(rows["rank"], at), pc.greater_equal(rows["last"], at))
        out.append(rows.filter(holds)["value"][0].as_py())
    return out


def rank(version_dir: Store, column: str, arrow_type: pa.DataType, probe: pa.Scalar) -> dict:
    """How many non-null values of the column (of `arrow_type`) are smaller than `probe`,
    and its count."""
    rows = version_dir.read_parquet(RANKS, columns=["value", "rank", "count"],
                                    filters=pc.field("column") == column)
    typed = ty.from_text(rows["value"].to_pylist(), arrow_type)
    texts = rows["value"].to_pylist()
    canonical = ty.scalar_text(probe)
    if canonical in texts:
        i = texts.index(canonical)
        return {"column": column, "value": canonical, "smaller": rows["rank"][i].as_py() - 1,
                "count": rows["count"][i].as_py()}
    less = pc.fill_null(pc.less(typed, probe), False).to_numpy(zero_copy_only=False)
    smaller = int(rows["count"].to_numpy()[less].sum())
    return {"column": column, "value": canonical, "smaller": smaller, "count": 0}
