"""Bloom filters over the 64-bit value hashes of core.hashing, built and probed with NumPy.

pybloom-live hashes one value per Python call (about 5 us each): 75,000 values per column and
partition would cost more than computing every other statistic of the partition. Here a batch
of hashes sets or probes its bits in a few vectorized operations. The filter is blocked
(Putze, Sanders and Singler): the hash picks one 512-bit block, a cache line, and the k <= 7
bits within it come from 9-bit slices of the remixed hash, so a probe costs one cache miss,
not k. Blocking raises the false-positive rate a little; sizing adds 10% bits for it.

Serialized form: 8-byte little-endian bit count m, 8-byte hash count k, then the m bits packed
little-endian (numpy.packbits, bitorder="little").
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from lakestats.core.hashing import hash_text, mix64

DEFAULT_ERROR_RATE = 0.01


BLOCK_BITS = 512
MAX_HASHES = 7           # 7 slices of 9 bits fit a 64-bit hash


def size_for(n: int, error_rate: float = DEFAULT_ERROR_RATE) -> tuple[int, int]:
    """Bits m and hash count k giving about `error_rate` false positives at n values."""
    n = max(n, 1)
    m = 1.1 * -n * math.log(error_rate) / math.log(2) ** 2
    m = max(1, math.ceil(m / BLOCK_BITS)) * BLOCK_BITS
    k = min(MAX_HASHES, max(1, round(m / n * math.log(2))))
    return m, k


class BloomFilter:
    def __init__(self, m: int, k: int, bits: np.ndarray | None = None):
        self.m, self.k = m, k
        # one byte per bit while building: NumPy sets a batch of positions in one assignment
        self.bits = np.zeros(m, bool) if bits is None else bits

    @classmethod
    def sized(cls, n: int, error_rate: float = DEFAULT_ERROR_RATE) -> "BloomFilter":
        return cls(*size_for(n, error_rate))

    def _positions(self, hashes: np.ndarray) -> np.ndarray:
        return _positions(self.m, self.k, hashes)

    def add(self, hashes: np.ndarray) -> None:
        self.bits[self._positions(hashes).ravel()] = True

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """False where the value is certainly absent; True where it may be present."""
        return self.bits[self._positions(hashes)].all(axis=1)

    def add_text(self, values: pa.Array) -> None:
        self.add(hash_text(values))

    def contains_text(self, values: pa.Array) -> np.ndarray:
        return self.contains(hash_text(values))

    def to_bytes(self) -> bytes:
        header = np.array([self.m, self.k], "<u8").tobytes()
        return header + np.packbits(self.bits, bitorder="little").tobytes()

    @staticmethod
    def may_contain(data: bytes, hashes: np.ndarray) -> np.ndarray:
        """contains() on a serialized filter, probing its packed bits where they lie: a
        lookup need not unpack a filter (one byte per bit) to ask about a few values."""
        m, k = (int(x) for x in np.frombuffer(data[:16], "<u8"))
        packed = np.frombuffer(data, np.uint8, offset=16)
        positions = _positions(m, k, hashes)
        bits = (packed[positions >> np.uint64(3)] >> (positions & np.uint64(7)).astype(np.uint8)) & 1
        return bits.astype(bool).all(axis=1)

    @staticmethod
    def may_contain_any(filters: list[bytes], hashes: np.ndarray) -> np.ndarray:
        """For each serialized filter, may it hold any of the hashes? The filters are probed
        together, in a few array operations over batches of at most 4M probes."""
        step = max(1, (1 << 22) // max(1, hashes.size * MAX_HASHES))
        return np.concatenate([np.zeros(0, bool)] + [
            BloomFilter._probe_all(filters[i:i + step], hashes)
            for i in range(0, len(filters), step)])

    @staticmethod
    def _probe_all(filters: list[bytes], hashes: np.ndarray) -> np.ndarray:
        headers = np.frombuffer(b"".join(f[:16] for f in filters), "<u8").reshape(-1, 2)
        m, k = headers[:, 0].astype(np.uint64), headers[:, 1].astype(np.int64)
        sizes = np.array([len(f) - 16 for f in filters], np.uint64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint64)
        data = np.frombuffer(b"".join(f[16:] for f in filters), np.uint8)
        blocks = hashes[None, :] % (m[:, None] // np.uint64(BLOCK_BITS)) * np.uint64(BLOCK_BITS)
        shifts = np.arange(MAX_HASHES, dtype=np.uint64) * np.uint64(9)
        within = (mix64(hashes)[:, None] >> shifts[None, :]) & np.uint64(BLOCK_BITS - 1)
        positions = blocks[:, :, None] + within[None, :, :]          # filter, hash, probe
        bytes_at = starts[:, None, None] + (positions >> np.uint64(3))
        bits = (data[bytes_at] >> (positions & np.uint64(7)).astype(np.uint8)) & 1
        used = np.arange(MAX_HASHES)[None, None, :] < k[:, None, None]
        return ((bits == 1) | ~used).all(axis=2).any(axis=1)

    @classmethod
    def from_bytes(cls, data: bytes) -> "BloomFilter":
        m, k = (int(x) for x in np.frombuffer(data[:16], "<u8"))
        packed = np.frombuffer(data[16:], np.uint8)
        return cls(m, k, np.unpackbits(packed, count=m, bitorder="little").astype(bool))


def _positions(m: int, k: int, hashes: np.ndarray) -> np.ndarray:
    """The k bit positions of each hash: one 512-bit block, k 9-bit slices of the remixed hash."""
    block = hashes % np.uint64(m // BLOCK_BITS) * np.uint64(BLOCK_BITS)
    shifts = np.arange(k, dtype=np.uint64) * np.uint64(9)
    within = (mix64(hashes)[:, None] >> shifts[None, :]) & np.uint64(BLOCK_BITS - 1)
    return block[:, None] + within
