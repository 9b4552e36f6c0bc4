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
from typing import TYPE_CHECKING, Mapping, Sequence

import pyarrow as pa

from . import bitmap_index, bloom_filter
from .errors import SchemaError
from .options import parse_memory

if TYPE_CHECKING:
    from .schema import TableSchema

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


def validate(schema_options: Mapping[str, str], columns: Mapping[str, object]) -> None:
    """Paimon 2.x's SchemaValidation.validateFileIndex: named columns exist and have a type the
    index takes; per-column options name an indexed column. `columns`: name -> DataType."""
    for key in schema_options:
        if not key.startswith("file-index."):
            continue
        parts = key.split(".")
        if key in ("file-index.in-manifest-threshold", "file-index.read.enabled") or key.endswith(".columns"):
            if key.endswith(".columns") and (len(parts) != 3 or parts[1] not in TYPES):
                raise SchemaError(f"option {key!r}: dbt-paimon writes the file indexes {', '.join(TYPES)}")
            continue
        if len(parts) != 4 or parts[1] not in TYPES or parts[3] not in _COLUMN_OPTIONS[parts[1]]:
            raise SchemaError(f"unknown table option {key!r} (file index options: file-index.<type>.columns, "
                              f"file-index.bloom-filter.<column>.items / .fpp, file-index.bitmap.<column>.version / "
                              f".index-block-size, file-index.in-manifest-threshold, file-index.read.enabled)")
        named = [n.strip() for n in schema_options.get(f"file-index.{parts[1]}.columns", "").split(",")]
        if parts[2] not in named:
            raise SchemaError(f"option {key!r} is for column {parts[2]!r}, which file-index.{parts[1]}.columns "
                              "does not name")
    for c in indexed_columns(schema_options):
        if not c.column:
            raise SchemaError(f"option 'file-index.{c.type}.columns' names an empty column")
        if c.column not in columns:
            raise SchemaError(f"option 'file-index.{c.type}.columns' names {c.column!r}, which the table does not have")
        root = columns[c.column].root
        if root not in TYPES[c.type].SUPPORTED:
            raise SchemaError(f"column {c.column!r} is {root}, which a {c.type} file index does not take "
                              f"(it takes {', '.join(TYPES[c.type].SUPPORTED)})")
        opts = dict(c.options)
        if c.type == bitmap_index.TYPE and opts.get("version", "2") != "2":
            raise SchemaError(f"option 'file-index.bitmap.{c.column}.version': dbt-paimon writes version 2 "
                              "(Paimon's default)")


_COLUMN_OPTIONS = {bloom_filter.TYPE: ("items", "fpp"), bitmap_index.TYPE: ("version", "index-block-size")}


def threshold(schema: TableSchema) -> int:
    value = schema.options.get("file-index.in-manifest-threshold")
    return DEFAULT_THRESHOLD if value is None else parse_memory("file-index.in-manifest-threshold", value)


def _utf(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def write_container(schema: TableSchema, rows: pa.Table) -> bytes | None:
    """The container of one data file's rows (their value columns, in file order); None when the
    table indexes nothing."""
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
    return struct.pack(">qiii", MAGIC, VERSION, head_size, len(by_column)) + bytes(head) + struct.pack(">i", 0) + bytes(body)


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


def may_match(container: Mapping[str, Mapping[str, bytes]], conditions: Sequence[Condition],
              schema: TableSchema) -> bool:
    """False only when some condition cannot hold for any row of the file, as its indexes say."""
    for cond in conditions:
        indexes = container.get(cond.column, {})
        dtype = schema.field(cond.column).type
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
