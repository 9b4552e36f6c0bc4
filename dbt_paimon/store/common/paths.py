"""Where a partition's files live: `<k1>=<v1>/<k2>=<v2>/bucket-<b>/`, named as Java Paimon names them.

Paimon's default `partition.legacy-name = true` spells DATE as days since epoch and TIMESTAMP as
Java's LocalDateTime.toString(); null or blank values become `partition.default-name`; a few
characters are %-escaped (PartitionPathUtils). Readers locate files by this name, so it must match.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any, Sequence

from urllib.parse import urlparse

from .errors import CorruptTableError
from .types import DataType

_ESCAPED = set("\"#%'*/:=?\\{}[]^")
_EPOCH_DATE = dt.date(1970, 1, 1)


def _escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if ord(c) < 32 or ord(c) == 127 or c in _ESCAPED else c for c in text)


def _java_float(value: float, single: bool) -> str:
    """Java's Float/Double.toString: shortest round-trip digits, 'E' notation outside [1e-3, 1e7)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    if single:
        bits = struct.pack(">f", value)
        for digits in range(1, 10):
            candidate = format(value, f".{digits}g")
            if struct.pack(">f", float(candidate)) == bits:
                text = candidate
                break
    d = Decimal(text)
    if d.is_zero() or Decimal("0.001") <= abs(d) < Decimal("1e7"):
        out = format(d, "f")
        if "." in out:
            out = out.rstrip("0").rstrip(".")
        return out + ".0" if "." not in out else out
    mantissa, exponent = format(d, "e").split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exponent)}"


def _legacy_timestamp(value: dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if value.microsecond:
        text = value.isoformat(timespec="microseconds")
        return text[:-3] if value.microsecond % 1000 == 0 else text
    return value.isoformat(timespec="seconds" if value.second else "minutes")


def partition_value_string(value: Any, t: DataType) -> str:
    r = t.root
    if r == "BOOLEAN":
        return "true" if value else "false"
    if r == "DATE":
        return str((value - _EPOCH_DATE).days)
    if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return _legacy_timestamp(value)
    if r in ("FLOAT", "DOUBLE"):
        return _java_float(value, r == "FLOAT")
    if r == "DECIMAL":
        return format(value, "f")
    return str(value)


def partition_path(values: Sequence[Any], types: Sequence[DataType], names: Sequence[str],
                   default_name: str) -> str:
    parts = []
    for v, t, n in zip(values, types, names):
        text = default_name if v is None or str(v).strip() == "" else partition_value_string(v, t)
        parts.append(f"{_escape(n)}={_escape(text)}")
    return "/".join(parts)


def bucket_dir(table_path: str, partition_dir: str, bucket: int) -> str:
    # bucket -2 (a postpone-bucket table's parked rows) lives in `bucket-postpone`, as Paimon names it
    name = "bucket-postpone" if bucket == -2 else f"bucket-{bucket}"
    return f"{table_path}/{partition_dir}/{name}" if partition_dir else f"{table_path}/{name}"


def data_file_path(bucket_path: str, file) -> str:
    """Where a data file (a DataFileMeta) lives: in its bucket's directory, or where Paimon's
    `data-file.external-paths` put it (the external path its meta records, a `file:` one made a
    local path). An external path must end in the file's own name, with no `..` in it."""
    external = file.external_path
    if not external:
        return f"{bucket_path}/{file.file_name}"
    path = urlparse(external).path if external.startswith("file:") else external
    parts = path.rstrip("/").split("/")
    if parts[-1] != file.file_name or ".." in parts:
        raise CorruptTableError(f"data file {file.file_name} has the external path {external!r}, which is not a path "
                                "to that file")
    return path
