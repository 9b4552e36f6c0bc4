"""Paimon's data-file indexes (`file-index.<type>.columns`): per data file, a bloom filter
(bloom_filter.py) and/or a bitmap (bitmap_index.py) of chosen columns, that let a reader skip a file
a predicate cannot match.

All of one file's indexes make one container (FileIndexFormat), big-endian:

    int64 magic 1493475289347502, int32 version 1, int32 head length, int32 columns
    per column: UTF name, int32 indexes, per index: UTF type, int32 start (from byte 0), int32 length
    int32 0 (no redundant bytes), then the indexes' bytes in head order

A container of at most file-index.in-manifest-threshold bytes (500) is embedded in the file's meta
(`_EMBEDDED_FILE_INDEX`); a bigger one is the file `<data file>.index` beside it, named in
`_EXTRA_FILES` (a bloom filter of the default 1,000,000 items is 599 KB). Every row written to the
file is indexed (deletes too); changelog files have none. A file is skipped only on a predicate
(`=`, IN, IS NULL) that every index of its column rules out, and only where a file is read without a
merge: tables with deletion vectors (Java's scan does the same).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Mapping, Sequence

import pyarrow as pa

from . import bitmap_index, bloom_filter
from ..common.options import parse_memory

MAGIC, VERSION = 1493475289347502, 1
INDEX_SUFFIX = ".index"
TYPES = {bloom_filter.TYPE: bloom_filter, bitmap_index.TYPE: bitmap_index}
DEFAULT_THRESHOLD = 500


@dataclass(frozen=True)
class IndexedColumn:
    column: str
    type: str  # bloom-filter | bitmap
    options: tuple  # (option, value) of file-index.<type>.<column>.<option>


def indexed_columns(options: Mapping[str, str]) -> list[IndexedColumn]:
    """The columns `file-index.<type>.columns` names, with their per-column options."""
    out = []
    for kind in TYPES:
        names = options.get(f"file-index.{kind}.columns")
        if not names:
            continue
        for name in (n.strip() for n in names.split(",")):
            prefix = f"file-index.{kind}.{name}."
            out.append(IndexedColumn(name, kind, tuple(sorted((k[len(prefix):], v) for k, v in options.items()
                                                              if k.startswith(prefix)))))
    return out


def threshold(schema) -> int:
    """file-index.in-manifest-threshold of a TableSchema."""
    value = schema.options.get("file-index.in-manifest-threshold")
    return DEFAULT_THRESHOLD if value is None else parse_memory("file-index.in-manifest-threshold", value)


def _utf(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def write_container(schema, rows: pa.Table) -> bytes | None:
    """The container of one data file's rows (their value columns, in file order; `schema`: the
    table's TableSchema); None when the table indexes nothing."""
    wanted = indexed_columns(schema.options)
    if not wanted:
        return None
    by_column: dict[str, list[tuple[str, bytes]]] = {}
    for c in wanted:
        dtype, values, opts = schema.field(c.column).type, rows.column(c.column), dict(c.options)
        if c.type == bloom_filter.TYPE:
            data = bloom_filter.write(values, dtype, int(opts.get("items", bloom_filter.DEFAULT_ITEMS)),
                                      float(opts.get("fpp", bloom_filter.DEFAULT_FPP)))
        else:
            size = opts.get("index-block-size")
            data = bitmap_index.write(values, dtype, parse_memory("index-block-size", size) if size
                                      else bitmap_index.DEFAULT_BLOCK_SIZE)
        by_column.setdefault(c.column, []).append((c.type, data))
    head_size = 8 + 4 + 4 + 4 + 4 + sum(len(_utf(col)) + 4 + sum(len(_utf(t)) + 8 for t, _ in idx)
                                        for col, idx in by_column.items())
    head, body = bytearray(), bytearray()
    for col, indexes in by_column.items():
        head += _utf(col) + struct.pack(">i", len(indexes))
        for kind, data in indexes:
            head += _utf(kind) + struct.pack(">ii", head_size + len(body), len(data))
            body += data
    return (struct.pack(">qiii", MAGIC, VERSION, head_size, len(by_column)) + bytes(head) + struct.pack(">i", 0)
            + bytes(body))


def read_container(data: bytes) -> dict[str, dict[str, bytes]] | None:
    """column -> index type -> its bytes; None for a container we do not read."""
    if len(data) < 20:
        return None
    magic, version, _, columns = struct.unpack_from(">qiii", data)
    if magic != MAGIC or version != VERSION:
        return None
    out: dict[str, dict[str, bytes]] = {}
    at = 20
    for _ in range(columns):
        (n,) = struct.unpack_from(">H", data, at)
        name = data[at + 2:at + 2 + n].decode()
        (count,) = struct.unpack_from(">i", data, at + 2 + n)
        at += 6 + n
        for _ in range(count):
            (n,) = struct.unpack_from(">H", data, at)
            kind = data[at + 2:at + 2 + n].decode()
            start, length = struct.unpack_from(">ii", data, at + 2 + n)
            at += 10 + n
            out.setdefault(name, {})[kind] = b"" if start < 0 else data[start:start + length]
    return out


@dataclass(frozen=True)
class Condition:
    """One conjunct a file's rows must meet: `column` IN `values` (None: IS NULL)."""
    column: str
    values: tuple | None


def may_match(container: Mapping[str, Mapping[str, bytes]], conditions: Sequence[Condition], schema) -> bool:
    """False only when some condition cannot hold for any row of the file, as its indexes say."""
    for cond in conditions:
        indexes = container.get(cond.column, {})
        dtype = schema.field(cond.column).type
        if dtype.root in ("FLOAT", "DOUBLE"):  # -0.0 = 0.0 and NaN = NaN to Spark, apart in an index
            continue
        try:
            values = None if cond.values is None else pa.array(list(cond.values), dtype.to_arrow())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            continue  # a literal not of the column's type: the index cannot tell

        for kind, data in indexes.items():
            if not data:
                continue
            if kind == bloom_filter.TYPE and values is not None and not bloom_filter.might_contain(data, values, dtype):
                return False
            if kind == bitmap_index.TYPE:
                rows = bitmap_index.rows_of(data, values, dtype)
                if rows is not None and not rows:
                    return False
    return True
