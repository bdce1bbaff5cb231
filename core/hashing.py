"""Vectorized 64-bit hashes of values' canonical text, and the sketches built on them.

Frequencies, Bloom filters and distinct-count sketches all key values by their canonical text
(core.types.to_text), so one value hashes alike in every partition whatever its physical
type (int32 here, int64 there). Arrow has no hash kernel and DataSketches takes one value per
Python call, so the hash is computed here with NumPy over the strings' bytes: a polynomial
hash modulo 2**64 (segment sums of byte * P**position), then the splitmix64 finalizer so that
every output bit depends on every input bit. Not cryptographic; a collision only ever costs
work (a false "maybe"), never a wrong answer, because every user confirms on exact values.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

_P = np.uint64(0x100000001B3)                       # odd: invertible modulo 2**64
_P_INV = np.uint64(pow(int(_P), -1, 2 ** 64))
_CHUNK_BYTES = 1 << 20                              # bounds the temporary arrays
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)            # keeps the empty string's hash non-zero
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a bijection of uint64 with full avalanche."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _powers(base: np.uint64, n: int) -> np.ndarray:
    p = np.full(n, base, dtype=np.uint64)
    p[0] = 1
    return np.cumprod(p, dtype=np.uint64)           # wraps modulo 2**64, as intended


_POWERS: list[np.ndarray] = []                      # P**j and P**-j for j <= _CHUNK_BYTES


def _power_tables() -> tuple[np.ndarray, np.ndarray]:
    if not _POWERS:
        _POWERS.extend([_powers(_P, _CHUNK_BYTES + 1), _powers(_P_INV, _CHUNK_BYTES + 1)])
    return _POWERS[0], _POWERS[1]


def hash_text(values: pa.Array) -> np.ndarray:
    """uint64 hash of each non-null string or binary value (nulls must be dropped first)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.cast(pa.large_binary())
    n = len(values)
    if n == 0:
        return np.empty(0, np.uint64)
    offsets = np.frombuffer(values.buffers()[1], np.int64)[values.offset:values.offset + n + 1]
    data = np.frombuffer(values.buffers()[2], np.uint8) if values.buffers()[2] else \
        np.empty(0, np.uint8)
    out = np.empty(n, np.uint64)
    first = 0
    while first < n:          # whole strings per chunk, about _CHUNK_BYTES of them
        last = int(np.searchsorted(offsets, offsets[first] + _CHUNK_BYTES, side="right")) - 1
        last = min(max(last, first + 1), n)
        out[first:last] = _hash_chunk(data, offsets[first:last + 1])
        first = last
    return out


def _hash_chunk(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    base = int(offsets[0])
    starts, lengths = offsets[:-1] - base, np.diff(offsets)
    chunk = data[base:int(offsets[-1])]
    sums = np.zeros(len(lengths), np.uint64)
    if chunk.size:
        if chunk.size > _CHUNK_BYTES:     # one string longer than a chunk: its own tables
            power, inverse = _powers(_P, chunk.size + 1), _powers(_P_INV, chunk.size + 1)
        else:
            power, inverse = _power_tables()
        weighted = power[:chunk.size] * chunk               # byte * P**(position in chunk)
        nonempty = lengths > 0
        sums[nonempty] = np.add.reduceat(weighted, starts[nonempty])
        sums *= inverse[starts]           # rebase each string to position 0: times P**-start
    return mix64(sums ^ mix64(lengths.astype(np.uint64) + _GOLDEN))


# -- KMV: the k smallest distinct hashes, a mergeable distinct-count sketch (exact below k)

KMV_K = 4096


def kmv(distinct_hashes: np.ndarray, k: int = KMV_K) -> np.ndarray:
    """The k smallest hashes of distinct values, sorted; a partial sort first, O(n). (Two
    values colliding among the k smallest would cost one value of the estimate.)"""
    if len(distinct_hashes) > k:
        distinct_hashes = np.partition(distinct_hashes, k - 1)[:k]
    return np.sort(distinct_hashes)


def kmv_merge(sketches: list[np.ndarray], k: int = KMV_K) -> np.ndarray:
    """Sketches of overlapping sets: the union's k smallest distinct hashes."""
    union = np.concatenate(sketches) if sketches else np.empty(0, np.uint64)
    return distinct_sorted(union)[:k]


def distinct_sorted(hashes: np.ndarray) -> np.ndarray:
    """np.unique of integers, by a sort and one comparison: NumPy 2's unique hashes first,
    8x slower on a merge of 20 KMV sketches."""
    ordered = np.sort(hashes)
    return ordered[np.append(True, ordered[1:] != ordered[:-1])] if len(ordered) else ordered


def kmv_estimate(sketch: np.ndarray, k: int = KMV_K) -> float:
    """Distinct values: exact when the sketch holds fewer than k hashes, else (k-1)/h_k with
    h_k the k-th smallest hash scaled to [0, 1) (relative standard error 1/sqrt(k-2))."""
    if len(sketch) < k:
        return float(len(sketch))
    return (k - 1) / ((float(sketch[k - 1]) + 1.0) / 2.0 ** 64)


def kmv_to_bytes(sketch: np.ndarray) -> bytes:
    return sketch.astype("<u8").tobytes()


def kmv_from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, "<u8").astype(np.uint64)
