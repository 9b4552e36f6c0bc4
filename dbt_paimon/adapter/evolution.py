"""Paimon schema evolution for dbt's on_schema_change, and docs persisted into the Paimon schema.

Each change writes a new `schema/schema-N` file, as Paimon's own ALTER TABLE does: added columns get
new field ids (highestFieldId grows), dropped columns disappear from the field list, widened columns
keep their id. Data files remember the schema id they were written with and readers map their
columns by field id, so no data file is rewritten.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from pyspark.sql import types as T

from ..engine.spark_types import fits, from_spark, to_spark
from ..store import options as opts
from ..store.errors import SchemaError
from ..store.fileio import FileIO
from ..store.schema import DataField, SchemaManager, TableSchema
from ..store.snapshot import SnapshotManager
from ..store.types import DataType

ON_SCHEMA_CHANGE = ("ignore", "fail", "append_new_columns", "sync_all_columns")

# Lossless type changes a column may take (the readers cast older files on the fly).
_WIDENINGS = {
    "TINYINT": ("SMALLINT", "INT", "BIGINT", "DOUBLE"),
    "SMALLINT": ("INT", "BIGINT", "DOUBLE"),
    "INT": ("BIGINT", "DOUBLE"),
    "FLOAT": ("DOUBLE",),
}


@dataclass
class SchemaDiff:
    """How a model's columns differ from its Paimon table's (names compared case-insensitively)."""

    added: list[T.StructField] = field(default_factory=list)  # in the model, not in the table
    removed: list[str] = field(default_factory=list)  # in the table, not in the model
    retyped: list[tuple[str, DataType, T.DataType]] = field(default_factory=list)  # table type -> model type

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.retyped)

    def describe(self) -> str:
        return (f"columns in the model but not in the table: {[f.name for f in self.added]}; "
                f"columns in the table but not in the model: {self.removed}; "
                f"changed types: {[f'{n}: {t.sql()} -> {s.simpleString()}' for n, t, s in self.retyped]}")


def diff(schema: TableSchema, batch: T.StructType) -> SchemaDiff:
    by_name = {f.name.lower(): f for f in batch.fields}
    table_names = {n.lower() for n in schema.field_names}
    out = SchemaDiff()
    out.added = [f for f in batch.fields if f.name.lower() not in table_names]
    for f in schema.fields:
        source = by_name.get(f.name.lower())
        if source is None:
            out.removed.append(f.name)
        elif not fits(source.dataType, f.type):
            out.retyped.append((f.name, f.type, source.dataType))
    return out


def widened(old: DataType, new: T.DataType) -> Optional[DataType]:
    """The type a column of type `old` may evolve to so it holds the model's `new` values, if any."""
    if old.root == "DECIMAL" and isinstance(new, T.DecimalType):
        scale = max(old.scale, new.scale)
        digits = max(old.precision - old.scale, new.precision - new.scale)
        if digits + scale <= 38:
            return DataType("DECIMAL", old.nullable, precision=digits + scale, scale=scale)
        return None
    target = from_spark(new, "?")
    if target.root in _WIDENINGS.get(old.root, ()):
        return dataclasses.replace(target, nullable=old.nullable)
    return None


def _referenced_by_options(schema: TableSchema, column: str) -> list[str]:
    refs = []
    for key, value in schema.options.items():
        m = re.fullmatch(r"fields\.(.+?)\.[a-z-.]+", key)
        if m and m.group(1) == column:
            refs.append(key)
        elif key in ("sequence.field", "rowkind.field", "bucket-key") and column in [
                v.strip() for v in value.split(",")]:
            refs.append(key)
    return refs


def evolve(schema: TableSchema, *, add: Sequence[T.StructField] = (), drop: Sequence[str] = (),
           retype: Mapping[str, DataType] | None = None, options: Mapping[str, str] | None = None,
           protected: Sequence[str] = ()) -> TableSchema:
    """The next schema: columns added (new field ids), dropped and widened, options for added
    columns merged. Refuses what Paimon refuses (dropping or retyping a key) and what would lose data."""
    retype = dict(retype or {})
    keys = set(schema.primary_keys) | set(schema.partition_keys)
    for name in drop:
        if name in keys:
            raise SchemaError(f"column {name!r} is part of the primary or partition key and cannot be dropped "
                              f"(rebuild the table with --full-refresh)")
        if name in protected:
            raise SchemaError(f"column {name!r} is the sequence_by column and cannot be dropped")
        refs = _referenced_by_options(schema, name)
        if refs:
            raise SchemaError(f"column {name!r} cannot be dropped: table option(s) {refs} refer to it "
                              f"(rebuild the table with --full-refresh)")
    for name in retype:
        if name in keys:
            raise SchemaError(f"the type of key column {name!r} cannot change (rebuild the table with --full-refresh)")
    fields: list[DataField] = []
    for f in schema.fields:
        if f.name in drop:
            continue
        fields.append(dataclasses.replace(f, type=retype[f.name]) if f.name in retype else f)
    next_id = schema.highest_field_id
    names = {f.name.lower() for f in fields}
    for f in add:
        if f.name.lower() in names:
            raise SchemaError(f"column {f.name!r} already exists")
        next_id += 1
        fields.append(DataField(next_id, f.name, from_spark(f.dataType, f.name)))
        names.add(f.name.lower())
    new_options = dict(schema.options)
    if options:
        new_options.update(options)
    new_options = opts.validate(new_options, [f.name for f in fields])
    return dataclasses.replace(schema, id=schema.id + 1, fields=tuple(fields), highest_field_id=next_id,
                               options=new_options, time_millis=_now())


def with_docs(schema: TableSchema, comment: Optional[str], descriptions: Mapping[str, str]) -> Optional[TableSchema]:
    """The next schema with the table comment and column descriptions set; None when nothing changes.
    A column left out of `descriptions` keeps its description."""
    lower = {k.lower(): v for k, v in descriptions.items()}
    fields = tuple(dataclasses.replace(f, description=lower[f.name.lower()] or None)
                   if f.name.lower() in lower else f for f in schema.fields)
    new_comment = schema.comment if comment is None else (comment or None)
    if fields == schema.fields and new_comment == schema.comment:
        return None
    return dataclasses.replace(schema, id=schema.id + 1, fields=fields, comment=new_comment, time_millis=_now())


def commit(path: str, schema: TableSchema, io: FileIO | None = None) -> TableSchema:
    return SchemaManager(io or FileIO.get(path), path).commit(schema)


def rollback(path: str, schema: TableSchema, io: FileIO | None = None) -> bool:
    """Remove a schema file written by this run when no snapshot was committed with it."""
    io = io or FileIO.get(path)
    latest = SnapshotManager(io, path).latest()
    if latest is not None and latest.schema_id >= schema.id:
        return False
    return io.delete(SchemaManager(io, path).schema_path(schema.id))


def spark_type(t: DataType) -> T.DataType:
    return to_spark(t)


def _now() -> int:
    import time

    return int(time.time() * 1000)
