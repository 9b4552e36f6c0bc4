"""Paimon types as Spark sees them, and the Arrow types Spark exchanges with Python workers.

Mapping as Paimon's Spark connector does it: Spark TIMESTAMP (session-local) is Paimon
TIMESTAMP_LTZ(6), TIMESTAMP_NTZ is TIMESTAMP(6). Spark moves timestamps as microseconds, so Arrow
batches handed back to Spark are cast to microsecond units.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type

from ..assign.rows import conform, exchange_type

from ..store.errors import SchemaError
from ..store.schema import TableSchema
from ..store.types import DataType

_TO_SPARK = {
    "BOOLEAN": T.BooleanType(), "TINYINT": T.ByteType(), "SMALLINT": T.ShortType(), "INT": T.IntegerType(),
    "BIGINT": T.LongType(), "FLOAT": T.FloatType(), "DOUBLE": T.DoubleType(), "STRING": T.StringType(),
    "BYTES": T.BinaryType(), "DATE": T.DateType(), "TIMESTAMP": T.TimestampNTZType(),
    "TIMESTAMP_LTZ": T.TimestampType(),
}

# Lossless widenings a batch column may take on its way into an existing table column.
_WIDENS = {
    T.ByteType: ("SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"),
    T.ShortType: ("INT", "BIGINT", "FLOAT", "DOUBLE"),
    T.IntegerType: ("BIGINT", "DOUBLE"),
    T.LongType: (),
    T.FloatType: ("DOUBLE",),
    T.NullType: tuple(_TO_SPARK) + ("DECIMAL",),
}


def to_spark(t: DataType) -> T.DataType:
    if t.root == "DECIMAL":
        return T.DecimalType(t.precision, t.scale)
    return _TO_SPARK[t.root]


def spark_schema(schema: TableSchema, columns=None) -> T.StructType:
    names = schema.field_names if columns is None else columns
    return T.StructType([T.StructField(n, to_spark(schema.field(n).type), True) for n in names])


def from_spark(t: T.DataType, column: str) -> DataType:
    """The Paimon type a new table gets for a Spark column."""
    if isinstance(t, T.DecimalType):
        return DataType("DECIMAL", precision=t.precision, scale=t.scale)
    for root, st in _TO_SPARK.items():
        if type(t) is type(st):
            return DataType(root, precision=6 if root.startswith("TIMESTAMP") else 0)
    if isinstance(t, (T.VarcharType, T.CharType)):
        return DataType("STRING")
    raise SchemaError(f"column {column!r} has Spark type {t.simpleString()}, which dbt-paimon cannot store "
                      f"(supported: boolean, tinyint, smallint, int, bigint, float, double, decimal, string, "
                      f"binary, date, timestamp, timestamp_ntz)")


def arrow_schema_of(struct: T.StructType) -> pa.Schema:
    """Arrow schema of a new table from a Spark schema (all columns nullable)."""
    fields = []
    for f in struct.fields:
        dt = from_spark(f.dataType, f.name)
        fields.append(pa.field(f.name, dt.to_arrow(), True))
    return pa.schema(fields)


def fits(source: T.DataType, target: DataType) -> bool:
    """True when a Spark column of type `source` can be written into `target` without loss."""
    want = to_spark(target)
    if source == want or (isinstance(source, (T.VarcharType, T.CharType)) and target.root == "STRING"):
        return True
    if isinstance(source, T.DecimalType) and target.root == "DECIMAL":
        return (target.scale >= source.scale
                and target.precision - target.scale >= source.precision - source.scale)
    if isinstance(source, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)) and target.root == "DECIMAL":
        digits = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 19}[type(source)]
        return target.precision - target.scale >= digits
    return target.root in _WIDENS.get(type(source), ())


# Bytes a value takes in an Arrow batch, by Spark type; a string or binary value is assumed to
# take VARIABLE_VALUE_BYTES (its 4-byte offset included): a schema does not say how long they are.
VARIABLE_VALUE_BYTES = 256
_FIXED_BYTES = {T.BooleanType: 1, T.ByteType: 1, T.ShortType: 2, T.IntegerType: 4, T.DateType: 4,
                T.LongType: 8, T.TimestampType: 8, T.TimestampNTZType: 8, T.FloatType: 4, T.DoubleType: 8,
                T.DecimalType: 16, T.NullType: 0}


def arrow_row_bytes(schema: T.StructType) -> int:
    """A row's estimated size in an Arrow batch of schema's columns (each with its validity bit);
    a table's columns are flat (from_spark), anything not fixed-width counts as a string."""
    size = sum(_FIXED_BYTES.get(type(f.dataType), VARIABLE_VALUE_BYTES) for f in schema.fields)
    return max(1, size + (len(schema.fields) + 7) // 8)


def struct_of(layout: pa.Schema) -> T.StructType:
    """The Spark schema of a stage layout (assign/rows.py): Spark's view of the same Arrow types
    (a timestamp with a time zone is TIMESTAMP, one without TIMESTAMP_NTZ)."""
    return T.StructType([T.StructField(f.name, from_arrow_type(f.type, prefer_timestamp_ntz=True), True)
                         for f in layout])


def for_spark(table: pa.Table, schema: TableSchema) -> pa.Table:
    """A table of the table's columns in exactly the Arrow types Spark expects back."""
    return conform(table, pa.schema([pa.field(n, exchange_type(schema.field(n).type)) for n in table.column_names]))
