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

from ..store.common.errors import SchemaError
from ..store.schema.schema import TableSchema
from ..store.common.types import DataType, RowField, loose

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


def to_spark(t: DataType, loose: bool = False) -> T.DataType:
    """As Paimon's SparkTypeUtils: an array's containsNull and a map's valueContainsNull are the
    element's and the value's nullability, a struct's fields keep theirs; `loose`: every one of
    them nullable (what a read declares: Spark's DDL cannot say containsNull = false, so a catalog
    entry's schema is loose, and the `paimon` source's must be the same)."""
    if t.root == "DECIMAL":
        return T.DecimalType(t.precision, t.scale)
    if t.root == "ARRAY":
        return T.ArrayType(to_spark(t.element, loose), loose or t.element.nullable)
    if t.root == "MAP":
        return T.MapType(to_spark(t.key, loose), to_spark(t.value, loose), loose or t.value.nullable)
    if t.root == "ROW":
        return T.StructType([T.StructField(f.name, to_spark(f.type, loose), loose or f.type.nullable)
                             for f in t.fields])
    return _TO_SPARK[t.root]


def spark_schema(schema: TableSchema, columns=None) -> T.StructType:
    """The Spark schema a read of the table declares (nested children loose, see to_spark)."""
    names = schema.field_names if columns is None else columns
    return T.StructType([T.StructField(n, to_spark(schema.field(n).type, loose=True), True) for n in names])


def spark_ddl(t: T.DataType) -> str:
    """A Spark type as DDL text Spark parses back: simpleString with a struct's field names quoted
    (a name may hold a space, a colon or a backtick)."""
    if isinstance(t, T.ArrayType):
        return f"array<{spark_ddl(t.elementType)}>"
    if isinstance(t, T.MapType):
        return f"map<{spark_ddl(t.keyType)},{spark_ddl(t.valueType)}>"
    if isinstance(t, T.StructType):
        return "struct<" + ",".join("`" + f.name.replace("`", "``") + "`:" + spark_ddl(f.dataType)
                                    for f in t.fields) + ">"
    return t.simpleString()


def from_spark(t: T.DataType, column: str) -> DataType:
    """The Paimon type a new table gets for a Spark column; a ROW's fields get their ids from
    store.types.with_field_ids. Like a table's columns, what a nested value holds may be null
    whatever the model's first rows said (Spark's containsNull and a struct field's nullable follow
    the expression, not the data, and differ between runs of one model); a map's key is NOT NULL,
    as in Paimon's Spark connector and in Parquet."""
    if isinstance(t, T.DecimalType):
        return DataType("DECIMAL", precision=t.precision, scale=t.scale)
    if isinstance(t, T.ArrayType):
        return DataType("ARRAY", element=from_spark(t.elementType, f"{column} element"))
    if isinstance(t, T.MapType):
        return DataType("MAP", key=from_spark(t.keyType, f"{column} key").not_null(),
                        value=from_spark(t.valueType, f"{column} value"))
    if isinstance(t, T.StructType):
        return DataType("ROW", fields=tuple(RowField(-1, f.name, from_spark(f.dataType, f"{column}.{f.name}"))
                                            for f in t.fields))
    for root, st in _TO_SPARK.items():
        if type(t) is type(st):
            return DataType(root, precision=6 if root.startswith("TIMESTAMP") else 0)
    if isinstance(t, (T.VarcharType, T.CharType)):
        return DataType("STRING")
    raise SchemaError(f"column {column!r} has Spark type {t.simpleString()}, which dbt-paimon cannot store "
                      f"(supported: boolean, tinyint, smallint, int, bigint, float, double, decimal, string, "
                      f"binary, date, timestamp, timestamp_ntz, and array, map, struct of them)")


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
    if target.is_nested:  # taken as it is: no widening inside a nested value
        return _same_shape(source, want)
    if source == want or (isinstance(source, (T.VarcharType, T.CharType)) and target.root == "STRING"):
        return True
    if isinstance(source, T.DecimalType) and target.root == "DECIMAL":
        return (target.scale >= source.scale
                and target.precision - target.scale >= source.precision - source.scale)
    if isinstance(source, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)) and target.root == "DECIMAL":
        digits = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 19}[type(source)]
        return target.precision - target.scale >= digits
    return target.root in _WIDENS.get(type(source), ())


def check_nested_values(given: dict, schema: TableSchema, words: str) -> None:
    """SchemaError unless each value a statement gives a nested column (its Spark type, by column
    name: the types of an analysis the caller made anyway) fits it as it is: a CAST to a struct type
    would match fields by position where Spark's UPDATE and MERGE match them by name, and swap two
    of one type."""
    for f in schema.fields:
        if f.type.is_nested and f.name in given and not fits(given[f.name], f.type):
            raise SchemaError(f"{words}: column {f.name!r} is {f.type.sql()}, and the statement gives it "
                              f"{given[f.name].simpleString()} (a struct's fields by the column's names, in its order)")


def _same_shape(source: T.DataType, want: T.DataType) -> bool:
    """The same nested type, where `source` may hold nulls only where `want` does (Spark writes a
    value into a column of its own nullability or a wider one); a NULL (Spark's void: `NULL`,
    `array()`, `map()`) fits anywhere."""
    if isinstance(source, T.NullType):
        return True
    if isinstance(want, T.ArrayType):
        return (isinstance(source, T.ArrayType) and _same_shape(source.elementType, want.elementType)
                and (want.containsNull or not source.containsNull))
    if isinstance(want, T.MapType):
        return (isinstance(source, T.MapType) and _same_shape(source.keyType, want.keyType)
                and _same_shape(source.valueType, want.valueType)
                and (want.valueContainsNull or not source.valueContainsNull))
    if isinstance(want, T.StructType):
        return (isinstance(source, T.StructType) and len(source.fields) == len(want.fields)
                and all(s.name == w.name and _same_shape(s.dataType, w.dataType) and (w.nullable or not s.nullable)
                        for s, w in zip(source.fields, want.fields)))
    return source == want or (isinstance(source, (T.VarcharType, T.CharType)) and isinstance(want, T.StringType))


# Bytes a value takes in an Arrow batch, by Spark type; a string or binary value is assumed to
# take VARIABLE_VALUE_BYTES (its 4-byte offset included): a schema does not say how long they are.
VARIABLE_VALUE_BYTES = 256
_FIXED_BYTES = {T.BooleanType: 1, T.ByteType: 1, T.ShortType: 2, T.IntegerType: 4, T.DateType: 4,
                T.LongType: 8, T.TimestampType: 8, T.TimestampNTZType: 8, T.FloatType: 4, T.DoubleType: 8,
                T.DecimalType: 16, T.NullType: 0}


# A nested value (array, map, struct) is assumed to take this many: it may hold many values, and
# the batch sizes built on these figures are all that bounds a Python worker's batch (jobs.py)
NESTED_VALUE_BYTES = 4096
_NESTED = (T.ArrayType, T.MapType, T.StructType)


def arrow_row_bytes(schema: T.StructType) -> int:
    """A row's estimated size in an Arrow batch of schema's columns (each with its validity bit);
    a nested value counts NESTED_VALUE_BYTES, anything else not fixed-width as a string."""
    size = sum(NESTED_VALUE_BYTES if isinstance(f.dataType, _NESTED) else
               _FIXED_BYTES.get(type(f.dataType), VARIABLE_VALUE_BYTES) for f in schema.fields)
    return max(1, size + (len(schema.fields) + 7) // 8)


def struct_of(layout: pa.Schema) -> T.StructType:
    """The Spark schema of a stage layout (assign/rows.py): Spark's view of the same Arrow types
    (a timestamp with a time zone is TIMESTAMP, one without TIMESTAMP_NTZ)."""
    return T.StructType([T.StructField(f.name, from_arrow_type(f.type, prefer_timestamp_ntz=True), True)
                         for f in layout])


def for_spark(table: pa.Table, schema: TableSchema) -> pa.Table:
    """A table of the table's columns in exactly the Arrow types Spark expects back."""
    return conform(table, pa.schema([pa.field(n, loose(exchange_type(schema.field(n).type)))
                                     for n in table.column_names]))
