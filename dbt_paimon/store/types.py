"""Paimon data types: the SQL strings stored in schema JSON and their Arrow counterparts."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import pyarrow as pa

from .errors import SchemaError

_TS_UNITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}

_SIMPLE = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "BYTES": pa.binary(),
    "DATE": pa.date32(),
}
_ALIASES = {"INTEGER": "INT", "BOOL": "BOOLEAN", "VARBINARY": "BYTES", "BINARY": "BYTES",
            "CHAR": "STRING", "VARCHAR": "STRING", "NUMERIC": "DECIMAL", "DEC": "DECIMAL"}

_TYPE_RE = re.compile(
    r"^\s*(?P<root>[A-Z_]+)\s*(?:\((?P<args>[^)]*)\))?\s*(?P<ltz>WITH LOCAL TIME ZONE)?\s*(?P<nn>NOT NULL)?\s*$"
)


@dataclass(frozen=True)
class DataType:
    """One Paimon atomic type. `root` is canonical: BOOLEAN ... DATE, DECIMAL, TIMESTAMP, TIMESTAMP_LTZ."""

    root: str
    nullable: bool = True
    precision: int = 0
    scale: int = 0
    # Kept so that a table written by Java/pypaimon with VARCHAR(n) or CHAR(n) round-trips unchanged.
    spelling: str | None = None

    def not_null(self) -> "DataType":
        return replace(self, nullable=False)

    def with_nullable(self) -> "DataType":
        return replace(self, nullable=True)

    @property
    def is_fixed_length(self) -> bool:
        """True when a BinaryRow keeps the whole value in its 8-byte slot."""
        if self.root in ("STRING", "BYTES"):
            return False
        if self.root == "DECIMAL":
            return self.precision <= 18
        if self.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            return self.precision <= 3
        return True

    def sql(self) -> str:
        if self.spelling is not None:
            body = self.spelling
        elif self.root == "DECIMAL":
            body = f"DECIMAL({self.precision}, {self.scale})"
        elif self.root == "TIMESTAMP":
            body = f"TIMESTAMP({self.precision})"
        elif self.root == "TIMESTAMP_LTZ":
            body = f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        else:
            body = self.root
        return body if self.nullable else f"{body} NOT NULL"

    def to_arrow(self) -> pa.DataType:
        if self.root in _SIMPLE:
            return _SIMPLE[self.root]
        if self.root == "DECIMAL":
            return pa.decimal128(self.precision, self.scale)
        unit = "s" if self.precision == 0 else "ms" if self.precision <= 3 else "us" if self.precision <= 6 else "ns"
        return pa.timestamp(unit, tz="UTC" if self.root == "TIMESTAMP_LTZ" else None)

    def __str__(self) -> str:
        return self.sql()


def parse_type(text: str) -> DataType:
    """Parse a Paimon SQL type string such as `DECIMAL(10, 2) NOT NULL`."""
    m = _TYPE_RE.match(text.upper())
    if not m:
        raise SchemaError(f"unsupported Paimon type {text!r}")
    root, args, nullable = m.group("root"), m.group("args"), m.group("nn") is None
    spelling = None
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        spelling = text.upper().replace("NOT NULL", "").strip()
    root = _ALIASES.get(root, root)
    nums = [int(a) for a in args.split(",")] if args else []
    if root == "TIMESTAMP_LTZ" or (root == "TIMESTAMP" and m.group("ltz")):
        return DataType("TIMESTAMP_LTZ", nullable, precision=nums[0] if nums else 6)
    if root == "TIMESTAMP":
        return DataType("TIMESTAMP", nullable, precision=nums[0] if nums else 6)
    if root == "DECIMAL":
        p = nums[0] if nums else 10
        s = nums[1] if len(nums) > 1 else 0
        if p > 38:
            raise SchemaError(f"DECIMAL precision {p} is above 38 in {text!r}")
        return DataType("DECIMAL", nullable, precision=p, scale=s)
    if root in _SIMPLE:
        return DataType(root, nullable, spelling=spelling)
    raise SchemaError(f"unsupported Paimon type {text!r} (supported: {', '.join(supported_type_names())})")


def supported_type_names() -> list[str]:
    return [*_SIMPLE, "DECIMAL(p, s)", "TIMESTAMP(p)", "TIMESTAMP(p) WITH LOCAL TIME ZONE"]


def from_arrow(t: pa.DataType, nullable: bool = True, column: str = "?") -> DataType:
    """Map an Arrow type to the Paimon type we store; anything else is a clear error."""
    for root, at in _SIMPLE.items():
        if t == at:
            return DataType(root, nullable)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return DataType("STRING", nullable)
    if pa.types.is_large_binary(t):
        return DataType("BYTES", nullable)
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaError(f"column {column!r}: decimal precision {t.precision} is above 38")
        return DataType("DECIMAL", nullable, precision=t.precision, scale=t.scale)
    if pa.types.is_timestamp(t):
        return DataType("TIMESTAMP_LTZ" if t.tz else "TIMESTAMP", nullable, precision=_TS_UNITS[t.unit])
    raise SchemaError(
        f"column {column!r} has Arrow type {t}, which dbt-paimon cannot store "
        f"(supported: {', '.join(supported_type_names())})"
    )
