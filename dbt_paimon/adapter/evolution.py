"""dbt's on_schema_change on a Paimon table: how a model's columns differ from the table's, and the
schema change (engine/writes/schema_change.py) each mode makes of it, worded in dbt's config names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..engine import fits, schema_change
from ..store import DataType, PaimonError, TableSchema, options as opts

log = AdapterLogger("Paimon")

ON_SCHEMA_CHANGE = ("ignore", "fail", "append_new_columns", "sync_all_columns")

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
            wider = schema_change.widened(old, new)
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
        evolved = schema_change.evolve(schema, add=change.added, drop=drop, retype=retype, options=new_options,
                                   protected=sequence)
    except PaimonError as e:
        raise DbtRuntimeError(f"{name}: {e}") from e
    schema_change.commit(path, evolved)
    log.info(f"{name}: Paimon schema {evolved.id} ({mode}): added {[f.name for f in change.added]}, "
             f"dropped {drop}, widened {list(retype)}")
    if mode == "append_new_columns":  # columns the model left out are written as null
        for col in change.removed:
            field = evolved.field(col)
            batch = batch.withColumn(col, F.lit(None).cast(schema_change.spark_type(field.type)))
    return batch, evolved


def new_column_options(options: Mapping[str, Any], added) -> Dict[str, str]:
    """Per-column options (`fields.<c>.*`) the config gives for columns this run adds, stored as
    the engine stores them (its `count` aggregate is Paimon's `sum` plus a marker)."""
    prefixes = tuple(f"fields.{f.name}." for f in added)
    stored, _ = opts.count_sugar({k: v for k, v in options.items() if k.startswith(prefixes)})
    return stored
