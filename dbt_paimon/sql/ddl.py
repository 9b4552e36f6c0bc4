"""ALTER TABLE on a Paimon table, carried out on the table itself.

Spark would change its catalog entry alone and report OK, leaving the entry and the table apart.
Here each change is a Paimon schema change (engine/writes/schema_change.py: a new schema-N file, which
every reader, ours, pypaimon's and Java Paimon's, reads), and the catalog entry is made again from
the new schema (catalog.expose); a rename moves the table's directory. What Paimon cannot do, or
we do not, is refused before anything changes, naming the table as the statement wrote it.

    ADD COLUMNS (c type [COMMENT ...])          new nullable columns, at the end
    RENAME COLUMN a TO b                        not a key or partition column, nor one options name
    ALTER COLUMN c TYPE t | COMMENT ... | DROP NOT NULL     lossless widenings only
    DROP COLUMNS                                not a key or partition column
    SET / UNSET TBLPROPERTIES                   Paimon options, except those fixed at creation
    RENAME TO                                   within the warehouse, on a filesystem
"""

from __future__ import annotations

import dataclasses
import os
import shutil

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ..engine.writes import schema_change
from ..key_index import index_dir
from ..store.common import fileio
from ..store import warehouse as layout
from ..store.common.errors import SchemaError
from ..store.common.fileio import FileIO, is_storage_option
from ..store.schema.schema import SchemaManager, TableSchema, resolve_columns
from . import catalog
from ..engine.jvm import scala_list, scala_map
from .statement import Statement, option, spark_type
from .target import Target

KINDS = ("add columns", "rename column", "alter column", "drop columns", "replace columns", "set properties",
         "unset properties", "rename table")
# Spark's own table properties, kept by the catalog entry (SET TBLPROPERTIES ('comment' = ...))
_COMMENT = "comment"


def alter(spark: SparkSession, statement: Statement, target: Target) -> None:
    """Carry out an ALTER TABLE statement (kind in KINDS) on the Paimon table `target`."""
    io = FileIO.get(target.path)
    schema = SchemaManager(io, target.path, target.branch).latest()
    if statement.kind == "rename table" and target.branch:
        raise SchemaError(f"a branch is renamed with its table, not alone ({statement.written_name})")
    if statement.kind == "rename table":
        _rename_table(spark, statement, target)
        return
    changed = _changed(spark, statement, schema)  # a refusal is prefixed with the statement (session.py)
    if changed is not None:
        schema_change.commit(target.path, changed, io)
    catalog.expose(spark, catalog.load(target.schema, target.name, target.path))


def _column(schema: TableSchema, parts: list[str]) -> str:
    if len(parts) > 1:
        raise SchemaError(f"nested column {'.'.join(parts)!r}: only top-level columns change here")
    return resolve_columns("column", parts, schema.field_names)[0]


def _changed(spark: SparkSession, statement: Statement, schema: TableSchema):
    """The next schema (None: nothing to change), or a SchemaError naming what cannot be done."""
    plan = statement.plan
    if statement.kind == "add columns":
        added, descriptions = [], {}
        for col in scala_list(plan.columnsToAdd()):
            parts = [str(p) for p in scala_list(col.name())]
            if len(parts) > 1:
                raise SchemaError(f"nested column {'.'.join(parts)!r}: only top-level columns are added here")
            if option(col.position()) is not None:
                raise SchemaError(f"column {parts[0]!r}: FIRST/AFTER is not supported; new columns go at the end")
            if option(col.default()) is not None:
                raise SchemaError(f"column {parts[0]!r}: DEFAULT values are not supported on Paimon tables")
            if not col.nullable():
                raise SchemaError(f"column {parts[0]!r}: a column added to a table holding rows must be nullable "
                                  f"(as in Paimon)")
            added.append(T.StructField(parts[0], spark_type(col.dataType())))
            if option(col.comment()) is not None:
                descriptions[parts[0]] = str(option(col.comment()))
        return schema_change.evolve(schema, add=added, descriptions=descriptions)
    if statement.kind == "rename column":
        old = _column(schema, [str(p) for p in scala_list(plan.column().name())])
        return schema_change.rename(schema, old, str(plan.newName()))
    if statement.kind == "alter column":
        return _altered_columns(plan, schema)
    if statement.kind == "drop columns":
        names = []
        for col in scala_list(plan.columnsToDrop()):
            parts = [str(p) for p in scala_list(col.name())]
            try:
                names.append(_column(schema, parts))
            except SchemaError:
                if not plan.ifExists():
                    raise
        return schema_change.evolve(schema, drop=names) if names else None
    if statement.kind == "replace columns":
        raise SchemaError("REPLACE COLUMNS would give every column a new identity; add, rename, widen or drop "
                          "columns one statement at a time")
    if statement.kind == "set properties":
        props = {str(k): str(v) for k, v in scala_map(spark, plan.properties()).items()}
        _check_keys(props)
        comment = props.pop(_COMMENT, None)
        changed = schema_change.with_options(schema, props) if props else schema
        if comment is not None:
            changed = schema_change.with_docs(changed, comment, {}) or changed
        return changed if changed is not schema else None
    if statement.kind == "unset properties":
        keys = [str(k) for k in scala_list(plan.propertyKeys())]
        _check_keys(keys)
        missing = [k for k in keys if k not in schema.options and k != _COMMENT]
        if missing and not plan.ifExists():
            raise SchemaError(f"the table has no option(s) {missing}")
        removed = [k for k in keys if k in schema.options]
        changed = schema_change.with_options(schema, {}, removed) if removed else schema
        if _COMMENT in keys and schema.comment:
            changed = schema_change.with_docs(changed, "", {}) or changed
        return changed if changed is not schema else None
    raise SchemaError(f"unexpected statement kind {statement.kind}")


def _check_keys(keys) -> None:
    for key in keys:
        if is_storage_option(key):
            raise SchemaError(f"{key!r} is a setting of the object store, which is never stored with a table: "
                              f"give it in the profile or to the session")
        if key.startswith("paimon."):
            raise SchemaError(f"{key!r} is kept by Spark's catalog entry of the table, not by the table")


def _altered_columns(plan, schema: TableSchema):
    """ALTER COLUMN: a lossless widening, a comment, DROP NOT NULL."""
    retype, descriptions = {}, {}
    for spec in scala_list(plan.specs()):
        name = _column(schema, [str(p) for p in scala_list(spec.column().name())])
        field = schema.field(name)
        if option(spec.newPosition()) is not None:
            raise SchemaError(f"column {name!r}: FIRST/AFTER is not supported")
        if option(spec.newDefaultExpression()) is not None:
            raise SchemaError(f"column {name!r}: DEFAULT values are not supported on Paimon tables")
        new_type = option(spec.newDataType())
        target = field.type
        if new_type is not None:
            wanted = spark_type(new_type)
            if schema_change.spark_type(field.type) != wanted:
                target = schema_change.widened(field.type, wanted)
                if target is None:
                    raise SchemaError(f"column {name!r} is {field.type.sql()} and cannot become "
                                      f"{wanted.simpleString()} in place (only lossless widenings are applied)")
        nullable = option(spec.newNullability())
        if nullable is not None:
            if not nullable and field.type.nullable:
                raise SchemaError(f"column {name!r} cannot become NOT NULL: rows already written may hold nulls")
            if nullable and not field.type.nullable:
                if name in schema.primary_keys:
                    raise SchemaError(f"column {name!r} is part of the primary key, which is never null")
                target = dataclasses.replace(target, nullable=True)
        if target != field.type:
            retype[name] = target
        comment = option(spec.newComment())
        if comment is not None:
            descriptions[name] = str(comment)
    changed = schema_change.evolve(schema, retype=retype) if retype else schema
    if descriptions:
        changed = schema_change.with_docs(changed, None, descriptions) or changed
    return changed if changed is not schema else None


def _rename_table(spark: SparkSession, statement: Statement, target: Target) -> None:
    """The table's directory moved to the new name's, within the same warehouse; its key index is
    dropped (the next upsert builds it again)."""
    if fileio.scheme_of(target.path):
        raise SchemaError("an object store has no rename (every file would be copied); build the table under its "
                          "new name instead")
    parts = [str(p) for p in scala_list(statement.plan.newName())]
    if len(parts) > 2 and parts[0].lower() != "spark_catalog" or len(parts) > 3:
        raise SchemaError(f"{'.'.join(parts)} is in another catalog")
    schema_name = parts[-2].lower() if len(parts) >= 2 else target.schema
    name = parts[-1].lower()
    warehouse = os.path.dirname(os.path.dirname(target.path.rstrip("/")))
    new_path = layout.table_path(warehouse, schema_name, name)  # an InvalidNameError outside the warehouse
    if os.path.exists(new_path) or catalog.catalog_entry(spark, schema_name, name) is not None:
        raise SchemaError(f"{schema_name}.{name} already exists")
    catalog.ensure_schema(spark, schema_name)
    old_entry = catalog.catalog_entry(spark, target.schema, target.name)
    os.makedirs(os.path.dirname(new_path), exist_ok=True)
    os.rename(target.path, new_path)
    for stale in (index_dir(target.path), index_dir(new_path)):
        shutil.rmtree(stale, ignore_errors=True)
    if old_entry is not None:
        catalog.drop_entry(spark, old_entry, target.path)
    catalog.expose(spark, catalog.load(schema_name, name, new_path))
