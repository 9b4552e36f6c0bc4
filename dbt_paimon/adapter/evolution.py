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
from typing import Any, Dict, List, Mapping, Optional, Sequence

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..engine.spark_types import fits, from_spark, to_spark
from ..store import options as opts
from ..store.errors import PaimonError, SchemaError
from ..store.fileio import FileIO
from ..store.schema import DataField, SchemaManager, TableSchema
from ..store.snapshot import SnapshotManager
from ..store.types import DataType

log = AdapterLogger("Paimon")

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


def apply_on_schema_change(name: str, path: str, schema: TableSchema, batch: DataFrame, mode: str,
                           options: Mapping[str, Any], sequence: List[str]):
    """The batch to write and the evolved schema (committed), per on_schema_change (`mode`); the
    errors are worded in dbt's config names."""
    change = diff(schema, batch.schema)
    if not change.changed:
        return batch, None
    log.debug(f"{name}: schema change ({mode}): {change.describe()}")
    if mode == "fail":
        raise CompilationError(
            f"{name}: the model's columns no longer match the Paimon table and on_schema_change='fail': "
            f"{change.describe()}. Set on_schema_change to 'append_new_columns' or 'sync_all_columns', or "
            f"rebuild the table with --full-refresh")
    if mode == "ignore":
        if change.removed:
            raise DbtRuntimeError(
                f"{name}: the model no longer returns column(s) {change.removed} of the Paimon table; with "
                f"on_schema_change='ignore' every column must be given. Set on_schema_change to "
                f"'append_new_columns' (they become null) or 'sync_all_columns' (they are dropped), or "
                f"rebuild the table with --full-refresh")
        if change.added:
            log.debug(f"{name}: on_schema_change='ignore': not adding {[f.name for f in change.added]}")
        return batch.select(*[F.col(f"`{c}`") for c in batch.columns
                              if c.lower() in {n.lower() for n in schema.field_names}]), None
    retype: Dict[str, Any] = {}
    if change.retyped:
        if mode != "sync_all_columns":
            bad = [n for n, _, _ in change.retyped]
            raise DbtRuntimeError(f"{name}: column(s) {bad} changed type ({change.describe()}); "
                                  f"on_schema_change='{mode}' does not change types")
        for col, old, new in change.retyped:
            wider = widened(old, new)
            if wider is None:
                raise DbtRuntimeError(
                    f"{name}: column {col!r} is {old.sql()} in the Paimon table and cannot become "
                    f"{new.simpleString()} in place (only lossless widenings are applied); cast it in the "
                    f"model or rebuild the table with --full-refresh")
            retype[col] = wider
    drop = change.removed if mode == "sync_all_columns" else []
    # The model may read its own table ({{ this }}): evaluate it against the table as it is now,
    # before its schema (and so its catalog entry) changes under the running job.
    batch = batch.localCheckpoint(eager=True)
    new_options = {k: v for k, v in new_column_options(options, change.added).items()}
    try:
        evolved = evolve(schema, add=change.added, drop=drop, retype=retype, options=new_options,
                                   protected=sequence)
    except PaimonError as e:
        raise DbtRuntimeError(f"{name}: {e}") from e
    commit(path, evolved)
    log.info(f"{name}: Paimon schema {evolved.id} ({mode}): added {[f.name for f in change.added]}, "
             f"dropped {drop}, widened {list(retype)}")
    if mode == "append_new_columns":  # columns the model left out are written as null
        for col in change.removed:
            field = evolved.field(col)
            batch = batch.withColumn(col, F.lit(None).cast(spark_type(field.type)))
    return batch, evolved


def new_column_options(options: Mapping[str, Any], added) -> Dict[str, str]:
    """Per-column options (`fields.<c>.*`) the config gives for columns this run adds, stored as
    the engine stores them (its `count` aggregate is Paimon's `sum` plus a marker)."""
    prefixes = tuple(f"fields.{f.name}." for f in added)
    stored, _ = opts.count_sugar({k: v for k, v in options.items() if k.startswith(prefixes)})
    return stored
