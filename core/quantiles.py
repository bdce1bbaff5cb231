"""Quantile arithmetic: percentile_disc over exact counts, and answers from a KLL sketch.

percentile_disc(q) over n values is the value at 1-based position ceil(q * n), the minimum for
q = 0; q is taken as the decimal it is written as, so 0.1 * 10 is exactly position 1."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Collection, Iterator, Protocol

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import types as ty
from lakestats.core.binning import from_binning

HELD = 262_144          # distinct values sorted in memory at once
SAMPLE = 4_096          # about this many splitters cut a longer list into buckets


class Batches(Protocol):
    """A frequency list's (texts, counts) batches, the same each call: all of them, or those
    at the `only` ordinals, in order."""

    def __call__(self, only: Collection[int] | None = None
                 ) -> Iterator[tuple[pa.Array, np.ndarray]]: ...


def position(q: float, n: int) -> int:
    """The 1-based position of percentile_disc(q) among n sorted values."""
    return max(1, math.ceil(Fraction(str(q)) * n))


def from_counts(texts: pa.Array, counts: np.ndarray, arrow_type: pa.DataType,
                qs: list[float], rank: int | None = None) -> list[str | None]:
    """percentile_disc from distinct values (canonical text, any order) and their counts; with
    `rank`, the value at that 1-based position among these values (one q)."""
    order = pc.sort_indices(ty.from_text(texts, arrow_type))
    texts = texts.take(order)
    cumulative = np.cumsum(np.asarray(counts)[order.to_numpy()])
    n = int(cumulative[-1]) if cumulative.size else 0
    return [texts[int(np.searchsorted(cumulative, rank or position(q, n)))].as_py() if n
            else None for q in qs]


def from_count_batches(batches: Batches, rows: int, arrow_type: pa.DataType, qs: list[float]
                       ) -> list[str | None]:
    """from_counts over (texts, counts) batches, `rows` in all (an upper bound), holding about
    HELD values at most: a longer list is read for splitters (every stride-th value: a list
    orders equal frequencies by value, so these spread evenly), then for the counts between
    splitters (noting which buckets each batch holds: a bit each), and last only in the
    batches that hold a quantile's bucket, which is sorted alone."""
    if rows <= HELD:
        parts = list(batches())
        if not parts:
            return [None] * len(qs)
        return from_counts(pa.concat_arrays([t for t, _ in parts]),
                           np.concatenate([c for _, c in parts]), arrow_type, qs)
    stride, seen, sample = max(1, rows // SAMPLE), 0, []
    for texts, _ in batches():
        sample.append(texts.take(np.arange(-seen % stride, len(texts), stride)))
        seen += len(texts)
    splitters = ty.from_text(pa.concat_arrays(sample), arrow_type)
    splitters = splitters.take(pc.sort_indices(splitters))
    weights = np.zeros(len(splitters) + 1, np.int64)
    present = []            # per batch, a bit per bucket it holds values of
    for texts, counts in batches():
        batch = np.bincount(_buckets(ty.from_text(texts, arrow_type), splitters),
                            weights=counts, minlength=len(weights)).astype(np.int64)
        weights += batch
        present.append(np.packbits(batch > 0))
    cumulative = np.cumsum(weights)
    n = int(cumulative[-1])
    if not n:
        return [None] * len(qs)
    targets = {q: int(np.searchsorted(cumulative, position(q, n))) for q in qs}
    held: dict[int, list[tuple[pa.Array, np.ndarray]]] = {b: [] for b in targets.values()}
    reread = [k for k, bits in enumerate(present)
              if np.unpackbits(bits, count=len(weights))[list(held)].any()]
    for texts, counts in batches(reread):
        bucket = _buckets(ty.from_text(texts, arrow_type), splitters)
        for b in held:
            mine = bucket == b
            held[b].append((texts.filter(mine), counts[mine]))
    out = []
    for q, b in targets.items():
        below = int(cumulative[b - 1]) if b else 0
        texts = pa.concat_arrays([t for t, _ in held[b]])
        counts = np.concatenate([c for _, c in held[b]])
        out.append(from_counts(texts, counts, arrow_type, [q], rank=position(q, n) - below)[0])
    return out


def _buckets(values: pa.Array, splitters: pa.Array) -> np.ndarray:
    """For each value, how many of the (sorted) splitters are at most it: Arrow's stable sort
    of splitters and values together orders them as a quantile lookup does (NaN last, which
    compares with nothing)."""
    together = pc.sort_indices(pa.concat_arrays([splitters, values])).to_numpy()
    is_splitter = together < len(splitters)
    at_most = np.cumsum(is_splitter)
    out = np.empty(len(values), np.int64)
    out[together[~is_splitter] - len(splitters)] = at_most[~is_splitter]
    return out


def from_sketch(sketch: bytes, arrow_type: pa.DataType, qs: list[float]) -> tuple[list[str], float]:
    """Approximate quantiles from a KLL sketch of the binning domain, and its normalized rank
    error."""
    kll = ds.kll_doubles_sketch.deserialize(sketch)
    return (from_binning([kll.get_quantile(q) for q in qs], arrow_type),
            kll.normalized_rank_error(False))
