"""Values as Paimon's system tables print them (Java's `toString` of its internal values): a data file's
keys and statistics in `$files`, a partition in `$partitions`.

- `min_key` / `max_key`: `[v1, v2]`, the trimmed primary key (partition fields left out) in the file's
  schema; NULL for an append table's file (it has no key).
- `null_value_counts`, `min_value_stats`, `max_value_stats`: `{a=1, b=x}` over the table's current
  columns in name order (Java's TreeMap: code-unit order); a column the file keeps no statistics of
  (`value_stats_cols`, a nested type) `null`; a column added after the file was written has as many
  nulls as the file has rows.
- a value: text as it is, numbers as Java prints them (`1.0E10`), a decimal with its scale, a DATE as
  its day number and a TIME as its millisecond of the day (Paimon's internal values), a timestamp as
  Java's LocalDateTime (`2024-01-01T10:00`), bytes as `[B@` and a hash of them (Java prints an
  object's identity there, which no two runs share).
- a partition in `$partitions`: `k=v/k2=v2` in key order, NULL as the partition default name, a DATE
  as `yyyy-MM-dd`.
"""

from __future__ import annotations

import datetime as dt
import math
import zlib
from decimal import Decimal
from typing import Sequence

import numpy as np

from .common import binary_row
from .common.types import DataType
from .manifest.manifest import DataFileMeta
from .schema.schema import TableSchema

_EPOCH_DATE = dt.date(1970, 1, 1)


def java_text(value, dtype: DataType) -> str:
    """`value` (binary_row's Python value of a `dtype`) as Java's toString of Paimon's internal value."""
    if value is None:
        return "null"
    root = dtype.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root in ("DOUBLE", "FLOAT"):
        return _java_floating(float(value), root == "FLOAT")
    if root == "DECIMAL":
        return format(value if isinstance(value, Decimal) else Decimal(value), "f")
    if root == "DATE":
        return str((value - _EPOCH_DATE).days if isinstance(value, dt.date) else value)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return _local_date_time(value.replace(tzinfo=None) if isinstance(value, dt.datetime) else value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"[B@{zlib.crc32(bytes(value)):x}"
    return str(value)


def _java_floating(v: float, single: bool) -> str:
    """Java's Float/Double.toString: the shortest digits that read back, in scientific form (`1.0E10`)
    outside [1e-3, 1e7)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1, v) < 0 else "0.0"
    # the shortest digits that read back as the same float (or float32)
    digits = Decimal(np.format_float_scientific(np.float32(v) if single else v, unique=True, trim="0"))
    if 1e-3 <= abs(v) < 1e7:
        text = format(digits.normalize(), "f")
        return text if "." in text else text + ".0"
    sign, figures, exponent = digits.normalize().as_tuple()
    mantissa = "".join(map(str, figures))
    power = len(figures) - 1 + exponent
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{power}"


def _local_date_time(value: dt.datetime) -> str:
    """Java's LocalDateTime.toString: seconds and the fraction only when not zero, the fraction in
    groups of three digits."""
    text = value.strftime("%Y-%m-%dT%H:%M")
    if value.second or value.microsecond:
        text += f":{value.second:02d}"
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}" if value.microsecond % 1000 == 0 else f".{value.microsecond:06d}"
    return text


def key_text(file: DataFileMeta, file_schema: TableSchema, key: bytes) -> str | None:
    """`[v1, v2]`: a file's min or max key; None for an append table's file."""
    if not file_schema.primary_keys:
        return None
    types = file_schema.key_types
    return "[" + ", ".join(java_text(v, t) for v, t in zip(binary_row.deserialize(key, types), types)) + "]"


def value_stats_text(file: DataFileMeta, file_schema: TableSchema, table: TableSchema) -> tuple[str, str, str]:
    """(null_value_counts, min_value_stats, max_value_stats) of a data file, over the table's current
    columns (fields matched by id to the file's schema)."""
    kept = list(file.value_stats_cols) if file.value_stats_cols is not None else file_schema.field_names
    stored = {name: i for i, name in enumerate(kept)}
    types = [file_schema.field(n).type for n in kept]
    stats = file.value_stats
    mins = binary_row.deserialize(stats.min_values, types)
    maxs = binary_row.deserialize(stats.max_values, types)
    nulls = list(stats.null_counts or [])
    by_id = {f.id: f for f in file_schema.fields}
    counts, lows, highs = {}, {}, {}
    for field in table.fields:
        then = by_id.get(field.id)
        if then is None:  # added after the file was written: every row of it null
            counts[field.name], lows[field.name], highs[field.name] = str(file.row_count), "null", "null"
            continue
        i = stored.get(then.name)
        if i is None or field.type.is_nested:
            counts[field.name] = lows[field.name] = highs[field.name] = "null"
            continue
        counts[field.name] = "null" if i >= len(nulls) or nulls[i] is None else str(nulls[i])
        lows[field.name], highs[field.name] = java_text(mins[i], then.type), java_text(maxs[i], then.type)
    return tuple("{" + ", ".join(f"{k}={m[k]}" for k in sorted(m)) + "}" for m in (counts, lows, highs))


def partition_path_text(values: Sequence, types: Sequence[DataType], keys: Sequence[str], default: str) -> str:
    """`k=v/k2=v2` as `$partitions` shows a partition (empty for an unpartitioned table)."""
    parts = []
    for key, value, dtype in zip(keys, values, types):
        if value is None or (isinstance(value, str) and not value.strip()):
            text = default
        elif dtype.root == "DATE" and isinstance(value, dt.date):
            text = value.isoformat()
        else:
            text = java_text(value, dtype)
        parts.append(f"{key}={text}")
    return "/".join(parts)
