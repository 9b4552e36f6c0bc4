"""Paimon's bloom-filter file index (BloomFilterFileIndex over BloomFilter64, hashed by FastHash).

A filter of `items` expected values at false-positive rate `fpp` has
    nb = (int)(-items * ln(fpp) / ln(2)^2),  numBits = nb + (8 - nb % 8),  k = max(1, round(numBits / items * ln 2))
bits, stored as int32 BE k then numBits / 8 bytes, bit p at byte p >> 3, bit p & 7 (least significant
first). A value's 64-bit hash h sets bits ((int) h + i * (int) (h >>> 32), wrapped to int32, ~c when
negative) % numBits for i = 1..k. Strings and bytes hash by XXH64 (seed 0) of their bytes; integers,
dates and timestamps (epoch millis up to precision 3, else micros) by Thomas Wang's 64-bit mix of
the value as a long. Floats and doubles are neither indexed nor skipped by (-0.0 and 0.0, equal to
Spark, hash apart: option_validation.check_file_index). Nulls are not added. Everything here
works on whole columns (numpy); XXH64 runs once per distinct string length.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..common.types import DataType

TYPE = "bloom-filter"
DEFAULT_ITEMS, DEFAULT_FPP = 1_000_000, 0.1
SUPPORTED = ("TINYINT", "SMALLINT", "INT", "BIGINT", "STRING", "BYTES", "DATE", "TIMESTAMP",
             "TIMESTAMP_LTZ")

_P1, _P2, _P3 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9)
_P4, _P5 = np.uint64(0x85EBCA77C2B2AE63), np.uint64(0x27D4EB2F165667C5)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def _lanes(mat: np.ndarray, at: int, width: int) -> np.ndarray:
    """The little-endian words of `width` bytes at column `at` of each row of a byte matrix."""
    dtype = "<u8" if width == 8 else "<u4"
    return np.ascontiguousarray(mat[:, at:at + width]).view(dtype).ravel().astype(np.uint64)


def _xxh64_of_length(mat: np.ndarray, length: int, seed: np.ndarray) -> np.ndarray:
    """XXH64 of each row of a (n, length) uint8 matrix, each with its seed (uint64s)."""
    n, p = mat.shape[0], 0
    if length >= 32:
        v = [seed + _P1 + _P2, seed + _P2, seed.copy(), seed - _P1]
        while p + 32 <= length:
            v = [_round(v[j], _lanes(mat, p + 8 * j, 8)) for j in range(4)]
            p += 32
        h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
        for lane in v:
            h = (h ^ _round(np.zeros(n, np.uint64), lane)) * _P1 + _P4
    else:
        h = seed + _P5
    h = h + np.uint64(length)
    while p + 8 <= length:
        h = _rotl(h ^ _round(np.zeros(n, np.uint64), _lanes(mat, p, 8)), 27) * _P1 + _P4
        p += 8
    if p + 4 <= length:
        h = _rotl(h ^ (_lanes(mat, p, 4) * _P1), 23) * _P2 + _P3
        p += 4
    while p < length:
        h = _rotl(h ^ (mat[:, p].astype(np.uint64) * _P5), 11) * _P1
        p += 1
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


def xxh64(values: pa.Array, seed=0) -> np.ndarray:
    """XXH64 of each value's bytes (a string or binary array without nulls), as uint64; `seed` one
    for all or one per value (Paimon's FastHash: 0; Spark's xxhash64: 42, then each next column's
    hash seeded by the one before)."""
    values = values.cast(pa.large_binary())
    offsets = np.frombuffer(values.buffers()[1], np.int64)[values.offset:values.offset + len(values) + 1]
    data = np.frombuffer(values.buffers()[2], np.uint8) if values.buffers()[2] is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    out = np.zeros(len(values), np.uint64)
    seeds = np.broadcast_to(np.asarray(seed, np.int64).astype(np.uint64), (len(values),))
    with np.errstate(over="ignore"):
        for length in np.unique(lengths):
            rows = np.flatnonzero(lengths == length)
            mat = (data[offsets[rows][:, None] + np.arange(int(length))] if length
                   else np.zeros((rows.size, 0), np.uint8))
            out[rows] = _xxh64_of_length(mat, int(length), seeds[rows])
    return out


def long_hash(keys: np.ndarray) -> np.ndarray:
    """Thomas Wang's 64-bit mix (Paimon's MurmurHashUtils-free FastHash.getLongHash), int64 in and out."""
    key = keys.astype(np.int64)
    with np.errstate(over="ignore"):
        key = ~key + (key << 21)
        key ^= key >> 24
        key = key + (key << 3) + (key << 8)
        key ^= key >> 14
        key = key + (key << 2) + (key << 4)
        key ^= key >> 28
        key += key << 31
    return key


def value_hashes(values: pa.Array, dtype: DataType) -> np.ndarray:
    """FastHash of each non-null value, as int64 (nulls dropped)."""
    values = values.drop_null() if values.null_count else values
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    root = dtype.root
    if root in ("STRING", "BYTES"):
        return xxh64(values).view(np.int64)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        unit = "ms" if dtype.precision <= 3 else "us"
        if values.type.unit == "ns" and unit == "us":  # Timestamp.toMicros: floor of the nanos
            ints = pc.floor(pc.divide(values.cast(pa.int64()).cast(pa.float64()), 1000.0)).cast(pa.int64())
        else:
            ints = values.cast(pa.timestamp(unit, values.type.tz), safe=False).cast(pa.int64())
        return long_hash(ints.to_numpy(zero_copy_only=False))
    if root == "DATE":
        return long_hash(values.cast(pa.int32()).to_numpy(zero_copy_only=False))
    return long_hash(values.cast(pa.int64()).to_numpy(zero_copy_only=False))


def sizing(items: int, fpp: float) -> tuple[int, int]:
    """(numBits, k) of BloomFilter64 for `items` values at rate `fpp`."""
    nb = int(-items * math.log(fpp) / (math.log(2) * math.log(2)))
    bits = nb + (8 - nb % 8)
    return bits, max(1, math.floor(bits / items * math.log(2) + 0.5))


def _positions(hashes: np.ndarray, bits: int, k: int) -> np.ndarray:
    """Each hash's k bit positions, (n, k)."""
    h = hashes.astype(np.int64)
    h1, h2 = h.astype(np.int32).astype(np.int64), (h >> 32).astype(np.int32).astype(np.int64)
    c = (h1[:, None] + np.arange(1, k + 1, dtype=np.int64)[None, :] * h2[:, None]).astype(np.int32)
    c = np.where(c < 0, ~c, c).astype(np.int64)
    return c % bits


def write(values: pa.Array, dtype: DataType, items: int = DEFAULT_ITEMS, fpp: float = DEFAULT_FPP) -> bytes:
    """The index of one column of one data file."""
    bits, k = sizing(items, fpp)
    flags = np.zeros(bits, dtype=bool)
    hashes = value_hashes(values, dtype)
    if hashes.size:
        flags[_positions(np.unique(hashes), bits, k).ravel()] = True
    return struct.pack(">i", k) + np.packbits(flags, bitorder="little").tobytes()


def might_contain(index: bytes, values: pa.Array, dtype: DataType) -> bool:
    """Whether any of `values` (non-null) may be in the filter."""
    (k,) = struct.unpack_from(">i", index)
    flags = np.unpackbits(np.frombuffer(index, np.uint8, offset=4), bitorder="little").astype(bool)
    hashes = value_hashes(values, dtype)
    if not hashes.size:
        return False
    return bool(flags[_positions(hashes, flags.size, k)].all(axis=1).any())
