"""The binning domain of histograms and quantile sketches: integers, dates, times and
timestamps as their integer storage; floats and decimals as float64."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakestats.core import types as ty
from lakestats.core.exact import as_words


def binning_unit(t: pa.DataType) -> str | None:
    """What one step of a type's binning domain counts: a temporal type's unit (days for
    date32), None for numbers, whose binned values are the same in any width or scale."""
    if pa.types.is_date32(t):
        return "d"
    if pa.types.is_date64(t):
        return "ms"
    return getattr(t, "unit", None)


def binning_values(arr: pa.Array) -> np.ndarray:
    """Non-null, non-NaN values in the binning domain."""
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        ints = ty.integers(arr).to_numpy(zero_copy_only=False)
        return ints.astype(np.uint64 if pa.types.is_uint64(t) else np.int64, copy=False)
    if pa.types.is_decimal(t):
        return decimal_floats(arr)
    values = arr.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return values[~np.isnan(values)] if pa.types.is_floating(t) else values


def decimal_floats(arr: pa.Array) -> np.ndarray:
    """Decimals (no nulls) as their nearest float64. Arrow's decimal-to-float cast can be an ulp
    off, which moves values across bin edges; one division of exact doubles is correctly rounded
    (unscaled values below 2**53, scales up to 22), Arrow's text parser is in general."""
    t = arr.type
    if pa.types.is_decimal128(t) and t.scale <= 22:
        words = as_words(arr)[0]
        low, high = words[:, 0].view(np.int64), words[:, 1].view(np.int64)
        if ((high == low >> 63) & (low > -2**53) & (low < 2**53)).all():
            return low.astype(np.float64) / 10.0 ** t.scale
    return arr.cast(pa.string()).cast(pa.float64()).to_numpy(zero_copy_only=False)


def edge_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type of a column's histogram bin edges: its own for integers and temporal values,
    float64 for floats and decimals."""
    kind = ty.kind_of(arrow_type)
    return ty.value_type(arrow_type) if kind in (ty.INTEGER, ty.TEMPORAL) else pa.float64()


def edges_array(values: list, etype: pa.DataType) -> pa.Array:
    """Bin edges (numbers of the binning domain: a list or an array) as an array of the edge
    type."""
    if pa.types.is_floating(etype):
        return pa.array(values, pa.float64())
    storage = etype if pa.types.is_integer(etype) else ty.storage_type(etype)
    array = pa.array(values, storage)
    return array if storage == etype else array.view(etype)


def from_binning(values: list[float], arrow_type: pa.DataType) -> list[str]:
    """Numbers of the binning domain (a sketch's quantiles) as canonical text of the type."""
    kind = ty.kind_of(arrow_type)
    if kind in (ty.INTEGER, ty.TEMPORAL):
        typed = edges_array([round(v) for v in values], ty.value_type(arrow_type))
    else:
        typed = pa.array(values, pa.float64())
    return ty.to_text(typed).to_pylist()
