"""PaimonAdapter: dbt-spark's adapter plus the Paimon tables of one warehouse.

The Jinja side (macros/) orchestrates a model as dbt-spark's materializations do (hooks, relations,
temporary view, grants, docs); the work on Paimon tables is done here, through the engine and the
store, and reported back to dbt as an adapter response.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Union

from dbt.adapters.base import available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import SparkAdapter, SparkConfig
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..engine import upsert
from ..engine.upsert import TableMismatchError, check_table
from ..engine.settings import EXECUTIONS, Execution, RunSettings
from ..engine.spark_types import spark_schema
from ..store import options as opts
from ..store.errors import PaimonError
from ..store import fileio, key_index
from ..store.fileio import FileIO
from ..store.object_store import copy_tree
from ..store.clone import clone_table
from ..store.commit import FileStoreCommit
from ..store.schema import SchemaManager, TableSchema, resolve_columns
from ..store.table import FileStoreTable
from . import catalog, constraints, evolution, incremental, maintenance, python_models, snapshots
from .connections import PaimonConnectionManager, error_message
from .credentials import PaimonCredentials
from .relation import PaimonRelation
from .session import spark_for
from .configs import column_list

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
class PaimonConfig(SparkConfig):
    unique_key: Optional[Union[str, List[str]]] = None
    sequence_by: Optional[str] = None
    execution: Optional[str] = None  # the engine's: auto | local | distributed
    key_index: Optional[bool] = None  # cross-partition tables: bootstrap from the key index (default true)


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


class PaimonAdapter(SparkAdapter):
    Relation = PaimonRelation  # type: ignore[assignment]
    ConnectionManager = PaimonConnectionManager  # type: ignore[assignment]
    AdapterSpecificConfigs = PaimonConfig  # type: ignore[assignment]

    # ---- plumbing ------------------------------------------------------------------------------
    @property
    def credentials(self) -> PaimonCredentials:
        return self.config.credentials  # type: ignore[return-value]

    def spark(self) -> SparkSession:
        return spark_for(self.credentials)

    def list_relations_without_caching(self, schema_relation: BaseRelation):  # type: ignore[override]
        # dbt lists every schema of the project before a run: a schema name that leads out of the
        # warehouse is refused here in words, not by Spark's SQL parser
        self.paimon_check_relation(schema_relation)
        return super().list_relations_without_caching(schema_relation)

    def _build_spark_relation_list(self, row_list, relation_info_func):  # type: ignore[override]
        relations = super()._build_spark_relation_list(row_list, relation_info_func)
        return [r.incorporate(is_paimon=f"Provider: {catalog.PROVIDER_PREFIX}" in (r.information or ""))
                for r in relations]

    def _get_columns_for_catalog(self, relation: BaseRelation):  # type: ignore[override]
        """Catalog rows of a Paimon table from its Paimon schema: Spark SQL types as `describe`
        shows them, and the table's and columns' comments (dbt-spark's parsing has neither)."""
        path = self.paimon_table_path(relation) if getattr(relation, "is_paimon", False) else None
        if not path or not FileStoreTable.exists(path):
            yield from super()._get_columns_for_catalog(relation)
            return
        io = FileIO.get(path)
        schema = SchemaManager(io, path).latest()
        owner = re.search(r"^Owner: (.*)$", getattr(relation, "information", None) or "", re.MULTILINE)
        types = spark_schema(schema)
        stats = _table_stats(path, schema, io)
        for index, (field, spark_field) in enumerate(zip(schema.fields, types.fields)):
            yield {
                **stats,
                "table_database": None,
                "table_schema": relation.schema,
                "table_name": relation.identifier,
                "table_type": relation.type,
                "table_owner": owner.group(1).strip() if owner else None,
                "table_comment": schema.comment,
                "column_name": field.name,
                "column_index": index,
                "column_type": spark_field.dataType.simpleString(),
                "column_comment": field.description,
            }

    # ---- Python models (python_models.py): run in this process's SparkSession ----------------------
    @property
    def default_python_submission_method(self) -> str:
        return python_models.SUBMISSION_METHOD

    @property
    def python_submission_helpers(self) -> Dict[str, Any]:
        return {python_models.SUBMISSION_METHOD: python_models.SessionPythonJobHelper}

    def generate_python_submission_response(self, submission_result: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK")

    @available
    def paimon_run_python_model(self, model: Dict[str, Any], compiled_code: str) -> AdapterResponse:
        """A Paimon materialization's Python model step (dbt lets `statement(language='python')`
        run only directly inside a materialization; ours runs inside its shared macro)."""
        return self.submit_python_job(model, compiled_code)

    def valid_incremental_strategies(self) -> List[str]:
        return ["append", "merge", "insert_overwrite", "microbatch", MATERIALIZATION]

    @classmethod
    def _get_adapter_specific_run_info(cls, config: Any) -> Dict[str, Any]:
        return {"adapter_type": "paimon", "table_format": "paimon"}

    # ---- paths ---------------------------------------------------------------------------------
    @available
    def paimon_table_path(self, relation: BaseRelation) -> str:
        """Where the Paimon table of a relation lives: <warehouse>/<schema>.db/<identifier>; a
        relation whose names would lead outside the warehouse is refused here, before any file
        is touched (every path of a relation is built by this method)."""
        try:
            return catalog.table_path(self.credentials.warehouse, relation.schema or "", relation.identifier or "")
        except PaimonError as e:
            raise DbtRuntimeError(f"relation {relation}: {e}") from None

    def _schema_path(self, relation: BaseRelation) -> str:
        try:
            return catalog.schema_dir(self.credentials.warehouse, relation.schema or "")
        except PaimonError as e:
            raise DbtRuntimeError(f"schema {relation.schema!r}: {e}") from None

    @available
    def paimon_check_relation(self, relation: BaseRelation) -> str:
        """Refuse a relation whose schema or name could reach files outside the warehouse; called
        first by every relation macro (drop, create schema, rename), also before dbt-spark's SQL."""
        if relation.identifier:
            self.paimon_table_path(relation)
        elif relation.schema is not None:
            self._schema_path(relation)
        return ""

    @available
    def paimon_table_exists(self, relation: BaseRelation) -> bool:
        return FileStoreTable.exists(self.paimon_table_path(relation))

    # ---- catalog -------------------------------------------------------------------------------
    def _expose(self, relation: BaseRelation, path: str) -> None:
        table = catalog.load(relation.schema, relation.identifier, path)
        if table is not None:
            catalog.expose(self.spark(), table)
            self.cache_added(self.Relation.create(schema=relation.schema, identifier=relation.identifier,
                                                  type="table", is_paimon=True))

    def _resync(self, relation: BaseRelation, path: str) -> None:
        """After a commit: the catalog entry follows the table. The change is done whatever happens
        here, so a failure is a warning (the next connection's sync repairs the entry), never an
        error that would report a committed change as failed."""
        try:
            self._expose(relation, path)
        except Exception as e:  # noqa: BLE001
            log.warning(f"{relation.schema}.{relation.identifier}: the change was committed, but Spark's catalog "
                        f"entry could not be refreshed ({error_message(e)}); it is repaired on the next connection")

    @available
    def paimon_drop_table(self, relation: BaseRelation) -> None:
        """Drop the catalog entry and delete the Paimon table's files."""
        spark = self.spark()
        entry = catalog.catalog_entry(spark, relation.schema, relation.identifier)
        if entry is not None:
            catalog.drop_entry(spark, entry)
        path = self.paimon_table_path(relation)
        if FileStoreTable.exists(path):
            _remove_tree(path)
            log.debug(f"dropped Paimon table {path}")
        _remove_tree(key_index.index_dir(path))  # the engine's key index beside it (store/key_index.py)
        self.cache_dropped(relation)

    @available
    def paimon_drop_schema(self, relation: BaseRelation) -> None:
        """After `drop schema ... cascade`: delete the schema's Paimon tables too."""
        _remove_tree(self._schema_path(relation))

    @available
    def paimon_create_schema(self, relation: BaseRelation) -> None:
        path = self._schema_path(relation)
        FileIO.get(path).mkdirs(path)

    # ---- the materialization -------------------------------------------------------------------
    @available
    def paimon_table_format(self, materialization: str, file_format: Optional[str] = None,
                            strategy: Optional[str] = None) -> str:
        """'paimon' when the model is kept in a Paimon table, else 'spark' (incremental.py)."""
        return incremental.table_format(materialization, file_format, strategy)

    @available
    def paimon_warn_unsupported(self, config: Mapping[str, Any], materialization: str = MATERIALIZATION) -> List[str]:
        """Warn about configs a paimon_upsert model ignores; returns their names."""
        ignored = []
        for name, why in UNSUPPORTED_CONFIGS.items():
            value = config.get(name)
            if value in (None, [], {}, "") or (name == "file_format" and value in ("parquet", "paimon")):
                continue
            ignored.append(name)
            log.warning(f"{materialization}: config {name}={value!r} is ignored: {why}")
        return ignored

    @available
    def paimon_warn_grants(self, relation: BaseRelation, grant_config: Optional[Mapping[str, Any]]) -> bool:
        """Warn that `grants` cannot be applied (as dbt-duckdb does for its files); True if it warned."""
        if not grant_config:
            return False
        log.warning(f"{relation}: grants {dict(grant_config)} are not applied: a Paimon warehouse on a filesystem "
                    f"or object store has no grants (give access through the storage's own permissions)")
        return True

    @available
    def paimon_upsert(self, relation: BaseRelation, source: BaseRelation, unique_key: Any = None,
                      partition_by: Any = None, options: Optional[Mapping[str, Any]] = None,
                      sequence_by: Optional[str] = None, execution: Optional[str] = None,
                      on_schema_change: Optional[str] = "ignore",
                      full_refresh: bool = False, merge_update_columns: Any = None,
                      merge_exclude_columns: Any = None, incremental_predicates: Any = None,
                      contract: Optional[Mapping[str, Any]] = None,
                      key_index: Any = None) -> PaimonAdapterResponse:
        """Upsert the rows of `source` (the model's temporary view) into the Paimon table of
        `relation`, creating it first if needed (or anew with full_refresh); one snapshot.
        merge_update_columns / merge_exclude_columns / incremental_predicates: the merge
        strategy's column rules (incremental.py). contract: an enforced contract's constraints
        ({"constraints": model-level, "columns": model.columns}, constraints.py)."""
        spark = self.spark()
        path = self.paimon_table_path(relation)
        name = f"{relation.schema}.{relation.identifier}"
        on_schema_change = on_schema_change or "ignore"
        if execution is not None and execution not in tuple(Execution):
            raise DbtRuntimeError(f"{name}: execution must be one of {', '.join(EXECUTIONS)}, got {execution!r}")
        if key_index not in (None, True, False):
            raise DbtRuntimeError(f"{name}: key_index must be true or false, got {key_index!r}")
        if on_schema_change not in evolution.ON_SCHEMA_CHANGE:
            raise DbtRuntimeError(f"{name}: on_schema_change must be one of {', '.join(evolution.ON_SCHEMA_CHANGE)}, "
                                  f"got {on_schema_change!r}")
        try:
            batch = spark.table(source.render())
        except Exception as e:  # noqa: BLE001
            raise DbtRuntimeError(f"{name}: the model's SQL failed: {error_message(e)}") from e
        columns = batch.columns
        keys = self._columns(name, "unique_key", column_list(unique_key), columns)
        not_null: List[str] = []
        if contract is not None:
            keys, not_null = constraints.from_contract(name, contract.get("constraints") or [],
                                                       contract.get("columns") or {}, keys)
            keys = self._columns(name, "primary_key constraint", keys, columns)
            not_null = self._columns(name, "not_null constraint", not_null, columns)
        if not keys:
            raise DbtRuntimeError(
                f"{name}: a {MATERIALIZATION} model needs unique_key (a column or a list of columns): it is the "
                f"Paimon table's primary key, and Paimon keeps primary-key tables")
        partitions = self._columns(name, "partition_by", column_list(partition_by), columns)
        sequence = self._columns(name, "sequence_by", column_list(sequence_by), columns)
        if len(sequence) > 1:
            raise DbtRuntimeError(f"{name}: sequence_by takes one column, got {sequence}")
        updated = incremental.check_merge_config(name, columns, keys, merge_update_columns, merge_exclude_columns)
        io = FileIO.get(path)
        exists = FileStoreTable.exists(path, io)
        target = path
        if full_refresh and exists:
            parent, base = path.rsplit("/", 1) if fileio.scheme_of(path) else os.path.split(path)
            target = f"{parent}/.{base}.dbt-refresh-{uuid.uuid4().hex[:8]}"
            exists = False
        evolved: Optional[TableSchema] = None
        try:
            if exists:
                schema = SchemaManager(io, path).latest()
                self._check_keys(name, path, schema, keys, partitions)  # before a schema change commits
                batch, evolved = self._apply_schema_change(name, path, schema, batch, on_schema_change, options or {},
                                                           sequence)
                if updated is not None or incremental_predicates:
                    batch = incremental.merge_batch(name, batch, spark.read.format("paimon").load(path), keys,
                                                    updated, incremental_predicates)
            t0 = time.time()
            settings = RunSettings(execution=execution or Execution.AUTO, key_index=key_index is not False)
            result = upsert(batch, target, primary_keys=keys, partition_keys=partitions, options=options or {},
                            sequence_by=sequence[0] if sequence else None, settings=settings, not_null=not_null)
        except Exception as e:  # noqa: BLE001 - nothing of this run may stay behind
            if evolved is not None:
                evolution.rollback(path, evolved, io)
            if target != path:
                _remove_tree(target)
                _remove_tree(key_index.index_dir(target))
            if isinstance(e, DbtRuntimeError):
                raise
            what = str(e) if isinstance(e, PaimonError) else error_message(e)
            raise DbtRuntimeError(f"{MATERIALIZATION} of {name} failed, nothing was written: {what}") from e
        if target != path:
            _swap(target, path)
        self._resync(relation, path)
        phases = ", ".join(f"{k} {v:.3f}s" for k, v in (result.phases or {}).items())
        log.debug(f"{name}: {result.summary()} in {time.time() - t0:.1f}s (snapshot {result.snapshot_id}, "
                  f"{result.attempts} attempt(s); {phases})")
        return PaimonAdapterResponse(
            _message=result.summary(), code="UPSERT", rows_affected=result.rows_affected,
            snapshot_id=result.snapshot_id, **result.as_dict(), rows_written=result.rows_written, table_path=path,
            schema_id=self._schema_id(path),
            extra_snapshots=list(getattr(result, "extra_snapshots", None) or []) or None,
            execution=result.execution, bootstrap=(result.bootstrap or {}).get("source"),
            phases=dict(result.phases) or None)

    @available
    def paimon_clone(self, relation: BaseRelation, source: BaseRelation, replace: bool = False) -> AdapterResponse:
        """`dbt clone` of a Paimon table: a new table at `relation` with `source`'s latest rows, its
        files shared (store/clone.py); an existing table there is replaced only with `replace`
        (--full-refresh), and then only once the clone is complete."""
        path, source_path = self.paimon_table_path(relation), self.paimon_table_path(source)
        name = f"{relation.schema}.{relation.identifier}"
        io = FileIO.get(path)
        staged = path
        if FileStoreTable.exists(path, io):
            if not replace:
                return AdapterResponse(_message=f"CLONE {name}: exists already (nothing done)")
            parent, base = path.rsplit("/", 1) if fileio.scheme_of(path) else os.path.split(path)
            staged = f"{parent}/.{base}.dbt-clone-{uuid.uuid4().hex[:8]}"
        try:
            result = clone_table(io, source_path, staged)
        except Exception as e:  # noqa: BLE001 - nothing of this run may stay behind
            _remove_tree(staged)
            what = str(e) if isinstance(e, PaimonError) else error_message(e)
            raise DbtRuntimeError(f"clone of {source.schema}.{source.identifier} into {name} failed, nothing was "
                                  f"written: {what}") from e
        if staged != path:
            _swap(staged, path)
        self._resync(relation, path)
        log.debug(f"{name}: cloned from {source_path} snapshot {result.source_snapshot}: {result.files} files, "
                  f"{result.bytes} bytes shared")
        return AdapterResponse(_message=f"CLONE {name}: {result.files} files of snapshot {result.source_snapshot}",
                               code="CLONE", rows_affected=0)

    @staticmethod
    def _schema_id(path: str) -> Optional[int]:
        """For the run result only: a failure to read it back must not report the commit as failed."""
        try:
            return SchemaManager(FileIO.get(path), path).latest().id
        except Exception:  # noqa: BLE001
            return None

    @staticmethod
    def _columns(name: str, what: str, wanted: List[str], columns: List[str]) -> List[str]:
        """Config column names resolved against the model's columns by the engine's one rule
        (case-insensitively, as Spark)."""
        try:
            return resolve_columns(what, wanted, columns)
        except PaimonError as e:
            raise DbtRuntimeError(f"{name}: {e}") from None

    @staticmethod
    def _check_keys(name: str, path: str, schema: TableSchema, keys: List[str], partitions: List[str]) -> None:
        """The engine's check (check_table), its disagreements said in the model's config names."""
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

    def _apply_schema_change(self, name: str, path: str, schema: TableSchema, batch: DataFrame, mode: str,
                             options: Mapping[str, Any], sequence: List[str]):
        """The batch to write and the evolved schema (committed), per on_schema_change."""
        change = evolution.diff(schema, batch.schema)
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
                widened = evolution.widened(old, new)
                if widened is None:
                    raise DbtRuntimeError(
                        f"{name}: column {col!r} is {old.sql()} in the Paimon table and cannot become "
                        f"{new.simpleString()} in place (only lossless widenings are applied); cast it in the "
                        f"model or rebuild the table with --full-refresh")
                retype[col] = widened
        drop = change.removed if mode == "sync_all_columns" else []
        # The model may read its own table ({{ this }}): evaluate it against the table as it is now,
        # before its schema (and so its catalog entry) changes under the running job.
        batch = batch.localCheckpoint(eager=True)
        new_options = {k: v for k, v in self._new_column_options(options, change.added).items()}
        try:
            evolved = evolution.evolve(schema, add=change.added, drop=drop, retype=retype, options=new_options,
                                       protected=sequence)
        except PaimonError as e:
            raise DbtRuntimeError(f"{name}: {e}") from e
        evolution.commit(path, evolved)
        log.info(f"{name}: Paimon schema {evolved.id} ({mode}): added {[f.name for f in change.added]}, "
                 f"dropped {drop}, widened {list(retype)}")
        if mode == "append_new_columns":  # columns the model left out are written as null
            for col in change.removed:
                field = evolved.field(col)
                batch = batch.withColumn(col, F.lit(None).cast(evolution.spark_type(field.type)))
        return batch, evolved

    @staticmethod
    def _new_column_options(options: Mapping[str, Any], added) -> Dict[str, str]:
        """Per-column options (`fields.<c>.*`) the config gives for columns this run adds, stored as
        the engine stores them (its `count` aggregate is Paimon's `sum` plus a marker)."""
        prefixes = tuple(f"fields.{f.name}." for f in added)
        stored, _ = opts.count_sugar({k: v for k, v in options.items() if k.startswith(prefixes)})
        return stored


    # ---- docs ----------------------------------------------------------------------------------
    @available
    def paimon_persist_docs(self, relation: BaseRelation, model: Mapping[str, Any], for_relation: bool,
                            for_columns: bool) -> bool:
        """Write the model's description and column descriptions into the Paimon schema (a new
        schema-N, read by every Paimon reader) and Spark's catalog entry. True when they changed."""
        path = self.paimon_table_path(relation)
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
        docs = evolution.with_docs(schema, comment, descriptions)
        if docs is None:
            return False
        evolution.commit(path, docs)
        self._resync(relation, path)
        return True

    # ---- maintenance (macros/maintenance.sql; the work is in maintenance.py) -------------------
    @available
    def paimon_delete(self, relation: Any, where: Any = None) -> Dict[str, Any]:
        return maintenance.delete_rows(self, relation, where)

    @available
    def paimon_compact(self, relation: Any) -> Dict[str, Any]:
        return maintenance.compact_table(self, relation)

    @available
    def paimon_expire(self, relation: Any, retain_max: Any = None, retain_min: Any = None, older_than: Any = None,
                      max_deletes: Any = None) -> Dict[str, Any]:
        return maintenance.expire(self, relation, retain_max, retain_min, older_than, max_deletes)

    @available
    def paimon_create_tag(self, relation: Any, tag: Any = None, snapshot_id: Any = None, time_retained: Any = None,
                          ignore_if_exists: bool = False) -> Dict[str, Any]:
        return maintenance.create_tag(self, relation, tag, snapshot_id, time_retained, ignore_if_exists)

    @available
    def paimon_delete_tag(self, relation: Any, tag: Any = None) -> Dict[str, Any]:
        return maintenance.delete_tag(self, relation, tag)

    @available
    def paimon_rollback(self, relation: Any, snapshot_id: Any = None, tag: Any = None) -> Dict[str, Any]:
        return maintenance.rollback(self, relation, snapshot_id, tag)

    @available
    def paimon_remove_orphan_files(self, relation: Any, older_than: Any = "1 d", dry_run: Any = False) -> Dict[str, Any]:
        return maintenance.remove_orphan_files(self, relation, older_than, dry_run)

    @available
    def paimon_as_of(self, relation: Any, snapshot_id: Any = None, tag: Any = None) -> BaseRelation:
        return maintenance.as_of(self, relation, snapshot_id, tag)

    @available
    def paimon_system_table(self, relation: Any, name: Any) -> BaseRelation:
        return maintenance.system_table(self, relation, name)

    # ---- snapshots (macros/materializations/snapshot.sql; the work is in snapshots.py) ---------
    @available
    def paimon_snapshot_check(self, relation: BaseRelation, config: Mapping[str, Any], columns: Mapping[str, str],
                              sql: Optional[str] = None) -> str:
        snapshots.check(self, relation, config, columns, sql)
        return ""

    @available
    def paimon_snapshot_stored(self, relation: BaseRelation) -> BaseRelation:
        return snapshots.stored_view(self, relation)

    @available
    def paimon_snapshot(self, relation: BaseRelation, source: BaseRelation, columns: Mapping[str, str],
                        created: bool = False, stored: Optional[BaseRelation] = None, partition_by: Any = None,
                        options: Optional[Mapping[str, Any]] = None, execution: Optional[str] = None,
                        valid_to_current: Optional[str] = None) -> AdapterResponse:
        return snapshots.apply(self, relation, source, columns, created=created, stored=stored,
                               partition_by=partition_by, options=options, execution=execution,
                               valid_to_current=valid_to_current)


def _table_stats(path: str, schema: TableSchema, io: FileIO) -> Dict[str, Any]:
    """dbt's catalog stats of a Paimon table, from its latest snapshot's metadata (the snapshot's
    record count, its manifests' file sizes): no data file is read. Rows count every record of the
    live files (a key updated in a file not yet compacted counts once per version), as Paimon's
    own `totalRecordCount` does. A table that cannot be read gets none (docs never fail on it)."""
    try:
        snapshot = FileStoreTable(path, schema, io).latest_snapshot()
        if snapshot is None:
            return {}
        files = FileStoreCommit(io, path, schema).live_entries(snapshot).values()
        found = {"rows": snapshot.total_record_count, "files": len(files),
                 "bytes": sum(e.file.file_size for e in files), "snapshot": snapshot.id}
    except Exception as e:  # noqa: BLE001
        log.debug(f"no catalog stats for {path}: {e}")
        return {}
    labels = {"rows": "Rows", "files": "Data files", "bytes": "Bytes", "snapshot": "Paimon snapshot"}
    out: Dict[str, Any] = {}
    for key, value in found.items():
        out.update({f"stats:{key}:label": labels[key], f"stats:{key}:value": value,
                    f"stats:{key}:description": f"{labels[key]} of the latest Paimon snapshot (from its metadata)",
                    f"stats:{key}:include": True})
    return out


def _remove_tree(path: str) -> None:
    """Delete a table's (or database's) files: the directory tree, or every object under the prefix."""
    io = FileIO.get(path)
    if not io.is_object_store:
        shutil.rmtree(path, ignore_errors=True)
        return
    for status in list(io.list_status(path, recursive=True)):  # per file (a drop), not per row
        io.delete(status.path)


def _swap(staged: str, path: str) -> None:
    """Put a table built by a full refresh in place of the old one. On a filesystem the directories
    are renamed (readers see the old table or the new one). An object store has no rename: the old
    table's objects are deleted and the staged ones copied into place on the server (no data through
    this process); a reader during the swap may find no table, and a failure leaves the staged copy
    for the next full refresh to replace."""
    io = FileIO.get(path)
    # The old table's key index goes with it; the new table's follows it on a filesystem (its
    # manifest names files, not paths), and is rebuilt by the next upsert on an object store.
    # The staged upsert's background clean (KeyIndex.sweep) ends first: its index dir moves.
    key_index.join_sweeps()
    old_index, new_index = key_index.index_dir(path), key_index.index_dir(staged)
    if io.is_object_store:
        _remove_tree(path)
        _remove_tree(old_index)
        copy_tree(io, staged, path)
        _remove_tree(staged)
        _remove_tree(new_index)
        return
    backup = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.dbt-backup-{uuid.uuid4().hex[:8]}")
    os.rename(path, backup)
    try:
        os.rename(staged, path)
    except BaseException:
        os.rename(backup, path)
        raise
    shutil.rmtree(backup, ignore_errors=True)
    shutil.rmtree(old_index, ignore_errors=True)
    if os.path.isdir(new_index):
        os.rename(new_index, old_index)
