"""Quantile arithmetic: percentile_disc over exact counts, and answers from a KLL sketch.

percentile_disc(q) over n values is the value at 1-based position ceil(q * n), the minimum for
q = 0; q is taken as the decimal it is written as, so 0.1 * 10 is exactly position 1."""
from __future__ import annotations

import math
from fractions import Fraction

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core import types as ty
from core.binning import from_binning


def position(q: float, n: int) -> int:
    """The 1-based position of percentile_disc(q) among n sorted values."""
    return max(1, math.ceil(Fraction(str(q)) * n))


def from_counts(texts: pa.Array, counts: np.ndarray, arrow_type: pa.DataType,
                qs: list[float]) -> list[str | None]:
    """percentile_disc from distinct values (canonical text, any order) and their counts."""
    order = pc.sort_indices(ty.from_text(texts, arrow_type))
    texts = texts.take(order)
    cumulative = np.cumsum(np.asarray(counts)[order.to_numpy()])
    n = int(cumulative[-1]) if cumulative.size else 0
    return [texts[int(np.searchsorted(cumulative, position(q, n)))].as_py() if n else None
            for q in qs]


def from_sketch(sketch: bytes, arrow_type: pa.DataType, qs: list[float]) -> tuple[list[str], float]:
    """Approximate quantiles from a KLL sketch of the binning domain, and its normalized rank
    error."""
    kll = ds.kll_doubles_sketch.deserialize(sketch)
    return ([from_binning(kll.get_quantile(q), arrow_type) for q in qs],
            kll.normalized_rank_error(False))
