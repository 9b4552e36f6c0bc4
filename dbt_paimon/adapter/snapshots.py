"""dbt snapshots into Paimon primary-key tables: what macros/materializations/snapshot.sql calls.

A snapshot table is a Paimon table keyed on dbt_scd_id (merge engine deduplicate). dbt-core computes
what changed exactly as on every adapter: its staging query (`snapshot_staging_table`) marks rows
`insert`, `update` or `delete`, each with a dbt_scd_id. Where other adapters then run

    MERGE INTO snapshot USING staging ON staging.dbt_scd_id = snapshot.dbt_scd_id
    WHEN MATCHED AND <snapshot row is current> AND dbt_change_type IN ('update', 'delete')
        THEN UPDATE SET dbt_valid_to = staging.dbt_valid_to
    WHEN NOT MATCHED AND dbt_change_type = 'insert' THEN INSERT ...

this module turns the same change set into the rows of one engine upsert, so closing a version and
opening the next land in one Paimon snapshot and no history is rewritten:

  - a version being closed: its stored row, whole, with dbt_valid_to set to the staged value. A
    deduplicate table keeps the last row of a key, so the stored row is replaced by the same row
    with its end date; only the closed versions are written again, never the rest of the history.
  - a new version: the staged row, for a dbt_scd_id the table does not hold yet (MERGE's NOT MATCHED).

Why whole rows and not a `partial-update` table where a closing row carries only dbt_scd_id and
dbt_valid_to: MERGE may set dbt_valid_to to any staged value, null included (a check snapshot
whose updated_at column is null), and partial-update cannot write a null; a deduplicate table is also
what every Paimon reader and writer handles without a merge function, and the stored rows are read
anyway, by dbt's staging query. docs/dbt.md, "Snapshots", has the user's side.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..engine import (EXECUTIONS, Execution, RUN_OPTIONS, RunSettings, TableMismatchError, check_table, fits,
                      from_spark, schema_change, to_spark, upsert)
from ..store import (FileIO, FileStoreTable, MergeEngine, PaimonError, SchemaManager, TableSchema, options as opts,
                     validate_options)
from .connections import error_message
from .tables import Tables, schema_id
from .configs import column_list, quoted


log = AdapterLogger("Paimon")

HARD_DELETES = ("ignore", "invalidate", "new_record")
# dbt's meta columns, by their default names (a snapshot may rename them: snapshot_meta_column_names)
META = ("dbt_scd_id", "dbt_valid_from", "dbt_valid_to", "dbt_updated_at", "dbt_is_deleted")
# columns of dbt's staging query that are not columns of the snapshot table
CHANGE_TYPE = "dbt_change_type"
_STAGING_ONLY = re.compile(r"^(dbt_change_type|dbt_unique_key(_\d+)?)$", re.IGNORECASE)
# table options that would change what a row of the table means: a snapshot table keeps every
# version as written, the last write of a dbt_scd_id winning
_REFUSED_OPTIONS = {
    "merge-engine": "closing a version replaces its row, which needs merge-engine 'deduplicate'",
    "rowkind.field": "a snapshot never deletes rows: hard deletes close versions (hard_deletes)",
    "sequence.field": "the latest write of a dbt_scd_id must win",
}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class SnapshotResponse(AdapterResponse):
    """What one `dbt snapshot` of a model did; run_results.json's adapter_response."""

    snapshot_id: Optional[int] = None  # the Paimon snapshot committed; None when nothing changed
    opened: int = 0  # new versions (rows inserted)
    closed: int = 0  # versions whose dbt_valid_to was set
    rows_written: int = 0
    table_path: Optional[str] = None
    schema_id: Optional[int] = None
    added_columns: Optional[List[str]] = None  # columns the query gained, added to the Paimon schema
    extra_snapshots: Optional[List[int]] = None  # e.g. Paimon's compaction right after the commit
    execution: Optional[str] = None


def _name(relation: BaseRelation) -> str:
    return f"{relation.schema}.{relation.identifier}"


def _col(df: DataFrame, name: str) -> Column:
    return df[quoted(name)]


def meta_columns(columns: Mapping[str, str]) -> Dict[str, str]:
    """dbt's meta column names as this snapshot spells them (snapshot_meta_column_names)."""
    return {m: str((columns or {}).get(m) or m) for m in META}


def _resolve(name: str, columns: Sequence[str]) -> Optional[str]:
    lower = {c.lower(): c for c in columns}
    return lower.get(name.lower())


# ---- checks: everything a run cannot honour is refused before anything is written ------------------

def check(tables: Tables, relation: BaseRelation, config: Mapping[str, Any], columns: Mapping[str, str],
          hard_deletes_behavior: Callable[[Mapping[str, Any]], str], sql: Optional[str] = None) -> None:
    """Refuse a snapshot this adapter cannot apply, in words, before any file is written.

    Without `sql`: the configuration alone (run before the pre-hooks). With `sql` (the snapshot's
    compiled query): also the query's columns against updated_at, check_cols, unique_key, the meta
    column names and partition_by, and an existing table against the configuration.
    hard_deletes_behavior: dbt's reading of the hard_deletes configs (the adapter's)."""
    try:
        mode, meta, used, options = _check_config(relation, config, columns, hard_deletes_behavior)
        if sql is not None:
            _check_query(tables, relation, config, meta, used, mode, sql, options)
    except DbtRuntimeError as e:
        raise DbtRuntimeError(f"{e.msg}; nothing was written") from None


def _check_config(relation: BaseRelation, config: Mapping[str, Any], columns: Mapping[str, str],
                  hard_deletes_behavior: Callable[[Mapping[str, Any]], str]
                  ) -> Tuple[str, Dict[str, str], List[str], Mapping[str, Any]]:
    name = _name(relation)
    file_format = config.get("file_format")
    if file_format not in (None, "") and str(file_format).lower() != "paimon":
        raise DbtRuntimeError(
            f"snapshot {name}: file_format={file_format!r} is not available: on dbt-paimon a snapshot is always a "
            f"Paimon table (keyed on dbt_scd_id). Remove file_format from the snapshot's config or set it to 'paimon'")
    hard_deletes = config.get("hard_deletes")
    if hard_deletes is not None and hard_deletes not in HARD_DELETES:
        raise DbtRuntimeError(f"snapshot {name}: hard_deletes must be one of {', '.join(HARD_DELETES)}, "
                              f"got {hard_deletes!r}")
    try:
        mode = hard_deletes_behavior(config)  # also refuses invalidate_hard_deletes with hard_deletes
    except Exception as e:  # noqa: BLE001 - dbt's validation error, said with the snapshot's name
        raise DbtRuntimeError(f"snapshot {name}: {e}") from None
    execution = config.get("execution")
    if execution is not None and execution not in tuple(Execution):
        raise DbtRuntimeError(f"snapshot {name}: execution must be one of {', '.join(EXECUTIONS)}, got {execution!r}")
    options = config.get("options") or {}
    if not isinstance(options, Mapping):
        raise DbtRuntimeError(f"snapshot {name}: options must be a mapping of Paimon table options, got {options!r}")
    for key, why in _REFUSED_OPTIONS.items():
        value = options.get(key)
        if value is not None and not (key == "merge-engine" and str(value) == MergeEngine.DEDUPLICATE.value):
            raise DbtRuntimeError(f"snapshot {name}: table option {key}={value!r} is not available on a snapshot "
                                  f"table: {why}")
    meta = meta_columns(columns)
    used = [meta[m] for m in META if m != "dbt_is_deleted" or mode == "new_record"]
    if len({c.lower() for c in used}) != len(used):
        raise DbtRuntimeError(f"snapshot {name}: snapshot_meta_column_names gives one name to two columns: {used}")
    return mode, meta, used, options


def _check_query(tables: Tables, relation: BaseRelation, config: Mapping[str, Any], meta: Dict[str, str],
                 used: List[str], mode: str, sql: str, options: Mapping[str, Any]) -> None:
    name = _name(relation)
    spark = tables.spark()
    try:  # analysis only: no Spark job runs
        query_columns = spark.sql(sql).columns
    except Exception as e:  # noqa: BLE001 - any failure of the user's query: an error naming the snapshot
        raise DbtRuntimeError(f"snapshot {name}: the snapshot's query failed: {error_message(e)}") from e
    listed = ", ".join(query_columns)
    clash = [c for c in used if _resolve(c, query_columns)]
    if clash:
        raise DbtRuntimeError(
            f"snapshot {name}: the snapshot's query already returns column(s) {clash}, which dbt adds to every "
            f"snapshot row; rename them in the query (or the meta columns with snapshot_meta_column_names)")
    strategy = config.get("strategy")
    if strategy == "timestamp":
        updated_at = config.get("updated_at")
        if updated_at and _IDENTIFIER.match(str(updated_at)) and not _resolve(str(updated_at), query_columns):
            raise DbtRuntimeError(f"snapshot {name}: updated_at column {updated_at!r} is not a column of the "
                                  f"snapshot's query (columns: {listed})")
    elif strategy == "check":
        check_cols = config.get("check_cols")
        if check_cols != "all":
            missing = [c for c in column_list(check_cols) if not _resolve(c, query_columns)]
            if missing or not column_list(check_cols):
                raise DbtRuntimeError(
                    f"snapshot {name}: check_cols {missing or check_cols!r} {'are' if len(missing) > 1 else 'is'} "
                    f"not {'columns' if len(missing) > 1 else 'a column'} of the snapshot's query (columns: {listed})")
    unique_key = config.get("unique_key")
    keys = [str(k) for k in unique_key] if isinstance(unique_key, (list, tuple)) else [str(unique_key or "")]
    if all(k.strip() for k in keys):
        # unique_key may be an expression (dbt's own tests use `id || '-' || first_name`): analyse it
        # over the query, as the staging query will use it
        select = ", ".join(f"{k} as __dbt_paimon_key_{i}" for i, k in enumerate(keys))
        try:
            spark.sql(f"select {select} from (\n{sql}\n) __dbt_paimon_query")
        except Exception as e:  # noqa: BLE001 - any failure: the error names the unique_key
            raise DbtRuntimeError(f"snapshot {name}: unique_key {unique_key!r} is not a column or "
                                  f"expression of the snapshot's query (columns: {listed}): "
                                  f"{error_message(e).splitlines()[0]}") from e  # Spark's plan after it: left out
    table_columns = list(query_columns) + used
    partitions = column_list(config.get("partition_by"))
    missing = [p for p in partitions if not _resolve(p, table_columns)]
    if missing:
        raise DbtRuntimeError(f"snapshot {name}: partition_by column(s) {missing} are not columns of the snapshot "
                              f"table (columns: {', '.join(table_columns)})")
    try:
        given, _ = opts.count_sugar(options)
        given = validate_options(given, table_columns) if given else {}
        given = {k: v for k, v in given.items() if k not in RUN_OPTIONS}  # may differ between runs
    except PaimonError as e:
        raise DbtRuntimeError(f"snapshot {name}: {e}") from None
    path = tables.path(relation)
    if FileStoreTable.exists(path):
        _check_table(name, path, SchemaManager(FileIO.get(path), path).latest(), meta, partitions, given)


def _check_table(name: str, path: str, schema: TableSchema, meta: Dict[str, str], partitions: List[str],
                 options: Mapping[str, str]) -> None:
    """An existing Paimon table must be a snapshot table of this configuration: keyed on dbt_scd_id,
    deduplicating, partitioned as configured, with the options given."""
    scd_id = meta["dbt_scd_id"]
    if [k.lower() for k in schema.primary_keys] != [scd_id.lower()]:
        raise DbtRuntimeError(
            f"snapshot {name}: the Paimon table at {path} is not a snapshot table: its primary key is "
            f"{list(schema.primary_keys)}, a snapshot table's is [{scd_id!r}]; drop it or give the snapshot another "
            f"name")
    if schema.core.merge_engine != MergeEngine.DEDUPLICATE:
        raise DbtRuntimeError(f"snapshot {name}: the Paimon table at {path} has merge-engine "
                              f"{schema.core.merge_engine!s}; a snapshot table needs 'deduplicate'")
    try:
        check_table(schema, [], partitions, options, path)
    except TableMismatchError as e:
        problems = []
        for what, given, stored in e.mismatches:
            if what == "partition keys":
                problems.append(f"partition_by {given} but the table is partitioned by {stored}")
            else:
                problems.append(f"option {what}={given!r} but the table has {stored!r}")
        raise DbtRuntimeError(
            f"snapshot {name}: the snapshot's config disagrees with its Paimon table at {path}: {'; '.join(problems)}. "
            f"A snapshot table holds history that cannot be rebuilt from the source, so it is never rebuilt "
            f"implicitly: change the config back, or drop the table yourself") from None


# ---- the run -----------------------------------------------------------------------------------------

def stored_view(tables: Tables, relation: BaseRelation) -> BaseRelation:
    """A temporary view of the snapshot table's rows, kept by Spark after their first read, for
    dbt's staging query to read instead of the table: that query reads it up to four times
    (current versions for inserts, updates, deletes, deletion records) and `_changes` twice more,
    and each read of the table itself would read its files again. Released by `apply` (a run that
    fails before it, by the next run of the snapshot). Named after schema and table: snapshots of
    one name in two schemas may run at once (threads), and temporary views have no schema."""
    spark = tables.spark()
    view = f"{relation.schema}__{relation.identifier}__dbt_snapshot_stored"
    _release(spark, view)
    # a view of this DataFrame's plan, so every query of the view finds the cached data
    tables.read(relation).persist(StorageLevel.MEMORY_AND_DISK).createOrReplaceTempView(view)
    return tables.Relation.create(identifier=view, type="view")


def _release(spark: Any, view: str) -> None:
    if spark.catalog.tableExists(view):
        spark.table(view).unpersist()
        spark.catalog.dropTempView(view)


def apply(tables: Tables, relation: BaseRelation, source: BaseRelation, columns: Mapping[str, str], *,
          created: bool, stored: Optional[BaseRelation] = None, partition_by: Any = None,
          options: Optional[Mapping[str, Any]] = None, execution: Optional[str] = None,
          valid_to_current: Optional[str] = None) -> SnapshotResponse:
    """One `dbt snapshot` of one snapshot: `source` is the temporary view of dbt's rows, the whole
    first snapshot (`created`: build_snapshot_table) or the staging query's change set over the
    table's rows in `stored` (stored_view). One Paimon snapshot when something changed, none otherwise."""
    spark = tables.spark()
    try:
        return _apply(tables, spark, relation, source, columns, created, stored, partition_by, options, execution,
                      valid_to_current)
    finally:
        if stored is not None:
            _release(spark, stored.identifier)


def _apply(tables: Tables, spark: Any, relation: BaseRelation, source: BaseRelation,
           columns: Mapping[str, str], created: bool, stored: Optional[BaseRelation], partition_by: Any,
           options: Optional[Mapping[str, Any]], execution: Optional[str],
           valid_to_current: Optional[str]) -> SnapshotResponse:
    name = _name(relation)
    path = tables.path(relation)
    meta = meta_columns(columns)
    io = FileIO.get(path)
    try:
        staged = spark.table(source.render())
    except Exception as e:  # noqa: BLE001 - any failure of the user's query: an error naming the snapshot
        raise DbtRuntimeError(f"snapshot {name}: the snapshot's query failed: {error_message(e)}") from e
    evolved: Optional[TableSchema] = None
    added: List[str] = []
    t0 = time.time()
    try:
        tables.prepare_branch(path, io)
        if created:
            batch = staged
        else:
            schema = SchemaManager(io, path, tables.branch).latest()
            target = spark.table(stored.render()) if stored is not None else tables.read(relation)
            batch, new_fields = _changes(name, target, staged, schema, meta, valid_to_current)
            # evaluated once, now: the rows read the table this run is about to change
            batch = batch.localCheckpoint(eager=True)
            unchanged = batch.isEmpty()
            if new_fields:  # as dbt-core adds them, whether or not a version changes
                evolved = schema_change.commit(path, schema_change.evolve(schema, add=new_fields), io)
                added = [f.name for f in new_fields]
                log.info(f"{name}: Paimon schema {evolved.id}: added {added} (new columns of the snapshot's query)")
            if unchanged:
                log.debug(f"{name}: no version changed, no Paimon snapshot written ({time.time() - t0:.1f}s)")
                if evolved is not None:
                    tables.resync(relation, path)
                return SnapshotResponse(
                    _message="SNAPSHOT 0: no changes" + (f", added column(s) {', '.join(added)}" if added else ""),
                    code="SNAPSHOT", rows_affected=0, table_path=path, schema_id=schema_id(path, tables.branch),
                    added_columns=added or None)
        settings, table_options = RunSettings.from_options(options, RunSettings(execution=execution or Execution.AUTO))
        settings = tables.on_branch(settings)
        result = upsert(batch, path, primary_keys=[meta["dbt_scd_id"]], partition_keys=column_list(partition_by),
                        options=table_options, settings=settings)
    except Exception as e:  # noqa: BLE001 - nothing of this run may stay behind
        if evolved is not None:
            schema_change.rollback(path, evolved, io)
        if isinstance(e, DbtRuntimeError):
            raise
        what = str(e) if isinstance(e, PaimonError) else error_message(e)
        what = what.removesuffix("; nothing was written")  # said once, in front
        if "duplicate row" in what:
            what = (f"two rows of this run share a {meta['dbt_scd_id']} (is unique_key unique in the snapshot's "
                    f"query?): {what}")
        raise DbtRuntimeError(f"snapshot of {name} failed, nothing was written: {what}") from e
    tables.resync(relation, path)
    closed = result.updated + result.moved
    message = f"SNAPSHOT {result.inserted + closed}: {result.inserted} opened, {closed} closed"
    log.debug(f"{name}: {message} in {time.time() - t0:.1f}s (Paimon snapshot {result.snapshot_id})")
    return SnapshotResponse(
        _message=message, code="SNAPSHOT", rows_affected=result.inserted + closed, snapshot_id=result.snapshot_id,
        opened=result.inserted, closed=closed, rows_written=result.rows_written, table_path=path,
        schema_id=schema_id(path, tables.branch), added_columns=added or None,
        extra_snapshots=list(result.extra_snapshots or []) or None, execution=result.execution)


def _changes(name: str, target: DataFrame, staged: DataFrame, schema: TableSchema, meta: Dict[str, str],
             valid_to_current: Optional[str]) -> Tuple[DataFrame, List[T.StructField]]:
    """The rows of MERGE's effect (see the module's docstring) and the columns to add to the table."""
    scd_id = _resolve(meta["dbt_scd_id"], schema.field_names)
    valid_to = _resolve(meta["dbt_valid_to"], schema.field_names)
    if scd_id is None or valid_to is None:
        raise DbtRuntimeError(f"snapshot {name}: the Paimon table has no {meta['dbt_scd_id']!r} or "
                              f"{meta['dbt_valid_to']!r} column: it is not a snapshot table")
    change = _resolve(CHANGE_TYPE, staged.columns)
    staged_scd = _resolve(meta["dbt_scd_id"], staged.columns)
    staged_valid_to = _resolve(meta["dbt_valid_to"], staged.columns)
    if change is None or staged_scd is None or staged_valid_to is None:
        raise DbtRuntimeError(f"snapshot {name}: dbt's staging query lacks {CHANGE_TYPE}, {meta['dbt_scd_id']} or "
                              f"{meta['dbt_valid_to']}")
    row_columns = [c for c in staged.columns if not _STAGING_ONLY.match(c)]
    by_name = {f.name.lower(): f for f in staged.schema.fields}
    table_names = {n.lower() for n in schema.field_names}
    new_fields = [by_name[c.lower()] for c in row_columns if c.lower() not in table_names]
    # dbt's columns take MERGE's assignment cast (a DATE updated_at column gets the run's timestamp
    # as a date when a hard delete closes a version); the query's columns must fit losslessly
    meta_names = {v.lower() for v in meta.values()}
    cast: Dict[str, T.DataType] = {}
    for field in schema.fields:
        given = by_name.get(field.name.lower())
        if given is None or fits(given.dataType, field.type):
            continue
        if field.name.lower() in meta_names:
            cast[field.name.lower()] = to_spark(field.type)
            continue
        raise DbtRuntimeError(
            f"snapshot {name}: column {field.name!r} is {field.type.sql()} in the snapshot table but "
            f"{given.dataType.simpleString()} in the snapshot's query; a snapshot table's columns keep their types "
            f"(cast it in the query); nothing was written")
    for f in new_fields:  # refused before the schema changes: a type the store cannot hold
        try:
            from_spark(f.dataType, f.name)
        except PaimonError as e:
            raise DbtRuntimeError(f"snapshot {name}: {e}") from None

    current = _col(target, valid_to).isNull()
    if valid_to_current:
        current = current | (_col(target, valid_to) == F.expr(str(valid_to_current)))
    closes = (staged.where(_col(staged, change).isin("update", "delete"))
              .select(_col(staged, staged_scd).alias("__dbt_paimon_scd_id"),
                      _col(staged, staged_valid_to).alias("__dbt_paimon_valid_to")))
    closing = (target.where(current)
               .join(closes, _col(target, scd_id) == closes["__dbt_paimon_scd_id"])
               .select(*[closes["__dbt_paimon_valid_to"].cast(to_spark(schema.field(valid_to).type)).alias(valid_to)
                         if c == valid_to else _col(target, c) for c in schema.field_names]))
    stored = target.select(_col(target, scd_id).alias("__dbt_paimon_scd_id"))
    inserts = (staged.where(_col(staged, change) == "insert")
               .join(stored, _col(staged, staged_scd) == stored["__dbt_paimon_scd_id"], "left_anti"))
    staged_names = {c.lower(): c for c in row_columns}
    values = []
    for field in schema.fields:  # a table column the query no longer has: null, as MERGE inserts it
        c = staged_names.get(field.name.lower())
        value = F.lit(None).cast(to_spark(field.type)) if c is None else _col(inserts, c)
        if c is not None and field.name.lower() in cast:
            value = value.cast(cast[field.name.lower()])
        values.append(value.alias(field.name))
    values += [_col(inserts, f.name) for f in new_fields]
    opening = inserts.select(*values)
    for f in new_fields:
        closing = closing.withColumn(f.name, F.lit(None).cast(f.dataType))
    return closing.unionByName(opening), new_fields
