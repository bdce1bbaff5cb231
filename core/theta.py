"""Theta sketches of distinct values as Iceberg defines them for its statistics files (Puffin
blob `apache-datasketches-theta-v1`): Apache DataSketches' compact theta sketch, seed 9001,
updated with each value's Iceberg single-value serialization (4-byte little-endian int, date
and float; 8-byte long, timestamp, time and double; UTF-8 string; bytes; a decimal's unscaled
value as big-endian two's complement; 0x00/0x01 boolean). An engine merges and reads them with
DataSketches, so each must be a real sketch over exactly those bytes.

DataSketches' Python binding takes values one at a time and cannot hash raw bytes, so the
hashes are computed here: MurmurHash3_x64_128 (seed 9001), vectorized with NumPy over the
values (fixed width) or Arrow's offsets and bytes (strings, binary, decimals); theta keeps
the first half shifted right by one. A sketch keeps the K smallest hashes (KMV, K = 4096,
DataSketches' default), and so does the union of partitions' sketches: a table's sketch is
the same bytes however its partitions were merged.
"""
from __future__ import annotations

import struct

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core.exact import fitting_int64
from lakestats.core.hashing import distinct_sorted

SEED = 9001
K = 4096
MAX_THETA = (1 << 63) - 1
_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)
_F1, _F2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(k: np.ndarray) -> np.ndarray:
    k = k ^ (k >> np.uint64(33))
    k = k * _F1
    k = k ^ (k >> np.uint64(33))
    k = k * _F2
    return k ^ (k >> np.uint64(33))


def _finish(h1: np.ndarray, h2: np.ndarray, length) -> np.ndarray:
    """MurmurHash3_x64_128's finalization, its first half: the theta hash, shifted right."""
    n = np.asarray(length).astype(np.uint64)
    with np.errstate(over="ignore"):
        h1, h2 = h1 ^ n, h2 ^ n
        h1 = h1 + h2
        h2 = h2 + h1
        return (_fmix(h1) + _fmix(h2)) >> np.uint64(1)


def _fixed(values: np.ndarray, length: int) -> np.ndarray:
    """Theta hashes of fixed-width values serialized as `length` (1, 4 or 8) little-endian
    bytes: one key of at most 8 bytes is the tail round alone."""
    words = values.astype(f"<u{length}").astype(np.uint64)
    seed = np.full(len(words), SEED, np.uint64)
    with np.errstate(over="ignore"):
        return _finish(seed ^ (_rotl(words * _C1, 31) * _C2), seed, length)


def _words(data: np.ndarray, at: np.ndarray, count: np.ndarray | int = 8) -> np.ndarray:
    """The little-endian uint64 of the `count` (at most 8) bytes of `data` from each of `at`
    (`data` padded so that 8 bytes are always there): one gather of 8-byte windows."""
    windows = np.lib.stride_tricks.as_strided(data, (max(len(data) - 7, 0), 8), (1, 1))
    word = np.ascontiguousarray(windows[at]).view("<u8").ravel().astype(np.uint64)
    if isinstance(count, int):
        return word
    kept = np.clip(count, 0, 8).astype(np.uint64) * np.uint64(8)
    with np.errstate(over="ignore"):
        mask = np.where(kept >= 64, np.uint64(0xFFFFFFFFFFFFFFFF),
                        (np.uint64(1) << np.minimum(kept, np.uint64(63))) - np.uint64(1))
    return word & mask


def _binary(values: pa.Array) -> np.ndarray:
    """Theta hashes of strings (UTF-8) or bytes: MurmurHash3_x64_128 over Arrow's buffers,
    every key at once, one 16-byte block position at a time."""
    values = values.cast(pa.large_binary())
    offsets = np.frombuffer(values.buffers()[1], np.int64)[values.offset:
                                                         values.offset + len(values) + 1]
    data = np.frombuffer(values.buffers()[2] or b"", np.uint8)
    data = np.concatenate([data, np.zeros(16, np.uint8)])
    start, length = offsets[:-1], np.diff(offsets)
    blocks = length // 16
    h1 = np.full(len(values), SEED, np.uint64)
    h2 = h1.copy()
    with np.errstate(over="ignore"):
        for b in range(int(blocks.max()) if len(values) else 0):
            on = blocks > b
            at = start[on] + 16 * b
            k1, k2, a1, a2 = _words(data, at), _words(data, at + 8), h1[on], h2[on]
            a1 ^= _rotl(k1 * _C1, 31) * _C2
            a1 = (_rotl(a1, 27) + a2) * np.uint64(5) + np.uint64(0x52DCE729)
            a2 ^= _rotl(k2 * _C2, 33) * _C1
            a2 = (_rotl(a2, 31) + a1) * np.uint64(5) + np.uint64(0x38495AB5)
            h1[on], h2[on] = a1, a2
        rest = length - 16 * blocks
        tail = start + 16 * blocks
        k2 = _words(data, tail + 8, rest - 8)
        h2 = np.where(rest > 8, h2 ^ (_rotl(k2 * _C2, 33) * _C1), h2)
        k1 = _words(data, tail, rest)
        h1 = np.where(rest > 0, h1 ^ (_rotl(k1 * _C1, 31) * _C2), h1)
    return _finish(h1, h2, length)


def _decimal_bytes(values: pa.Array) -> pa.Array:
    """Decimals as Iceberg serializes them: the unscaled value's big-endian two's complement in
    the fewest bytes that hold it."""
    width = 32 if pa.types.is_decimal256(values.type) else 16
    if width == 16 and values.type.bit_width < 128:
        values = values.cast(pa.decimal128(38, values.type.scale))
    raw = np.frombuffer(values.buffers()[1], np.uint8).reshape(-1, width)[
        values.offset:values.offset + len(values), ::-1]            # big-endian rows
    # a leading byte is redundant when it only extends the sign of the next one
    redundant = ((raw[:, :-1] == 0) & (raw[:, 1:] < 0x80)) | \
        ((raw[:, :-1] == 0xFF) & (raw[:, 1:] >= 0x80))
    skip = np.cumprod(redundant, axis=1).sum(axis=1)
    keep = np.arange(width) >= skip[:, None]
    offsets = np.concatenate([[0], np.cumsum(width - skip)]).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), len(values), [
        None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(raw[keep].tobytes())])


def _short_decimals(unscaled: np.ndarray) -> np.ndarray:
    """Theta hashes of decimals whose unscaled values fit 64 bits, as `_decimal_bytes` would
    serialize them (at most 8 bytes: the tail round alone), without building those bytes: the
    big-endian bytes, byte-swapped, read as one little-endian word shifted to its length."""
    magnitude = np.where(unscaled < 0, ~unscaled, unscaled)         # the bits below the sign
    length = np.ones(len(unscaled), np.uint64)
    for k in range(1, 8):
        length += magnitude >= (1 << (8 * k - 1))
    words = unscaled.byteswap().view(np.uint64) >> (np.uint64(64) - np.uint64(8) * length)
    seed = np.full(len(words), SEED, np.uint64)
    with np.errstate(over="ignore"):
        return _finish(seed ^ (_rotl(words * _C1, 31) * _C2), seed, length)


def hashes(values: pa.Array) -> np.ndarray | None:
    """Theta hashes of non-null `values` under Iceberg's serialization of their type (None: a
    type Iceberg has no single-value serialization for)."""
    t = values.type
    if pa.types.is_boolean(t):
        return _fixed(pc.cast(values, pa.uint8()).to_numpy(zero_copy_only=False), 1)
    if pa.types.is_integer(t):
        if pa.types.is_unsigned_integer(t) and t.bit_width == 64:
            return None
        wide = t.bit_width == 64 or t == pa.uint32()
        return _fixed(values.cast(pa.int64() if wide else pa.int32())
                      .to_numpy(zero_copy_only=False), 8 if wide else 4)
    if pa.types.is_floating(t):
        width = 4 if t == pa.float32() else 8
        floats = values.cast(pa.float32() if width == 4 else pa.float64())
        return _fixed(floats.to_numpy(zero_copy_only=False).view(f"<u{width}"), width)
    if pa.types.is_date(t):
        return _fixed(values.cast(pa.date32()).cast(pa.int32()).to_numpy(), 4)
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        unit = "ns" if t.unit == "ns" else "us"       # Iceberg: microseconds, or ns types
        target = pa.timestamp(unit, t.tz) if pa.types.is_timestamp(t) else pa.time64(unit)
        return _fixed(values.cast(target).cast(pa.int64()).to_numpy(), 8)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) \
            or pa.types.is_binary(t) or pa.types.is_large_binary(t) \
            or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return _binary(values)
    if pa.types.is_decimal(t):
        unscaled = fitting_int64(values)
        return _binary(_decimal_bytes(values)) if unscaled is None else _short_decimals(unscaled)
    return None


def sketch(theta_hashes: np.ndarray, theta: int = MAX_THETA) -> bytes:
    """A compact theta sketch (DataSketches' serialization, version 3) of the distinct values
    whose hashes these are (those below `theta`): all of them up to K, else the K smallest
    with theta the next. A function of the set alone, whatever the order."""
    theta_hashes = theta_hashes[theta_hashes < np.uint64(theta)]
    smallest = np.partition(theta_hashes, K)[:K + 1] if len(theta_hashes) > K \
        else theta_hashes
    unique = distinct_sorted(smallest)
    if len(unique) <= K < len(theta_hashes):        # hashes repeated: all of them, sorted
        unique = distinct_sorted(theta_hashes)[:K + 1]
    if len(unique) > K:
        theta, unique = int(unique[K]), unique[:K]
    return _serialized(unique, theta)


def _serialized(entries: np.ndarray, theta: int) -> bytes:
    estimating = theta < MAX_THETA
    longs = 3 if estimating else 1 if len(entries) <= 1 else 2
    flags = (1 << 1) | (1 << 3) | (1 << 4) | ((1 << 2) if len(entries) == 0 and
                                                 not estimating else 0)
    out = struct.pack("<BBBHBH", longs, 3, 3, 0, flags, SEED_HASH)
    if longs > 1:
        out += struct.pack("<II", len(entries), 0)
    if estimating:
        out += struct.pack("<Q", theta)
    return out + np.sort(entries).astype("<u8").tobytes()


def _seed_hash() -> int:
    """DataSketches' 16-bit hash of the seed, which a serialized sketch carries."""
    probe = ds.update_theta_sketch(seed=SEED)
    probe.update(1)
    return struct.unpack_from("<H", probe.compact().serialize(), 6)[0]


SEED_HASH = _seed_hash()


def union(sketches: list[bytes]) -> bytes | None:
    """The union of compact theta sketches that this module wrote (None for none): every
    hash below the smallest theta, kept as `sketch` keeps them. DataSketches' own theta_union
    gives the same estimate, but what it retains depends on the order it is fed."""
    if not sketches:
        return None
    thetas, entries = zip(*map(_parsed, sketches))
    return sketch(np.concatenate(entries), min(thetas))


def _parsed(serialized: bytes) -> tuple[int, np.ndarray]:
    """(theta, hashes) of a compact sketch in the layout `_serialized` writes."""
    longs, flags = serialized[0], serialized[5]
    count = struct.unpack_from("<I", serialized, 8)[0] if longs > 1 else \
        0 if flags & (1 << 2) or len(serialized) <= 8 else 1
    theta = struct.unpack_from("<Q", serialized, 16)[0] if longs > 2 else MAX_THETA
    return theta, np.frombuffer(serialized, "<u8", count, 8 * longs).astype(np.uint64)
