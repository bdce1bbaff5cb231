"""Counting values with Arrow kernels: per array (value_counts) and across arrays
(sum_by_value), one hash pass and a bincount, several times faster than a group-by."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core.exact import unscaled_int64


def value_counts(values: pa.Array) -> pa.StructArray:
    """pc.value_counts, with decimals of up to 18 digits hashed as their unscaled int64
    (Arrow hashes decimal128 several times slower than int64)."""
    t = values.type
    if not (pa.types.is_decimal128(t) and t.precision <= 18) or values.null_count:
        return pc.value_counts(values)
    counted = pc.value_counts(pa.array(unscaled_int64(values)))
    keys = counted.field(0).to_numpy()
    storage = np.empty(2 * len(keys), np.int64)
    storage[0::2], storage[1::2] = keys, keys >> 63
    decimals = pa.Array.from_buffers(t, len(keys), [None, pa.py_buffer(storage)])
    return pa.StructArray.from_arrays([decimals, counted.field(1)], names=["values", "counts"])


def sum_by_value(values: pa.Array | pa.ChunkedArray, counts: np.ndarray
                 ) -> tuple[pa.Array, np.ndarray]:
    """Distinct values and their summed counts. Exact below 2**53 rows."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    encoded = pc.dictionary_encode(values)
    summed = np.bincount(encoded.indices.to_numpy(), weights=counts,
                         minlength=len(encoded.dictionary))
    return encoded.dictionary, summed.astype(np.int64)
