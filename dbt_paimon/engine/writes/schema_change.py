"""Paimon's schema changes on a table, as Paimon's SchemaManager applies them: each change writes a
new `schema/schema-N` file. Added columns get new field ids (highestFieldId grows), dropped columns
leave the field list, renamed and widened columns keep their id. Data files remember the schema id
they were written with and readers map their columns by field id, so no data file is rewritten.

Used by dbt's on_schema_change and persist_docs (adapter/evolution.py) and by Spark SQL's ALTER
TABLE on a Paimon table (sql/ddl.py).
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Mapping, Optional, Sequence

from pyspark.sql import types as T

from ...store.schema.option_validation import validate as validate_options
from ...store.common.errors import SchemaError
from ...store.common.fileio import FileIO
from ...store.schema.schema import DataField, SchemaManager, TableSchema, check_append_options, check_nested
from ...store.snapshot.snapshot import SnapshotManager
from ...store.common.types import DataType, with_field_ids
from ..spark_types import from_spark, to_spark

# Lossless type changes a column may take (the readers cast older files on the fly).
_WIDENINGS = {
    "TINYINT": ("SMALLINT", "INT", "BIGINT", "DOUBLE"),
    "SMALLINT": ("INT", "BIGINT", "DOUBLE"),
    "INT": ("BIGINT", "DOUBLE"),
    "FLOAT": ("DOUBLE",),
}


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


def referenced_by_options(schema: TableSchema, column: str) -> list[str]:
    refs = []
    for key, value in schema.options.items():
        m = re.fullmatch(r"fields\.(.+?)\.[a-z-.]+", key)
        if m and m.group(1) == column:
            refs.append(key)
        elif (key in ("sequence.field", "rowkind.field", "bucket-key") or re.fullmatch(
                r"file-index\.[a-z-]+\.columns", key)) and column in [v.strip() for v in value.split(",")]:
            refs.append(key)
        elif re.fullmatch(rf"file-index\.[a-z-]+\.{re.escape(column)}\.[a-z-]+", key):
            refs.append(key)
    return refs


def evolve(schema: TableSchema, *, add: Sequence[T.StructField] = (), drop: Sequence[str] = (),
           retype: Mapping[str, DataType] | None = None, options: Mapping[str, str] | None = None,
           protected: Sequence[str] = (), descriptions: Mapping[str, str] | None = None) -> TableSchema:
    """The next schema: columns added (new field ids), dropped and widened, options for added
    columns merged, `descriptions` given to added columns. Refuses what Paimon refuses (dropping or
    retyping a key) and what would lose data."""
    retype = dict(retype or {})
    keys = set(schema.primary_keys) | set(schema.partition_keys)
    for name in drop:
        if name in keys:
            raise SchemaError(f"column {name!r} is part of the primary or partition key and cannot be dropped "
                              f"(rebuild the table with --full-refresh)")
        if name in protected:
            raise SchemaError(f"column {name!r} is the sequence_by column and cannot be dropped")
        refs = referenced_by_options(schema, name)
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
        column_id = next_id
        dtype, next_id = with_field_ids(from_spark(f.dataType, f.name), next_id)
        fields.append(DataField(column_id, f.name, dtype, (descriptions or {}).get(f.name) or None))
        names.add(f.name.lower())
    new_options = dict(schema.options)
    if options:
        new_options.update(options)
    new_options = validate_options(new_options, [f.name for f in fields], stored=schema.options)
    check_nested(fields, schema.primary_keys, schema.partition_keys, new_options)
    return dataclasses.replace(schema, id=schema.id + 1, fields=tuple(fields), highest_field_id=next_id,
                               options=new_options, time_millis=_now())


def rename(schema: TableSchema, old: str, new: str) -> TableSchema:
    """The next schema with column `old` named `new` (its field id kept: data files read it under the
    new name). Key and partition columns, and columns table options name, keep their names, as Paimon
    keeps a partition column's."""
    if old in schema.primary_keys or old in schema.partition_keys:
        raise SchemaError(f"column {old!r} is part of the primary or partition key and cannot be renamed")
    refs = referenced_by_options(schema, old)
    if refs:
        raise SchemaError(f"column {old!r} cannot be renamed: table option(s) {refs} refer to it")
    if new.lower() in {f.name.lower() for f in schema.fields if f.name != old}:
        raise SchemaError(f"column {new!r} already exists")
    fields = tuple(dataclasses.replace(f, name=new) if f.name == old else f for f in schema.fields)
    return dataclasses.replace(schema, id=schema.id + 1, fields=fields, time_millis=_now())


# Options a table keeps for life: Paimon's immutable ones, and `bucket` (rescaling rewrites the data,
# which only a rebuild does here)
IMMUTABLE_OPTIONS = ("primary-key", "partition", "bucket", "bucket-key", "bucket-function.type", "merge-engine",
                     "sequence.field", "sequence.snapshot-ordering", "rowkind.field", "primary-key.nullable",
                     "aggregation.remove-record-on-delete", "partial-update.remove-record-on-delete",
                     "partial-update.remove-record-on-sequence-group", "dynamic-bucket.initial-buckets",
                     "force-lookup", "row-tracking.enabled", "data-evolution.enabled", "data-file.path-directory",
                     "index-file-in-data-file-dir", "type")


def with_options(schema: TableSchema, changes: Mapping[str, str], removed: Sequence[str] = ()) -> TableSchema:
    """The next schema with options set and removed, as Paimon's SET/RESET: an immutable option, or a
    per-column function (`fields.<c>.aggregate-function`), stays as it is."""
    for key in [*changes, *removed]:
        if key in IMMUTABLE_OPTIONS or re.fullmatch(r"fields\..+\.(aggregate-function|sequence-group)", key):
            raise SchemaError(f"table option {key!r} cannot change once the table exists (rebuild the table)")
    new_options = {k: v for k, v in schema.options.items() if k not in removed}
    new_options.update({k: str(v) for k, v in changes.items()})
    new_options = validate_options(new_options, schema.field_names, stored=schema.options)
    if schema.is_append:
        check_append_options(new_options)
    return dataclasses.replace(schema, id=schema.id + 1, options=new_options, time_millis=_now())


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
    """The evolved schema written, into the branch it was read from."""
    return SchemaManager(io or FileIO.get(path), path, schema.branch).commit(schema)


def rollback(path: str, schema: TableSchema, io: FileIO | None = None) -> bool:
    """Remove a schema file written by this run when no snapshot was committed with it."""
    io = io or FileIO.get(path)
    latest = SnapshotManager(io, path, schema.branch).latest()
    if latest is not None and latest.schema_id >= schema.id:
        return False
    return io.delete(SchemaManager(io, path, schema.branch).schema_path(schema.id))


def spark_type(t: DataType) -> T.DataType:
    return to_spark(t)


def _now() -> int:
    return int(time.time() * 1000)


