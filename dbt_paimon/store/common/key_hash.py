"""Paimon's key hash, vectorised: MurmurHash3 "by words" (seed 42) over each row's BinaryRow bytes.

Java computes `BinaryRow.hashCode()` over the row without the 4-byte arity prefix: an 8-byte header
(row kind + null bits), an 8-byte slot per field, then the 8-byte aligned variable part. Fixed-bucket
tables put a row in `abs(hash % N)`; dynamic-bucket HASH index files store the hash of the trimmed key.

Rows are laid out in one flat byte buffer with numpy (no Python loop per row), then hashed in groups
of equal length (4-byte little-endian words, no tail: BinaryRow lengths are multiples of 8).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .types import DataType

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_SEED = 42
_UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def hash_words(words: np.ndarray) -> np.ndarray:
    """Murmur3 by words of an (rows, k) uint32 matrix; returns Java-signed int32 hashes."""
    rows, k = words.shape
    h = np.full(rows, _SEED, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for j in range(k):
            w = words[:, j] * _C1
            w = _rotl(w, 15) * _C2
            h = _rotl(h ^ w, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= np.uint32(4 * k)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h.view(np.int32)


def _ints(col: pa.Array) -> np.ndarray:
    """Integer view of a column with nulls as 0 (their slots are zeroed by the caller anyway)."""
    return col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64) if col.null_count else \
        col.to_numpy(zero_copy_only=False).astype(np.int64)


def _fixed_slot(col: pa.Array, t: DataType) -> np.ndarray:
    """The 8-byte slot of a fixed-length value as int64 (little-endian bytes of the slot)."""
    r = t.root
    if col.null_count and r not in ("DECIMAL",):
        col = col.fill_null(False if r == "BOOLEAN" else 0)
    if r == "BOOLEAN":
        return pc.cast(col, pa.int8()).to_numpy(zero_copy_only=False).astype(np.int64) & 0xFF
    if r in ("TINYINT", "SMALLINT", "INT", "DATE"):
        width = {"TINYINT": 0xFF, "SMALLINT": 0xFFFF, "INT": 0xFFFFFFFF, "DATE": 0xFFFFFFFF}[r]
        ints = col.cast(pa.int32()) if r == "DATE" else col
        return ints.to_numpy(zero_copy_only=False).astype(np.int64) & width
    if r == "BIGINT":
        return col.to_numpy(zero_copy_only=False).astype(np.int64)
    if r == "FLOAT":
        return col.to_numpy(zero_copy_only=False).astype(np.float32).view(np.uint32).astype(np.int64)
    if r == "DOUBLE":
        return col.to_numpy(zero_copy_only=False).astype(np.float64).view(np.int64)
    if r == "DECIMAL":  # compact: the unscaled long
        return _unscaled_int64(col)
    if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):  # compact: epoch millis
        raw = _ints(col.cast(pa.int64()))
        return np.floor_divide(raw * _UNIT_NANOS[col.type.unit], 1_000_000)
    raise TypeError(f"{t} is not a fixed-length type")


def _unscaled_int64(col: pa.Array) -> np.ndarray:
    # decimal128 storage is two little-endian int64 words per value; the low word is the unscaled
    # value whenever it fits in 64 bits, which precision <= 18 guarantees.
    buf = col.buffers()[1]
    words = np.frombuffer(buf, dtype=np.int64)
    return words[2 * col.offset: 2 * (col.offset + len(col))][0::2].copy()


def _binary_parts(col: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data bytes, start offsets, lengths) of a string/binary array."""
    if pa.types.is_large_string(col.type) or pa.types.is_large_binary(col.type):
        col = col.cast(pa.large_binary())
        off_dtype = np.int64
    else:
        col = col.cast(pa.binary())
        off_dtype = np.int32
    bufs = col.buffers()
    offsets = np.frombuffer(bufs[1], dtype=off_dtype)[col.offset: col.offset + len(col) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return data, offsets[:-1], offsets[1:] - offsets[:-1]


def key_hashes(columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[DataType]) -> np.ndarray:
    """Java `BinaryRow.hashCode()` of each row of the given key columns (int32 array)."""
    cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
    n = len(cols[0]) if cols else 0
    arity = len(cols)
    head = ((arity + 63 + 8) // 64) * 8
    fixed_len = head + 8 * arity
    slots = np.zeros((n, arity), dtype=np.int64)
    header = np.zeros((n, head), dtype=np.uint8)
    var_len = np.zeros(n, dtype=np.int64)  # padded variable-part length per row
    var_pieces = []  # (field index, kind, payload) appended in field order
    for i, (col, t) in enumerate(zip(cols, types)):
        valid = ~col.is_null().to_numpy(zero_copy_only=False) if col.null_count else np.ones(n, dtype=bool)
        if col.null_count:
            bit = i + 8
            header[~valid, bit // 8] |= np.uint8(1 << (bit % 8))
        if t.root in ("STRING", "BYTES"):
            data, starts, lengths = _binary_parts(col)
            lengths = np.where(valid, lengths, 0)
            inline = lengths <= 7
            # inline: bytes in the slot's low bytes, 0x80 | len in the top byte
            inline_val = np.zeros(n, dtype=np.uint64)
            for b in range(7):
                take = inline & (lengths > b) & valid
                if take.any():
                    inline_val[take] |= data[starts[take] + b].astype(np.uint64) << np.uint64(8 * b)
            inline_val |= (np.uint64(0x80) | lengths.astype(np.uint64)) << np.uint64(56)
            padded = np.where(inline | ~valid, 0, (lengths + 7) // 8 * 8)
            offset = fixed_len + var_len
            slot = np.where(inline, inline_val.view(np.int64), (offset << 32) | lengths)
            slots[:, i] = np.where(valid, slot, 0)
            var_pieces.append(("bytes", offset, padded, (data, starts, lengths, ~inline & valid)))
            var_len = var_len + padded
        elif t.root == "DECIMAL" and t.precision > 18:
            raise TypeError("hashing a DECIMAL key of precision > 18 is not supported")
        elif t.root in ("TIMESTAMP", "TIMESTAMP_LTZ") and t.precision > 3:
            raw = _ints(col.cast(pa.int64())) * _UNIT_NANOS[col.type.unit]
            millis, nanos = np.divmod(raw, 1_000_000)
            offset = fixed_len + var_len
            slots[:, i] = np.where(valid, (offset << 32) | nanos, 0)
            padded = np.where(valid, 8, 0)
            var_pieces.append(("millis", offset, padded, (millis, valid)))
            var_len = var_len + padded
        else:
            vals = _fixed_slot(col, t)
            slots[:, i] = np.where(valid, vals, 0)

    total = fixed_len + var_len
    out = np.empty(n, dtype=np.int32)
    for length in np.unique(total):
        rows = np.flatnonzero(total == length)
        buf = np.zeros((len(rows), int(length)), dtype=np.uint8)
        buf[:, :head] = header[rows]
        buf[:, head:fixed_len] = slots[rows].astype("<i8").view(np.uint8).reshape(len(rows), 8 * arity)
        for kind, offset, _padded, payload in var_pieces:
            if kind == "millis":
                millis, valid = payload
                sel = valid[rows]
                if sel.any():
                    r = np.flatnonzero(sel)
                    pos = offset[rows][r][:, None] + np.arange(8)
                    buf[r[:, None], pos] = millis[rows][r].astype("<i8").view(np.uint8).reshape(len(r), 8)
            else:
                data, starts, lengths, in_var = payload
                sel = in_var[rows]
                if sel.any():
                    r = np.flatnonzero(sel)
                    lens = lengths[rows][r]
                    width = int(lens.max())
                    j = np.arange(width)
                    mask = j[None, :] < lens[:, None]
                    src = (starts[rows][r][:, None] + j)[mask]
                    dst_col = (offset[rows][r][:, None] + j)[mask]
                    dst_row = np.broadcast_to(r[:, None], mask.shape)[mask]
                    buf[dst_row, dst_col] = data[src]
        out[rows] = hash_words(buf.view("<u4"))
    return out


def java_bucket(hashes: np.ndarray, num_buckets: "int | np.ndarray") -> np.ndarray:
    """Math.abs(hash % N) with Java's truncating remainder; N one count, or one per hash."""
    return np.abs(np.fmod(hashes.astype(np.int64), num_buckets)).astype(np.int32)
