"""The materializations' work on Paimon tables: what macros/materializations/*.sql call through the
adapter (paimon_upsert, clone, docs) once the Jinja side has run hooks and built the model's view.

A run either commits and reports what it did, or fails with nothing written: a full refresh builds
the new table beside the old one (staging.py) and swaps it in only after its commit; a schema change
committed before a failed upsert is rolled back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from ..engine import TableMismatchError, check_table, schema_change, upsert, write as append_write
from ..store import FileIO, FileStoreTable, PaimonError, SchemaManager, TableSchema, clone_table, resolve_columns
from . import constraints, evolution, incremental, staging, wap
from .configs import UpsertConfig, check_names
from .connections import error_message
from .tables import Tables, schema_id

log = AdapterLogger("Paimon")

MATERIALIZATION = "paimon_upsert"
# dbt-spark configs that mean nothing for a Paimon table: said out loud rather than dropped silently.
UNSUPPORTED_CONFIGS = {
    "file_format": "a paimon_upsert model is always a Paimon table",
    "location_root": "Paimon tables live at <warehouse>/<schema>.db/<model>",
    "clustered_by": "use options={'bucket': N, 'bucket-key': ...} for fixed buckets",
    "buckets": "use options={'bucket': N}",
    "tblproperties": "Paimon table options go in options={...}",
    "unique_key_nulls": "primary key columns are NOT NULL in Paimon",
}


@dataclass
class PaimonAdapterResponse(AdapterResponse):
    """What one paimon_upsert did; lands in run_results.json as the node's adapter_response."""

    snapshot_id: Optional[int] = None
    inserted: int = 0
    updated: int = 0
    moved: int = 0
    deleted: int = 0
    skipped: int = 0
    rows_written: int = 0
    table_path: Optional[str] = None
    schema_id: Optional[int] = None
    extra_snapshots: Optional[List[int]] = None  # e.g. a compaction committed right after the upsert
    execution: Optional[str] = None  # where the engine ran the job: local (the driver) or distributed
    bootstrap: Optional[str] = None  # where the job learnt where keys live: "key index" or "table"
    phases: Optional[Dict[str, float]] = None  # seconds by phase of the upsert (UpsertResult.phases)
    attempts: int = 1  # commit attempts: each conflict with another writer's commit is one more
    recommits: int = 0  # conflicts after which the job's files were committed as they were (no re-run)


# ---- before the model runs --------------------------------------------------------------------------

def warn_unsupported(config: Mapping[str, Any], materialization: str = MATERIALIZATION) -> List[str]:
    """Refuse a misspelt config (configs.check_names); warn about configs a paimon_upsert model
    ignores; returns their names."""
    check_names(config, materialization)
    ignored = []
    for name, why in UNSUPPORTED_CONFIGS.items():
        value = config.get(name)
        if value in (None, [], {}, "") or (name == "file_format" and value in ("parquet", "paimon")):
            continue
        ignored.append(name)
        log.warning(f"{materialization}: config {name}={value!r} is ignored: {why}")
    return ignored


def warn_grants(relation: BaseRelation, grant_config: Optional[Mapping[str, Any]]) -> bool:
    """Warn that `grants` cannot be applied (as dbt-duckdb does for its files); True if it warned."""
    if not grant_config:
        return False
    log.warning(f"{relation}: grants {dict(grant_config)} are not applied: a Paimon warehouse on a filesystem "
                f"or object store has no grants (give access through the storage's own permissions)")
    return True


# ---- paimon_upsert ------------------------------------------------------------------------------------

def upsert_model(tables: Tables, relation: BaseRelation, source: BaseRelation, config: Mapping[str, Any],
                 on_schema_change: Optional[str] = "ignore", full_refresh: bool = False,
                 contract: Optional[Mapping[str, Any]] = None, sql: Optional[str] = None) -> PaimonAdapterResponse:
    """Write the rows of the model's query `sql` (a Python model's: its temporary view `source`) into
    the Paimon table of `relation`, creating it first if needed (or anew with full_refresh); one
    snapshot. With a unique_key (or a contract's primary key) the table is a primary-key table and
    the rows are upserted; without, it is an append table and the rows are appended, or replace
    partitions (`insert_overwrite`, incremental.py). `config`: the model's configs (UpsertConfig).
    contract: an enforced contract's constraints ({"constraints": model-level, "columns": model.columns},
    constraints.py)."""
    spark = tables.spark()
    path = tables.path(relation)
    name = f"{relation.schema}.{relation.identifier}"
    given = UpsertConfig.of(name, config)
    materialization = str(config.get("materialized") or MATERIALIZATION)
    on_schema_change = on_schema_change or "ignore"
    if on_schema_change not in evolution.ON_SCHEMA_CHANGE:
        raise DbtRuntimeError(f"{name}: on_schema_change must be one of {', '.join(evolution.ON_SCHEMA_CHANGE)}, "
                              f"got {on_schema_change!r}")
    try:
        # spark.sql reads the Paimon tables the query names through Spark's Parquet reader where
        # no merge is needed (sql/query.py); a temporary view would resolve them to the source
        batch = spark.sql(sql) if sql is not None else spark.table(source.render())
    except Exception as e:  # noqa: BLE001 - any failure of the model's SQL: an error naming the model
        raise DbtRuntimeError(f"{name}: the model's SQL failed: {error_message(e)}") from e
    columns = batch.columns
    keys = _columns(name, "unique_key", given.unique_key, columns)
    not_null: List[str] = []
    if contract is not None:
        keys, not_null = constraints.from_contract(name, contract.get("constraints") or [],
                                                   contract.get("columns") or {}, keys)
        keys = _columns(name, "primary_key constraint", keys, columns)
        not_null = _columns(name, "not_null constraint", not_null, columns)
    write = incremental.choose(name, materialization, given, bool(keys), full_refresh)
    partitions = _columns(name, "partition_by", given.partition_by, columns)
    sequence = _columns(name, "sequence_by", given.sequence_by, columns)
    if len(sequence) > 1:
        raise DbtRuntimeError(f"{name}: sequence_by takes one column, got {sequence}")
    updated = incremental.check_merge_config(name, columns, keys, given.merge_update_columns,
                                             given.merge_exclude_columns) if keys else None
    io = FileIO.get(path)
    exists = FileStoreTable.exists(path, io)
    settings = tables.on_branch(given.settings)
    target = path
    if full_refresh and exists and tables.branch:
        # on the build's branch a rebuild is an overwrite of the branch's rows (main stays as it is),
        # its columns following the model's
        write, on_schema_change = wap.rebuilt_on_branch(write, bool(keys)), "sync_all_columns"
    elif full_refresh and exists:
        target, exists = staging.staged_path(path, "refresh"), False
    evolved: Optional[TableSchema] = None
    try:
        if exists:
            tables.prepare_branch(path, io)
            schema = SchemaManager(io, path, settings.branch).latest()
            _check_keys(name, path, schema, keys, partitions)  # before a schema change commits
            batch, evolved = evolution.apply_on_schema_change(name, path, schema, batch, on_schema_change,
                                                              given.options, sequence)
            if updated is not None or (keys and given.incremental_predicates):
                batch = incremental.merge_batch(name, batch, tables.read(relation), keys,
                                                updated, given.incremental_predicates)
        t0 = time.time()
        if write.upsert:
            result = upsert(batch, target, primary_keys=keys, partition_keys=partitions, options=given.options,
                            sequence_by=sequence[0] if sequence else None, settings=settings,
                            not_null=not_null, replace=write.replace if exists else None)
        else:
            result = append_write(batch, target, mode=write.mode, partition_keys=partitions, options=given.options,
                                  not_null=not_null, settings=settings, where=write.where)
    except Exception as e:  # noqa: BLE001 - nothing of this run may stay behind
        if evolved is not None:
            schema_change.rollback(path, evolved, io)
        if target != path:
            staging.discard(target)
        if isinstance(e, DbtRuntimeError):
            raise
        what = str(e) if isinstance(e, PaimonError) else error_message(e)
        what = what.removesuffix("; nothing was written")  # said once, in front
        raise DbtRuntimeError(f"{materialization} of {name} failed, nothing was written: {what}") from e
    rebuilt = target != path
    if rebuilt:
        staging.swap(target, path)
    tables.resync(relation, path)
    # a `table` model, or --full-refresh, builds the table whole: say so, not "appended" / "inserted"
    built = f"{'replaced' if rebuilt else 'created'} the table: "
    if exists and full_refresh and tables.branch:
        built = f"rebuilt the table on branch '{tables.branch}': "
    message = result.summary() if not full_refresh else (
        built + result.summary() if write.upsert else f"{built}{result.rows_written} rows")
    if not write.upsert:
        log.debug(f"{name}: {result.summary()} in {time.time() - t0:.1f}s (snapshot {result.snapshot_id})")
        return PaimonAdapterResponse(
            _message=message, code=write.code, rows_affected=result.rows_written,
            snapshot_id=result.snapshot_id, inserted=result.rows_written, deleted=result.rows_replaced,
            rows_written=result.rows_written, table_path=path, schema_id=schema_id(path, settings.branch),
            extra_snapshots=list(result.extra_snapshots) or None, execution=result.execution,
            attempts=result.attempts)
    phases = ", ".join(f"{k} {v:.3f}s" for k, v in (result.phases or {}).items())
    log.debug(f"{name}: {result.summary()} in {time.time() - t0:.1f}s (snapshot {result.snapshot_id}, "
              f"{result.attempts} attempt(s), {result.recommits} without a re-run; {phases})")
    return PaimonAdapterResponse(
        _message=message, code=write.code, rows_affected=result.rows_affected,
        snapshot_id=result.snapshot_id, **result.as_dict(), rows_written=result.rows_written, table_path=path,
        schema_id=schema_id(path, settings.branch),
        extra_snapshots=list(getattr(result, "extra_snapshots", None) or []) or None,
        execution=result.execution, bootstrap=(result.bootstrap or {}).get("source"),
        phases=dict(result.phases) or None, attempts=result.attempts, recommits=result.recommits)


def _columns(name: str, what: str, wanted: List[str], columns: List[str]) -> List[str]:
    """Config column names resolved against the model's columns by the engine's one rule
    (case-insensitively, as Spark)."""
    try:
        return resolve_columns(what, wanted, columns)
    except PaimonError as e:
        raise DbtRuntimeError(f"{name}: {e}") from None


def _check_keys(name: str, path: str, schema: TableSchema, keys: List[str], partitions: List[str]) -> None:
    """The engine's check (check_table), its disagreements said in the model's config names."""
    if not keys and schema.primary_keys:
        raise DbtRuntimeError(
            f"{name}: the existing Paimon table at {path} has the primary key {list(schema.primary_keys)} but the "
            f"model gives no unique_key: set unique_key to it, or rebuild the table as an append table with "
            f"--full-refresh (nothing was written)")
    try:
        check_table(schema, keys, partitions, {}, path)
    except TableMismatchError as e:
        config = {"primary key": ("unique_key", "the table's primary key is"),
                  "partition keys": ("partition_by", "the table is partitioned by")}
        problems = [f"{config[what][0]} {given} but {config[what][1]} {stored}"
                    for what, given, stored in e.mismatches]
        raise DbtRuntimeError(
            f"{name}: the model's config disagrees with the existing Paimon table at {path}: "
            f"{'; '.join(problems)}. Keys cannot change in place: rebuild the table with --full-refresh "
            f"(nothing was written)") from None


# ---- dbt clone ------------------------------------------------------------------------------------------

def clone(tables: Tables, relation: BaseRelation, source: BaseRelation, replace: bool = False) -> AdapterResponse:
    """`dbt clone` of a Paimon table: a new table at `relation` with `source`'s latest rows, its
    files shared (store/clone.py); an existing table there is replaced only with `replace`
    (--full-refresh), and then only once the clone is complete."""
    path, source_path = tables.path(relation), tables.path(source)
    name = f"{relation.schema}.{relation.identifier}"
    io = FileIO.get(path)
    staged = path
    if FileStoreTable.exists(path, io):
        if not replace:
            return AdapterResponse(_message=f"CLONE {name}: exists already (nothing done)")
        staged = staging.staged_path(path, "clone")
    try:
        result = clone_table(io, source_path, staged)
    except Exception as e:  # noqa: BLE001 - nothing of this run may stay behind
        staging.remove_tree(staged)
        what = str(e) if isinstance(e, PaimonError) else error_message(e)
        raise DbtRuntimeError(f"clone of {source.schema}.{source.identifier} into {name} failed, nothing was "
                              f"written: {what}") from e
    if staged != path:
        staging.swap(staged, path)
    tables.resync(relation, path)
    log.debug(f"{name}: cloned from {source_path} snapshot {result.source_snapshot}: {result.files} files, "
              f"{result.bytes} bytes shared")
    return AdapterResponse(_message=f"CLONE {name}: {result.files} files of snapshot {result.source_snapshot}",
                           code="CLONE", rows_affected=0)


# ---- docs -----------------------------------------------------------------------------------------------

def persist_docs(tables: Tables, relation: BaseRelation, model: Mapping[str, Any], for_relation: bool,
                 for_columns: bool) -> bool:
    """Write the model's description and column descriptions into the Paimon schema (a new
    schema-N, read by every Paimon reader) and Spark's catalog entry. True when they changed."""
    path = tables.path(relation)
    if not FileStoreTable.exists(path):
        return False
    schema = SchemaManager(FileIO.get(path), path).latest()
    comment = (model.get("description") or "") if for_relation else None
    descriptions = {}
    if for_columns:
        for col_name, col in (model.get("columns") or {}).items():
            descriptions[col.get("name") or col_name] = col.get("description") or ""
        descriptions = {k: v for k, v in descriptions.items() if k.lower() in
                        {n.lower() for n in schema.field_names}}
    docs = schema_change.with_docs(schema, comment, descriptions)
    if docs is None:
        return False
    schema_change.commit(path, docs)
    tables.resync(relation, path)
    return True
