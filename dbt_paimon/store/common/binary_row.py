"""Java BinaryRow bytes, as Paimon stores partitions, min/max keys and stats in manifests.

Layout (after a 4-byte big-endian arity prefix): a null bitset padded to 8 bytes whose first 8 bits
hold the row kind, one 8-byte little-endian slot per field, then an 8-byte aligned variable part.
Values of up to 7 bytes (strings, bytes) live in their slot with 0x80|len in the top byte; longer
ones are addressed from the slot as (offset << 32 | length). Non-compact decimals (precision > 18)
take 16 bytes of the variable part; non-compact timestamps (precision > 3) keep epoch millis there
and the nanos of the millisecond in the slot.

Only a handful of rows per data file pass through here (partition, min/max key, stats), so plain
Python is fine: this module is never called per data row.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal, localcontext
from typing import Any, Sequence

import pyarrow as pa

from .types import DataType

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _bitset_width(arity: int) -> int:
    return ((arity + 63 + 8) // 64) * 8


def _round8(n: int) -> int:
    return (n + 7) & ~7


def _ts_parts(value: Any) -> tuple[int, int]:
    """(epoch millis, nanos of millisecond) from a datetime or an epoch-nanos int."""
    if isinstance(value, int):
        millis, nanos = divmod(value, 1_000_000)
        return millis, nanos
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    delta = value - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    millis, micro_rest = divmod(micros, 1000)
    return millis, micro_rest * 1000


def _unscaled(value: Decimal, scale: int) -> int:
    with localcontext() as ctx:  # the default 28 digits would round DECIMAL(38, s)
        ctx.prec = 80
        return int(Decimal(value).scaleb(scale).to_integral_value())


def serialize(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """BinaryRow bytes (with arity prefix) of one row of Python values."""
    arity = len(types)
    head = _bitset_width(arity)
    fixed = bytearray(head + 8 * arity)
    var = bytearray()
    for i, (v, t) in enumerate(zip(values, types)):
        slot = head + 8 * i
        if v is None:
            bit = i + 8
            fixed[bit // 8] |= 1 << (bit % 8)
            continue
        r = t.root
        if r == "BOOLEAN":
            fixed[slot] = 1 if v else 0
        elif r == "TINYINT":
            struct.pack_into("<b", fixed, slot, v)
        elif r == "SMALLINT":
            struct.pack_into("<h", fixed, slot, v)
        elif r == "INT":
            struct.pack_into("<i", fixed, slot, v)
        elif r == "DATE":
            struct.pack_into("<i", fixed, slot, v if isinstance(v, int) else (v - _EPOCH_DATE).days)
        elif r == "BIGINT":
            struct.pack_into("<q", fixed, slot, v)
        elif r == "FLOAT":
            struct.pack_into("<f", fixed, slot, v)
        elif r == "DOUBLE":
            struct.pack_into("<d", fixed, slot, v)
        elif r == "DECIMAL":
            unscaled = _unscaled(v, t.scale)
            if t.precision <= 18:
                struct.pack_into("<q", fixed, slot, unscaled)
            else:
                raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
                struct.pack_into("<q", fixed, slot, ((len(fixed) + len(var)) << 32) | len(raw))
                var += raw + b"\x00" * (16 - len(raw))
        elif r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            millis, nanos = _ts_parts(v)
            if t.precision <= 3:
                struct.pack_into("<q", fixed, slot, millis)
            else:
                struct.pack_into("<q", fixed, slot, ((len(fixed) + len(var)) << 32) | nanos)
                var += struct.pack("<q", millis)
        else:  # STRING, BYTES
            raw = v.encode("utf-8") if isinstance(v, str) else bytes(v)
            if len(raw) <= 7:
                fixed[slot:slot + len(raw)] = raw
                fixed[slot + 7] = 0x80 | len(raw)
            else:
                struct.pack_into("<q", fixed, slot, ((len(fixed) + len(var)) << 32) | len(raw))
                var += raw + b"\x00" * (_round8(len(raw)) - len(raw))
    return struct.pack(">i", arity) + bytes(fixed) + bytes(var)


def deserialize(data: bytes, types: Sequence[DataType]) -> tuple:
    """Python values of a BinaryRow (arity prefix included): date, datetime, Decimal, str, bytes..."""
    arity = len(types)
    if not data:
        return (None,) * arity
    row = memoryview(data)[4:]
    head = _bitset_width(arity)
    out = []
    for i, t in enumerate(types):
        bit = i + 8
        if row[bit // 8] & (1 << (bit % 8)):
            out.append(None)
            continue
        slot = head + 8 * i
        r = t.root
        if r == "BOOLEAN":
            out.append(row[slot] != 0)
        elif r == "TINYINT":
            out.append(struct.unpack_from("<b", row, slot)[0])
        elif r == "SMALLINT":
            out.append(struct.unpack_from("<h", row, slot)[0])
        elif r == "INT":
            out.append(struct.unpack_from("<i", row, slot)[0])
        elif r == "DATE":
            out.append(_EPOCH_DATE + dt.timedelta(days=struct.unpack_from("<i", row, slot)[0]))
        elif r == "BIGINT":
            out.append(struct.unpack_from("<q", row, slot)[0])
        elif r == "FLOAT":
            out.append(struct.unpack_from("<f", row, slot)[0])
        elif r == "DOUBLE":
            out.append(struct.unpack_from("<d", row, slot)[0])
        elif r == "DECIMAL":
            if t.precision <= 18:
                unscaled = struct.unpack_from("<q", row, slot)[0]
            else:
                word = struct.unpack_from("<q", row, slot)[0]
                off, n = word >> 32, word & 0xFFFFFFFF
                unscaled = int.from_bytes(row[off:off + n], "big", signed=True)
            with localcontext() as ctx:
                ctx.prec = 80
                out.append(Decimal(unscaled).scaleb(-t.scale))
        elif r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            if t.precision <= 3:
                millis, nanos = struct.unpack_from("<q", row, slot)[0], 0
            else:
                word = struct.unpack_from("<q", row, slot)[0]
                millis, nanos = struct.unpack_from("<q", row, word >> 32)[0], word & 0xFFFFFFFF
            value = _EPOCH + dt.timedelta(milliseconds=millis, microseconds=nanos // 1000)
            out.append(value.replace(tzinfo=dt.timezone.utc) if r == "TIMESTAMP_LTZ" else value)
        else:
            mark = row[slot + 7]
            if mark & 0x80:
                raw = bytes(row[slot:slot + (mark & 0x7F)])
            else:
                word = struct.unpack_from("<q", row, slot)[0]
                off, n = word >> 32, word & 0xFFFFFFFF
                raw = bytes(row[off:off + n])
            out.append(raw.decode("utf-8") if r == "STRING" else raw)
    return tuple(out)


def empty_row() -> bytes:
    return serialize((), ())


def scalar_value(scalar: pa.Scalar) -> Any:
    """A Python value for `serialize`; timestamps become exact epoch nanos (datetime drops nanos)."""
    if not scalar.is_valid:
        return None
    if pa.types.is_timestamp(scalar.type):
        raw = scalar.cast(pa.int64()).as_py()
        return raw * _UNIT_NANOS[scalar.type.unit]
    if pa.types.is_date32(scalar.type):
        return scalar.cast(pa.int32()).as_py()
    return scalar.as_py()


def array_values(array: pa.Array | pa.ChunkedArray) -> list:
    """scalar_value of every element of an array, converted as a whole."""
    t = array.type
    if pa.types.is_timestamp(t):  # in Python: nanos of year 9999 do not fit in an int64
        unit = _UNIT_NANOS[t.unit]
        return [None if v is None else v * unit for v in array.cast(pa.int64()).to_pylist()]
    if pa.types.is_date32(t):
        return array.cast(pa.int32()).to_pylist()
    return array.to_pylist()


def row_of(columns: Sequence[pa.Array], index: int) -> list:
    return [scalar_value(c[index]) for c in columns]
