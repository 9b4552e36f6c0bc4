"""Paimon data types: the SQL strings stored in schema JSON and their Arrow counterparts."""

from __future__ import annotations

import json
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


NESTED_ROOTS = ("ARRAY", "MAP", "ROW")


@dataclass(frozen=True)
class RowField:
    """A field of a ROW type: like a table's column, it has an id of the schema's id space."""

    id: int
    name: str
    type: "DataType"
    description: str | None = None

    def to_json(self) -> dict:
        out = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class DataType:
    """One Paimon type. `root` is canonical: BOOLEAN ... DATE, DECIMAL, TIMESTAMP, TIMESTAMP_LTZ, or
    one of the nested ARRAY (of `element`), MAP (`key` to `value`), ROW (`fields`)."""

    root: str
    nullable: bool = True
    precision: int = 0
    scale: int = 0
    # Kept so that a table written by Java/pypaimon with VARCHAR(n) or CHAR(n) round-trips unchanged.
    spelling: str | None = None
    element: "DataType | None" = None
    key: "DataType | None" = None
    value: "DataType | None" = None
    fields: tuple[RowField, ...] = ()

    @property
    def is_nested(self) -> bool:
        return self.root in NESTED_ROOTS

    def not_null(self) -> "DataType":
        return replace(self, nullable=False)

    def with_nullable(self) -> "DataType":
        return replace(self, nullable=True)

    @property
    def is_fixed_length(self) -> bool:
        """True when a BinaryRow keeps the whole value in its 8-byte slot."""
        if self.root in ("STRING", "BYTES") or self.is_nested:
            return False
        if self.root == "DECIMAL":
            return self.precision <= 18
        if self.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            return self.precision <= 3
        return True

    def sql(self) -> str:
        """Paimon's asSQLString: `ARRAY<INT>`, `ROW<`a` INT>` for the nested types."""
        if self.root == "ARRAY":
            body = f"ARRAY<{self.element.sql()}>"
        elif self.root == "MAP":
            body = f"MAP<{self.key.sql()}, {self.value.sql()}>"
        elif self.root == "ROW":
            body = "ROW<" + ", ".join(f"`{f.name}` {f.type.sql()}" for f in self.fields) + ">"
        elif self.spelling is not None:
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

    def to_json(self):
        """The type as a schema file holds it: an atomic type as its SQL string; a nested type as
        Paimon's DataTypeJsonParser reads it, an object (its children in the same form)."""
        if not self.is_nested:
            return self.sql()
        out: dict = {"type": self.root if self.nullable else f"{self.root} NOT NULL"}
        if self.root == "ARRAY":
            out["element"] = self.element.to_json()
        elif self.root == "MAP":
            out["key"], out["value"] = self.key.to_json(), self.value.to_json()
        else:
            out["fields"] = [f.to_json() for f in self.fields]
        return out

    def to_arrow(self, leaf=None) -> pa.DataType:
        """The Arrow type of a column: nested children keep their nullability (a Parquet writer
        refuses a null where the type says NOT NULL); a map's key is never null, as in Parquet.
        leaf(t): another Arrow type for an atomic type, at any depth (None: the stored one)."""
        if self.root == "ARRAY":
            return pa.list_(pa.field("element", self.element.to_arrow(leaf), self.element.nullable))
        if self.root == "MAP":
            return pa.map_(pa.field("key", self.key.to_arrow(leaf), False),
                           pa.field("value", self.value.to_arrow(leaf), self.value.nullable))
        if self.root == "ROW":
            return pa.struct([pa.field(f.name, f.type.to_arrow(leaf), f.type.nullable) for f in self.fields])
        if leaf is not None:
            return leaf(self)
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


def loose(t: pa.DataType) -> pa.DataType:
    """An Arrow type with every child of a nested type nullable (a map's key excepted)."""
    if pa.types.is_map(t):
        return pa.map_(t.key_field, pa.field(t.item_field.name, loose(t.item_type), True))
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, loose(t.value_type), True))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, loose(t.field(i).type), True) for i in range(t.num_fields)])
    return t


def cast_to(col, target: pa.DataType):
    """col (an Array or ChunkedArray) as `target`. A nested target is cast to through its loose form:
    Arrow refuses to cast to a NOT NULL struct field even where no value is null, so the values are
    viewed as `target` after the cast (callers that write check such nulls: datafile.conform)."""
    if col.type == target:
        return col
    wide = loose(target)
    out = col if col.type == wide else col.cast(wide)
    if wide == target:
        return out
    if isinstance(out, pa.ChunkedArray):
        return pa.chunked_array([c.view(target) for c in out.chunks], type=target)
    return out.view(target)


def supported_type_names() -> list[str]:
    return [*_SIMPLE, "DECIMAL(p, s)", "TIMESTAMP(p)", "TIMESTAMP(p) WITH LOCAL TIME ZONE", "ARRAY<t>",
            "MAP<k, v>", "ROW<...>"]


def type_from_json(node) -> DataType:
    """A type as a schema file holds it (DataType.to_json): a SQL string, or an object for a nested
    type. MULTISET, VECTOR and the rest are refused by name."""
    if isinstance(node, str):
        return parse_type(node)
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise SchemaError(f"unsupported Paimon type {json.dumps(node)[:80]}")
    spelled = node["type"].upper()
    root, nullable = spelled.split()[0] if spelled.split() else "", "NOT NULL" not in spelled
    try:
        if root == "ARRAY":
            return DataType("ARRAY", nullable, element=type_from_json(node["element"]))
        if root == "MAP":
            return DataType("MAP", nullable, key=type_from_json(node["key"]), value=type_from_json(node["value"]))
        if root == "ROW":
            return DataType("ROW", nullable, fields=tuple(
                RowField(int(f["id"]), f["name"], type_from_json(f["type"]), f.get("description"))
                for f in node["fields"]))
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaError(f"Paimon type {json.dumps(node)[:80]} lacks or mistypes {e}") from None
    raise SchemaError(f"unsupported Paimon type {json.dumps(node)[:80]} "
                      f"(supported: {', '.join(supported_type_names())})")


def with_field_ids(t: DataType, highest: int) -> tuple[DataType, int]:
    """The type with its ROW fields numbered after `highest` in Paimon's order (ReassignFieldId: a
    field's children before the field), and the highest id given."""
    if t.root == "ARRAY":
        element, highest = with_field_ids(t.element, highest)
        return replace(t, element=element), highest
    if t.root == "MAP":
        key, highest = with_field_ids(t.key, highest)
        value, highest = with_field_ids(t.value, highest)
        return replace(t, key=key, value=value), highest
    fields = []
    for f in t.fields:
        child, highest = with_field_ids(f.type, highest)
        highest += 1
        fields.append(RowField(highest, f.name, child, f.description))
    return replace(t, fields=tuple(fields)), highest


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
    # nested: ROW fields get their ids from with_field_ids once the column has its own
    if pa.types.is_map(t):
        return DataType("MAP", nullable, key=from_arrow(t.key_type, False, f"{column} key"),
                        value=from_arrow(t.item_type, t.item_field.nullable, f"{column} value"))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return DataType("ARRAY", nullable,
                        element=from_arrow(t.value_type, t.value_field.nullable, f"{column} element"))
    if pa.types.is_struct(t):
        return DataType("ROW", nullable, fields=tuple(
            RowField(-1, t.field(i).name,
                     from_arrow(t.field(i).type, t.field(i).nullable, f"{column}.{t.field(i).name}"))
            for i in range(t.num_fields)))
    raise SchemaError(
        f"column {column!r} has Arrow type {t}, which dbt-paimon cannot store "
        f"(supported: {', '.join(supported_type_names())})"
    )
