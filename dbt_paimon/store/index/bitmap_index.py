"""Paimon's bitmap file index, version 2 (BitmapFileIndex / BitmapFileIndexMetaV2, Paimon's default).

Per distinct non-null value of a column in one data file, the Roaring bitmap of the rows (0-based
positions, nulls counted) holding it; a value in one row only stores `-1 - row` instead. Big-endian:

    int8 2, int32 rowCount, int32 distinct values, bool hasNull
    [hasNull: int32 null offset (-1 - row for one null row, else 0), int32 null bitmap length]
    int32 blocks, per block: value (its first), int32 offset in the block area
    int32 size of the block area
    blocks: int32 entries, per entry: value, int32 offset in the body (-1 - row), int32 length (-1)
    body: the null bitmap (when two rows or more are null), then the values' bitmaps

Entries are sorted by value (numbers signed, strings by their UTF-8 bytes) and packed into blocks of
at most index-block-size (16 KiB). A value is written as Java's DataOutput writes it (strings: int32
length and UTF-8 bytes; timestamps: epoch millis up to precision 3, else micros). Bitmaps are Roaring's
portable format after run optimisation, as Java serializes them. Java orders the body by its HashMap;
readers find each bitmap by offset, so ours is in value order.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from ..common.types import DataType

TYPE = "bitmap"
VERSION = 2
DEFAULT_BLOCK_SIZE = 16 * 1024
SUPPORTED = ("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "STRING", "DATE", "TIMESTAMP",
             "TIMESTAMP_LTZ")
_FIXED = {"BOOLEAN": ">?", "TINYINT": ">b", "SMALLINT": ">h", "INT": ">i", "DATE": ">i", "BIGINT": ">q",
          "TIMESTAMP": ">q", "TIMESTAMP_LTZ": ">q"}


def _comparable(values: pa.Array, dtype: DataType) -> pa.Array:
    """The values as the index stores them: timestamps as epoch millis or micros, dates as days."""
    if dtype.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        unit = "ms" if dtype.precision <= 3 else "us"
        return pc.cast(values, pa.timestamp(unit, values.type.tz), safe=False).cast(pa.int64())
    if dtype.root == "DATE":
        return values.cast(pa.int32())
    return values


def _encode(value, dtype: DataType) -> bytes:
    if dtype.root == "STRING":
        data = value.encode() if isinstance(value, str) else bytes(value)
        return struct.pack(">i", len(data)) + data
    return struct.pack(_FIXED[dtype.root], value)


def _bitmap(rows: np.ndarray) -> bytes:
    bm = BitMap(rows.tolist())
    bm.run_optimize()  # as Java's RoaringBitmap32.serialize
    return bm.serialize()


def write(values: pa.Array, dtype: DataType, block_size: int = DEFAULT_BLOCK_SIZE) -> bytes:
    """The index of one column of one data file (its rows in file order)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n = len(values)
    stored = _comparable(values, dtype)
    valid = np.asarray(pc.is_valid(stored).to_numpy(zero_copy_only=False), dtype=bool)
    null_rows = np.flatnonzero(~valid)
    rows = np.flatnonzero(valid)
    order = rows[np.asarray(pc.array_sort_indices(stored.filter(pa.array(valid)), null_placement="at_end"))] \
        if rows.size else rows
    ordered = stored.take(pa.array(order)) if rows.size else stored.slice(0, 0)
    # each distinct value's rows: the runs of equal values in sorted order (a stable sort keeps rows ascending)
    starts = np.flatnonzero(np.r_[True, ~np.asarray(pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
                                                   .to_numpy(zero_copy_only=False), dtype=bool)]) \
        if len(ordered) else np.zeros(0, np.int64)
    ends = np.r_[starts[1:], len(ordered)]
    body = bytearray()
    if null_rows.size > 1:
        body += _bitmap(null_rows)
    entries = []
    for s, e in zip(starts, ends):  # once per distinct value
        value = _encode(ordered[int(s)].as_py(), dtype)
        if e - s == 1:
            entries.append((value, -1 - int(order[s]), -1))
        else:
            bitmap = _bitmap(np.sort(order[s:e]))
            entries.append((value, len(body), len(bitmap)))
            body += bitmap
    blocks, block, size = [], [], 4
    for entry in entries:
        need = 8 + len(entry[0])
        if block and size + need > block_size:
            blocks.append(block)
            block, size = [], 4
        if 4 + need > block_size:
            raise ValueError(f"a bitmap index entry of {need} bytes exceeds index-block-size {block_size}")
        block.append(entry)
        size += need
    if block:
        blocks.append(block)
    area, heads = bytearray(), bytearray()
    for b in blocks:
        heads += b[0][0] + struct.pack(">i", len(area))
        area += struct.pack(">i", len(b)) + b"".join(v + struct.pack(">ii", off, ln) for v, off, ln in b)
    out = bytearray(struct.pack(">biiB", VERSION, n, len(entries), 1 if null_rows.size else 0))
    if null_rows.size:
        out += struct.pack(">ii", -1 - int(null_rows[0]) if null_rows.size == 1 else 0, len(_bitmap(null_rows)))
    out += struct.pack(">i", len(blocks)) + heads + struct.pack(">i", len(area)) + area + body
    return bytes(out)


def _read_value(data: bytes, at: int, dtype: DataType):
    if dtype.root == "STRING":
        (length,) = struct.unpack_from(">i", data, at)
        return data[at + 4:at + 4 + length], at + 4 + length
    fmt = _FIXED[dtype.root]
    return struct.unpack_from(fmt, data, at)[0], at + struct.calcsize(fmt)


def rows_of(index: bytes, values: pa.Array | None, dtype: DataType) -> BitMap | None:
    """The rows holding any of `values` (None: the null rows); None when the index is not one we
    read (another version), so nothing can be concluded."""
    if index[0] != VERSION:
        return None
    _, _, _, has_null = struct.unpack_from(">biiB", index)
    at = 10
    null_offset = null_length = None
    if has_null:
        null_offset, null_length = struct.unpack_from(">ii", index, at)
        at += 8
    (nblocks,) = struct.unpack_from(">i", index, at)
    at += 4
    for _ in range(nblocks):
        _, at = _read_value(index, at, dtype)
        at += 4
    (area_size,) = struct.unpack_from(">i", index, at)
    area, body = at + 4, at + 4 + area_size

    def bitmap(offset: int, length: int) -> BitMap:
        return BitMap([-1 - offset]) if offset < 0 else BitMap.deserialize(index[body + offset:body + offset + length])

    if values is None:
        return BitMap() if not has_null else bitmap(null_offset, null_length)
    wanted = {_encode(v, dtype) for v in _comparable(values.drop_null(), dtype).to_pylist()}
    found, at = BitMap(), area
    while at < body:
        (count,) = struct.unpack_from(">i", index, at)
        at += 4
        for _ in range(count):
            start = at
            _, at = _read_value(index, at, dtype)
            offset, length = struct.unpack_from(">ii", index, at)
            at += 8
            if index[start:at - 8] in wanted:
                found |= bitmap(offset, length)
    return found
